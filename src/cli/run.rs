//! `superstep run`: compile, interpret the low program, compare with the
//! FP32 reference.

use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{
    agreement_result, apply_searched_layouts, build_weights, check_pins, load, open_cache,
    reference_output,
};
use super::host_data::{self, HostArguments};
use crate::session::Session;
use crate::sim::compare::compare;
use crate::sim::interpreter::interpret;

/// The flags of `superstep run`.
#[derive(Debug, clap::Args)]
pub struct RunArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    #[command(flatten)]
    pub host: HostArguments,
}

pub fn run(arguments: &RunArguments) -> Result<(), CommandError> {
    let mut query = load(&arguments.query)?;
    let host_data = host_data::read(&arguments.host, &query)?;
    // The cache is asked only for the layouts a search kept for this
    // configuration.
    check_pins(&arguments.query, &query)?;
    let cache = open_cache(&arguments.query, &query.outputs.directory, &query.cache)?;
    let layouts = apply_searched_layouts(&mut query, cache.as_ref());
    if !super::progress::quiet() {
        eprintln!("{}", layouts.line());
    }
    // Left open: the end of the process finishes it, so that its line is
    // the last on standard error (after an error too).
    let _cache = cache;
    // The first half only: the persistent cache holds back-half results.
    let mut session = Session::new(&query);
    let progress = super::progress::bars();
    session.set_progress(progress.clone());
    let started = Instant::now();
    session.build_low_program()?;
    let layouts = session.layouts()?;
    let program = session.low_program()?;
    let compile_time = started.elapsed();
    let graph = session.graph();
    let started = Instant::now();
    progress.begin("weights", None);
    let weights = build_weights(&session);
    progress.end();
    let weights = host_data.apply(weights?)?;
    let weights_time = started.elapsed();
    let started = Instant::now();
    progress.begin("interpreter", None);
    let interpretation = interpret(&program, &layouts, &weights);
    progress.end();
    let interpretation =
        interpretation.map_err(|error| CommandError::Internal(format!("interpreter: {error}")))?;
    let interpret_time = started.elapsed();
    let (reference, reference_time) = reference_output(graph, &weights, progress.as_ref())?;
    let agreement = compare(&interpretation.output, &reference);
    print_line!(
        "superstep run {}: {} ({}) on {} tiles",
        query.name,
        query.workload.model.name,
        crate::text::counted(
            graph.repeat.as_ref().map_or(0, |repeat| repeat.iterations),
            "layer",
            "layers"
        ),
        query.machine.tiles
    );
    print_note!(
        "  compile {:.3} s, weights {:.3} s, interpreter {:.3} s, FP32 reference {:.3} s",
        compile_time.as_secs_f64(),
        weights_time.as_secs_f64(),
        interpret_time.as_secs_f64(),
        reference_time.as_secs_f64()
    );
    let counts = interpretation.counts;
    print_line!(
        "  executed {} kernel runs, {} transfers ({} words received), {} copy rows, {} fills",
        counts.kernel_runs,
        counts.transfers,
        counts.words_received,
        counts.copy_rows,
        counts.fills
    );
    let from_checkpoint = query.workload.weights.is_checkpoint();
    super::quantisation::report(&weights, from_checkpoint && !super::progress::quiet(), "  ");
    super::quantisation::report_activations(
        counts.fp8_activations,
        counts.saturated_activations,
        "  ",
    );
    print_line!("  {}", host_data.input_line);
    print_line!("  {agreement}");
    for line in host_data.finish(&arguments.host, &interpretation.output, &reference)? {
        print_line!("  {line}");
    }
    agreement_result(&agreement)
}
