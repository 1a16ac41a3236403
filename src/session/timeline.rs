//! What a program timeline needs beyond the profile: each chosen tile's
//! send and receive windows in every exchange phase (from the phase's
//! schedule), and which tiles move the most words.

use super::{PhaseError, Session};
use crate::schedule::windows::{TileActivity, tile_activity};

impl Session {
    /// Per phase (program order), the activity of each tile of `tiles`.
    /// Loads (or computes) every phase's full schedule.
    pub fn tile_activity(&self, tiles: &[u32]) -> Result<Vec<Vec<TileActivity>>, PhaseError> {
        self.map_phases(|phase| {
            let problem = phase.problem()?;
            let schedule = phase.schedule()?;
            Ok(tile_activity(problem, &schedule, tiles))
        })
        .into_iter()
        .collect()
    }

    /// The `count` tiles that send and receive the most words over a run of
    /// the program (executions counted), busiest first; ties by tile.
    pub fn busiest_tiles(&self, count: usize) -> Result<Vec<u32>, PhaseError> {
        let per_phase: Vec<Vec<u64>> = self
            .map_phases(|phase| {
                let problem = phase.problem()?;
                let executions = u64::from(phase.record()?.executions);
                let mut words = vec![0u64; problem.tiles as usize];
                for piece in 0..problem.pieces() {
                    let moved = u64::from(problem.words[piece]) * executions;
                    words[problem.source_tile[piece] as usize] += moved;
                    for receive in problem.receives_of(piece) {
                        words[problem.destination_tile[receive] as usize] += moved;
                    }
                }
                Ok(words)
            })
            .into_iter()
            .collect::<Result<_, PhaseError>>()?;
        let tiles = per_phase.first().map_or(0, Vec::len);
        let mut totals = vec![0u64; tiles];
        for words in &per_phase {
            for (total, &moved) in totals.iter_mut().zip(words) {
                *total += moved;
            }
        }
        let mut order: Vec<u32> = (0..tiles as u32).collect();
        order.sort_by_key(|&tile| (std::cmp::Reverse(totals[tile as usize]), tile));
        order.truncate(count);
        Ok(order)
    }
}
