//! The headline figures of a schedule (what reports and the estimate
//! need, without the per-receive events), kept in the persistent cache as
//! a small entry of their own so a warm build never loads full schedules.

use super::{CandidateOutcome, Schedule, SchedulePolicy, TransferWidth};

/// The headline figures of a schedule: what reports and the estimate need,
/// without the per-receive events.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScheduleFigures {
    pub width: TransferWidth,
    /// The concrete policy that produced the schedule (`auto`'s winner).
    pub chosen: SchedulePolicy,
    pub horizon: u32,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    #[serde(alias = "lower_bound")]
    pub endpoint_bound: u32,
    /// The latency-aware bound (`crate::schedule::bound`).
    pub latency_bound: u32,
    /// Under `auto`: every candidate tried and which won.
    pub candidates: Vec<CandidateOutcome>,
}

impl ScheduleFigures {
    /// The figures of `schedule`.
    pub fn of(schedule: &Schedule) -> ScheduleFigures {
        ScheduleFigures {
            width: schedule.width,
            chosen: schedule.chosen,
            horizon: schedule.horizon,
            endpoint_bound: schedule.endpoint_bound,
            latency_bound: schedule.latency_bound,
            candidates: schedule.candidates.clone(),
        }
    }
}
