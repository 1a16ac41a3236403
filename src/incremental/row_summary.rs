//! What a build reads of a phase's rows besides the package: their sizes
//! (the phase's figures) and its Repeat patch lists (reservations, the
//! estimate), as one small query of (problem, policy, base choice) kept in
//! the persistent cache beside the rows. A warm build that keeps its
//! package reads these and the row table, never the rows themselves; the
//! package reads the rows.
//!
//! A summary no trusted key signed is checked by making it again from the
//! phase's checked rows (its check costs what the rows cost, so it is
//! never fetched unsigned from a remote tier).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::database::Db;
use super::on_disk::{cache_on_disk, check_by_remaking, persisted_by_bincode};
use super::schedules::{PhaseError, PolicyKey, ProblemKey, encoded_rows, phase_cache_key};
use crate::cache::CacheKey;
use crate::patch::{PhasePatches, repeat_patches};
use crate::rows::PhaseRows;
use crate::schedule::ExchangeProblem;

/// The sizes of a phase's rows and its Repeat patch lists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowSummary {
    /// Bytes of the phase's longest row.
    pub max_bytes: u64,
    /// Bytes of all of the phase's rows.
    pub total_bytes: u64,
    /// The phase's Repeat patch lists under the summary's base choice.
    pub patches: PhasePatches,
}

persisted_by_bincode! {
    RowSummary => RowSummary,
}

impl RowSummary {
    /// The summary of `rows`, the rows of `problem`, with patch lists under
    /// a moving base when `moving_base` allows one.
    pub fn of(problem: &ExchangeProblem, rows: &PhaseRows, moving_base: bool) -> RowSummary {
        RowSummary {
            max_bytes: rows.max_bytes(),
            total_bytes: rows.total_bytes(),
            patches: repeat_patches(problem, rows, moving_base),
        }
    }

    /// `Err` unless every patch list is on a tile of `problem` (what the
    /// reservations index by), once per tile.
    fn fits(&self, problem: &ExchangeProblem) -> Result<(), crate::cache::Refusal> {
        let mut previous = None;
        for tiles in &self.patches.tiles {
            if tiles.tile >= problem.tiles || previous.is_some_and(|tile| tile >= tiles.tile) {
                return Err(crate::cache::Refusal::Shape(format!(
                    "a patch list on tile {} of a problem of {} tiles, out of order or beyond it",
                    tiles.tile, problem.tiles
                )));
            }
            previous = Some(tiles.tile);
        }
        Ok(())
    }
}

/// The summary of a (problem, policy) pair's rows with patch lists under
/// `moving_base` (`planning.repeat_base`).
#[salsa::tracked(returns(ref))]
pub fn row_summary<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
    moving_base: bool,
) -> Result<Arc<RowSummary>, PhaseError> {
    let content = problem.problem(db);
    let made = || -> Result<RowSummary, PhaseError> {
        let rows = encoded_rows(db, problem, policy).clone()?;
        Ok(RowSummary::of(content, &rows, moving_base))
    };
    cache_on_disk(
        db,
        || {
            Ok(CacheKey::of(
                "row summary",
                &(phase_cache_key(db, problem, policy), moving_base),
            ))
        },
        |cached: &RowSummary, provenance| {
            cached.fits(content)?;
            if !provenance.needs_check() {
                return Ok(());
            }
            check_by_remaking(cached, made, "summary", "the phase's checked rows")
        },
        made,
    )
    .map(Arc::new)
}
