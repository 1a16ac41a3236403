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
//! This module owns the search and the wording of its advice. It never
//! decides what fits: the layout planner and the placement do.

use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::{CommandError, query_path};
use super::memory::{MEMORY_MODEL, Shortage};
use crate::build_file::validate::{Capacity, CapacityCheck};
use crate::build_file::{ActivationScale, AttentionChoice, BuildQuery, load_query_with};
use crate::session::Session;
use crate::target::mapping::C600_TILES;
use crate::text::thousands;

/// What did not fit: the compiler's message, and the layout override that
/// no longer fits when one is the cause.
pub struct Failure {
    pub shortage: Shortage,
    pub override_op: Option<String>,
}

/// The searches' findings.
struct Findings {
    /// The largest smaller batch that fits (with the query's layers), when
    /// the batch can be smaller: `Some(None)` when even batch 1 does not.
    batch: Option<Option<u32>>,
    /// The largest smaller layer count that fits at the query's batch.
    layers: Option<Option<u32>>,
    /// Other levers, each tried once: what was set and whether it fits.
    levers: Vec<(String, bool)>,
    /// When a layout override is what does not fit: the largest batch (up
    /// to the query's) that fits without any override.
    without_overrides: Option<Option<u32>>,
    probes: Probes,
    seconds: f64,
}

/// Candidates tried: built through placement, or ruled out by total bytes
/// (the build file's capacity check, a necessary condition) without a
/// build.
#[derive(Clone, Copy, Debug, Default)]
struct Probes {
    builds: usize,
    ruled_out: usize,
}

/// Whether `query` builds through placement in `session` (which it now
/// holds). A candidate total bytes rule out (`Capacity`) does not fit and
/// is not built: a batch of a million, or a model on too few tiles, would
/// take long to plan only to fail. Its FP8 activations take one fixed scale: a scale changes no
/// byte of any allocation, and calibrating each candidate would run the
/// FP32 reference of every batch and layer count the search tries.
fn fits(session: &mut Session, query: &BuildQuery, probes: &mut Probes) -> bool {
    if !Capacity::of(&query.workload, &query.machine, &query.planning).passes() {
        probes.ruled_out += 1;
        return false;
    }
    probes.builds += 1;
    let mut candidate = query.clone();
    candidate.planning.activation_scale = ActivationScale::Fixed(PROBE_SCALE);
    session.update(&candidate);
    session.build().is_ok()
}

/// The fixed activation scale of the candidates `fits` builds (F143 at
/// 2^-4 holds magnitudes up to 15; for fitting, any scale would do).
const PROBE_SCALE: i8 = -4;

/// The largest value in `1..limit` for which `fits` holds, by bisection:
/// fitting is monotone (a smaller batch or fewer layers need no more
/// memory), and `limit` is known not to fit. `None` when 1 does not fit.
fn largest_fitting(limit: u32, mut fits: impl FnMut(u32) -> bool) -> Option<u32> {
    let (mut low, mut high) = (0u32, limit);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if fits(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    (low > 0).then_some(low)
}

/// The largest smaller batch of `query` that fits (see [`Findings::batch`]).
fn largest_batch(
    session: &mut Session,
    query: &BuildQuery,
    probes: &mut Probes,
) -> Option<Option<u32>> {
    (query.workload.batch > 1).then(|| {
        largest_fitting(query.workload.batch, |batch| {
            let mut candidate = query.clone();
            candidate.workload.batch = batch;
            fits(session, &candidate, probes)
        })
    })
}

/// Tries the other levers of `query` in `session`, after the batch search
/// (its answer `batch`, `probes` tried since `started`).
fn search(
    session: &mut Session,
    query: &BuildQuery,
    overrides_at_fault: bool,
    batch: Option<Option<u32>>,
    mut probes: Probes,
    started: Instant,
) -> Findings {
    let layers = (query.workload.model.layers > 1).then(|| {
        largest_fitting(query.workload.model.layers, |layers| {
            let mut candidate = query.clone();
            candidate.workload.model.layers = layers;
            fits(session, &candidate, &mut probes)
        })
    });
    let mut levers = Vec::new();
    let mut lever = |label: String, candidate: BuildQuery, probes: &mut Probes| {
        let fitted = fits(session, &candidate, probes);
        levers.push((label, fitted));
    };
    if query.workload.attention != AttentionChoice::Flash {
        let mut candidate = query.clone();
        candidate.workload.attention = AttentionChoice::Flash;
        lever(
            String::from("workload.attention = \"flash\""),
            candidate,
            &mut probes,
        );
    }
    if query.machine.tiles < C600_TILES {
        let mut candidate = query.clone();
        candidate.machine.tiles = C600_TILES;
        lever(
            format!("machine.tiles = {C600_TILES}"),
            candidate,
            &mut probes,
        );
    }
    let reserved = query.planning.reserved_bytes_per_tile;
    if reserved >= 2048 {
        let mut candidate = query.clone();
        candidate.planning.reserved_bytes_per_tile = reserved / 2;
        lever(
            format!(
                "planning.reserved_bytes_per_tile = {} (half; the planner keeps that back for \
                 the exchange tables and patch lists, placement uses what they really need)",
                reserved / 2
            ),
            candidate,
            &mut probes,
        );
    }
    let mut without_overrides = None;
    if overrides_at_fault && !query.planning.layout_overrides.is_empty() {
        let mut candidate = query.clone();
        candidate.planning.layout_overrides.clear();
        without_overrides = Some(if fits(session, &candidate, &mut probes) {
            Some(query.workload.batch)
        } else {
            largest_batch(session, &candidate, &mut probes).flatten()
        });
    }
    Findings {
        batch,
        layers,
        levers,
        without_overrides,
        probes,
        seconds: started.elapsed().as_secs_f64(),
    }
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
    let findings = search(
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
    let findings = search(&mut session, &query, false, batch, probes, started);
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

#[cfg(test)]
mod tests {
    use super::largest_fitting;

    #[test]
    fn bisection_finds_the_largest_value_that_fits_and_tries_few() {
        for limit in 1..40u32 {
            for threshold in 0..limit {
                let mut tried = Vec::new();
                let found = largest_fitting(limit, |value| {
                    tried.push(value);
                    value <= threshold
                });
                assert_eq!(
                    found,
                    (threshold > 0).then_some(threshold),
                    "{limit} {threshold}"
                );
                assert!(tried.iter().all(|value| (1..limit).contains(value)));
                assert!(tried.len() <= (u32::BITS - limit.leading_zeros()) as usize);
            }
        }
    }
}
