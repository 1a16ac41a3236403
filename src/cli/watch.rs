//! `superstep watch`: wires the folder watch and Ctrl-C to the `Watcher`
//! loop, which writes its reports to standard output.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::arguments::QueryArguments;
use super::command_error::{CommandError, query_path};
use super::common::{load, open_cache};
use crate::build_file::validate::DEFAULT_OUTPUT_DIRECTORY;
use crate::watch::{Refresh, WatchEvent, WatchOptions, Watcher, watch_file};

/// The flags of `superstep watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// Stop after N changes of the build file have been handled (each
    /// rebuild, failed build, cancelled build or invalid edit counts; the
    /// initial build does not, so 0 builds once). The exit code is then 2 if the last
    /// one was an invalid file or a failed build.
    #[arg(long, value_name = "N")]
    pub exit_after: Option<usize>,
    /// Quiet period in milliseconds: events closer together than this
    /// are one change.
    #[arg(long, value_name = "MS", default_value_t = 150)]
    pub debounce_ms: u64,
    /// Do not write report.json, phases.csv, compute.csv, report.html
    /// and last-build.json after each successful build (written by default,
    /// as `[outputs]` asks).
    #[arg(long)]
    pub no_artifacts: bool,
    /// Keep DIR as the build's per-phase snapshot (as `superstep snapshot
    /// --dir DIR` writes it) and name, per rebuild, the files that changed.
    #[arg(long, value_name = "DIR")]
    pub snapshot: Option<PathBuf>,
}

pub fn run(arguments: &WatchArguments) -> Result<(), CommandError> {
    let path = query_path(&arguments.query);
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !folder.is_dir() {
        return Err(CommandError::Input(format!(
            "error: cannot watch {}: the folder {} does not exist; \
             name a build file in an existing folder (queries/*.toml are the shipped ones)",
            path.display(),
            folder.display()
        )));
    }
    // A build file missing when watching starts is a wrong path, not a file
    // about to be saved: watch would wait for it forever. (One that
    // disappears later, as an editor replaces it, is waited for.)
    if !path.exists() {
        return Err(CommandError::Input(format!(
            "error: cannot watch {}: no such build file (the folder {} exists); \
             name an existing build file (queries/*.toml are the shipped ones)",
            path.display(),
            folder.display()
        )));
    }
    // The cache folder follows the build file as it is when watching
    // starts (its output folder), or the default when it does not load.
    let (outputs, cache_settings) = match load(&arguments.query) {
        Ok(query) => (query.outputs.directory, query.cache),
        Err(_) => (
            PathBuf::from(DEFAULT_OUTPUT_DIRECTORY),
            crate::build_file::CacheSettings::default(),
        ),
    };
    let cache = open_cache(&arguments.query, &outputs, &cache_settings)?;
    // The watcher reports the cache after every build, on standard output.
    if let Some(cache) = &cache {
        super::common::reports_its_own_cache(cache);
    }
    let (sender, events) = mpsc::channel();
    // Watch before the first build, so that saves during it are not missed.
    let watch = watch_file(&path, sender.clone()).map_err(|error| {
        CommandError::Input(format!("error: cannot watch {}: {error}", path.display()))
    })?;
    if let Some(target) = watch.target() {
        eprintln!(
            "watching {} through the link {}: edits to either are seen",
            target.display(),
            path.display()
        );
    }
    let stopping = AtomicBool::new(false);
    let handler = ctrlc::set_handler(move || {
        if stopping.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("stopping after the current build (Ctrl-C again to quit now)");
        let _ = sender.send(WatchEvent::Stop);
    });
    if let Err(error) = handler {
        eprintln!("warning: Ctrl-C will not stop cleanly: {error}");
    }
    let mut watcher = Watcher::new(WatchOptions {
        path,
        sets: arguments.query.sets.clone(),
        quiet_period: Duration::from_millis(arguments.debounce_ms),
        exit_after: arguments.exit_after,
        cache,
        write_artifacts: !arguments.no_artifacts,
        snapshot: arguments
            .snapshot
            .clone()
            .map(|dir| crate::watch::snapshot::SnapshotOptions {
                dir,
                detail: crate::record::Detail::Summary,
            }),
        // A failed build is explained as `superstep build` explains it.
        explain_failure: Some({
            let arguments = arguments.query.clone();
            crate::watch::FailureExplainer(Arc::new(move |session, query, error| {
                super::common::build_failure(session, query, &arguments, error).rendered()
            }))
        }),
        before_build: None,
    });
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // A closed pipe ends watching quietly (the reader has gone); any other
    // failure to write is an error naming standard output.
    let summary = match watcher.run(&events, &mut out) {
        Ok(summary) => summary,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(error) => {
            return Err(CommandError::Internal(format!(
                "writing to standard output: {error}"
            )));
        }
    };
    let _ = writeln!(out, "stopped watching");
    match summary.last {
        Refresh::Invalid | Refresh::Failed if summary.reached_limit => Err(CommandError::Input(
            String::from("the last change did not build"),
        )),
        _ => Ok(()),
    }
}
