//! Replay of every exchange phase of a build: each phase's rows are
//! finalized against a consecutive placement of its allocations, decoded
//! and executed on simulated tile memories whose sources hold known
//! patterns, and every destination word (or a deterministic sample) is
//! checked (`crate::sim::replay`). Phases run in parallel over cloned
//! database handles.

use super::Session;
use crate::rows::ConsecutivePlacement;
use crate::session::PhaseError;
use crate::sim::replay::{ReplayError, ReplayReport, replay_phase};

/// One phase's replay outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseReplay {
    pub key: String,
    pub result: Result<ReplayReport, ReplayFailure>,
}

/// Why one phase's replay failed: its rows or problem could not be had,
/// its rows did not finalize, or the replay found a wrong word.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayFailure {
    #[error(transparent)]
    Phase(#[from] PhaseError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Rows(#[from] crate::rows::RowError),
}

/// Replays every phase of the session's (already built) program. `sample`
/// limits the checked words per phase (`None`: every word).
pub fn replay_all(session: &Session, sample: Option<u64>) -> Vec<PhaseReplay> {
    session.map_phases_reporting("replay", |phase| {
        let outcome = (|| -> Result<ReplayReport, ReplayFailure> {
            let rows = phase.rows()?;
            let content = phase.problem()?;
            let placement = ConsecutivePlacement::new(content)?;
            let words =
                rows.finalize(|allocation, offset| placement.resolve(allocation, offset))?;
            Ok(replay_phase(content, &words, &placement, sample)?)
        })();
        PhaseReplay {
            key: phase.key().to_string(),
            result: outcome,
        }
    })
}
