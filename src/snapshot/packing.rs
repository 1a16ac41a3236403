//! `superstep packing --snapshot FILE`: the packing study of an imported
//! snapshot's phases (the seed's tool read captures the same way), each
//! problem scheduled, validated, encoded and row-checked directly, without
//! a database (an imported phase is not part of any build). Phases are
//! pure work here, so they run on rayon.

use rayon::prelude::*;

use super::PhaseSnapshot;
use crate::rows::{check_phase, encode_phase};
use crate::schedule::packing::{ExchangeMeasure, MeasureError, endpoint_fragments, study};
use crate::schedule::{AutoSettings, ExchangeProblem, ScheduleFigures, schedule_with, validate};
use crate::studies::packing::{Packing, PackingPhase, keep_top};
use crate::studies::sweep::SweepConfig;

/// `problem` under `config`: scheduled and validated, encoded and checked.
pub fn measure(
    problem: &ExchangeProblem,
    config: SweepConfig,
) -> Result<ExchangeMeasure, MeasureError> {
    let schedule = schedule_with(
        problem,
        config.policy,
        config.width,
        &AutoSettings::default(),
    )
    .map_err(|error| MeasureError::Scheduling(error.to_string()))?;
    validate(problem, &schedule).map_err(|error| MeasureError::Validation(error.to_string()))?;
    let rows =
        encode_phase(problem, &schedule).map_err(|error| MeasureError::Rows(error.to_string()))?;
    check_phase(problem, &schedule, &rows)
        .map_err(|error| MeasureError::Rows(error.to_string()))?;
    Ok(ExchangeMeasure::of(
        problem,
        &ScheduleFigures::of(&schedule),
        rows.max_bytes(),
        rows.total_bytes(),
    ))
}

/// A snapshot phase whose original exchange could not be measured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("snapshot phase {phase} ({key}): {source}")]
pub struct SnapshotPackingError {
    /// The phase's id in the snapshot.
    pub phase: u32,
    /// Its key (from its provenance), or `phase N`.
    pub key: String,
    #[source]
    pub source: MeasureError,
}

/// The study of `phases` (the snapshot's `total` phases, or the selected
/// ones) under `config`, keeping the `top` by endpoint fragmentation.
/// `Err` names the phase whose original does not schedule or encode.
pub fn snapshot_packing(
    phases: &[PhaseSnapshot],
    total: usize,
    config: SweepConfig,
    top: Option<usize>,
) -> Result<Packing, SnapshotPackingError> {
    let mut fragments: Vec<(usize, (u64, u32))> = phases
        .iter()
        .enumerate()
        .map(|(index, phase)| (index, endpoint_fragments(&phase.problem)))
        .collect();
    keep_top(&mut fragments, top);
    let studied: Vec<Result<PackingPhase, SnapshotPackingError>> = fragments
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
            .map_err(|source| SnapshotPackingError {
                phase: phase.phase,
                key: key.clone(),
                source,
            })?;
            Ok(PackingPhase {
                index: phase.phase as usize,
                step: phase.phase as usize,
                key,
                executions: phase.provenance.executions.unwrap_or(1),
                endpoint_fragments: count,
                fragment_tile: tile,
                policy: config,
                study: result,
            })
        })
        .collect();
    Ok(Packing {
        source: "snapshot",
        phases_in_build: total,
        config: Some(config),
        phases: studied.into_iter().collect::<Result<_, _>>()?,
    })
}
