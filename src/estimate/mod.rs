//! The estimate: cycles of every compute step and exchange phase of the
//! phase-grouped program, weighted by how often each runs, in cycles and in
//! milliseconds at 1.5 GHz.
//!
//! An exchange phase costs its scheduled horizon plus the measured setup and
//! sync above the horizon (IPU21.md: about 288 cycles) plus the patching
//! that precedes it on its slowest tile. Pure: it takes the steps and a
//! lookup of phase costs.

pub mod breakdown;
pub mod compute;
pub mod profile;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use serde::Serialize;

use crate::expand::program::Step;
use crate::target::costs::{PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES, cycles_to_ms};
use crate::target::kernel_cost::CostTable;

/// What one exchange phase costs per execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhaseCost {
    pub horizon: u64,
    pub patch_cycles: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Estimate {
    pub compute_cycles: u64,
    pub exchange_cycles: u64,
    pub sync_cycles: u64,
    pub patch_cycles: u64,
    pub total_cycles: u64,
    pub milliseconds: f64,
    /// Exchange phases executed (one barrier each).
    pub barriers: u64,
    /// Compute steps executed.
    #[serde(default)]
    pub compute_steps: u64,
}

struct Walker<'lookup> {
    compute_cost: &'lookup dyn Fn(&[u32], &Step) -> u64,
    phase_cost: &'lookup dyn Fn(&[u32]) -> Option<PhaseCost>,
    estimate: Estimate,
}

impl Walker<'_> {
    fn walk(&mut self, steps: &[Step], path: &mut Vec<u32>, executions: u64) {
        for (index, step) in steps.iter().enumerate() {
            path.push(index as u32);
            match step {
                Step::Repeat { iterations, body } => {
                    self.walk(body, path, executions * *iterations as u64)
                }
                Step::Exchange { .. } => {
                    let cost = (self.phase_cost)(path).unwrap_or_default();
                    self.estimate.exchange_cycles += cost.horizon * executions;
                    self.estimate.sync_cycles += PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES * executions;
                    self.estimate.patch_cycles += cost.patch_cycles * executions;
                    self.estimate.barriers += executions;
                }
                Step::Checkpoint { .. } => {}
                _ => {
                    self.estimate.compute_cycles += (self.compute_cost)(path, step) * executions;
                    self.estimate.compute_steps += executions;
                }
            }
            path.pop();
        }
    }
}

/// The load of every compute step, by step path.
pub fn compute_step_loads(
    steps: &[Step],
    tiles: u32,
    table: &CostTable,
) -> HashMap<Vec<u32>, compute::StepLoad> {
    fn walk(
        steps: &[Step],
        tiles: u32,
        table: &CostTable,
        path: &mut Vec<u32>,
        out: &mut HashMap<Vec<u32>, compute::StepLoad>,
    ) {
        for (index, step) in steps.iter().enumerate() {
            path.push(index as u32);
            match step {
                Step::Repeat { body, .. } => walk(body, tiles, table, path, out),
                Step::Exchange { .. } | Step::Checkpoint { .. } => {}
                _ => {
                    out.insert(path.clone(), compute::compute_step_load(step, tiles, table));
                }
            }
            path.pop();
        }
    }
    let mut out = HashMap::new();
    walk(steps, tiles, table, &mut Vec::new(), &mut out);
    out
}

/// Estimates `steps`; `compute_cost(step_path, step)` gives each compute
/// step's cycles and `phase_cost(step_path)` each exchange's cost.
pub fn estimate(
    steps: &[Step],
    compute_cost: &dyn Fn(&[u32], &Step) -> u64,
    phase_cost: &dyn Fn(&[u32]) -> Option<PhaseCost>,
) -> Estimate {
    let mut walker = Walker {
        compute_cost,
        phase_cost,
        estimate: Estimate {
            compute_cycles: 0,
            exchange_cycles: 0,
            sync_cycles: 0,
            patch_cycles: 0,
            total_cycles: 0,
            milliseconds: 0.0,
            barriers: 0,
            compute_steps: 0,
        },
    };
    walker.walk(steps, &mut Vec::new(), 1);
    let mut estimate = walker.estimate;
    estimate.total_cycles = estimate.compute_cycles
        + estimate.exchange_cycles
        + estimate.sync_cycles
        + estimate.patch_cycles;
    estimate.milliseconds = cycles_to_ms(estimate.total_cycles);
    estimate
}
