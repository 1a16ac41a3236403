//! `superstep build`: compile and report.

use std::path::PathBuf;
use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::{CommandError, query_path};
use super::common::{
    apply_searched_layouts, artifacts_directory, build_cold, build_weights, check_pins,
    finish_cache, load, open_cache, output_error,
};
use super::{preflight, progress, why};
use crate::build_file::BuildQuery;
use crate::build_file::package_build_key as build_key;
use crate::package::PackageError;
use crate::report::BackReport;
use crate::report::artifacts::{ArtifactError, session_report, write_reports};
use crate::report::last_build::{LastBuild, last_build_path};
use crate::report::manifest;

use crate::text::thousands;

pub use crate::studies::suggestions::SUGGESTION_CANDIDATES;

/// The flags of `superstep build`.
#[derive(Debug, clap::Args)]
pub struct BuildArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// Also print one line per op (plan, output format, counts).
    #[arg(long)]
    pub ops: bool,
    /// Print one JSON document instead of the text: report.json's record
    /// (schema_version, compiler, the figures), the files written and
    /// the suggestions measured. The same build prints the same bytes.
    #[arg(long)]
    pub json: bool,
    /// Explain the build against the last successful build of the same NAME.
    ///
    /// Every successful build records its effective query (build file
    /// text, folder and --set overrides) in artifacts/NAME/last-build.json.
    /// With --why, that recorded query is built first in a fresh session,
    /// then the current query is applied and built incrementally on top,
    /// and the build prints which input fields changed (old -> new) and
    /// which queries they invalidated, by stage, with op names. Cost: it
    /// builds twice (the recorded query cold, then the current one
    /// incrementally); the stage times shown are the second build's.
    /// Without a usable record it says so and builds once, cold.
    #[arg(long, verbatim_doc_comment)]
    pub why: bool,
    /// How many suggested overrides to end with (0: none, and none are
    /// measured; report.html then says so). Each is the best standard
    /// policy of one of the four most expensive exchange phases, proved
    /// by scheduling it under every standard policy: on a cold cache
    /// that is the largest part of a SigLIP build's time (memoized and
    /// cached after); `superstep phases --suggest` lists all.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub suggestions: usize,
}

pub fn run(arguments: &BuildArguments) -> Result<(), CommandError> {
    let started = Instant::now();
    if arguments.json {
        super::stdout::set_json_document();
    }
    // A file that fails the capacity check is answered with what fits,
    // found by building it.
    let mut query = load(&arguments.query)
        .map_err(|error| super::fit::capacity_advice(&arguments.query, error))?;
    // Every build writes into the outputs folder (at least last-build.json):
    // check it before the compile.
    preflight::check_output_directory("outputs.directory", &artifacts_directory(&query))?;
    check_pins(&arguments.query, &query)?;
    let cache = open_cache(&arguments.query, &query.outputs.directory, &query.cache)?;
    // The plan a search kept for this configuration, else the planner's.
    let layouts = apply_searched_layouts(&mut query, cache.as_ref());
    if let Some(cache) = &cache {
        cache.begin_command("build", &build_key(&query));
    }
    let (session, outcome, explanation) = if arguments.why {
        let (session, outcome, explanation) =
            why::build_on_last_build(&arguments.query, &query, cache)?;
        (session, outcome, Some(explanation))
    } else {
        let (session, outcome) = build_cold(&arguments.query, &query, cache)?;
        (session, outcome, None)
    };
    // A checkpoint is read and checked at build time (every tensor present,
    // shaped as the preset needs, finite): a build never succeeds on a file
    // `run` would refuse.
    let checkpoint = if query.workload.weights.is_checkpoint() {
        Some(build_weights(&session)?)
    } else {
        None
    };
    let mut report = {
        let _span = tracing::info_span!("report").entered();
        session_report(&session, &query, &outcome)
            .map_err(|error| CommandError::Internal(error.to_string()))?
    };
    report.layouts = Some(layouts);
    report.source = Some(crate::report::BuildSource {
        build_file: query_path(&arguments.query).display().to_string(),
        // As the build key, leaving aside where the outputs and the cache
        // go: a report's bytes do not depend on where it is written.
        sets: arguments
            .query
            .sets
            .iter()
            .filter(|set| {
                !set.trim_start().starts_with("outputs.") && !set.trim_start().starts_with("cache.")
            })
            .cloned()
            .collect(),
        build_key: build_key(&query).hex(),
        compiler_source: crate::report::compiler_source().to_string(),
    });
    let summary = &outcome.summary;
    let quiet = progress::quiet();
    print_line!(
        "superstep build {}: {} ({}, batch {}) on {} tiles",
        query.name,
        query.workload.model.name,
        crate::text::counted(report.layers, "layer", "layers"),
        query.workload.batch,
        summary.tiles
    );
    if let Some(layouts) = &report.layouts {
        print_line!("{}", layouts.line());
    }
    if !quiet {
        print_details(&outcome, &report, &query, arguments.ops);
    }
    if let Some(weights) = &checkpoint {
        super::quantisation::report(weights, !quiet, "");
    }
    let mut found: Vec<crate::studies::suggestions::Suggestion> = Vec::new();
    let mut measured = false;
    if let Some(back) = &report.back {
        print_line!(
            "estimate: {} cycles = {:.6} ms at 1.5 GHz (compute {}, exchange {}, setup and sync {}, patching {}); {} barriers",
            thousands(back.headline.estimate.total_cycles),
            back.headline.estimate.milliseconds,
            thousands(back.headline.estimate.compute_cycles),
            thousands(back.headline.estimate.exchange_cycles),
            thousands(back.headline.estimate.sync_cycles),
            thousands(back.headline.estimate.patch_cycles),
            thousands(back.headline.estimate.barriers)
        );
        if let Some(line) = crate::report::precision::precision_line(&back.compute_by_op) {
            print_line!("{line}");
        }
        if !quiet {
            print_back_details(back);
        }
        if arguments.ops && !quiet {
            print_line!(
                "compute by op: {:<36} {:>6} {:>14} {:>14} {:>7} {:>16} {:>9} {:>9}",
                "op",
                "runs",
                "cycles/run",
                "total",
                "share",
                "MACs",
                "rate",
                "roofline"
            );
            for line in &back.compute_by_op {
                print_line!(
                    "  {:<48} {:>6} {:>14} {:>14} {:>6.2}% {:>16} {:>9} {:>9}",
                    line.op.op,
                    line.op.executions,
                    thousands(line.cycles_per_execution),
                    thousands(line.op.cycles),
                    line.share * 100.0,
                    thousands(line.op.fp8_macs + line.op.fp16_macs),
                    matrix_rate(&line.op),
                    line.roofline_ratio
                        .map_or_else(|| "-".to_string(), |ratio| format!("{ratio:.2}x"))
                );
            }
        }
    }
    // The folder's record goes first and comes back last: while the
    // outputs are written no record describes the folder.
    let directory = artifacts_directory(&query);
    let (_lock, previous) = manifest::begin(&directory)
        .map_err(|error| CommandError::Input(format!("error: {error}")))?;
    let mut written = Vec::new();
    let kept = (query.outputs.package && report.back.is_some())
        .then(|| manifest::unchanged(&directory, previous.as_ref(), &query, "package.bin"))
        .flatten();
    if let Some(bytes) = kept {
        // The same build's package, intact: its bytes would be these.
        let path = directory.join("package.bin");
        print_note!(
            "kept {} ({} bytes, this build's, unchanged)",
            path.display(),
            thousands(bytes)
        );
        written.push(path);
    } else if query.outputs.package && report.back.is_some() {
        let _span = tracing::info_span!("package").entered();
        let package = session
            .package()
            .map_err(|error| CommandError::Internal(error.to_string()))?;
        let path = directory.join("package.bin");
        let bytes = package
            .write(&path, &build_key(&query))
            .map_err(|error| match error {
                PackageError::Output(error) => output_error(error),
                other => CommandError::Internal(other.to_string()),
            })?;
        print_note!("wrote {} ({} bytes)", path.display(), thousands(bytes));
        written.push(path);
    }
    // Advice, not the build: measured once the package is on disk (each
    // standard policy pruned by the phase's current cost), shown in
    // report.html and printed after every output is written.
    if arguments.suggestions > 0 && report.back.is_some() && (!quiet || query.outputs.html) {
        measured = true;
        found = crate::studies::suggestions::suggestions(&session, Some(SUGGESTION_CANDIDATES))
            .map_err(|error| CommandError::Internal(error.to_string()))?;
    }
    let reports = {
        let _span = tracing::info_span!("write_reports").entered();
        write_reports(
            &session,
            &query,
            &report,
            measured.then_some(found.as_slice()),
        )
        .map_err(|error| match error {
            ArtifactError::Write(error) => output_error(error),
            other => CommandError::Internal(other.to_string()),
        })?
    };
    for path in reports {
        print_note!("wrote {}", path.display());
        written.push(path);
    }
    if let Some(back) = report.back.as_ref().filter(|_| !quiet) {
        if arguments.suggestions > 0 {
            if found.is_empty() {
                print_line!(
                    "suggestions: none; no standard policy beats the {SUGGESTION_CANDIDATES} most expensive exchange phases as built"
                );
            } else {
                print_line!(
                    "suggestions: the {} largest savings among the {SUGGESTION_CANDIDATES} most expensive exchange phases (superstep phases --suggest lists every phase):",
                    found.len().min(arguments.suggestions)
                );
                let shown = &found[..found.len().min(arguments.suggestions)];
                for line in super::phases::render_suggestions(shown) {
                    print_line!("{line}");
                }
                print_line!("{}", super::phases::SUGGESTION_NOTE);
            }
        }
        print_line!("{}", pruning_line(&session, back, measured)?);
    }
    if let Some(explanation) = explanation {
        print_text!("{explanation}");
    }
    written.extend(record_build(&arguments.query, &query));
    manifest::finish(&directory, &query, &written, previous.as_ref())
        .map_err(|error| CommandError::Internal(error.to_string()))?;
    if arguments.json {
        // report.json's record, what was written and the advice measured;
        // nothing of the run (wall time, cache use), so that the same build
        // prints the same document.
        let document = serde_json::json!({
            "schema_version": crate::report::REPORT_SCHEMA_VERSION,
            "compiler": crate::report::compiler_version(),
            "report": report,
            "written": written,
            "suggestions": measured.then_some(&found),
        });
        super::stdout::write_document(&document)
            .map_err(|error| CommandError::Internal(error.to_string()))?;
    }
    print_note!("total {:.3} s", started.elapsed().as_secs_f64());
    finish_cache(session.cache());
    Ok(())
}

/// Stage times, the queries executed (`--verbose`), program counts, graph
/// and accumulation lines, and with `--ops` one line per op.
fn print_details(
    outcome: &crate::session::BuildOutcome,
    report: &crate::report::BuildReport,
    query: &crate::build_file::BuildQuery,
    show_ops: bool,
) {
    let summary = &outcome.summary;
    print_line!("stage times:");
    for time in &outcome.times {
        print_line!(
            "  {:<12} {:>10.3} ms",
            time.stage,
            time.elapsed.as_secs_f64() * 1e3
        );
    }
    if progress::verbose() {
        print_line!("queries executed:");
        for (query_name, count) in outcome.executions_by_query() {
            print_line!("  {:<24} {count:>6}", query_name.name());
        }
    }
    let total = &summary.total;
    let body = &summary.repeat_body;
    print_line!(
        "counts:                     {:>14} {:>14}",
        "program",
        "repeat body"
    );
    let rows: [(&str, u64, u64); 10] = [
        ("ops (planned)", report.planned_ops as u64, 0),
        ("values (planned)", report.planned_values as u64, 0),
        ("allocations", summary.allocations, 0),
        ("kernel runs", total.kernel_runs, body.kernel_runs),
        ("local copies", total.local_copies, body.local_copies),
        ("zero fills", total.zero_fills, body.zero_fills),
        ("exchanges", total.exchanges, body.exchanges),
        ("transfers", total.transfers, body.transfers),
        (
            "destinations",
            total.transfer_destinations,
            body.transfer_destinations,
        ),
        ("words moved", total.transfer_words, body.transfer_words),
    ];
    for (label, program_count, body_count) in rows {
        print_line!(
            "  {label:<24} {:>14} {:>14}",
            thousands(program_count),
            thousands(body_count)
        );
    }
    print_line!(
        "  graph: {} ops, {} values, {} parameters; {} rearranges inserted",
        report.graph_ops,
        report.graph_values,
        thousands(report.parameters),
        report.rearranges
    );
    print_line!(
        "  resident weights: {} bytes on the fullest tile ({}); {} exchange phases executed with {} iterations",
        thousands(report.resident_weight_bytes_max),
        report.resident_weight_tile,
        thousands(summary.executed_exchanges),
        summary.repeat_iterations
    );
    let split = report.f16_partials.len() + report.f32_partials.len();
    if split > 0 {
        print_line!(
            "  accumulation: FP16 partial sums on {} of {split} split matrix products{}",
            report.f16_partials.len(),
            if report.f16_partials.is_empty() {
                String::new()
            } else {
                format!(" ({})", report.f16_partials.join(", "))
            }
        );
    }
    if let Some(calibration) = &report.activation_calibration {
        print_calibration(calibration, &query.planning.activation_scale);
    }
    if show_ops {
        for op in &report.ops {
            print_line!(
                "  {:<36} {:<70} transfers {:>8} copies {:>6} runs {:>6}",
                op.name,
                op.plan,
                op.counts.transfers,
                op.counts.local_copies,
                op.counts.kernel_runs
            );
        }
    }
}

/// The matrix unit's rate(s) an op's multiply-accumulates run at: `fp8`,
/// `fp16`, `fp8+fp16` (an attention with FP8 `PV` and FP16 `QK^T`
/// products), or `-` without any.
fn matrix_rate(op: &crate::estimate::breakdown::OpCompute) -> &'static str {
    match (op.fp8_macs > 0, op.fp16_macs > 0) {
        (true, true) => "fp8+fp16",
        (true, false) => "fp8",
        (false, true) => "fp16",
        (false, false) => "-",
    }
}

/// The calibrated scale of every product position, with the largest
/// activation seen and the error of rounding to FP8 at that scale.
fn print_calibration(
    calibration: &crate::sim::calibration::ActivationCalibration,
    setting: &crate::build_file::ActivationScale,
) {
    use crate::build_file::{ActivationScale, CalibrationInput};
    let input = match setting {
        ActivationScale::Calibrate {
            input: CalibrationInput::File { path },
        } => format!("on {}", path.display()),
        _ => String::from("on the seeded input"),
    };
    print_line!(
        "  FP8 activation scales, calibrated {input} (the least scale whose range holds {}x the largest activation):",
        crate::sim::calibration::HEADROOM
    );
    for position in &calibration.positions {
        print_line!(
            "    {:<28} {:<11} scale {:>3}  largest {:>10.4}  range {:>9.1}  rounding error {:.5} (relative RMS over {} values)",
            position.op,
            position.operand.name(),
            position.scale,
            position.largest,
            crate::numerics::fp8::F143_MAX * 2f32.powi(i32::from(position.scale)),
            position.relative_rms,
            thousands(position.elements)
        );
    }
    let values = crate::sim::calibration::CalibratedOperand::Values;
    if calibration
        .positions
        .iter()
        .any(|position| position.operand == values)
    {
        let scale = crate::numerics::dot::PROBABILITY_SCALE;
        print_line!(
            "    PV probabilities: fixed scale {scale} (range {:.3}, the least scale that holds 1.0)",
            crate::numerics::fp8::F143_MAX * 2f32.powi(scale)
        );
    }
}

/// Memory, contention, compute, the longest phase and exchange quality.
fn print_back_details(back: &BackReport) {
    print_line!(
        "memory: exchange table {} B/tile (max), peak SRAM {} B on tile {}; patch words: {} Repeat (per iteration, all tiles), {} sharing",
        thousands(back.headline.exchange_table_bytes_per_tile_max),
        thousands(back.headline.peak_sram_bytes_per_tile),
        back.headline.peak_sram_tile,
        thousands(back.headline.repeat_patch_words),
        thousands(back.headline.sharing_patch_words)
    );
    print_line!(
        "memory elements (exchange x tile x element): {} where a send and a receive of different allocations share one, {} beside the exchange code's fetch; {} where one allocation is sent from and received into (kept apart in events by the schedule)",
        thousands(back.headline.element_conflicts),
        thousands(back.headline.fetch_conflicts),
        thousands(back.headline.same_allocation_elements)
    );
    print_line!(
        "compute: {} cycles, {:.2}x the matrix roofline of {} cycles",
        thousands(back.headline.estimate.compute_cycles),
        back.headline.estimate.compute_cycles as f64 / back.compute_roofline_cycles.max(1) as f64,
        thousands(back.compute_roofline_cycles)
    );
    let worst = back
        .phases
        .iter()
        .max_by_key(|phase| phase.horizon as u64 * phase.executions as u64);
    if let Some(worst) = worst {
        print_line!(
            "phases: {} validated and checked; longest {} (horizon {}, endpoint bound {}, {} transfers, x{})",
            back.phases.len(),
            worst.key,
            thousands(worst.horizon as u64),
            thousands(worst.endpoint_bound as u64),
            thousands(worst.transfers),
            worst.executions
        );
    }
    let quality = &back.exchange_quality;
    print_line!(
        "exchange: {} cycles = {:.3}x the endpoint bound ({}), {:.3}x the latency-aware bound ({}); furthest from its bound: {} at {:.2}x",
        thousands(quality.horizon_cycles),
        quality.endpoint_ratio,
        thousands(quality.endpoint_bound_cycles),
        quality.latency_ratio,
        thousands(quality.latency_bound_cycles),
        quality.worst_phase,
        quality.worst_latency_ratio
    );
}

/// What pruning by lower bounds skipped, per stage (`schedule.prune_by_bounds`).
fn pruning_line(
    session: &crate::session::Session,
    back: &BackReport,
    suggestions_measured: bool,
) -> Result<String, CommandError> {
    let internal = |error: &dyn std::fmt::Display| CommandError::Internal(error.to_string());
    let groups = session.phase_groups().map_err(|error| internal(&error))?;
    let priced: Vec<_> = groups
        .decisions
        .iter()
        .filter_map(|decision| decision.cost)
        .collect();
    let merges = priced.iter().filter(|cost| cost.pruned()).count();
    let taken = priced.iter().filter(|cost| cost.taken_by_bounds()).count();
    let candidates: Vec<_> = back
        .phases
        .iter()
        .flat_map(|phase| &phase.candidates)
        .collect();
    let stopped = candidates
        .iter()
        .filter(|candidate| candidate.pruned)
        .count();
    let mut line = format!(
        "pruned by lower bounds: {merges} of {} fusion merges priced (merged bound already at the separate horizons plus the barrier), {taken} taken without scheduling the exchanges apart (merged horizon below their bounds plus the barrier); {stopped} of {} auto candidates of the program's phases (bound to exceed the best horizon before their stage)",
        priced.len(),
        candidates.len()
    );
    if suggestions_measured {
        let (measured, pruned) =
            crate::studies::suggestions::suggestion_pruning(session, Some(SUGGESTION_CANDIDATES))
                .map_err(|error| internal(&error))?;
        line.push_str(&format!(
            "; {pruned} of {} suggestion policies (bound to reach the phase as built)",
            measured + pruned
        ));
    }
    Ok(line)
}

/// The report of a built session (as `build` writes it), for commands that
/// compare reports.
pub fn report_of(
    session: &crate::session::Session,
    query: &crate::build_file::BuildQuery,
    outcome: &crate::session::BuildOutcome,
) -> Result<crate::report::BuildReport, CommandError> {
    session_report(session, query, outcome)
        .map_err(|error| CommandError::Internal(error.to_string()))
}

/// Records `query` as the last successful build (what `--why` builds on);
/// a failure only warns.
fn record_build(arguments: &QueryArguments, query: &BuildQuery) -> Option<PathBuf> {
    let file = query_path(arguments);
    let record = crate::build_file::read_build_file(&file)
        .map(|text| LastBuild::new(&file, &text, &arguments.sets, query))
        .map_err(|error| format!("cannot read {}: {error}", file.display()))
        .and_then(|record| {
            record
                .save(&last_build_path(query))
                .map_err(|error| error.to_string())
        });
    match record {
        Ok(()) => Some(last_build_path(query)),
        Err(error) => {
            eprintln!("warning: the build was not recorded for --why: {error}");
            None
        }
    }
}
