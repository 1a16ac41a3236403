//! What every candidate order of one problem shares (the problem, its
//! dependencies, each piece's paired eligibility) and how one fixed order
//! or the time-ordered list becomes a schedule at a given width; also the
//! row-size proxy the width choice uses. `scheduler` (the entry point) and
//! `candidates` (`auto`) both build on it.

use super::dependencies::{Dependencies, dependencies};
use super::list::place_in_time_order;
use super::pairing::auto_pairings;
use super::placer::Placer;
use super::policy::order;
use super::problem::ExchangeProblem;
use super::timing::paired_eligible;
use super::vocabulary::{SchedulePolicy, TransferWidth};
use super::{NO_EVENT, Schedule, ScheduleError};

/// What every candidate of one problem shares: the problem, its
/// dependencies and the paired eligibility of each piece.
pub struct Prepared<'a> {
    pub problem: &'a ExchangeProblem,
    pub dependencies: Dependencies,
    pub eligible: Vec<bool>,
}

impl<'a> Prepared<'a> {
    pub fn new(problem: &'a ExchangeProblem) -> Self {
        let eligible = (0..problem.pieces())
            .map(|piece| paired_eligible(problem, piece))
            .collect();
        Prepared {
            problem,
            dependencies: dependencies(problem),
            eligible,
        }
    }

    /// Whether some piece may be paired.
    pub fn any_eligible(&self) -> bool {
        self.eligible.contains(&true)
    }

    /// The schedule of a concrete (non-`auto`) policy under `width`. With
    /// `TransferWidth::Auto` the order is placed under the pairings `auto`
    /// tries for each of its orders (none, every eligible piece, and the
    /// per-piece selection of `pairing` when it differs), and the shortest
    /// horizon wins, then the smaller maximum row, then total row (rows
    /// estimated by [`row_words_estimate`]), then the earlier pairing: the
    /// width is "paired where it shortens the phase", for an override of
    /// one phase as for `auto`.
    pub fn with_width(
        &self,
        policy: SchedulePolicy,
        width: TransferWidth,
    ) -> Result<Schedule, ScheduleError> {
        match self.with_width_below(policy, width, None)? {
            Some(schedule) => Ok(schedule),
            None => unreachable!("nothing is pruned without a cutoff"),
        }
    }

    /// [`Prepared::with_width`], or `None` when its schedule is bound to
    /// have a horizon of at least `cutoff` (each pairing is placed under the
    /// cutoff; one stopped there has the longer horizon and loses, so
    /// `Some` is always exactly what `with_width` returns).
    pub fn with_width_below(
        &self,
        policy: SchedulePolicy,
        width: TransferWidth,
        cutoff: Option<u32>,
    ) -> Result<Option<Schedule>, ScheduleError> {
        let none = vec![false; self.problem.pieces()];
        let below = |paired: &[bool], width: TransferWidth| match self
            .place_below(policy, paired, width, cutoff)
        {
            Ok(schedule) => Ok(Some(schedule)),
            Err(ScheduleError::AboveCutoff { .. }) => Ok(None),
            Err(error) => Err(error),
        };
        match width {
            TransferWidth::Word32 => below(&none, width),
            TransferWidth::Paired64 => below(&self.eligible, width),
            TransferWidth::Auto => {
                let mut best: Option<((u32, u64, u64), Schedule)> = None;
                for (_, paired) in auto_pairings(self.problem, &self.eligible) {
                    let width = if paired.contains(&true) {
                        TransferWidth::Paired64
                    } else {
                        TransferWidth::Word32
                    };
                    let Some(schedule) = below(&paired, width)? else {
                        continue;
                    };
                    let (maximum, total) = row_words_estimate(self.problem, &schedule);
                    let cost = (schedule.horizon, maximum, total);
                    if best.as_ref().is_none_or(|(best_cost, _)| cost < *best_cost) {
                        best = Some((cost, schedule));
                    }
                }
                Ok(best.map(|(_, schedule)| schedule))
            }
        }
    }

    /// Places every piece under a concrete policy with the given pairing.
    pub fn place(
        &self,
        policy: SchedulePolicy,
        paired: &[bool],
        width: TransferWidth,
    ) -> Result<Schedule, ScheduleError> {
        self.place_below(policy, paired, width, None)
    }

    /// [`Prepared::place`], giving up with [`ScheduleError::AboveCutoff`]
    /// once the horizon is bound to reach `cutoff` (when given).
    pub fn place_below(
        &self,
        policy: SchedulePolicy,
        paired: &[bool],
        width: TransferWidth,
        cutoff: Option<u32>,
    ) -> Result<Schedule, ScheduleError> {
        let problem = self.problem;
        let mut placer = Placer::new(
            problem,
            &self.dependencies,
            &self.eligible,
            paired,
            policy,
            width,
        );
        if let Some(cutoff) = cutoff {
            placer.set_cutoff(cutoff)?;
        }
        match order(problem, &self.dependencies, policy) {
            Some(order) => {
                for &piece in &order {
                    placer.place(piece as usize)?;
                }
            }
            None => place_in_time_order(problem, &self.dependencies, &mut placer)?,
        }
        let mut schedule = placer.finish()?;
        schedule.chosen = policy;
        Ok(schedule)
    }
}

/// Estimated row words per tile (maximum, total): two words per send and one
/// per receive control. A cheap proxy for width choice, not the encoded size.
pub fn row_words_estimate(problem: &ExchangeProblem, schedule: &Schedule) -> (u64, u64) {
    let mut words = vec![0u64; problem.tiles as usize];
    for piece in 0..problem.pieces() {
        if let Some(count) = words.get_mut(problem.source_tile[piece] as usize) {
            *count += 2;
        }
        for receive in problem.receives_of(piece) {
            let controls = 1
                + u64::from(schedule.pointer_write[receive] != NO_EVENT)
                + u64::from(schedule.deselect[receive] != NO_EVENT);
            if let Some(count) = words.get_mut(problem.destination_tile[receive] as usize) {
                *count += controls;
            }
        }
    }
    (words.iter().copied().max().unwrap_or(0), words.iter().sum())
}
