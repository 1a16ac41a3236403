//! `superstep packing --snapshot FILE`: the packing study of an imported
//! snapshot's phases (the seed's tool read captures the same way), each
//! problem scheduled, validated, encoded and row-checked directly, without
//! a database (an imported phase is not part of any build). Phases are
//! pure work here, so they run on rayon.

use rayon::prelude::*;

use super::PhaseSnapshot;
use crate::rows::{check_phase, encode_phase};
use crate::schedule::packing::{ExchangeMeasure, endpoint_fragments, study};
use crate::schedule::{AutoSettings, ExchangeProblem, ScheduleFigures, schedule_with, validate};
use crate::session::packing::{Packing, PackingPhase, keep_top};
use crate::session::sweep::SweepConfig;

/// `problem` under `config`: scheduled and validated, encoded and checked.
pub fn measure(problem: &ExchangeProblem, config: SweepConfig) -> Result<ExchangeMeasure, String> {
    let schedule = schedule_with(
        problem,
        config.policy,
        config.width,
        &AutoSettings::default(),
    )
    .map_err(|error| format!("scheduling: {error}"))?;
    validate(problem, &schedule)
        .map_err(|error| format!("the schedule fails validation: {error}"))?;
    let rows = encode_phase(problem, &schedule).map_err(|error| format!("rows: {error}"))?;
    check_phase(problem, &schedule, &rows).map_err(|error| format!("rows: {error}"))?;
    Ok(ExchangeMeasure::of(
        problem,
        &ScheduleFigures::of(&schedule),
        rows.max_bytes(),
        rows.total_bytes(),
    ))
}

/// The study of `phases` (the snapshot's `total` phases, or the selected
/// ones) under `config`, keeping the `top` by endpoint fragmentation.
/// `Err` names the phase whose original does not schedule or encode.
pub fn snapshot_packing(
    phases: &[PhaseSnapshot],
    total: usize,
    config: SweepConfig,
    top: Option<usize>,
) -> Result<Packing, String> {
    let mut fragments: Vec<(usize, (u64, u32))> = phases
        .iter()
        .enumerate()
        .map(|(index, phase)| (index, endpoint_fragments(&phase.problem)))
        .collect();
    keep_top(&mut fragments, top);
    let studied: Vec<Result<PackingPhase, String>> = fragments
        .par_iter()
        .map(|&(index, (count, tile))| {
            let phase = &phases[index];
            let key = phase
                .provenance
                .key
                .clone()
                .unwrap_or_else(|| format!("phase {}", phase.phase));
            let result = study(
                &phase.problem,
                || measure(&phase.problem, config),
                |packed| measure(&packed, config),
            )
            .map_err(|error| format!("snapshot phase {} ({key}): {error}", phase.phase))?;
            Ok(PackingPhase {
                index: phase.phase as usize,
                step: phase.phase as usize,
                key,
                executions: phase.provenance.executions.unwrap_or(1),
                endpoint_fragments: count,
                fragment_tile: tile,
                policy: config.to_string(),
                study: result,
            })
        })
        .collect();
    Ok(Packing {
        source: "snapshot",
        phases_in_build: total,
        config: Some(config.to_string()),
        phases: studied.into_iter().collect::<Result<_, _>>()?,
    })
}
