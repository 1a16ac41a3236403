//! `superstep simulate`: build, assemble the package, execute it on
//! simulated tile memories (`crate::sim::package`) and compare the output
//! with the FP32 reference.

use std::time::Instant;

use super::QueryArguments;
use super::common::{
    CommandError, finish_cache, load, load_build_weights, open_session, reference_output,
};
use crate::package::assemble_package;
use crate::sim::compare::compare;
use crate::sim::package::{SimulationOptions, simulate_with};

pub fn run(arguments: &QueryArguments, poisoned: bool) -> Result<(), CommandError> {
    let query = load(arguments)?;
    let mut session = open_session(arguments, &query)?;
    let started = Instant::now();
    let outcome = session.build()?;
    if let Some(line) = finish_cache(session.cache()) {
        eprintln!("{line}");
    }
    let package = assemble_package(&session)
        .map_err(|error| CommandError::Internal(format!("package: {error}")))?;
    let layouts = session.layouts()?;
    let program = session.low_program()?;
    let compile_time = started.elapsed();
    let graph = session.graph();
    let started = Instant::now();
    let weights = load_build_weights(&query, graph)?;
    let weights_time = started.elapsed();
    let started = Instant::now();
    let options = SimulationOptions {
        strict: false,
        poisoned,
    };
    let run = simulate_with(&package, &program, &layouts, &weights, options)
        .map_err(|error| CommandError::Internal(format!("package simulation: {error}")))?;
    let simulate_time = started.elapsed();
    let started = Instant::now();
    let reference = reference_output(graph, &weights)?;
    let reference_time = started.elapsed();
    let agreement = compare(&run.output, &reference);
    println!(
        "superstep simulate {}: {} ({} layers) on {} tiles, package of {} phases",
        query.name,
        query.workload.model.name,
        graph.repeat.as_ref().map_or(0, |repeat| repeat.iterations),
        query.machine.tiles,
        package.phases.len()
    );
    println!(
        "  compile {:.3} s, weights {:.3} s, package simulation {:.3} s, FP32 reference {:.3} s",
        compile_time.as_secs_f64(),
        weights_time.as_secs_f64(),
        simulate_time.as_secs_f64(),
        reference_time.as_secs_f64()
    );
    let counts = run.counts;
    println!(
        "  executed {} kernel runs, {} copy rows, {} fills; {} exchange phases from decoded rows: \
         {} receives ({} words), {} exchange events, {} Repeat-patched and {} sharing-patched \
         row words",
        counts.kernel_runs,
        counts.copy_rows,
        counts.fills,
        counts.phases_run,
        counts.deliveries,
        counts.words_received,
        counts.exchange_events,
        counts.patched_words,
        counts.sharing_patched_words
    );
    println!(
        "  kernel operand reads touching never-written bytes (block padding): {}",
        counts.unwritten_kernel_reads
    );
    println!(
        "  kernel operand reads touching bytes another allocation wrote (padding): {}{}",
        counts.foreign_kernel_reads,
        run.first_foreign_read
            .as_ref()
            .map_or(String::new(), |first| format!("; first: {first}"))
    );
    if let Some(back) = &outcome.back {
        println!(
            "  estimated {} cycles ({:.3} ms), {} barriers",
            back.cycles, back.milliseconds, back.barriers
        );
    }
    println!("  {agreement}");
    Ok(())
}
