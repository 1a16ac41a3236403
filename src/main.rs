//! The `superstep` binary: parses the command line, sets up tracing and runs
//! the command (`superstep::cli::run`); exit code 2 for bad input, 1 for
//! other failures.

use std::process::ExitCode;

use superstep::cli::{self, Cli, preflight, progress, trace_output};

/// mimalloc, not the system's allocator: a build allocates and frees
/// millions of small vectors (transfers, pieces, rows) over its threads,
/// and glibc's spends a warm SigLIP build's time in page faults and its
/// own free lists (docs/measurements.md, "A faster allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse_arguments();
    // Every file the command reads is one no output may replace
    // (docs/files.md).
    superstep::input_file::remember_inputs();
    progress::set_verbosity(cli.verbosity());
    // Every output the command will write is checked before any work.
    if let Err(error) = preflight::check_outputs(&cli) {
        return error.exit();
    }
    let tracing = match trace_output::install(cli.trace.as_deref()) {
        Ok(tracing) => tracing,
        Err(error) => return error.exit(),
    };
    let result = cli::run(&cli);
    // The rest of the trace is written before the outcome is known.
    let result = result.and(tracing.finish());
    let code = result.map_or_else(|error| error.exit(), |()| ExitCode::SUCCESS);
    // A command that failed after using its cache ends it here, after
    // its error: the cache's line is the last on standard error.
    cli::common::finish_unfinished_caches();
    // A closed pipe ended the output quietly; any other failure to write
    // standard output (a full disk) is an error even when the command
    // itself succeeded.
    cli::stdout::finish().map_or_else(
        |message| {
            eprintln!("error: {message}");
            ExitCode::from(1)
        },
        |()| code,
    )
}
