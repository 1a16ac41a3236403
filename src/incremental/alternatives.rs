//! What a phase would cost under each standard policy, measured by
//! actually scheduling, encoding and patching it (every schedule memoized
//! and kept in the persistent cache like any other), and the best override
//! a phase could take. `superstep build`'s suggestions and `superstep
//! phases --suggest` read these.
//!
//! A phase's cost here is its horizon plus its Repeat patching per
//! execution: what an override of that phase alone moves. Sharing patches
//! (which depend on every phase's rows) and the placement are left out.

use super::database::Db;
use super::phases::{
    EffectivePolicy, PhaseError, PhaseKey, PolicyKey, PolicySource, encoded_rows, phase_patches,
    phase_policy, phase_problem, phase_work, repeat_base, schedule_figures,
};
use crate::patch::repeat_patches;
use crate::schedule::SchedulePolicy;

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
        self.horizon + self.repeat_patch_cycles
    }
}

/// A phase's cost now and under each standard policy (at the build's
/// width) but the one that made its schedule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PhaseAlternatives {
    pub executions: u64,
    /// The phase as built.
    pub current: PolicyOutcome,
    pub alternatives: Vec<PolicyOutcome>,
}

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
    let effective = phase_policy(db, phase);
    let chosen = schedule_figures(db, problem, current_policy)
        .as_ref()
        .map_err(Clone::clone)?
        .chosen;
    Ok(STANDARD_POLICIES
        .into_iter()
        .filter(|&policy| policy != chosen)
        .map(|policy| {
            let key = PolicyKey::of(
                db,
                &EffectivePolicy {
                    policy,
                    width: effective.width,
                    row_allowance: effective.row_allowance,
                    source: PolicySource::Override,
                },
            );
            (policy, key)
        })
        .collect())
}

#[salsa::tracked(returns(ref))]
pub fn phase_alternatives<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<PhaseAlternatives, PhaseError> {
    let record = phase_problem(db, phase).as_ref().map_err(Clone::clone)?;
    let (problem, current_policy) = phase_work(db, phase)?;
    let effective = phase_policy(db, phase);
    let base_selection = repeat_base(db, phase.build(db));
    let figures = schedule_figures(db, problem, current_policy).clone()?;
    let current = PolicyOutcome {
        policy: effective.policy,
        horizon: u64::from(figures.horizon),
        repeat_patch_cycles: phase_patches(db, phase).clone()?.cycles(),
    };
    let mut alternatives = Vec::with_capacity(STANDARD_POLICIES.len());
    for (policy, key) in alternative_policies(db, phase)? {
        let figures = schedule_figures(db, problem, key).clone()?;
        let rows = encoded_rows(db, problem, key).clone()?;
        let patches = repeat_patches(problem.problem(db), &rows, base_selection);
        alternatives.push(PolicyOutcome {
            policy,
            horizon: u64::from(figures.horizon),
            repeat_patch_cycles: patches.cycles(),
        });
    }
    Ok(PhaseAlternatives {
        executions: u64::from(record.executions),
        current,
        alternatives,
    })
}
