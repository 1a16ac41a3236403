//! `superstep snapshot [QUERY] --dir DIR`: builds, then keeps DIR as the
//! build's per-phase record (`crate::record`): writes the files that
//! differ, or with `--check` only says what differs (exit 1) and with
//! `--accept` takes the build as the new record whatever DIR held.

use std::path::{Path, PathBuf};

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_session};
use crate::output_file::TEMPORARY_PREFIX;
use crate::record::folder::{self, Comparison, FolderError, change_line};
use crate::record::{Detail, RecordError, record};
use crate::text::thousands;

/// The flags of `superstep snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// The snapshot folder: program.txt, exchange/KEY.txt per exchange
    /// phase, compute/KEY.txt per compute step. Other files in it are left
    /// alone (and listed).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Compare the build with DIR and write nothing: print what changed per
    /// phase file, and the files added and removed; exit 1 when anything
    /// differs, 0 when nothing does.
    #[arg(long, conflicts_with = "accept")]
    pub check: bool,
    /// Take the build as the new snapshot: rewrite exactly the files that
    /// differ (and remove those of phases the build no longer has), even
    /// when DIR was written by another compiler version or for another
    /// build, and rewrite damaged files.
    #[arg(long)]
    pub accept: bool,
    /// How much each file holds: `summary` (figures, histograms and
    /// digests) or `full` (also every scheduled event, row word and kernel
    /// run; small builds only).
    #[arg(long, value_enum, default_value = "summary")]
    pub detail: Detail,
    /// How many changed figures to print per file under --check.
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub items: usize,
}

pub fn run(arguments: &SnapshotArguments) -> Result<(), CommandError> {
    check_folder(&arguments.dir, !arguments.check)?;
    let mut query = load(&arguments.query)?;
    let mut session = open_session(&arguments.query, &mut query)?;
    let outcome = build_checked(&mut session, &query, &arguments.query)?;
    let result = snapshot(arguments, &session, &query, &outcome);
    finish_cache(session.cache());
    result
}

/// Under --verbose: the build's stage times, the record's, and the
/// queries the build executed (salsa's log).
fn print_verbose(outcome: &crate::session::BuildOutcome, record_time: std::time::Duration) {
    if !super::progress::verbose() {
        return;
    }
    print_line!("stage times:");
    for time in &outcome.times {
        print_line!(
            "  {:<12} {:>10.3} ms",
            time.stage,
            time.elapsed.as_secs_f64() * 1e3
        );
    }
    print_line!(
        "  {:<12} {:>10.3} ms",
        "record",
        record_time.as_secs_f64() * 1e3
    );
    print_line!("queries executed:");
    for (query_name, count) in outcome.executions_by_query() {
        print_line!("  {:<24} {count:>6}", query_name.name());
    }
}

/// Before any work: DIR must be a folder (or not exist yet), and writable
/// unless only checked.
fn check_folder(dir: &Path, write: bool) -> Result<(), CommandError> {
    if dir.exists() && !dir.is_dir() {
        return Err(folder_error(FolderError::NotAFolder(dir.to_path_buf())));
    }
    if !write {
        return Ok(());
    }
    let probe = dir.join(format!("{TEMPORARY_PREFIX}{}-probe", std::process::id()));
    let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&probe, b""));
    let _ = std::fs::remove_file(&probe);
    written.map_err(|error| {
        CommandError::Input(format!(
            "error: --dir {}: cannot write there: {error}\n  help: name a folder you can write to",
            dir.display()
        ))
    })
}

fn folder_error(error: FolderError) -> CommandError {
    let input = match &error {
        FolderError::NotAFolder(_) | FolderError::Unreadable { .. } => true,
        FolderError::Write { source, .. } => {
            source.is_input()
                || matches!(source, crate::output_file::OutputFileError::Write { source, .. }
                    if source.kind() == std::io::ErrorKind::PermissionDenied)
        }
        FolderError::Remove { source, .. } | FolderError::CreateFolder { source, .. } => {
            source.kind() == std::io::ErrorKind::PermissionDenied
        }
    };
    let help = match &error {
        FolderError::NotAFolder(_) => "\n  help: name a folder (it is created when missing)",
        _ => "",
    };
    if input {
        CommandError::Input(format!("error: {error}{help}"))
    } else {
        CommandError::Internal(error.to_string())
    }
}

fn snapshot(
    arguments: &SnapshotArguments,
    session: &crate::session::Session,
    query: &crate::build_file::BuildQuery,
    outcome: &crate::session::BuildOutcome,
) -> Result<(), CommandError> {
    let started = std::time::Instant::now();
    let made = record(session, query, arguments.detail).map_err(|error| match error {
        RecordError::TooLarge { .. } => CommandError::Input(format!("error: {error}")),
        RecordError::Backend(error) => CommandError::from(error),
        RecordError::Inconsistent(message) => CommandError::Internal(message),
    })?;
    print_verbose(outcome, started.elapsed());
    let dir = &arguments.dir;
    let stored = folder::read(dir).map_err(folder_error)?;
    let comparison = folder::compare(&made, &stored);
    for other in &comparison.others {
        eprintln!(
            "note: {} is not a snapshot file: left alone",
            dir.join(other).display()
        );
    }
    let shown = dir.display();
    if arguments.check {
        // A folder of another build would differ everywhere: say why once.
        if let Some(mismatch) = &comparison.mismatch {
            return Err(CommandError::Input(format!(
                "error: the snapshot {shown} {mismatch}\n  help: compare with a snapshot of the same build \
                 (and --detail), or take this build as the snapshot with --accept"
            )));
        }
        print_changes(&comparison, arguments.items);
        if let Some((path, why)) = comparison.damaged.first() {
            return Err(damaged(dir, path, why, comparison.damaged.len()));
        }
        let files = made.files.len();
        if comparison.is_equal() {
            print_line!(
                "snapshot {shown}: all {} files match the build",
                thousands(files as u64)
            );
            return Ok(());
        }
        return Err(CommandError::Internal(format!(
            "snapshot {shown} differs from the build: {} changed, {} added, {} removed, {} unchanged\n  \
             help: review the changes, then take them with `superstep snapshot --accept --dir {shown}` \
             (with the same query and --set)",
            comparison.changed.len(),
            comparison.added.len(),
            comparison.removed.len(),
            comparison.unchanged
        )));
    }
    if !arguments.accept {
        if let Some(mismatch) = &comparison.mismatch {
            return Err(CommandError::Input(format!(
                "error: the snapshot {shown} {mismatch}\n  help: write this build's snapshot to another folder, \
                 or replace the snapshot with --accept"
            )));
        }
        if let Some((path, why)) = comparison.damaged.first() {
            return Err(damaged(dir, path, why, comparison.damaged.len()));
        }
    }
    let fresh = stored.files.is_empty();
    if !fresh && !super::progress::quiet() {
        match &comparison.mismatch {
            Some(mismatch) => print_line!("replacing the snapshot {shown}, which {mismatch}"),
            None => print_changes(&comparison, arguments.items),
        }
    }
    let applied = folder::apply(dir, &made, &comparison).map_err(folder_error)?;
    if !super::progress::quiet() {
        if fresh {
            print_line!(
                "wrote {} files to {shown} ({} exchange phases, {} compute steps, the program)",
                thousands(applied.written.len() as u64),
                thousands(session.phases().len() as u64),
                thousands((made.files.len() - 1 - session.phases().len()) as u64)
            );
        } else {
            for path in &applied.written {
                print_line!("wrote {}", dir.join(path).display());
            }
            for path in &applied.removed {
                print_line!("removed {}", dir.join(path).display());
            }
        }
    }
    print_line!(
        "snapshot {shown}: {} files, {} written, {} removed, {} unchanged",
        thousands(made.files.len() as u64),
        thousands(applied.written.len() as u64),
        thousands(applied.removed.len() as u64),
        thousands((made.files.len() - applied.written.len()) as u64)
    );
    Ok(())
}

fn damaged(dir: &Path, path: &str, why: &str, count: usize) -> CommandError {
    CommandError::Input(format!(
        "error: {}: {why}{}\n  help: restore it from version control, or rewrite it with --accept",
        dir.join(path).display(),
        if count > 1 {
            format!(" ({} damaged files in all)", count)
        } else {
            String::new()
        }
    ))
}

/// Per changed file what changed, then the files added and removed.
fn print_changes(comparison: &Comparison, items: usize) {
    for change in &comparison.changed {
        print_line!("{}", change_line(change, items.max(1)));
    }
    for (_, kind, key) in &comparison.added {
        print_line!("added {} {key}", kind.name());
    }
    for (path, title) in &comparison.removed {
        print_line!("removed {title} ({path})");
    }
    for (path, why) in &comparison.damaged {
        print_line!("damaged {path}: {why}");
    }
}
