//! Attention's cost: candidate partitions of an attention op over
//! `(group block, query block, key block)` tiles, each priced as the
//! estimate prices the kernels it becomes (the fitted kernel cost model:
//! the `QK^T` product at FP16, the `PV` product at the problem's
//! `value_product` inputs with its casts, the softmax, the combine of the
//! key parts' partial statistics) plus the exchange of its operands, and
//! checked against the tile's SRAM working budget; and the choice among
//! them. Pure, as `super::cost` is.

use super::cost::{
    AttentionMethod, AttentionOrder, AttentionPlan, AttentionProblem, CostError, exchange_cycles,
};
use super::format::{ceil_div, round_up};
use crate::numerics::dot::ProductInputs;
use crate::target::costs;
use crate::target::kernel_cost::{KernelCall, MatrixInputs, call_cycles, composite};

/// Keys per block of the flash method (model choice: a multiple of the
/// matrix unit's 16-deep reduction that keeps scores small).
pub const FLASH_KEY_BLOCK: u32 = 64;

fn attention_candidate(
    problem: &AttentionProblem,
    key_parts: u32,
    method: AttentionMethod,
) -> Option<AttentionPlan> {
    attention_partition(problem, None, key_parts, method)
}

/// Cost of attention split into `key_parts` key blocks and (about)
/// `query_parts` query blocks (`None`: as many as the tiles allow), or
/// `None` when the blocks do not make sense or need more tiles than the
/// problem has.
pub fn attention_partition(
    problem: &AttentionProblem,
    query_parts: Option<u32>,
    key_parts: u32,
    method: AttentionMethod,
) -> Option<AttentionPlan> {
    if key_parts == 0 || query_parts == Some(0) {
        return None;
    }
    let (groups, queries, keys, dimension) = (
        problem.groups,
        problem.queries,
        problem.keys,
        problem.dimension,
    );
    let block_keys = ceil_div(keys, key_parts);
    if ceil_div(keys, block_keys) != key_parts {
        return None;
    }
    let tiles_per_key_part = problem.tiles / key_parts;
    if tiles_per_key_part == 0 {
        return None;
    }
    let block_groups = ceil_div(groups, tiles_per_key_part).max(1);
    let group_blocks = ceil_div(groups, block_groups);
    let query_parts_wanted = match query_parts {
        Some(wanted) => {
            if u64::from(wanted) * u64::from(group_blocks) * u64::from(key_parts)
                > u64::from(problem.tiles)
            {
                return None;
            }
            wanted.min(queries)
        }
        None => (tiles_per_key_part / group_blocks).clamp(1, queries),
    };
    // Query blocks split evenly over the key tiles for the combine.
    let block_queries = round_up(ceil_div(queries, query_parts_wanted), key_parts);
    let query_parts = ceil_div(queries, block_queries);
    let (bg, bq, bk, d, pk) = (
        block_groups as u64,
        block_queries as u64,
        block_keys as u64,
        dimension as u64,
        key_parts as u64,
    );
    let line = round_up(dimension * 2, 4) as u64;
    let output_line = round_up(dimension * problem.output.bytes(), 4) as u64;
    let operands = bg * (bq * line + 2 * bk * line) + bg * (bq / pk) * output_line;
    let partial_row = AttentionPlan::partial_row_bytes(dimension) as u64;
    // Priced as the estimate prices the kernels it becomes (the fitted
    // kernel cost model): QK^T per head at FP16, PV at the problem's inputs
    // (with FP8 inputs the value block's cast and the FP8 probabilities)
    // and the softmax, then the combine of the key parts' partial
    // statistics.
    let table = problem.cost_table;
    let vector_f32 = costs::VECTOR_F32_OPS_PER_CYCLE;
    let value_inputs = match problem.value_product {
        ProductInputs::Fp16 => MatrixInputs::Fp16,
        ProductInputs::Fp8 { .. } => MatrixInputs::Fp8,
    };
    let products_and_softmax = composite::attention(bg, bq, bk, d, value_inputs, &table);
    let output_cast = if problem.output.is_fp8() {
        composite::fused_cast(bg * (bq / pk).max(1) * d, &table)
    } else {
        0
    };
    let combine = if pk > 1 {
        call_cycles(
            KernelCall::Reduce {
                elements: bg * (bq / pk).max(1) * (d + 2),
                parts: pk,
            },
            &table,
        )
    } else {
        0
    };
    let received_words = (operands
        + if pk > 1 {
            (pk - 1) * bg * (bq / pk) * partial_row
        } else {
            0
        })
        / 4;
    let phases = 1 + u64::from(pk > 1);
    let extra_cycles = match method {
        AttentionMethod::Materialized => 0,
        AttentionMethod::Flash { key_block } => {
            bg * bq * d * ceil_div(block_keys, key_block) as u64 * 2 / vector_f32
        }
    };
    let mut plan = AttentionPlan {
        block_groups,
        query_parts,
        block_queries,
        key_parts,
        block_keys,
        method,
        cycles: products_and_softmax
            + output_cast
            + combine
            + extra_cycles
            + exchange_cycles(received_words)
            + phases * costs::GLOBAL_SYNC_CYCLES_PER_PHASE,
        working_bytes: 0,
        order: AttentionOrder::PLANNED,
        value_product: problem.value_product,
    };
    let working: u64 = plan
        .working_parts(dimension)
        .iter()
        .map(|(_, bytes)| bytes)
        .sum();
    plan.working_bytes = u32::try_from(working).unwrap_or(u32::MAX);
    Some(plan)
}

pub fn plan_attention(problem: &AttentionProblem) -> Result<AttentionPlan, CostError> {
    let methods: Vec<AttentionMethod> = match problem.forced_flash {
        Some(true) => vec![AttentionMethod::Flash {
            key_block: FLASH_KEY_BLOCK.min(problem.keys),
        }],
        Some(false) => vec![AttentionMethod::Materialized],
        None => vec![
            AttentionMethod::Materialized,
            AttentionMethod::Flash {
                key_block: FLASH_KEY_BLOCK.min(problem.keys),
            },
        ],
    };
    let mut best: Option<AttentionPlan> = None;
    let mut smallest = u32::MAX;
    let mut smallest_plan = None;
    let max_key_parts = (problem.keys / 8).clamp(1, 32);
    for key_parts in 1..=max_key_parts {
        for &method in &methods {
            let Some(candidate) = attention_candidate(problem, key_parts, method) else {
                continue;
            };
            if candidate.working_bytes < smallest {
                smallest = candidate.working_bytes;
                smallest_plan = Some(candidate);
            }
            if candidate.working_bytes > problem.working_budget {
                continue;
            }
            let key = |plan: &AttentionPlan| (plan.cycles, plan.key_parts, plan.working_bytes);
            if best
                .as_ref()
                .is_none_or(|current| key(&candidate) < key(current))
            {
                best = Some(candidate);
            }
        }
    }
    best.ok_or(CostError::AttentionDoesNotFit {
        groups: problem.groups,
        queries: problem.queries,
        keys: problem.keys,
        dimension: problem.dimension,
        needed: smallest,
        budget: problem.working_budget,
        smallest_plan,
    })
}
