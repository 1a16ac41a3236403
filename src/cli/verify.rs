//! `superstep verify FILE`: read a package file from disk (header, length,
//! digest) and check it on its own (`crate::package::verify`), then replay
//! every exchange phase execution from its rows against its transfer list
//! (`crate::sim::package::rows_check`, the package simulator's own check),
//! so that a package `verify` passes has exchanges `simulate --package`
//! executes.

use std::path::PathBuf;
use std::time::Instant;

use super::command_error::CommandError;
use crate::package::Package;
use crate::package::verify::verify_package;
use crate::sim::package::rows_check::check_exchange_rows;

/// The flags of `superstep verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArguments {
    /// The package file (artifacts/NAME/package.bin).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

pub fn run(arguments: &VerifyArguments) -> Result<(), CommandError> {
    let path = &arguments.file;
    let started = Instant::now();
    let (package, header) = Package::read_with_header(path)
        .map_err(|error| CommandError::Input(format!("error: {error}")))?;
    let read = started.elapsed();
    let verification = verify_package(&package);
    print_line!(
        "{}: package `{}` (format {}), {} payload bytes, digest checked; read in {:.3} s",
        path.display(),
        package.name,
        String::from_utf8_lossy(&crate::package::PACKAGE_MAGIC[6..]),
        header.payload_bytes,
        read.as_secs_f64()
    );
    print_line!("checked {verification}");
    if !verification.passed() {
        return Err(CommandError::Input(format!(
            "error: {} fails {} checks",
            path.display(),
            verification.failure_count
        )));
    }
    // Only a package whose every index and address passed is replayed.
    let replay_started = Instant::now();
    let rows = check_exchange_rows(&package).map_err(|fault| {
        CommandError::Input(format!(
            "error: {}: exchange rows disagree with the transfer lists: {fault}\n  help: \
             `superstep build` writes the package again",
            path.display()
        ))
    })?;
    print_line!(
        "checked {rows} in {:.3} s",
        replay_started.elapsed().as_secs_f64()
    );
    Ok(())
}
