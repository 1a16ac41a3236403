//! The `superstep` binary: parses the command line, sets up tracing and runs
//! the command; exit code 2 for bad input, 1 for other failures.

use std::process::ExitCode;

use clap::Parser;
use superstep::cli::{
    Cli, Command, bench_snapshot, build, capture, explain, replay, run, simulate, watch,
};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let fmt_layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let (chrome_layer, _guard) = match &cli.trace {
        Some(path) => {
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .file(path.clone())
                .build();
            (Some(layer), Some(guard))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(fmt_layer)
        .with(chrome_layer)
        .init();
    let result = match &cli.command {
        Command::Build { query, ops, why } => build::run(query, *ops, *why),
        Command::Run { query } => run::run(query),
        Command::Simulate { query, poisoned } => simulate::run(query, *poisoned),
        Command::Replay { query, sample } => replay::run(query, *sample),
        Command::Explain { query, phase } => explain::run(query, phase),
        Command::Capture {
            query,
            output,
            without_allocations,
        } => capture::run(query, output, *without_allocations),
        Command::BenchSnapshot {
            file,
            phases,
            policies,
            width,
            iterations,
            sample,
            json,
        } => bench_snapshot::run(&bench_snapshot::BenchArguments {
            file: file.clone(),
            phases: phases.clone(),
            policies: policies.clone(),
            width: *width,
            iterations: *iterations,
            sample: *sample,
            json: json.clone(),
        }),
        Command::Watch {
            query,
            exit_after,
            debounce_ms,
        } => watch::run(query, *exit_after, *debounce_ms),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => error.exit(),
    }
}
