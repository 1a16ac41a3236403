//! What a layout search found, as data: the chosen plan (its layout
//! overrides and estimate), the steps that reached it, the beam's part and
//! how far the planner's prices were from the compiled program's. The
//! search (`crate::studies::layout_search`) makes it; the searched-plan
//! query (`crate::incremental::searched_plan`) keeps it in the persistent
//! cache under its configuration and hands builds its overrides.

use serde::{Deserialize, Serialize};

use super::overrides::{LayoutOverride, Partition};

/// One accepted step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchStep {
    pub op: String,
    pub from: String,
    pub to: String,
    pub cycles_before: u64,
    pub cycles_after: u64,
    /// Trials run for this op in the pass that accepted the step.
    pub trials: u32,
    /// Queries the accepted trial re-executed (salsa's event log).
    pub recomputed_queries: u32,
    /// Of those, exchange schedules computed.
    pub recomputed_schedules: u32,
}

/// What the beam contributed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeamReport {
    /// The proxy price of the build's plan and of the beam's best.
    pub start_price: u64,
    pub best_price: u64,
    /// The real estimate of the beam's best plan.
    pub best_cycles: u64,
    /// Whether the local steps started from it (it beat the build's plan).
    pub taken: bool,
    pub states: u32,
    pub seconds: f64,
}

/// The beam's price of one exchange phase made only of conversions,
/// against what the build's policy scheduled (horizon plus the fixed
/// overhead above it), per execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    pub phase: String,
    /// The conversions merged into it.
    pub conversions: u32,
    pub proxy_cycles: u64,
    pub real_cycles: u64,
}

/// The planner's price of one matrix product or attention (what the beam
/// and the local steps rank candidates by: its kernels, its own exchanges
/// and their barriers) against what the compiled program's estimate
/// charges the same, per execution: the op's compute steps, and the
/// exchange phases of its own (keyed by the op, not by one of its
/// conversions) with the overhead above their horizons.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCalibration {
    pub op: String,
    pub partition: String,
    pub predicted_cycles: u64,
    pub compiled_cycles: u64,
}

/// An op a search did not try to change, with what the cost model
/// plans it to cost over all its executions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsearchedOp {
    pub op: String,
    pub planned_cycles: u64,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchOutcome {
    pub baseline_cycles: u64,
    /// The beam's part, when it ran.
    pub beam: Option<BeamReport>,
    /// The beam's proxy against the scheduled phases, on the chosen plan.
    pub calibration: Vec<Calibration>,
    /// The planner's price of each product and attention against its
    /// compiled compute, on the chosen plan.
    pub operators: Vec<OpCalibration>,
    pub best_cycles: u64,
    pub overrides: Vec<(String, String)>,
    pub steps: Vec<SearchStep>,
    /// Ops the search left at their partition: their planned cost is under
    /// the search's minimum share of the estimate (`--min-share`).
    pub unsearched: Vec<UnsearchedOp>,
    pub trials: u32,
    /// Of those, trials this run compiled (the rest were read from the
    /// cache: kept by an earlier search or by another shard).
    pub compiled_here: u32,
    /// Trials that did not build (a partition the planner refused), and
    /// trials that would have won but did not fit (only a trial that
    /// would win is placed).
    pub rejected: u32,
    /// Trials placed to check that they fit.
    pub placed: u32,
    /// Times the trials' session was dropped for a fresh one to stay
    /// within the memory budget.
    pub fresh_sessions: u32,
    /// Seconds the search took when it ran (not when loaded from the cache).
    pub seconds: f64,
}

impl SearchOutcome {
    /// The chosen plan as layout overrides.
    pub fn layout_overrides(&self) -> Vec<LayoutOverride> {
        self.overrides
            .iter()
            .filter_map(|(op, partition)| {
                Some(LayoutOverride {
                    op: op.clone(),
                    partition: Partition::parse(partition).ok()?,
                })
            })
            .collect()
    }
}
