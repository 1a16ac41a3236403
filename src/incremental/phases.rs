//! The back half's per-phase queries: phase groups, each phase's exchange
//! problem (interned by content in `schedules`, so identical phases are
//! scheduled once), its effective policy (a firewall out of the override
//! list), its figures and its Repeat patches (both read from its rows'
//! summary, `row_summary`, not from the rows).
//!
//! Phases are identified by their stable key (`op#ordinal`), never by
//! position.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::database::Db;
use super::grouping::group_priced;
use super::inputs::BuildInputs;
use super::lowering::{StageError, low_program};
use super::row_summary::row_summary;
use super::schedules::{
    EffectivePolicy, PhaseError, PolicyKey, PolicySource, ProblemKey, schedule_figures,
};
use crate::expand::program::{AllocationId, Step, TransferList};
use crate::group::{ExchangePhase, Fusion, MotionOptions, PhaseGroups, group_phases_with};
use crate::patch::PhasePatches;
use crate::schedule::vocabulary::policy_text;
use crate::schedule::{CandidateOutcome, ExchangeProblem, SchedulePolicy, TransferWidth};

/// The phase groups under `planning.copy_motion` and `planning.fusion`.
/// Under `auto` each cross-operator merge hazards allow is priced with the
/// memoized (and persistently cached) schedule figures of the two exchange
/// problems and of their merge, under the build's global policy, or as the
/// kept record of the grouping replays it (`grouping`); only then does this
/// query read `[schedule]`.
#[salsa::tracked(returns(ref))]
pub fn phase_groups(db: &dyn Db, build: BuildInputs) -> Result<Arc<PhaseGroups>, StageError> {
    let program = low_program(db, build).clone()?;
    let planning = build.planning(db);
    let options = MotionOptions {
        copy_motion: planning.copy_motion,
        fusion: planning.fusion,
    };
    if options.fusion != Fusion::Auto || !options.copy_motion {
        return Ok(Arc::new(group_phases_with(&program, options)));
    }
    Ok(Arc::new(group_priced(db, build, &program, options)))
}

/// An exchange phase, identified by its key.
#[salsa::interned(debug)]
pub struct PhaseKey<'db> {
    #[returns(copy)]
    pub build: BuildInputs,
    #[returns(ref)]
    pub key: String,
}

/// The keys of every phase, in program order. Empty when the phase groups
/// cannot be formed: every aggregate over the keys (`row_table`, and through
/// it reservations, placement and the estimate) reads `phase_groups` first
/// and fails with its error instead of working on no phases.
#[salsa::tracked(returns(ref))]
pub fn phase_keys<'db>(db: &'db dyn Db, build: BuildInputs) -> Vec<PhaseKey<'db>> {
    match phase_groups(db, build) {
        Ok(groups) => groups
            .phases
            .iter()
            .map(|phase| PhaseKey::new(db, build, phase.key.clone()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Each phase's position by key, built once per phase groups (so locating
/// every phase is linear, not quadratic).
#[salsa::tracked(returns(ref))]
pub fn phase_positions(db: &dyn Db, build: BuildInputs) -> Arc<BTreeMap<String, u32>> {
    Arc::new(match phase_groups(db, build) {
        Ok(groups) => groups
            .phases
            .iter()
            .enumerate()
            .map(|(position, phase)| (phase.key.clone(), position as u32))
            .collect(),
        Err(_) => BTreeMap::new(),
    })
}

/// Each phase's step, in phase order: its position in program order among
/// every exchange phase and compute step, the one index `phases`,
/// `explain`, the trace, the reports, `packing`, `sweep` and `capture`
/// show (`crate::estimate::profile::exchange_steps`). Empty when the phase
/// groups cannot be formed.
#[salsa::tracked(returns(ref))]
pub fn phase_steps(db: &dyn Db, build: BuildInputs) -> Arc<Vec<usize>> {
    Arc::new(match phase_groups(db, build) {
        Ok(groups) => {
            let numbers = crate::estimate::profile::exchange_steps(&groups.steps);
            groups
                .phases
                .iter()
                .map(|phase| numbers.get(&phase.step_path).copied().unwrap_or(usize::MAX))
                .collect()
        }
        Err(_) => Vec::new(),
    })
}

/// The phase record at `position` and its transfer list (and Repeat iterations).
pub fn locate_phase(
    groups: &PhaseGroups,
    position: u32,
) -> Option<(&ExchangePhase, &TransferList, u32)> {
    let phase = groups.phases.get(position as usize)?;
    let mut steps = &groups.steps;
    let mut iterations = 1;
    for (depth, &index) in phase.step_path.iter().enumerate() {
        match steps.get(index as usize)? {
            Step::Repeat {
                iterations: count,
                body,
            } if depth + 1 < phase.step_path.len() => {
                iterations = *count;
                steps = body;
            }
            Step::Exchange { transfers, .. } if depth + 1 == phase.step_path.len() => {
                return Some((phase, transfers, iterations));
            }
            _ => return None,
        }
    }
    None
}

/// A phase's problem plus what maps it back to the program.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct PhaseProblem<'db> {
    pub problem: ProblemKey<'db>,
    /// Global allocation of each of the problem's local allocations.
    pub allocations: Vec<AllocationId>,
    pub executions: u32,
    pub in_repeat: bool,
    pub merged_from: Vec<String>,
}

#[salsa::tracked(returns(ref))]
pub fn phase_problem<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<PhaseProblem<'db>, PhaseError> {
    let build = phase.build(db);
    let groups = phase_groups(db, build)
        .as_ref()
        .map_err(|error| PhaseError::Stage(error.to_string()))?;
    let program = low_program(db, build)
        .as_ref()
        .map_err(|error| PhaseError::Stage(error.to_string()))?;
    let key = phase.key(db);
    let (record, transfers, iterations) = phase_positions(db, build)
        .get(key)
        .and_then(|&position| locate_phase(groups, position))
        .ok_or_else(|| PhaseError::Missing(key.clone()))?;
    let (problem, origin) =
        ExchangeProblem::with_origin(transfers, &program.allocations, iterations, program.tiles)
            .map_err(|source| PhaseError::Problem {
                phase: key.clone(),
                source,
            })?;
    Ok(PhaseProblem {
        problem: ProblemKey::new(db, Arc::new(problem)),
        allocations: origin.allocations,
        executions: record.executions,
        in_repeat: record.in_repeat,
        merged_from: record.merged_from.clone(),
    })
}

/// Firewall: the policy of one phase, out of the build's override list.
#[salsa::tracked(returns(ref))]
pub fn phase_policy<'db>(db: &'db dyn Db, phase: PhaseKey<'db>) -> EffectivePolicy {
    let build = phase.build(db);
    let schedule = build.schedule(db);
    let key = phase.key(db);
    match build.overrides(db).iter().find(|entry| &entry.phase == key) {
        Some(entry) => EffectivePolicy::new(
            entry.policy,
            entry.width.unwrap_or(schedule.width),
            schedule.row_allowance,
            PolicySource::Override,
        ),
        None => EffectivePolicy::new(
            schedule.policy,
            schedule.width,
            schedule.row_allowance,
            PolicySource::Default,
        ),
    }
}

/// The (problem, policy) pair of a phase.
pub fn phase_work<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<(ProblemKey<'db>, PolicyKey<'db>), PhaseError> {
    let problem = phase_problem(db, phase)
        .as_ref()
        .map_err(Clone::clone)?
        .problem;
    let policy = phase_policy(db, phase);
    Ok((problem, PolicyKey::of(db, policy)))
}

/// One phase's figures for reports (a firewall over schedule and rows).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PhaseFigures {
    pub key: String,
    pub merged_from: Vec<String>,
    pub executions: u32,
    pub in_repeat: bool,
    /// The phase's effective policy (`auto`, or an override's).
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub policy_source: PolicySource,
    /// The concrete policy that made the schedule (`auto`'s winner).
    #[serde(with = "policy_text")]
    pub chosen: SchedulePolicy,
    /// The schedule's width (`word32`, or `paired64` when some piece
    /// moves paired).
    pub width: TransferWidth,
    pub transfers: u64,
    pub destinations: u64,
    pub horizon: u32,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    pub endpoint_bound: u32,
    /// The latency-aware bound (`crate::schedule::bound`).
    pub latency_bound: u32,
    pub max_row_bytes: u64,
    pub total_row_bytes: u64,
    /// Repeat patch words over all tiles.
    pub patch_words: u64,
    /// Under `auto`: every candidate tried and which won.
    pub candidates: Vec<CandidateOutcome>,
}

#[salsa::tracked(returns(ref))]
pub fn phase_figures<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<PhaseFigures, PhaseError> {
    let record = phase_problem(db, phase).as_ref().map_err(Clone::clone)?;
    let (problem, policy) = phase_work(db, phase)?;
    let schedule = schedule_figures(db, problem, policy).clone()?;
    let rows = row_summary(db, problem, policy, repeat_base(db, phase.build(db))).clone()?;
    let effective = phase_policy(db, phase);
    let content = problem.problem(db);
    Ok(PhaseFigures {
        key: phase.key(db).clone(),
        merged_from: record.merged_from.clone(),
        executions: record.executions,
        in_repeat: record.in_repeat,
        policy: effective.policy,
        policy_source: effective.source,
        chosen: schedule.chosen,
        width: schedule.width,
        transfers: content.pieces() as u64,
        destinations: content.receives() as u64,
        horizon: schedule.horizon,
        endpoint_bound: schedule.endpoint_bound,
        latency_bound: schedule.latency_bound,
        max_row_bytes: rows.max_bytes,
        total_row_bytes: rows.total_bytes,
        patch_words: rows.patches.words(),
        candidates: schedule.candidates,
    })
}

/// Repeat patch lists of one phase (its rows' summary's).
#[salsa::tracked(returns(ref))]
pub fn phase_patches<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<Arc<PhasePatches>, PhaseError> {
    let (problem, policy) = phase_work(db, phase)?;
    let summary = row_summary(db, problem, policy, repeat_base(db, phase.build(db))).clone()?;
    Ok(Arc::new(summary.patches.clone()))
}

/// Firewall: whether Repeat patches may use a moving base register
/// (`planning.repeat_base`), out of the planning flags.
#[salsa::tracked(returns(copy))]
pub fn repeat_base(db: &dyn Db, build: BuildInputs) -> bool {
    build.planning(db).repeat_base
}
