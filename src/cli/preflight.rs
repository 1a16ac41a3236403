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

use crate::output_file::PendingFile;
use std::path::{Path, PathBuf};

use super::arguments::QueryArguments;
use super::command_error::{CommandError, query_path};
use super::host_data::HostArguments;
use super::{AuditCommand, Cli, Command};

/// Checks the outputs named by flags, known before the build query is read:
/// `capture -o FILE` and `bench-snapshot --json OUT` (`--trace` is created by
/// [`create_trace`]).
pub fn check_outputs(cli: &Cli) -> Result<(), CommandError> {
    let mut inputs = command_inputs(cli);
    let (query_inputs, build_files) = query_files(cli);
    inputs.extend(query_inputs);
    let outputs = command_outputs(cli);
    for (index, (flag, output)) in outputs.iter().enumerate() {
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
        if let Some(own) = build_files.iter().find(|own| same_file(own, output)) {
            return Err(CommandError::Input(format!(
                "error: {flag}: {} is {}, a file of the build's outputs folder; writing it would \
                 leave the folder disagreeing with its record\n  help: give {flag} a file outside it",
                output.display(),
                own.display()
            )));
        }
        if let Some((other, _)) = outputs[..index]
            .iter()
            .find(|(_, earlier)| same_file(earlier, output))
        {
            return Err(CommandError::Input(format!(
                "error: {flag}: {} is also written by {other}; one of the two would be lost\n  \
                 help: give each output its own file",
                output.display()
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
        Command::Search(arguments) => match &arguments.write_overrides {
            Some(file) => check_output_file("search --write-overrides", file),
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
        Command::Cost(arguments) => arguments.calibration.iter().cloned().collect(),
        Command::Calibrate(arguments) => std::iter::once(arguments.measurements.clone())
            .chain(arguments.base.iter().cloned())
            .collect(),
        Command::Cache(_) => Vec::new(),
    }
}

/// The files a command's build query names, found before it runs (none
/// when the query cannot be loaded: the command reports that itself):
/// the checkpoint's files (the SafeTensors file or index, the shards an
/// index names, `config.json` beside them) and the calibration files
/// (`workload.calibration`, `machine.calibration`), which the command reads, and
/// the build's outputs folder's own files (those its record lists, the
/// record, and the names a build writes), which no flag may name.
fn query_files(cli: &Cli) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let Some(arguments) = query_arguments(cli) else {
        return (Vec::new(), Vec::new());
    };
    let Ok(query) = crate::build_file::load_query(&query_path(arguments), &arguments.sets) else {
        return (Vec::new(), Vec::new());
    };
    let mut inputs = Vec::new();
    if let crate::build_file::WeightSource::SafeTensors { path, .. } = &query.workload.weights {
        let folder = path.parent().unwrap_or(Path::new(""));
        inputs.push(path.clone());
        inputs.push(folder.join("config.json"));
        if path.to_string_lossy().ends_with(".index.json") {
            inputs.extend(
                crate::model::safetensors::SafeTensors::index_shards(path)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|shard| folder.join(shard)),
            );
        }
    }
    // The calibration input of FP8 activation scales and the kernel cost
    // model's calibration file are read as the checkpoint is.
    if let crate::build_file::ActivationScale::Calibrate {
        input: crate::build_file::CalibrationInput::File { path },
    } = &query.planning.activation_scale
    {
        inputs.push(path.clone());
    }
    inputs.extend(query.machine.calibration.iter().cloned());
    let directory = super::common::artifacts_directory(&query);
    let build_files = crate::report::manifest::own_files(&directory);
    (inputs, build_files)
}

/// The build query arguments of a command that has them.
fn query_arguments(cli: &Cli) -> Option<&QueryArguments> {
    cli.command.query_arguments()
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
        Command::Calibrate(arguments) => arguments
            .output
            .as_deref()
            .map(|file| ("calibrate --output", file)),
        _ => None,
    };
    outputs.extend(named);
    outputs
}

/// Whether two paths name one file: the same device and inode when both
/// exist (through links, `..` or a hard link), else the same canonical
/// path (the folder resolved, the name kept).
fn same_file(first: &Path, second: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(first), Ok(second)) = (std::fs::metadata(first), std::fs::metadata(second)) {
        return first.dev() == second.dev() && first.ino() == second.ino();
    }
    let canonical = crate::input_file::canonical_target;
    canonical(first).is_some_and(|first| Some(first) == canonical(second))
}

/// Begins the trace file (a temporary file beside it, renamed into place
/// when the trace is complete: `output_file::PendingFile`), or says why it
/// cannot be: "cannot write trace FILE: reason".
pub fn create_trace(path: &Path) -> Result<PendingFile, CommandError> {
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
    PendingFile::create(path).map_err(|error| failure(error.to_string()))
}

/// Why a file named by `flag` cannot be written, checked without opening
/// it (a FIFO is never waited on, a link never followed): its folder must
/// exist, nothing but a regular file may be in its place
/// (`output_file::check_output`), and the folder must take a new file (a
/// probe file is created beside it and removed again).
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
    crate::output_file::check_output(path).map_err(|error| failure(error.to_string()))?;
    let folder = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let probe = folder.join(format!(
        "{}probe-{}",
        crate::output_file::TEMPORARY_PREFIX,
        std::process::id()
    ));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|error| failure(error.to_string()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Why the folder of a file named by a flag cannot hold it.
#[derive(Debug, thiserror::Error)]
enum ParentError {
    #[error("{0} needs a file name")]
    NoName(String),
    #[error("{} is not a folder (a file is in the way)", .0.display())]
    NotAFolder(std::path::PathBuf),
    #[error(
        "the folder {} does not exist; create it first or name a file in an existing folder",
        .0.display()
    )]
    Missing(std::path::PathBuf),
}

/// The folder of a file named by a flag must exist and be a folder.
fn check_parent(flag: &str, path: &Path) -> Result<(), ParentError> {
    if path.as_os_str().is_empty() {
        return Err(ParentError::NoName(flag.to_string()));
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => return Ok(()),
    };
    if parent.is_dir() {
        return Ok(());
    }
    if parent.exists() {
        return Err(ParentError::NotAFolder(parent.to_path_buf()));
    }
    Err(ParentError::Missing(parent.to_path_buf()))
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
