//! A model that does not fit, explained by what would: the largest batch
//! and the largest layer count that fit, and whether flash attention, all
//! of the c600's tiles, half the planner's reservation or no layout
//! overrides would. Each answer is found by building the candidate through
//! placement (the stage that decides whether a program fits), in the
//! failing build's own session, so nothing is guessed; the error points at
//! `workload.batch` in the build file (or its `--set`).
//!
//! A build file that fails the capacity check before anything is compiled
//! gets the same answer ([`capacity_advice`]): the check only says what
//! total bytes rule out.
//!
//! This module owns the wording of the advice; the probing builds are the
//! study `crate::studies::fit_probing`. It never decides what fits: the
//! layout planner and the placement do.

use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::{CommandError, query_path};
use super::memory::{MEMORY_MODEL, Shortage};
use crate::build_file::validate::{Capacity, CapacityCheck};
use crate::build_file::{BuildQuery, load_query_with};
use crate::session::Session;
use crate::studies::fit_probing::{Findings, Probes, largest_batch, other_levers};
use crate::target::mapping::C600_TILES;
use crate::text::thousands;

/// What did not fit: the compiler's message, and the layout override that
/// no longer fits when one is the cause.
pub struct Failure {
    pub shortage: Shortage,
    pub override_op: Option<String>,
}

/// The advice of `findings` for `query`, one lever per line: only what was
/// built (the planner's own hint of what would make room, "workload.layers
/// = 179" from bytes alone, is left out: a build of it may still not fit).
fn advice(query: &BuildQuery, findings: &Findings) -> String {
    let batch = query.workload.batch;
    let layers = query.workload.model.layers;
    let plural = |count: u32, word: &str| {
        if count == 1 {
            format!("{count} {word}")
        } else {
            format!("{count} {word}s")
        }
    };
    let mut lines = Vec::new();
    match findings.batch {
        Some(Some(largest)) => lines.push(format!(
            "the largest batch that fits: workload.batch = {largest} (batch {} does not), with {}",
            largest + 1,
            plural(layers, "layer")
        )),
        Some(None) => lines.push(format!(
            "no smaller batch fits: batch 1 does not fit {} either",
            plural(layers, "layer")
        )),
        None => {}
    }
    match findings.layers {
        Some(Some(largest)) => lines.push(format!(
            "the largest layer count that fits at batch {batch}: workload.layers = {largest} ({} \
             do not)",
            largest + 1
        )),
        Some(None) => lines.push(format!(
            "no layer count fits at batch {batch}: 1 layer does not (activations, not weights, \
             fill the memory)"
        )),
        None => {}
    }
    for (label, fitted) in &findings.levers {
        lines.push(if *fitted {
            format!(
                "{label} fits at batch {batch} with {}",
                plural(layers, "layer")
            )
        } else {
            format!("{label} does not fit either")
        });
    }
    match findings.without_overrides {
        Some(Some(largest)) if largest == batch => lines.push(format!(
            "without the [[layout.override]] entries (the planner choosing every layout) batch \
             {batch} fits"
        )),
        Some(Some(largest)) => lines.push(format!(
            "without the [[layout.override]] entries (the planner choosing every layout): \
             workload.batch = {largest} fits (batch {} does not)",
            largest + 1
        )),
        Some(None) => lines.push(String::from(
            "without the [[layout.override]] entries no batch fits either",
        )),
        None => {}
    }
    if query.machine.tiles >= C600_TILES {
        lines.push(format!(
            "all {} tiles of the c600 are in use",
            thousands(u64::from(C600_TILES))
        ));
    }
    lines.push(if findings.probes.ruled_out > 0 {
        format!(
            "each answer was found by building it through placement ({} builds, {:.1} s) or, \
             for {}, by total bytes alone (the build file's capacity check)",
            findings.probes.builds,
            findings.seconds,
            crate::text::counted(findings.probes.ruled_out as u64, "candidate", "candidates")
        )
    } else {
        format!(
            "each answer was found by building it through placement ({} builds, {:.1} s)",
            findings.probes.builds, findings.seconds
        )
    });
    lines.join("\n")
}

/// The input error of a build that does not fit, with what would: the
/// search runs in `session`, silently (it is left holding the last
/// candidate). For a layout override that does not fit, `unless` is the
/// error to give instead when no smaller batch fits either (then the
/// override itself is wrong, not the batch).
pub fn does_not_fit(
    session: &mut Session,
    query: &BuildQuery,
    arguments: &QueryArguments,
    failure: Failure,
    unless: Option<CommandError>,
) -> CommandError {
    if query.workload.batch <= 1
        && let Some(original) = unless
    {
        return original;
    }
    match &failure.override_op {
        Some(op) => eprintln!(
            "the layout override of `{op}` cannot be used at batch {}; building smaller batches \
             to see whether it fits one ...",
            query.workload.batch
        ),
        None => eprintln!(
            "the model does not fit; building smaller candidates to find what would (batch, \
             layers, attention, tiles, reservation) ..."
        ),
    }
    session.set_progress(crate::session::progress::silent());
    let started = Instant::now();
    let mut probes = Probes::default();
    let batch = largest_batch(session, query, &mut probes);
    if let (Some(original), Some(None)) = (unless, batch) {
        return original;
    }
    let findings = other_levers(
        session,
        query,
        failure.override_op.is_some(),
        batch,
        probes,
        started,
    );
    let batch = query.workload.batch;
    let layers = query.workload.model.layers;
    let tiles = query.machine.tiles;
    let label = move |field: &str| match field {
        "workload.batch" => format!("batch {batch} does not fit"),
        "workload.layers" => format!("{layers} layers at batch {batch} do not fit"),
        _ => format!("this model at batch {batch} does not fit on {tiles} tiles"),
    };
    let error = crate::build_file::fit::fit_error(
        &query_path(arguments),
        &arguments.sets,
        batch,
        failure.shortage.message.clone(),
        &label,
        advice(query, &findings),
        failure.override_op.as_deref(),
    );
    CommandError::Diagnostic(format!(
        "{}\n  note: {MEMORY_MODEL}",
        crate::build_file::error::render_query_error(&error).trim_end()
    ))
}

/// `superstep build`'s answer to a build file that fails the capacity check
/// (a necessary condition on total bytes, whose own help names levers, not
/// values): the check's error, pointed where it points, followed by what
/// fits, each value found by building it (or ruled out by total bytes).
/// `original` alone when the file fails for another reason too.
pub fn capacity_advice(arguments: &QueryArguments, original: CommandError) -> CommandError {
    let CommandError::Diagnostic(diagnostic) = &original else {
        return original;
    };
    let Ok(query) = load_query_with(
        &query_path(arguments),
        &arguments.sets,
        CapacityCheck::Skipped,
    ) else {
        return original;
    };
    if Capacity::of(&query.workload, &query.machine, &query.planning).passes() {
        return original;
    }
    eprintln!(
        "the model does not fit by total bytes; building smaller candidates to find what would \
         (batch, layers, attention, tiles, reservation) ..."
    );
    let mut session = Session::as_written(&query, None);
    let started = Instant::now();
    let mut probes = Probes::default();
    let batch = largest_batch(&mut session, &query, &mut probes);
    let findings = other_levers(&mut session, &query, false, batch, probes, started);
    let built: Vec<String> = advice(&query, &findings)
        .lines()
        .map(|line| format!("    {line}"))
        .collect();
    CommandError::Diagnostic(format!(
        "{}\n  what fits, found by building it:\n{}\n  note: {MEMORY_MODEL}",
        diagnostic.trim_end(),
        built.join("\n")
    ))
}
