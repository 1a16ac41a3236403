//! How hard a layout search looks ([`SearchSettings`]): the quick search
//! `superstep search` runs by default and the thorough one of
//! `--thorough`, and which ops a search leaves at their partition because
//! they cost too little of the estimate to be worth trials
//! ([`split_by_share`]).

use serde::{Deserialize, Serialize};

use super::beam::BeamSettings;
use crate::layout::search_record::UnsearchedOp;

/// How far the search looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SearchSettings {
    /// The beam that chooses the starting plan (`None`: start from the
    /// build's own layouts).
    pub beam: Option<BeamSettings>,
    /// Passes over the operators (a pass ends early when nothing improved).
    pub rounds: u32,
    /// Candidates per operator that the cost model ranks cheapest.
    pub cheapest: u32,
    /// Candidates per alignment with a neighbour's blocks.
    pub aligned: u32,
    /// Whether each accepted partition's other tile orders are tried.
    pub orders: bool,
    /// Ops whose planned cost (the cost model's cycles, times the op's
    /// executions) is under this share of the starting estimate, in
    /// hundredths of a percent, keep their partition: no change of theirs
    /// can save more than about what they cost. 0: every op is searched.
    pub min_share_basis_points: u32,
}

impl Default for SearchSettings {
    /// The quick search: one pass over the ops that cost at least 1% of
    /// the estimate, trying the cost model's two cheapest partitions and
    /// the tile orders. Measured on SigLIP so400m and ViT-B/16
    /// (docs/measurements.md, "A quick search by default"): every step it
    /// took, and most the thorough search took, was a tile order.
    fn default() -> Self {
        SearchSettings {
            // Measured: on the shipped models the local steps from the cost
            // model's plans beat the local steps from the beam's plan.
            beam: None,
            rounds: 1,
            cheapest: 2,
            aligned: 0,
            orders: true,
            min_share_basis_points: 100,
        }
    }
}

impl SearchSettings {
    /// The thorough search (`superstep search --thorough`): two passes
    /// over every op, six cheapest partitions, three per alignment, and
    /// the tile orders.
    pub fn thorough() -> Self {
        SearchSettings {
            beam: None,
            rounds: 2,
            cheapest: 6,
            aligned: 3,
            orders: true,
            min_share_basis_points: 0,
        }
    }
}

/// The ops to search, costliest first, and those left at their partition:
/// an op whose planned cycles are under `min_share_basis_points`
/// hundredths of a percent of `estimate`.
pub(super) fn split_by_share(
    ranked: Vec<(u64, String)>,
    estimate: u64,
    min_share_basis_points: u32,
) -> (Vec<String>, Vec<UnsearchedOp>) {
    let mut searched = Vec::new();
    let mut unsearched = Vec::new();
    for (planned_cycles, op) in ranked {
        // planned / estimate < basis points / 10,000, without rounding.
        let small = u128::from(planned_cycles) * 10_000
            < u128::from(estimate) * u128::from(min_share_basis_points);
        if small {
            unsearched.push(UnsearchedOp { op, planned_cycles });
        } else {
            searched.push(op);
        }
    }
    (searched, unsearched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked() -> Vec<(u64, String)> {
        vec![
            (500, String::from("layer.mlp.up")),
            (100, String::from("head.pool.k")),
            (99, String::from("embed.patch")),
        ]
    }

    #[test]
    fn ops_under_the_share_keep_their_partition_and_the_rest_keep_their_rank() {
        // 1% of 10,000 cycles is 100: 100 is searched, 99 is not.
        let (searched, unsearched) = split_by_share(ranked(), 10_000, 100);
        assert_eq!(searched, ["layer.mlp.up", "head.pool.k"]);
        assert_eq!(
            unsearched,
            [UnsearchedOp {
                op: String::from("embed.patch"),
                planned_cycles: 99
            }]
        );
    }

    #[test]
    fn a_share_of_zero_searches_every_op() {
        let (searched, unsearched) = split_by_share(ranked(), 10_000, 0);
        assert_eq!(searched.len(), 3);
        assert!(unsearched.is_empty());
        assert_eq!(SearchSettings::thorough().min_share_basis_points, 0);
    }

    #[test]
    fn the_quick_search_looks_at_less_than_the_thorough_one() {
        let quick = SearchSettings::default();
        let thorough = SearchSettings::thorough();
        assert!(quick.rounds < thorough.rounds);
        assert!(quick.cheapest < thorough.cheapest);
        assert!(quick.aligned < thorough.aligned);
        assert!(quick.min_share_basis_points > thorough.min_share_basis_points);
        assert!(quick.orders && thorough.orders);
    }
}
