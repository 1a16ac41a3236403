//! The event-time scheduler's entry point: one (problem, policy, width)
//! becomes one schedule. Fixed-order policies (`latency`, `S<W>`, `B<W>`,
//! `matching`) give the placer an order; `list` lets the placer's frontiers
//! pick the next piece in time order; `auto` tries every candidate
//! (`candidates`) and keeps the best.
//!
//! Width: `word32` moves every piece as 32-bit words; `paired64` pairs every
//! eligible piece; `auto` tries both and, for the best one, pairs exactly
//! the eligible pieces that shorten the horizon (`pairing`). This module
//! must not encode rows or re-check its own output (see `validate`).

use super::bound::latency_bound;
use super::candidates::{AutoSettings, choose};
use super::placer::check_pieces;
use super::prepared::Prepared;
use super::problem::ExchangeProblem;
use super::vocabulary::{SchedulePolicy, TransferWidth};
use super::{Schedule, ScheduleError};

/// Schedules `problem` under `policy` and `width`. `auto` policies use the
/// default [`AutoSettings`].
pub fn schedule(
    problem: &ExchangeProblem,
    policy: SchedulePolicy,
    width: TransferWidth,
) -> Result<Schedule, ScheduleError> {
    schedule_with(problem, policy, width, &AutoSettings::default())
}

/// Schedules `problem` under `policy` and `width`, with `settings` for the
/// `auto` policy.
pub fn schedule_with(
    problem: &ExchangeProblem,
    policy: SchedulePolicy,
    width: TransferWidth,
    settings: &AutoSettings,
) -> Result<Schedule, ScheduleError> {
    let prepared = Prepared::new(problem);
    check_pieces(problem, &prepared.eligible)?;
    if policy == SchedulePolicy::Auto {
        // `choose` computes the latency-aware bound for its stages and
        // records it.
        return choose(&prepared, width, settings);
    }
    let mut result = prepared.with_width(policy, width)?;
    result.latency_bound = latency_bound(problem);
    Ok(result)
}

/// The schedule of a concrete (non-`auto`) `policy` that [`schedule`] makes,
/// or `None` when its horizon is bound to be at least `cutoff`: each width
/// is placed under the cutoff and stops as soon as its running lower bound
/// reaches it (`Placer::set_cutoff`). For the cheap question "can this
/// policy beat `cutoff`?", asked of policies that mostly cannot.
pub fn schedule_below(
    problem: &ExchangeProblem,
    policy: SchedulePolicy,
    width: TransferWidth,
    cutoff: u32,
) -> Result<Option<Schedule>, ScheduleError> {
    debug_assert_ne!(
        policy,
        SchedulePolicy::Auto,
        "auto is not a concrete policy"
    );
    let prepared = Prepared::new(problem);
    check_pieces(problem, &prepared.eligible)?;
    let mut result = prepared.with_width_below(policy, width, Some(cutoff))?;
    if let Some(schedule) = &mut result {
        schedule.latency_bound = latency_bound(problem);
    }
    Ok(result)
}
