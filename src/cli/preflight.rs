//! Output checks made before any work: every file or folder a command will
//! write (`--trace`, `capture -o`, `bench-snapshot --json`, the build's
//! outputs folder) is checked here first, so a path that cannot be written is
//! an input error (exit code 2) naming the flag or field and the reason, never
//! a panic and never a failure after a whole compile.
//!
//! Files named by a flag are written into a folder that must already exist
//! (no folder the user did not ask for is created); the outputs folder
//! (`outputs.directory/NAME`) is created, as the build would create it.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::command_error::{CommandError, query_path};
use super::host_data::HostArguments;
use super::{AuditCommand, Cli, Command, QueryArguments};

/// Checks the outputs named by flags, known before the build query is read:
/// `capture -o FILE` and `bench-snapshot --json OUT` (`--trace` is created by
/// [`create_trace`]).
pub fn check_outputs(cli: &Cli) -> Result<(), CommandError> {
    let inputs = command_inputs(cli);
    for (flag, output) in command_outputs(cli) {
        if let Some(input) = inputs.iter().find(|input| same_file(input, output)) {
            return Err(CommandError::Input(format!(
                "error: {flag}: {} is {}, which this command reads; writing it would destroy it\n  \
                 help: give {flag} another file",
                output.display(),
                if input == output {
                    String::from("an input")
                } else {
                    format!("the same file as the input {}", input.display())
                }
            )));
        }
    }
    match &cli.command {
        Command::Capture(arguments) => check_output_file("capture -o", &arguments.output),
        Command::Profile(arguments) => check_output_file("profile -o", &arguments.output),
        Command::BenchSnapshot(arguments) => match &arguments.json {
            Some(json) => check_output_file("bench-snapshot --json", json),
            None => Ok(()),
        },
        Command::Run(arguments) => check_host_output(&arguments.host),
        Command::Simulate(arguments) => check_host_output(&arguments.host),
        _ => Ok(()),
    }
}

/// `run --output` and `simulate --output`.
fn check_host_output(host: &HostArguments) -> Result<(), CommandError> {
    match host.output.as_deref() {
        Some(file) => check_output_file("--output", file),
        None => Ok(()),
    }
}

/// The files the command reads, known from its flags: the build file (the
/// default one when none is named), diff's two builds, a snapshot, a
/// package.
fn command_inputs(cli: &Cli) -> Vec<PathBuf> {
    let query = |arguments: &QueryArguments| vec![query_path(arguments)];
    match &cli.command {
        Command::Build(arguments) => query(&arguments.query),
        Command::Phases(arguments) => query(&arguments.query),
        Command::Profile(arguments) => query(&arguments.query),
        Command::Explain(arguments) => query(&arguments.query),
        Command::Replay(arguments) => query(&arguments.query),
        Command::Capture(arguments) => query(&arguments.query),
        Command::Sweep(arguments) => query(&arguments.query),
        Command::Search(arguments) => query(&arguments.query),
        Command::Watch(arguments) => query(&arguments.query),
        Command::Snapshot(arguments) => query(&arguments.query),
        Command::Audit(AuditCommand::Copies(arguments)) => query(&arguments.query),
        Command::Packing(arguments) => arguments
            .snapshot
            .iter()
            .cloned()
            .chain(query(&arguments.query))
            .collect(),
        Command::Run(arguments) => arguments
            .host
            .inputs()
            .into_iter()
            .chain(query(&arguments.query))
            .collect(),
        Command::Simulate(arguments) => arguments
            .package
            .iter()
            .cloned()
            .chain(arguments.host.inputs())
            .chain(query(&arguments.query))
            .collect(),
        Command::Diff(arguments) => vec![arguments.a.clone(), arguments.b.clone()],
        Command::BenchSnapshot(arguments) => vec![arguments.file.clone()],
        Command::Verify(arguments) => vec![arguments.file.clone()],
    }
}

/// The files the command writes that a flag names, with the flag.
fn command_outputs(cli: &Cli) -> Vec<(&'static str, &Path)> {
    let mut outputs: Vec<(&'static str, &Path)> = Vec::new();
    if let Some(trace) = &cli.trace {
        outputs.push(("--trace", trace));
    }
    let named = match &cli.command {
        Command::Capture(arguments) => Some(("capture -o", arguments.output.as_path())),
        Command::Profile(arguments) => Some(("profile -o", arguments.output.as_path())),
        Command::BenchSnapshot(arguments) => arguments
            .json
            .as_deref()
            .map(|json| ("bench-snapshot --json", json)),
        Command::Sweep(arguments) => arguments
            .write_overrides
            .as_deref()
            .map(|file| ("sweep --write-overrides", file)),
        Command::Search(arguments) => arguments
            .write_overrides
            .as_deref()
            .map(|file| ("search --write-overrides", file)),
        Command::Run(arguments) => arguments
            .host
            .output
            .as_deref()
            .map(|file| ("run --output", file)),
        Command::Simulate(arguments) => arguments
            .host
            .output
            .as_deref()
            .map(|file| ("simulate --output", file)),
        _ => None,
    };
    outputs.extend(named);
    outputs
}

/// Whether two paths name one existing file (the same device and inode:
/// through links, `..` or a hard link).
fn same_file(first: &Path, second: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(first), std::fs::metadata(second)) {
        (Ok(first), Ok(second)) => first.dev() == second.dev() && first.ino() == second.ino(),
        _ => false,
    }
}

/// Creates the trace file (truncating an existing one), or says why it
/// cannot be: "cannot write trace FILE: reason".
pub fn create_trace(path: &Path) -> Result<File, CommandError> {
    let failure = |reason: String| {
        CommandError::Input(format!(
            "error: --trace: cannot write trace {}: {reason}",
            path.display()
        ))
    };
    check_parent("--trace", path).map_err(|reason| failure(reason.to_string()))?;
    if path.is_dir() {
        return Err(failure(String::from("it is a directory")));
    }
    File::create(path).map_err(|error| failure(error.to_string()))
}

/// Why a file named by `flag` cannot be written, checked without changing
/// it: its folder must exist, it must not be a folder, and it must be
/// openable for writing (an existing file is not truncated; a probe file is
/// removed again).
pub fn check_output_file(flag: &str, path: &Path) -> Result<(), CommandError> {
    let failure = |reason: String| {
        CommandError::Input(format!(
            "error: {flag}: cannot write {}: {reason}",
            path.display()
        ))
    };
    check_parent(flag, path).map_err(|reason| failure(reason.to_string()))?;
    if path.is_dir() {
        return Err(failure(String::from("it is a directory")));
    }
    let existed = path.exists();
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|error| failure(error.to_string()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// The folder of a file named by a flag must exist and be a folder.
fn check_parent(flag: &str, path: &Path) -> Result<(), String> {
    if path.as_os_str().is_empty() {
        return Err(format!("{flag} needs a file name"));
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => return Ok(()),
    };
    if parent.is_dir() {
        return Ok(());
    }
    if parent.exists() {
        return Err(format!(
            "{} is not a folder (a file is in the way)",
            parent.display()
        ));
    }
    Err(format!(
        "the folder {} does not exist; create it first or name a file in an existing folder",
        parent.display()
    ))
}

/// Creates the build's outputs folder `directory` (as the build would) and
/// checks that files can be created in it; `field` names where the folder
/// came from (`outputs.directory`).
pub fn check_output_directory(field: &str, directory: &Path) -> Result<(), CommandError> {
    check_folder(
        field,
        directory,
        &format!("set {field} (in the build file or with --set {field}=DIR) to a writable folder"),
    )
}

/// [`check_output_directory`] for a folder a flag (`flag`) names.
pub fn check_output_flag_directory(flag: &str, directory: &Path) -> Result<(), CommandError> {
    check_folder(flag, directory, &format!("give {flag} a writable folder"))
}

fn check_folder(field: &str, directory: &Path, help: &str) -> Result<(), CommandError> {
    let failure = |reason: String| {
        CommandError::Input(format!(
            "error: {field}: cannot write outputs to {}: {reason}\n  help: {help}",
            directory.display()
        ))
    };
    if let Some(blocker) = file_in_the_way(directory) {
        return Err(failure(format!(
            "{} is a file, not a folder",
            blocker.display()
        )));
    }
    std::fs::create_dir_all(directory).map_err(|error| failure(error.to_string()))?;
    let probe = directory.join(format!(".superstep-probe-{}", std::process::id()));
    File::create(&probe).map_err(|error| failure(error.to_string()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The first ancestor of `directory` (or itself) that exists but is not a folder.
fn file_in_the_way(directory: &Path) -> Option<PathBuf> {
    directory
        .ancestors()
        .filter(|ancestor| !ancestor.as_os_str().is_empty())
        .find(|ancestor| ancestor.exists())
        .filter(|existing| !existing.is_dir())
        .map(Path::to_path_buf)
}
