//! Every tile's work at every program step, for the report's per-tile
//! timeline and per-step balance across tiles: busy cycles in compute
//! steps (the estimate's kernel, copy and fill costs per tile, as it
//! charges the step its busiest tile) and words sent plus received in
//! exchange phases (from the transfer lists), beside each step's key,
//! kind and modelled cycles from the profile. Steps are the one step
//! index `phases` shows: exchange phases and compute steps in program
//! order, the Repeat body once.

use serde::Serialize;

use super::{BackendError, Session};
use crate::estimate::compute::compute_step_tile_cycles;
use crate::estimate::profile::{StepKind, program_steps};
use crate::expand::program::{Step, TransferList};

/// One program step's work on every tile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepTileLoad {
    /// The step index (`phases`' first column).
    pub step: usize,
    /// The stable key (`op#ordinal`, or `op:kind#ordinal`).
    pub key: String,
    pub kind: StepKind,
    /// Cycles of one execution, as the estimate charges them.
    pub cycles: u64,
    pub executions: u64,
    /// Per tile: busy cycles (compute steps) or words sent and received
    /// (exchange phases), for one execution.
    pub per_tile: Vec<u64>,
}

/// Words each tile sends and receives in `transfers`.
fn words_per_tile(transfers: &TransferList, tiles: u32) -> Vec<u64> {
    let mut words = vec![0u64; tiles as usize];
    for (transfer, &moved) in transfers.words.iter().enumerate() {
        let moved = u64::from(moved);
        if let Some(slot) = words.get_mut(transfers.source_tile[transfer] as usize) {
            *slot += moved;
        }
        let start = transfers.destination_start[transfer] as usize;
        let end = transfers
            .destination_start
            .get(transfer + 1)
            .map_or(transfers.destinations.len(), |&end| end as usize);
        for destination in &transfers.destinations[start..end] {
            if let Some(slot) = words.get_mut(destination.tile as usize) {
                *slot += moved;
            }
        }
    }
    words
}

impl Session {
    /// Every program step's work per tile, in step order.
    pub fn step_loads(&self) -> Result<Vec<StepTileLoad>, BackendError> {
        let groups = self.phase_groups()?;
        let profile = self.profile()?;
        let machine = self.inputs.machine(&self.db);
        let (tiles, table) = (machine.tiles, &machine.cost_table);
        let loads: Vec<Vec<u64>> = program_steps(&groups.steps)
            .into_iter()
            .map(|(_, step)| match step {
                Step::Exchange { transfers, .. } => words_per_tile(transfers, tiles),
                _ => compute_step_tile_cycles(step, tiles, table),
            })
            .collect();
        // The profile numbers the same steps in the same order (its
        // `step`), so the two lists pair one to one (a test holds it).
        let mut entries: Vec<_> = profile.entries.iter().collect();
        entries.sort_by_key(|entry| entry.step);
        Ok(entries
            .into_iter()
            .zip(loads)
            .map(|(entry, per_tile)| StepTileLoad {
                step: entry.step,
                key: entry.key.clone(),
                kind: entry.kind,
                cycles: entry.cycles,
                executions: entry.executions,
                per_tile,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::program::{AllocationId, Destination, Location};

    #[test]
    fn a_tile_counts_what_it_sends_and_what_it_receives() {
        let at = |tile| Destination {
            tile,
            location: Location {
                allocation: AllocationId(0),
                offset: 0,
            },
        };
        let mut list = TransferList::default();
        list.push(0, at(0).location, 5, &[at(1), at(2)]);
        list.push(2, at(0).location, 3, &[at(0)]);
        assert_eq!(words_per_tile(&list, 4), vec![8, 5, 8, 0]);
    }
}
