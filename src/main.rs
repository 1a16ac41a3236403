//! The `superstep` binary: parses the command line, sets up tracing and runs
//! the command; exit code 2 for bad input, 1 for other failures.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use superstep::cli::{
    AuditCommand, Cli, Command, audit, bench_snapshot, build, capture, diff, explain, packing,
    phases, preflight, profile, progress, replay, run, search, simulate, sweep, trace_output,
    verify, watch,
};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

fn main() -> ExitCode {
    let cli = Cli::parse();
    progress::set_verbosity(if cli.quiet {
        progress::Verbosity::Quiet
    } else if cli.verbose {
        progress::Verbosity::Verbose
    } else {
        progress::Verbosity::Normal
    });
    // Every output the command will write is checked before any work.
    if let Err(error) = preflight::check_outputs(&cli) {
        return error.exit();
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let fmt_layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    let (chrome_layer, guard, trace_outcome) = match &cli.trace {
        Some(path) => {
            let file = match preflight::create_trace(path) {
                Ok(file) => file,
                Err(error) => return error.exit(),
            };
            let (writer, outcome) = trace_output::trace_writer(path, file);
            // Spans carry their fields (phase key, op, policy) as arguments;
            // events are named by level and target, never by a source path
            // of the machine that built the binary.
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .writer(writer)
                .include_args(true)
                .include_locations(false)
                .name_fn(Box::new(|event_or_span| match event_or_span {
                    tracing_chrome::EventOrSpan::Event(event) => {
                        format!("{} {}", event.metadata().level(), event.metadata().target())
                    }
                    tracing_chrome::EventOrSpan::Span(span) => span.metadata().name().to_string(),
                }))
                .build();
            (Some(layer), Some(guard), Some(outcome))
        }
        None => (None, None, None),
    };
    tracing_subscriber::registry()
        .with(fmt_layer)
        .with(chrome_layer)
        .init();
    let result = match &cli.command {
        Command::Build {
            query,
            ops,
            json,
            why,
            suggestions,
        } => build::run(query, *ops, *why, *suggestions, *json),
        Command::Phases {
            query,
            sort_by,
            max_cycles,
            max_occupancy,
            kind,
            at_offset,
            top,
            json,
            suggest,
        } => phases::run(
            query,
            &phases::PhasesOptions {
                sort_by: *sort_by,
                max_cycles: *max_cycles,
                max_occupancy: *max_occupancy,
                kind: *kind,
                at_offset: *at_offset,
                top: *top,
                json: *json,
                suggest: *suggest,
            },
        ),
        Command::Diff {
            a,
            b,
            sets,
            sets_a,
            sets_b,
            top,
            json,
            cache,
        } => diff::run(&diff::DiffArguments {
            a: a.clone(),
            b: b.clone(),
            sets: sets.clone(),
            sets_a: sets_a.clone(),
            sets_b: sets_b.clone(),
            top: *top,
            json: *json,
            cache: cache.clone(),
        }),
        Command::Audit {
            what:
                AuditCommand::Copies {
                    query,
                    json,
                    boundary,
                    motion,
                },
        } => audit::run(
            query,
            &audit::CopiesOptions {
                json: *json,
                boundary: *boundary,
                fusion: *motion,
            },
        ),
        Command::Run { query, host } => run::run(query, host),
        Command::Simulate {
            query,
            host,
            poisoned,
            package,
        } => simulate::run(query, host, *poisoned, package.as_deref()),
        Command::Verify { file } => verify::run(file),
        Command::Sweep {
            query,
            configs,
            window,
            write_overrides,
            select,
            apply,
            shard,
            json,
        } => sweep::run(
            query,
            &sweep::SweepOptions {
                configs: configs.clone(),
                window: *window,
                write_overrides: write_overrides.clone(),
                select: *select,
                apply: *apply,
                shard: *shard,
                json: *json,
            },
        ),
        Command::Packing {
            query,
            phases,
            top,
            config,
            json,
            snapshot,
            output,
        } => packing::run(
            query,
            &packing::PackingOptions {
                phases: phases.clone(),
                top: *top,
                config: *config,
                json: *json,
                snapshot: snapshot.clone(),
                output: output.clone(),
            },
        ),
        Command::Search {
            query,
            beam_width,
            rounds,
            cheapest,
            aligned,
            no_orders,
            write_overrides,
            json,
        } => search::run(
            query,
            &search::SearchOptions {
                settings: crate_search_settings(
                    *beam_width,
                    *rounds,
                    *cheapest,
                    *aligned,
                    !*no_orders,
                ),
                write_overrides: write_overrides.clone(),
                json: *json,
            },
        ),
        Command::Replay { query, sample } => replay::run(query, *sample),
        Command::Explain { query, phase, json } => explain::run(query, phase, *json),
        Command::Profile {
            query,
            output,
            tiles,
        } => profile::run(query, output, tiles.as_ref().map(|list| list.0.as_slice())),
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
            iterations: *iterations as usize,
            sample: *sample,
            json: json.clone(),
        }),
        Command::Watch {
            query,
            exit_after,
            debounce_ms,
            no_artifacts,
        } => watch::run(query, *exit_after, *debounce_ms, *no_artifacts),
    };
    // The trace layer writes the rest of the trace when its guard drops.
    drop(guard);
    let result = result.and_then(|()| {
        trace_outcome
            .as_ref()
            .map_or(Ok(()), trace_output::TraceOutcome::check)
    });
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => error.exit(),
    };
    // A closed pipe ended the output quietly; any other failure to write
    // standard output (a full disk) is an error even when the command
    // itself succeeded.
    match superstep::cli::stdout::finish() {
        Ok(()) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn crate_search_settings(
    beam_width: u32,
    rounds: u32,
    cheapest: u32,
    aligned: u32,
    orders: bool,
) -> superstep::session::layout_search::SearchSettings {
    superstep::session::layout_search::SearchSettings {
        beam: (beam_width > 0).then_some(superstep::session::layout_beam::BeamSettings {
            width: beam_width,
            cheapest,
            aligned,
        }),
        rounds,
        cheapest,
        aligned,
        orders,
    }
}
