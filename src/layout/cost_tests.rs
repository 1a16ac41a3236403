//! Tests of the cost model: plans cover their products and fit, memory
//! budgets, attention splits and the pairing order.

use super::attention_cost::{FLASH_KEY_BLOCK, attention_partition, plan_attention};
use super::cost::*;
use crate::numerics::dot::Accumulation;

/// A product of `m x k` by `k x n` on `tiles` tiles with a 400 KiB working
/// budget and FP32 partial sums (the candidates' tests share it).
pub(super) fn problem(m: u32, k: u32, n: u32, tiles: u32) -> MatMulProblem {
    MatMulProblem {
        m,
        k,
        n,
        tiles,
        working_budget: 400 * 1024,
        accumulation: Accumulation::F32,
        inputs: crate::numerics::dot::ProductInputs::Fp16,
        cost_table: crate::target::kernel_cost::CostTable::shipped(),
        candidate_limit: 64,
        activations: crate::numerics::dot::ActivationStore::F16,
    }
}

#[test]
fn the_pairing_order_puts_partner_tiles_on_one_replicated_block() {
    use crate::target::mapping::partner;
    let qkv = problem(729, 1152, 3456, 1472);
    // Even row parts and the larger weight block: rows innermost, so
    // partners share every coordinate but the row, hence the weight; the
    // reduction outermost.
    let rows_even = matmul_partition(&qkv, 16, 23, 4).expect("16x23x4");
    assert_eq!(rows_even.pairing_order(), TileOrder::ReductionColumnsRows);
    // Odd row parts, even column parts: columns innermost, so partners
    // share the activation block.
    let cols_even = matmul_partition(&qkv, 15, 24, 4).expect("15x24x4");
    assert_eq!(cols_even.pairing_order(), TileOrder::ReductionRowsColumns);
    // Both even, the activation block the larger (40 x 128 FP16 = 2,560
    // words against the weight's 128 x 32 FP8 = 1,024): still the
    // weight's order, so that its replicas pair and are not its home.
    let out = problem(400, 768, 768, 1440);
    let both_even = matmul_partition(&out, 10, 24, 6).expect("10x24x6");
    assert_eq!(
        (
            both_even.block_rows,
            both_even.block_reduction,
            both_even.block_cols
        ),
        (40, 128, 32)
    );
    assert_eq!(both_even.pairing_order(), TileOrder::ReductionColumnsRows);
    // Neither even: the reduction outermost still.
    let odd = matmul_partition(&qkv, 15, 23, 3).expect("15x23x3");
    assert_eq!(odd.pairing_order(), TileOrder::ReductionRowsColumns);
    // The fallback orders keep the paired axis innermost, the reduction
    // next to it, and the default where nothing pairs.
    assert_eq!(rows_even.fallback_order(), TileOrder::ColumnsReductionRows);
    assert_eq!(cols_even.fallback_order(), TileOrder::RowsReductionColumns);
    assert_eq!(both_even.fallback_order(), TileOrder::ColumnsReductionRows);
    assert_eq!(odd.fallback_order(), TileOrder::default());
    // Paired, the weight block (288 x 152 FP8 = 10,944 words) takes
    // half its events; unpaired, nothing changes.
    assert_eq!(
        rows_even.cycles - rows_even.paired_cycles(),
        exchange_cycles(288 * 152 / 4 / 2)
    );
    assert_eq!(odd.paired_cycles(), odd.cycles);
    for (mut plan, paired_axis, fallback) in [
        (rows_even, 0, false),
        (cols_even, 1, false),
        (rows_even, 0, true),
        (cols_even, 1, true),
    ] {
        plan.order = if fallback {
            plan.fallback_order()
        } else {
            plan.pairing_order()
        };
        let parts = [plan.row_parts, plan.col_parts, plan.reduction_parts];
        for row in 0..parts[0] {
            for col in 0..parts[1] {
                for reduction in 0..parts[2] {
                    let mut coordinate = [row, col, reduction];
                    let tile = plan.tile(row, col, reduction);
                    // The partner differs in the paired axis only.
                    coordinate[paired_axis] ^= 1;
                    let other = plan.tile(coordinate[0], coordinate[1], coordinate[2]);
                    assert_eq!(partner(tile), other, "{plan:?} at {row},{col},{reduction}");
                }
            }
        }
    }
}

#[test]
fn plan_covers_the_product_and_fits_the_machine() {
    for (m, k, n, tiles) in [
        (729, 1152, 3456, 1472),
        (197, 768, 3072, 1472),
        (17, 64, 256, 16),
        (1, 1152, 1152, 1472),
    ] {
        let plan = plan_matmul(&problem(m, k, n, tiles)).expect("plan");
        assert!(plan.tiles_used() <= tiles);
        assert!(plan.row_parts * plan.block_rows >= m);
        assert!(plan.col_parts * plan.block_cols >= n);
        assert!(plan.reduction_parts * plan.block_reduction >= k);
        // Every reduced slice holds a row: each block's rows deal out over
        // the reduction parts (ragged), or the blocks are padded to a
        // multiple of them (even).
        let last_rows = m - (plan.row_parts - 1) * plan.block_rows;
        assert!(
            plan.block_rows.is_multiple_of(plan.reduction_parts)
                || last_rows >= plan.reduction_parts,
            "{plan:?}"
        );
        let sliced: u32 = (0..plan.row_parts)
            .flat_map(|row_block| (0..plan.reduction_parts).map(move |slice| (row_block, slice)))
            .map(|(row_block, slice)| plan.slice(m, row_block, slice).1)
            .sum();
        if plan.ragged_slices() {
            assert_eq!(sliced, m, "{plan:?}");
        } else {
            assert!(sliced >= m, "{plan:?}");
        }
    }
}

#[test]
fn plan_is_not_a_fixed_grid() {
    let wide = plan_matmul(&problem(729, 1152, 4304, 1472)).expect("plan");
    let narrow = plan_matmul(&problem(1, 1152, 1152, 1472)).expect("plan");
    assert_ne!(
        (wide.row_parts, wide.reduction_parts),
        (narrow.row_parts, narrow.reduction_parts)
    );
}

#[test]
fn too_small_budget_is_an_error() {
    let mut tight = problem(729, 1152, 4304, 16);
    tight.working_budget = 1024;
    assert!(matches!(
        plan_matmul(&tight),
        Err(CostError::MatMulDoesNotFit { .. })
    ));
}

#[test]
fn attention_splits_keys_when_memory_is_tight() {
    let mut attention = AttentionProblem {
        groups: 16,
        queries: 729,
        keys: 729,
        dimension: 72,
        tiles: 1472,
        working_budget: 400 * 1024,
        forced_flash: None,
        cost_table: crate::target::kernel_cost::CostTable::shipped(),
        output: crate::numerics::dot::ActivationStore::F16,
        value_product: crate::numerics::dot::ProductInputs::Fp16,
    };
    assert_eq!(
        plan_attention(&attention).expect("plan").method,
        AttentionMethod::Materialized
    );
    attention.working_budget = 100 * 1024;
    let split = plan_attention(&attention).expect("plan");
    assert!(split.key_parts > 1, "{split:?}");
    assert!(split.working_bytes <= 100 * 1024);
    attention.forced_flash = Some(true);
    assert!(matches!(
        plan_attention(&attention).expect("plan").method,
        AttentionMethod::Flash { .. }
    ));
}

/// SigLIP's attention (16 heads of 729 tokens, dimension 72) on 1,472
/// tiles: with FP8 `PV` inputs a partition whose tiles hold 16 or more
/// query rows costs less than with FP16 ones (the PV product at the FP8
/// rate saves more than the value block's cast and the FP8 probabilities
/// cost; with a few rows per tile the cast of the whole value block does
/// not pay), holds the FP8 value block, and the plan says what its
/// kernels multiply; the best FP8 plan beats the best FP16 plan.
#[test]
fn an_fp8_value_product_makes_attention_cheaper() {
    use crate::numerics::dot::ProductInputs;
    let problem = |value_product| AttentionProblem {
        groups: 16,
        queries: 729,
        keys: 729,
        dimension: 72,
        tiles: 1472,
        working_budget: 400 * 1024,
        forced_flash: None,
        cost_table: crate::target::kernel_cost::CostTable::shipped(),
        output: crate::numerics::dot::ActivationStore::F16,
        value_product,
    };
    let fp16 = problem(ProductInputs::Fp16);
    let fp8 = problem(ProductInputs::Fp8 {
        activation_scale: -2,
    });
    for (query_parts, key_parts) in [(46, 1), (23, 1), (8, 1), (23, 2), (12, 3)] {
        for method in [
            AttentionMethod::Materialized,
            AttentionMethod::Flash {
                key_block: FLASH_KEY_BLOCK,
            },
        ] {
            let partition = |problem| {
                attention_partition(problem, Some(query_parts), key_parts, method).expect("plan")
            };
            let (wide, narrow) = (partition(&fp16), partition(&fp8));
            assert!(narrow.block_queries >= 16, "{narrow:?}");
            assert!(
                narrow.cycles < wide.cycles,
                "{query_parts}x{key_parts}, {method:?}: {} vs {}",
                narrow.cycles,
                wide.cycles
            );
            assert_eq!(
                u64::from(narrow.working_bytes - wide.working_bytes),
                u64::from(narrow.block_groups) * u64::from(narrow.block_keys) * 72
            );
            assert_eq!(narrow.value_product, fp8.value_product);
        }
    }
    let chosen = plan_attention(&fp8).expect("plan");
    assert!(chosen.cycles < plan_attention(&fp16).expect("plan").cycles);
}

/// PE-Core's 577 tokens over 14 row parts and 4 reduction parts: blocks
/// of 42 rows (no longer padded to 44, a multiple of the reduction
/// parts), each reduce-scattered in balanced slices (11, 11, 10, 10; the
/// last block's 31 rows as 8, 8, 8, 7), which the output format's row
/// starts name; a block too short for a row per slice keeps the even
/// slices of a padded block.
#[test]
fn row_blocks_are_not_padded_to_the_reduction_parts() {
    let qkv = problem(577, 1024, 3072, 1472);
    let plan = matmul_partition(&qkv, 14, 26, 4).expect("14x26x4");
    assert_eq!((plan.row_parts, plan.block_rows), (14, 42));
    assert!(plan.ragged_slices());
    assert_eq!(plan.slice_rows(), 11);
    let slices: Vec<(u32, u32)> = (0..4).map(|slice| plan.slice(577, 0, slice)).collect();
    assert_eq!(slices, [(0, 11), (11, 11), (22, 10), (32, 10)]);
    let last: Vec<(u32, u32)> = (0..4).map(|slice| plan.slice(577, 13, slice)).collect();
    assert_eq!(last, [(0, 8), (8, 8), (16, 8), (24, 7)]);
    let starts = plan.output_row_starts(577).expect("ragged");
    assert_eq!(starts.len(), 14 * 4 + 1);
    assert_eq!(&starts[..5], &[0, 11, 22, 32, 42]);
    assert_eq!(starts[starts.len() - 2..], [570, 577]);
    // The same partition padded to 44 rows computed 44 x 256 x 120 per
    // tile; 42 rows is the cheaper plan.
    let padded_compute = 44 * 256 * 120 / 128;
    let compute = u64::from(plan.block_rows * plan.block_reduction * plan.block_cols) / 128;
    assert!(compute < padded_compute);
    // Even blocks keep even slices and no row starts.
    let even = matmul_partition(&problem(576, 1024, 3072, 1472), 12, 30, 4).expect("12x30x4");
    assert!(!even.ragged_slices());
    assert_eq!(even.slice(576, 3, 2), (24, 12));
    assert_eq!(even.output_row_starts(576), None);
    // One row over eight reduction parts: padded to eight rows, sliced
    // one row each (the slices past the product's row exist nowhere).
    let probe = matmul_partition(&problem(1, 1024, 1024, 1472), 1, 128, 8).expect("1x128x8");
    assert_eq!(probe.block_rows, 8);
    assert!(!probe.ragged_slices());
}
