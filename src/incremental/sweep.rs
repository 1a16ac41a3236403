//! `superstep sweep`'s per-point query: one phase under one (policy,
//! width), measured by scheduling, validating, encoding, checking and
//! patching it through the same memoized, persistent-cached
//! `schedule_figures` and `encoded_rows` queries a build uses. The point's
//! figures are kept in a small cache entry of their own, so a second sweep
//! in a new process loads neither schedules nor rows.

use serde::{Deserialize, Serialize};

use super::database::Db;
use super::on_disk::{cache_on_disk, persisted_by_bincode};
use super::phases::{PhaseKey, phase_problem, repeat_base};
use super::schedules::{
    PhaseError, PolicyKey, ProblemKey, encoded_rows, problem_digest, schedule_figures,
};
use crate::cache::CacheKey;
use crate::patch::repeat_patches;
use crate::schedule::timing::paired_eligible;
use crate::schedule::{SchedulePolicy, TransferWidth};

/// What one sweep point measured, per execution of its phase. A point
/// exists only once the independent schedule validator and the row checker
/// accepted it (the cache stores only such points).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointFigures {
    /// The concrete order that made the schedule (`auto`'s winner),
    /// written as the build file writes it.
    #[serde(with = "crate::schedule::vocabulary::policy_text")]
    pub chosen: SchedulePolicy,
    /// The schedule's width (`paired64` when some piece moves paired).
    pub width: TransferWidth,
    pub horizon: u32,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    pub endpoint_bound: u32,
    /// Encoded row bytes of the fullest tile, before cross-phase sharing.
    pub max_row_bytes: u64,
    /// Encoded row bytes over all tiles, before cross-phase sharing.
    pub total_row_bytes: u64,
    /// Repeat patch words over all tiles (with the build's base selection).
    pub repeat_patch_words: u64,
    /// Cycles of the longest tile's Repeat patching, per execution.
    pub repeat_patch_cycles: u64,
}

persisted_by_bincode! { PointFigures => SweepPoint }

/// One phase under one policy key (its policy, width and `auto` storage
/// guard), measured.
#[salsa::tracked(returns(ref))]
pub fn sweep_point<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<PointFigures, PhaseError> {
    let problem = phase_problem(db, phase)
        .as_ref()
        .map_err(Clone::clone)?
        .problem;
    let base_selection = repeat_base(db, phase.build(db));
    let _span = tracing::debug_span!(
        "sweep_point",
        key = %phase.key(db),
        policy = %policy.policy(db),
        width = ?policy.width(db)
    )
    .entered();
    cache_on_disk(
        db,
        || {
            Ok(CacheKey::of(
                "sweep point",
                &(
                    problem_digest(db, problem),
                    policy.policy(db),
                    policy.width(db),
                    policy.row_allowance(db),
                    base_selection,
                ),
            ))
        },
        |_, _| Ok(()),
        || {
            let figures = schedule_figures(db, problem, policy).clone()?;
            let rows = encoded_rows(db, problem, policy).clone()?;
            let patches = repeat_patches(problem.problem(db), &rows, base_selection);
            Ok(PointFigures {
                chosen: figures.chosen,
                width: figures.width,
                horizon: figures.horizon,
                endpoint_bound: figures.endpoint_bound,
                max_row_bytes: rows.max_bytes(),
                total_row_bytes: rows.total_bytes(),
                repeat_patch_words: patches.words(),
                repeat_patch_cycles: patches.cycles(),
            })
        },
    )
}

/// Whether some piece of the problem may move paired (so that a
/// `paired64` point differs from the `word32` one).
#[salsa::tracked(returns(copy))]
pub fn pairing_eligible<'db>(db: &'db dyn Db, problem: ProblemKey<'db>) -> bool {
    let content = problem.problem(db);
    (0..content.pieces()).any(|piece| paired_eligible(content, piece))
}
