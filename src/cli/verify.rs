//! `superstep verify FILE [QUERY]`: read a package file from disk (header,
//! length, digest) and check it on its own (`crate::package::verify`), then
//! replay every exchange phase execution from its rows against its transfer
//! list (`crate::sim::package::rows_check`, the package simulator's own
//! check), so that a package `verify` passes has exchanges `simulate
//! --package` executes. Given the build query it was written for, it also
//! compiles that build's program (the first half, from the cache when it
//! can) and applies `simulate`'s admission (`crate::sim::package::admit`):
//! every allocation, kernel run, copy and fill the program's, so whatever
//! `simulate QUERY --package FILE` would refuse, `verify FILE QUERY` refuses
//! first, naming the part.

use std::path::PathBuf;
use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{check_package_build, finish_cache, load, open_session};
use super::progress::timing;
use crate::package::Package;
use crate::package::verify::verify_package;
use crate::sim::package::admit;
use crate::sim::package::rows_check::check_exchange_rows;

/// The flags of `superstep verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArguments {
    /// The package file (artifacts/NAME/package.bin).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The build query the file was written for (with the same `--set`s):
    /// verify then also compiles its program and checks that the file is
    /// that program's package, as `simulate QUERY --package FILE` admits it
    /// (every allocation, kernel run, copy and fill). Without a QUERY the
    /// file is checked on its own (nothing is compiled).
    #[command(flatten)]
    pub query: QueryArguments,
}

pub fn run(arguments: &VerifyArguments) -> Result<(), CommandError> {
    let path = &arguments.file;
    let started = Instant::now();
    let (package, header) = Package::read_with_header(path)
        .map_err(|error| CommandError::Input(format!("error: {error}")))?;
    let read = started.elapsed();
    let verification = verify_package(&package);
    print_line!(
        "{}: package `{}` (format {}), {} payload bytes, digest checked{}",
        path.display(),
        package.name,
        String::from_utf8_lossy(&crate::package::PACKAGE_MAGIC[6..]),
        header.payload_bytes,
        timing(format_args!("; read in {:.3} s", read.as_secs_f64()))
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
        "checked {rows}{}",
        timing(format_args!(
            " in {:.3} s",
            replay_started.elapsed().as_secs_f64()
        ))
    );
    if arguments.query.query.is_none() {
        print_line!(
            "checked on its own: `superstep verify {} QUERY [--set ...]` also checks that it is \
             the package of that build's program, as `simulate --package` requires",
            path.display()
        );
        return Ok(());
    }
    admitted_by_its_build(arguments, &package, &header)
}

/// Compiles the build `arguments` name and checks that `package` (read
/// with `header`) is its program's package, as `simulate` admits it.
fn admitted_by_its_build(
    arguments: &VerifyArguments,
    package: &Package,
    header: &crate::package::file::PackageHeader,
) -> Result<(), CommandError> {
    let path = &arguments.file;
    let mut query = load(&arguments.query)?;
    check_package_build("", path, header, &query)?;
    let started = Instant::now();
    let mut session = open_session(&arguments.query, &mut query)?;
    session.build_low_program()?;
    let program = session.low_program()?;
    finish_cache(session.cache());
    admit(package, &program).map_err(|refusal| {
        CommandError::Input(format!(
            "error: {} is not the package of {}'s program: {refusal}\n  help: `superstep \
             build` writes it again",
            path.display(),
            query.name
        ))
    })?;
    print_line!(
        "checked against {}'s program{}: every allocation, kernel run, copy and fill is the \
         program's; `simulate --package` admits it",
        query.name,
        timing(format_args!(
            " (compiled in {:.3} s)",
            started.elapsed().as_secs_f64()
        ))
    );
    Ok(())
}
