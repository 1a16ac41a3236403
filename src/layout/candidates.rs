//! The candidate space of the layout search: for a matrix product every
//! partition into exactly `rows x cols x reduction` parts that fits the
//! working budget, for attention every `queries x keys` split, each costed
//! by the operator cost model; the small non-dominated set the search
//! tries per operator (cheapest by the model, the least working memory, and
//! the partitions whose blocks line up with a neighbour's so that the
//! conversion between them moves less or nothing); the nearest valid
//! partitions for an override that cannot be applied.
//!
//! Pure functions of problems; they do not know the graph or the build.

use super::attention_cost::{FLASH_KEY_BLOCK, attention_partition};
use super::cost::{
    AttentionMethod, AttentionOrder, AttentionPlan, AttentionProblem, MatMulPlan, MatMulProblem,
    TileOrder, matmul_partition,
};
use super::overrides::Partition;

/// The most reduction parts a candidate has (an override may name more,
/// within the block rule; the cost model's own choice stops at
/// `cost::MAX_REDUCTION_PARTS`).
pub const MAX_CANDIDATE_REDUCTION_PARTS: u32 = 64;

/// The most row (or query) parts a candidate has.
pub const MAX_CANDIDATE_ROW_PARTS: u32 = 128;

/// Candidates use at least this share of the tiles (eighths): a partition
/// that leaves more idle is never competitive on the shipped workloads and
/// would only slow the search.
const MIN_TILE_SHARE_EIGHTHS: u64 = 5;

/// Every partition of `problem` into exactly the parts it names whose
/// working set fits `problem.working_budget`, costed.
pub fn matmul_plans(problem: &MatMulProblem) -> Vec<MatMulPlan> {
    let mut plans = Vec::new();
    let tiles = u64::from(problem.tiles);
    let max_rows = problem.m.min(MAX_CANDIDATE_ROW_PARTS).min(problem.tiles);
    let max_reduction = (problem.k / 4).clamp(1, MAX_CANDIDATE_REDUCTION_PARTS);
    for rows in 1..=max_rows {
        for reduction in 1..=max_reduction {
            let used = u64::from(rows) * u64::from(reduction);
            if used > tiles {
                break;
            }
            let max_cols = (tiles / used) as u32;
            let min_cols = (tiles * MIN_TILE_SHARE_EIGHTHS / 8).div_ceil(used) as u32;
            for cols in min_cols.max(1)..=max_cols.min(problem.n.div_ceil(2)) {
                let Some(plan) = matmul_partition(problem, rows, cols, reduction) else {
                    continue;
                };
                if (plan.row_parts, plan.col_parts, plan.reduction_parts) == (rows, cols, reduction)
                    && plan.working_bytes <= problem.working_budget
                {
                    plans.push(plan);
                }
            }
        }
    }
    plans
}

/// The valid partitions of `problem` as overrides in `order`.
pub fn matmul_partitions(problem: &MatMulProblem, order: TileOrder) -> Vec<Partition> {
    matmul_plans(problem)
        .iter()
        .map(|plan| Partition::MatMul {
            rows: plan.row_parts,
            cols: plan.col_parts,
            reduction: plan.reduction_parts,
            order,
        })
        .collect()
}

/// The methods the problem allows.
pub fn attention_methods(problem: &AttentionProblem) -> Vec<AttentionMethod> {
    let flash = AttentionMethod::Flash {
        key_block: FLASH_KEY_BLOCK.min(problem.keys),
    };
    match problem.forced_flash {
        Some(true) => vec![flash],
        Some(false) => vec![AttentionMethod::Materialized],
        None => vec![AttentionMethod::Materialized, flash],
    }
}

/// Every `queries x keys` split of `problem` into exactly those parts that
/// fits the budget, the cheapest method each.
pub fn attention_plans(problem: &AttentionProblem) -> Vec<AttentionPlan> {
    let mut plans = Vec::new();
    let max_keys = (problem.keys / 8).clamp(1, MAX_CANDIDATE_REDUCTION_PARTS);
    let tiles = u64::from(problem.tiles);
    for keys in 1..=max_keys {
        let max_queries = problem.queries.min(MAX_CANDIDATE_ROW_PARTS);
        for queries in 1..=max_queries {
            let best = attention_methods(problem)
                .into_iter()
                .filter_map(|method| attention_partition(problem, Some(queries), keys, method))
                .filter(|plan| {
                    plan.query_parts == queries
                        && plan.key_parts == keys
                        && plan.working_bytes <= problem.working_budget
                })
                .min_by_key(|plan| (plan.cycles, plan.working_bytes));
            if let Some(plan) = best {
                let group_blocks = problem.groups.div_ceil(plan.block_groups.max(1));
                let used = u64::from(group_blocks) * u64::from(queries) * u64::from(keys);
                if used * 8 >= tiles * MIN_TILE_SHARE_EIGHTHS && used <= tiles {
                    plans.push(plan);
                }
            }
        }
    }
    plans
}

/// The valid splits of `problem` as overrides in `order`.
pub fn attention_partitions(problem: &AttentionProblem, order: AttentionOrder) -> Vec<Partition> {
    attention_plans(problem)
        .iter()
        .map(|plan| Partition::Attention {
            queries: plan.query_parts,
            keys: plan.key_parts,
            order,
        })
        .collect()
}

/// The `count` partitions of `valid` nearest to `wanted` (ties in order).
pub fn nearest_partitions(wanted: &Partition, valid: &[Partition], count: usize) -> Vec<Partition> {
    let mut scored: Vec<(u32, Partition)> = valid
        .iter()
        .map(|partition| (wanted.distance(partition), *partition))
        .collect();
    scored.sort();
    scored.dedup();
    scored
        .into_iter()
        .take(count)
        .map(|(_, partition)| partition)
        .collect()
}

/// What a neighbour's layout asks of an operator's blocks, for the
/// candidates that line up with it: a block extent along an axis that is a
/// multiple of `quantum` (rows 0, cols 1, reduction 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alignment {
    pub axis: usize,
    pub quantum: u32,
}

/// The matrix-product candidates the search tries: the `cheapest` by the
/// cost model, the `cheapest` by [`MatMulPlan::paired_cycles`], the plan
/// with the least working memory, and for each
/// alignment the `aligned` cheapest whose blocks line up with it; each in
/// the default tile order. Sorted by model cycles, deduplicated.
pub fn matmul_search_candidates(
    problem: &MatMulProblem,
    alignments: &[Alignment],
    cheapest: usize,
    aligned: usize,
) -> Vec<MatMulPlan> {
    let mut plans = matmul_plans(problem);
    plans.sort_by_key(|plan| {
        (
            plan.cycles,
            plan.working_bytes,
            plan.row_parts,
            plan.col_parts,
            plan.reduction_parts,
        )
    });
    let mut chosen: Vec<MatMulPlan> = plans.iter().take(cheapest).copied().collect();
    // The cheapest once a replicated block pairs (each is tried in its
    // pairing order).
    let mut by_paired = plans.clone();
    by_paired.sort_by_key(|plan| {
        (
            plan.paired_cycles(),
            plan.working_bytes,
            plan.row_parts,
            plan.col_parts,
            plan.reduction_parts,
        )
    });
    chosen.extend(by_paired.iter().take(cheapest).copied());
    if let Some(least) = plans
        .iter()
        .min_by_key(|plan| (plan.working_bytes, plan.cycles))
    {
        chosen.push(*least);
    }
    for alignment in alignments {
        let quantum = alignment.quantum.max(1);
        chosen.extend(
            plans
                .iter()
                .filter(|plan| {
                    let extent = [plan.block_rows, plan.block_cols, plan.block_reduction];
                    extent[alignment.axis].is_multiple_of(quantum)
                })
                .take(aligned),
        );
    }
    chosen.sort_by_key(|plan| {
        (
            plan.cycles,
            plan.row_parts,
            plan.col_parts,
            plan.reduction_parts,
        )
    });
    chosen.dedup_by_key(|plan| (plan.row_parts, plan.col_parts, plan.reduction_parts));
    chosen
}

/// The attention candidates the search tries: the `cheapest` by the cost
/// model and the one with the least working memory.
pub fn attention_search_candidates(
    problem: &AttentionProblem,
    cheapest: usize,
) -> Vec<AttentionPlan> {
    let mut plans = attention_plans(problem);
    plans.sort_by_key(|plan| {
        (
            plan.cycles,
            plan.working_bytes,
            plan.query_parts,
            plan.key_parts,
        )
    });
    let mut chosen: Vec<AttentionPlan> = plans.iter().take(cheapest).copied().collect();
    if let Some(least) = plans
        .iter()
        .min_by_key(|plan| (plan.working_bytes, plan.cycles))
    {
        chosen.push(*least);
    }
    chosen.sort_by_key(|plan| (plan.cycles, plan.query_parts, plan.key_parts));
    chosen.dedup_by_key(|plan| (plan.query_parts, plan.key_parts));
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::cost_tests::problem;

    #[test]
    fn every_candidate_has_exactly_its_parts_and_fits() {
        let problem = problem(729, 4304, 1152, 1472);
        let plans = matmul_plans(&problem);
        assert!(plans.len() > 100, "{}", plans.len());
        for plan in &plans {
            assert!(plan.tiles_used() <= 1472);
            assert!(plan.working_bytes <= problem.working_budget);
            assert_eq!(
                Some((plan.row_parts, plan.col_parts, plan.reduction_parts)),
                matmul_partition(
                    &problem,
                    plan.row_parts,
                    plan.col_parts,
                    plan.reduction_parts
                )
                .map(|again| (
                    again.row_parts,
                    again.col_parts,
                    again.reduction_parts
                ))
            );
        }
        // The cost model's own choice is among them.
        let chosen = crate::layout::cost::plan_matmul(&problem).expect("plan");
        assert!(
            plans
                .iter()
                .any(|plan| plan.partition() == chosen.partition())
        );
    }

    #[test]
    fn the_space_holds_the_reduction_split_that_matches_a_column_split() {
        // SigLIP's MLP: the up projection 8x46x4 gives 94-column output
        // blocks; a down projection over 23 reduction parts takes blocks of
        // 188 = 2 x 94 columns, so its operand blocks are whole output blocks.
        let down = problem(729, 4304, 1152, 1472);
        let aligned = matmul_search_candidates(
            &down,
            &[Alignment {
                axis: 2,
                quantum: 94,
            }],
            4,
            4,
        );
        assert!(
            aligned
                .iter()
                .any(|plan| plan.block_reduction % 94 == 0 && plan.reduction_parts == 23),
            "{:?}",
            aligned
                .iter()
                .map(MatMulPlan::partition)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn nearest_partitions_are_by_distance() {
        let valid = [
            Partition::parse("8x46x4").unwrap(),
            Partition::parse("8x8x23").unwrap(),
            Partition::parse("7x14x15").unwrap(),
        ];
        let nearest = nearest_partitions(&Partition::parse("8x45x4").unwrap(), &valid, 2);
        assert_eq!(nearest[0].to_string(), "8x46x4");
        assert_eq!(nearest.len(), 2);
    }
}
