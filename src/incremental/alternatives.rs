//! What a phase would cost under each standard policy, measured by
//! actually scheduling, encoding and patching it, and the best override a
//! phase could take. `superstep build`'s suggestions and `superstep phases
//! --suggest` read these.
//!
//! A phase's cost here is its horizon plus its Repeat patching per
//! execution: what an override of that phase alone moves. Sharing patches
//! (which depend on every phase's rows) and the placement are left out.
//!
//! Most standard policies do not beat the phase as built, so each is placed
//! under a cutoff of the phase's current cost (`schedule_below`): a policy
//! whose horizon is bound to reach it is pruned there, since patching only
//! adds to it. The rest are scheduled, validated, encoded, row-checked and
//! patched in full. Each outcome is memoized and kept in the persistent
//! cache (a small entry: two numbers, or "pruned").

use super::database::Db;
use super::on_disk::{cache_on_disk, persisted_by_bincode};
use super::phases::{
    PhaseKey, phase_patches, phase_policy, phase_problem, phase_work, repeat_base,
};
use super::schedules::{PhaseError, PolicyKey, phase_cache_key, schedule_figures};
use crate::cache::CacheKey;
use crate::patch::repeat_patches;
use crate::rows::{check_phase, encode_phase};
use crate::schedule::{SchedulePolicy, schedule_below, validate};

/// The policies every phase is measured under.
pub const STANDARD_POLICIES: [SchedulePolicy; 7] = [
    SchedulePolicy::Latency,
    SchedulePolicy::Stream { words: 64 },
    SchedulePolicy::Stream { words: 256 },
    SchedulePolicy::Balanced { words: 256 },
    SchedulePolicy::Balanced { words: 1024 },
    SchedulePolicy::List,
    SchedulePolicy::Matching,
];

/// A phase under one policy, per execution.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PolicyOutcome {
    pub policy: SchedulePolicy,
    pub horizon: u64,
    pub repeat_patch_cycles: u64,
}

impl PolicyOutcome {
    /// Horizon plus Repeat patching.
    pub fn cycles(&self) -> u64 {
        self.horizon.saturating_add(self.repeat_patch_cycles)
    }
}

/// A phase's cost now and under each standard policy (at the build's
/// width) but the one that made its schedule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PhaseAlternatives {
    pub executions: u64,
    /// The phase as built.
    pub current: PolicyOutcome,
    /// The policies measured in full (those that might beat `current`).
    pub alternatives: Vec<PolicyOutcome>,
    /// The policies whose horizon was bound to reach `current`'s cost: not
    /// scheduled in full.
    pub pruned: Vec<SchedulePolicy>,
}

/// One standard policy on one phase, measured only as far as it could beat
/// the phase as built.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BoundedOutcome {
    /// Its horizon is bound to reach the phase's current cost.
    Pruned,
    /// Scheduled in full: horizon and Repeat patch cycles per execution.
    Measured {
        horizon: u64,
        repeat_patch_cycles: u64,
    },
}

persisted_by_bincode! { BoundedOutcome => Alternative }

impl PhaseAlternatives {
    /// The cheapest alternative that beats the phase as built, with the
    /// cycles it saves over every execution.
    pub fn best(&self) -> Option<(&PolicyOutcome, u64)> {
        self.alternatives
            .iter()
            .filter(|outcome| outcome.cycles() < self.current.cycles())
            .min_by_key(|outcome| (outcome.cycles(), outcome.horizon))
            .map(|outcome| {
                (
                    outcome,
                    (self.current.cycles() - outcome.cycles()) * self.executions,
                )
            })
    }
}

/// The policies `phase_alternatives` measures a phase under, with their
/// keys: every standard policy at the phase's width and storage guard but
/// the one that made its schedule (itself, or `auto`'s winner, which would
/// only make it again). The session warms these schedules in parallel
/// before asking for the alternatives.
pub fn alternative_policies<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<Vec<(SchedulePolicy, PolicyKey<'db>)>, PhaseError> {
    let (problem, current_policy) = phase_work(db, phase)?;
    let chosen = schedule_figures(db, problem, current_policy)
        .as_ref()
        .map_err(Clone::clone)?
        .chosen;
    Ok(STANDARD_POLICIES
        .into_iter()
        .filter(|&policy| policy != chosen)
        .map(|policy| (policy, alternative_key(db, phase, policy)))
        .collect())
}

/// The key `phase` is measured under as the alternative `policy`: the
/// policy at the phase's own width and storage guard.
pub fn alternative_key<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
    policy: SchedulePolicy,
) -> PolicyKey<'db> {
    let effective = phase_policy(db, phase);
    PolicyKey::from_config(db, policy, effective.width, effective.row_allowance)
}

#[salsa::tracked(returns(ref))]
pub fn phase_alternatives<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<PhaseAlternatives, PhaseError> {
    let record = phase_problem(db, phase).as_ref().map_err(Clone::clone)?;
    let (problem, current_policy) = phase_work(db, phase)?;
    let effective = phase_policy(db, phase);
    let figures = schedule_figures(db, problem, current_policy).clone()?;
    let current = PolicyOutcome {
        policy: effective.policy,
        horizon: u64::from(figures.horizon),
        repeat_patch_cycles: phase_patches(db, phase).clone()?.cycles(),
    };
    let mut alternatives = Vec::with_capacity(STANDARD_POLICIES.len());
    let mut pruned = Vec::new();
    for (policy, key) in alternative_policies(db, phase)? {
        match alternative_outcome(db, phase, key).clone()? {
            BoundedOutcome::Pruned => pruned.push(policy),
            BoundedOutcome::Measured {
                horizon,
                repeat_patch_cycles,
            } => alternatives.push(PolicyOutcome {
                policy,
                horizon,
                repeat_patch_cycles,
            }),
        }
    }
    Ok(PhaseAlternatives {
        executions: u64::from(record.executions),
        current,
        alternatives,
        pruned,
    })
}

/// `phase` under `policy` (a standard policy), measured only as far as it
/// could beat the phase as built (see the module notes).
#[salsa::tracked(returns(ref))]
pub fn alternative_outcome<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<BoundedOutcome, PhaseError> {
    let (problem, current_policy) = phase_work(db, phase)?;
    let base_selection = repeat_base(db, phase.build(db));
    let figures = schedule_figures(db, problem, current_policy).clone()?;
    let current_cycles = u64::from(figures.horizon) + phase_patches(db, phase).clone()?.cycles();
    let cutoff = u32::try_from(current_cycles).unwrap_or(u32::MAX);
    let prune = phase.build(db).schedule(db).prune_by_bounds;
    let content = problem.problem(db);
    cache_on_disk(
        db,
        || {
            Ok(CacheKey::of(
                "bounded alternative",
                &(
                    phase_cache_key(db, problem, policy),
                    cutoff,
                    base_selection,
                    prune,
                ),
            ))
        },
        |cached: &BoundedOutcome, _| match cached {
            // A horizon is an event count of one phase (`u32` in every
            // schedule); Repeat patching is priced per word of a tile's
            // rows, far below it.
            BoundedOutcome::Measured {
                horizon,
                repeat_patch_cycles,
            } if *horizon > u64::from(u32::MAX) || *repeat_patch_cycles > u64::from(u32::MAX) => {
                Err(crate::cache::Refusal::Shape(format!(
                    "its horizon {horizon} or Repeat patch cycles {repeat_patch_cycles} exceed any phase's"
                )))
            }
            _ => Ok(()),
        },
        || {
            let limit = if prune { cutoff } else { u32::MAX };
            let Some(schedule) =
                schedule_below(content, policy.policy(db), policy.width(db), limit)?
            else {
                return Ok(BoundedOutcome::Pruned);
            };
            validate(content, &schedule)?;
            let rows = encode_phase(content, &schedule)?;
            check_phase(content, &schedule, &rows)?;
            Ok(BoundedOutcome::Measured {
                horizon: u64::from(schedule.horizon),
                repeat_patch_cycles: repeat_patches(content, &rows, base_selection).cycles(),
            })
        },
    )
}
