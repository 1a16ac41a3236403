//! Tests of the estimate's compute costs and totals, with every expected
//! figure worked out by hand from IPU21.md's rates (`target::costs`): a
//! kernel launch of 11 cycles, 128 FP8 or 64 FP16 multiply-accumulates per
//! cycle, 4 FP32 / 8 FP16 vector operations and 8 streamed bytes per cycle,
//! one transcendental per cycle, a local copy or fill of 288 cycles plus 8
//! bytes per cycle, a step as long as its busiest tile, and 288 cycles of
//! setup and sync per exchange phase, all weighted by Repeat executions.

use std::cell::RefCell;
use std::collections::HashMap;

use super::compute::{compute_step_cycles, compute_step_load, kernel_cycles};
use super::*;
use crate::expand::program::{
    AllocationId, AttentionKind, Destination, ElementType, GeluForm, Kernel, KernelRun, LocalCopy,
    Location, MatMulOutput, Operand, Provenance, Real, Reason, TransferList, ZeroFill,
};
use crate::numerics::dot::Accumulation;

fn location() -> Location {
    Location {
        allocation: AllocationId(0),
        offset: 0,
    }
}

fn operand() -> Operand {
    Operand {
        location: location(),
        line: 0,
        matrix: 0,
    }
}

fn provenance() -> Provenance {
    Provenance {
        op: 0,
        value: None,
        reason: Reason::Compute,
    }
}

/// A `[32, 64] x [64, 16]` matrix product with `output`.
fn matmul(output: MatMulOutput) -> Kernel {
    Kernel::MatMul {
        a: operand(),
        weight: operand(),
        output,
        rows: 32,
        reduction: 64,
        cols: 16,
        valid_rows: 32,
        valid_reduction: 64,
        valid_cols: 16,
        accumulation: Accumulation::F32,
    }
}

fn final_output(valid_rows: u32, valid_cols: u32) -> MatMulOutput {
    MatMulOutput::Final {
        output: operand(),
        bias: operand(),
        valid_rows,
        valid_cols,
    }
}

#[test]
fn a_matrix_product_costs_a_launch_its_fp8_macs_and_its_bias_add() {
    // 32 x 64 x 16 = 32,768 MACs at 128 per cycle: 256 cycles; the bias
    // over 30 x 16 = 480 written elements at 4 per cycle: 120; launch 11.
    assert_eq!(kernel_cycles(&matmul(final_output(30, 16))), 11 + 256 + 120);
    // Partial sums add no bias.
    assert_eq!(
        kernel_cycles(&matmul(MatMulOutput::Partial(operand()))),
        11 + 256
    );
    // A product not a multiple of the rate rounds up: 3 x 4 x 2 = 24 MACs
    // is one cycle, bias 3 x 2 = 6 elements is two.
    let small = Kernel::MatMul {
        a: operand(),
        weight: operand(),
        output: final_output(3, 2),
        rows: 3,
        reduction: 4,
        cols: 2,
        valid_rows: 3,
        valid_reduction: 4,
        valid_cols: 2,
        accumulation: Accumulation::F16,
    };
    assert_eq!(kernel_cycles(&small), 11 + 1 + 2);
}

#[test]
fn attention_runs_its_products_at_fp16_and_one_exponential_per_score() {
    // Two groups of 16 queries over 16 keys, dimension 16 (no padding):
    // QK^T and AV are 16 x 16 x 16 each, 2 x 8,192 = 16,384 MACs at 64
    // per cycle: 256 cycles; 2 x 16 x 16 = 512 scores at one per cycle.
    let attention = Kernel::Attention {
        query: operand(),
        key: operand(),
        value: operand(),
        output: operand(),
        scratch: location(),
        groups: 2,
        queries: 16,
        keys: 16,
        dimension: 16,
        scale: Real::new(0.25),
        kind: AttentionKind::Materialized,
    };
    assert_eq!(kernel_cycles(&attention), 11 + 256 + 512);
    // Dimension 8 pads QK^T's reduction to 16: 16 x 16 x 16 + 16 x 16 x 8
    // = 6,144 MACs for one group: 96 cycles, 256 scores.
    let partial = Kernel::AttentionPartial {
        query: operand(),
        key: operand(),
        value: operand(),
        partial: location(),
        groups: 1,
        stride_groups: 1,
        queries: 16,
        keys: 16,
        dimension: 8,
        scale: Real::new(0.25),
        kind: AttentionKind::Flash { key_block: 16 },
    };
    assert_eq!(kernel_cycles(&partial), 11 + 96 + 256);
}

#[test]
fn vector_kernels_cost_the_slower_of_arithmetic_and_streaming() {
    // LayerNorm over 4 x 64 = 256 elements: 5 FP32 operations each (1,280
    // at 4 per cycle: 320) against 4 bytes each (1,024 at 8: 128).
    let layer_norm = Kernel::LayerNorm {
        input: operand(),
        gamma: operand(),
        beta: operand(),
        output: operand(),
        rows: 4,
        cols: 64,
        epsilon: Real::new(1e-6),
    };
    assert_eq!(kernel_cycles(&layer_norm), 11 + 320);
    // Add over 4 x 16 = 64 FP16 elements: 64 operations at 8 per cycle
    // (8) against 6 bytes each (384 at 8: 48): streaming dominates.
    let add = Kernel::Add {
        a: operand(),
        b: operand(),
        output: operand(),
        groups: 1,
        rows: 4,
        cols: 16,
    };
    assert_eq!(kernel_cycles(&add), 11 + 48);
    // GELU: one transcendental per element, 2 x 2 x 8 = 32 elements.
    let gelu = Kernel::Gelu {
        input: operand(),
        output: operand(),
        groups: 2,
        rows: 2,
        cols: 8,
        form: GeluForm::Tanh,
    };
    assert_eq!(kernel_cycles(&gelu), 11 + 32);
    // Reduce-bias of 3 FP32 slices over 2 x 8 = 16 elements: 48 operations
    // (12 cycles) against 16 x (3 x 4 + 2) = 224 bytes (28 cycles).
    let reduce = Kernel::ReduceBias {
        local: operand(),
        received: operand(),
        received_slice_bytes: 64,
        count: 3,
        partial: ElementType::F32,
        bias: operand(),
        output: operand(),
        rows: 2,
        cols: 8,
    };
    assert_eq!(kernel_cycles(&reduce), 11 + 28);
    // The same with FP16 partials: 16 x (3 x 2 + 2) = 128 bytes, 16
    // cycles, still above the 12 of arithmetic.
    let reduce_f16 = Kernel::ReduceBias {
        local: operand(),
        received: operand(),
        received_slice_bytes: 32,
        count: 3,
        partial: ElementType::F16,
        bias: operand(),
        output: operand(),
        rows: 2,
        cols: 8,
    };
    assert_eq!(kernel_cycles(&reduce_f16), 11 + 16);
}

fn copy(tile: u32, rows: u32, row_bytes: u32) -> LocalCopy {
    LocalCopy {
        tile,
        source: location(),
        destination: location(),
        row_bytes,
        rows,
        source_stride: row_bytes,
        destination_stride: row_bytes,
    }
}

#[test]
fn copies_and_fills_cost_a_call_plus_eight_bytes_per_cycle() {
    // 3 rows of 100 bytes: 288 + 300 / 8 (rounded up) = 288 + 38.
    let copies = Step::Copies {
        provenance: provenance(),
        copies: vec![copy(1, 3, 100)],
    };
    assert_eq!(compute_step_cycles(&copies, 4), 326);
    // A 7-byte fill still costs the whole call and one cycle.
    let fills = Step::Fills {
        provenance: provenance(),
        fills: vec![ZeroFill {
            tile: 0,
            destination: location(),
            row_bytes: 7,
            rows: 1,
            stride: 8,
        }],
    };
    assert_eq!(compute_step_cycles(&fills, 4), 289);
}

#[test]
fn a_step_lasts_as_long_as_its_busiest_tile() {
    // Tile 0 runs two products (387 + 267 = 654 cycles), tile 2 one (387).
    let step = Step::Kernels {
        provenance: provenance(),
        runs: vec![
            KernelRun {
                tile: 0,
                kernel: matmul(final_output(30, 16)),
            },
            KernelRun {
                tile: 2,
                kernel: matmul(final_output(30, 16)),
            },
            KernelRun {
                tile: 0,
                kernel: matmul(MatMulOutput::Partial(operand())),
            },
        ],
    };
    let load = compute_step_load(&step, 4);
    assert_eq!(load.cycles, 654);
    assert_eq!(load.busy_tiles, 2);
    assert_eq!(load.busy_tile_cycles, 654 + 387);
    // Two copies on one tile add up: 2 x (288 + 10) = 596; one on another
    // tile: 288 + 1 = 289.
    let copies = Step::Copies {
        provenance: provenance(),
        copies: vec![copy(3, 1, 80), copy(1, 1, 8), copy(3, 2, 40)],
    };
    let load = compute_step_load(&copies, 4);
    assert_eq!(load.cycles, 596);
    assert_eq!(load.busy_tiles, 2);
    assert_eq!(load.busy_tile_cycles, 596 + 289);
    // Exchanges and checkpoints are not compute.
    assert_eq!(
        compute_step_load(&exchange(), 4),
        compute::StepLoad::default()
    );
    assert_eq!(
        compute_step_load(&Step::Checkpoint { name: 0 }, 4),
        compute::StepLoad::default()
    );
}

fn exchange() -> Step {
    let mut transfers = TransferList::default();
    transfers.push(
        0,
        location(),
        4,
        &[Destination {
            tile: 1,
            location: location(),
        }],
    );
    Step::Exchange {
        provenance: provenance(),
        transfers,
    }
}

fn kernels() -> Step {
    Step::Kernels {
        provenance: provenance(),
        runs: vec![KernelRun {
            tile: 0,
            kernel: matmul(final_output(30, 16)),
        }],
    }
}

/// `[kernels, exchange, Repeat x3 [exchange, copies, Repeat x2 [exchange]],
/// checkpoint, exchange]`.
fn nested_program() -> Vec<Step> {
    vec![
        kernels(),
        exchange(),
        Step::Repeat {
            iterations: 3,
            body: vec![
                exchange(),
                Step::Copies {
                    provenance: provenance(),
                    copies: vec![copy(0, 1, 8)],
                },
                Step::Repeat {
                    iterations: 2,
                    body: vec![exchange()],
                },
            ],
        },
        Step::Checkpoint { name: 0 },
        exchange(),
    ]
}

#[test]
fn the_estimate_weights_every_step_by_its_executions() {
    let steps = nested_program();
    let compute_costs: HashMap<Vec<u32>, u64> = [(vec![0], 50), (vec![2, 1], 20)].into();
    let phase_costs: HashMap<Vec<u32>, PhaseCost> = [
        (
            vec![1],
            PhaseCost {
                horizon: 1_000,
                patch_cycles: 0,
            },
        ),
        (
            vec![2, 0],
            PhaseCost {
                horizon: 500,
                patch_cycles: 162,
            },
        ),
        (
            vec![2, 2, 0],
            PhaseCost {
                horizon: 100,
                patch_cycles: 54,
            },
        ),
    ]
    .into();
    let asked = RefCell::new(Vec::new());
    let estimate = estimate(&steps, &|path, _| compute_costs[path], &|path| {
        asked.borrow_mut().push(path.to_vec());
        phase_costs.get(path).copied()
    });
    // Every exchange is asked for by its path, the last one has no cost.
    assert_eq!(
        asked.into_inner(),
        vec![vec![1], vec![2, 0], vec![2, 2, 0], vec![4]]
    );
    // Compute: 50 once, 20 three times; four compute steps executed.
    assert_eq!(estimate.compute_cycles, 50 + 3 * 20);
    assert_eq!(estimate.compute_steps, 1 + 3);
    // Exchanges: 1,000 once, 500 three times, 100 six times, 0 once.
    assert_eq!(estimate.exchange_cycles, 1_000 + 3 * 500 + 6 * 100);
    assert_eq!(estimate.barriers, 1 + 3 + 6 + 1);
    // 288 cycles of setup and sync per executed phase.
    assert_eq!(estimate.sync_cycles, 11 * 288);
    assert_eq!(estimate.patch_cycles, 3 * 162 + 6 * 54);
    let total = 110 + 3_100 + 3_168 + 810;
    assert_eq!(estimate.total_cycles, total);
    assert!((estimate.milliseconds - total as f64 / 1.5e6).abs() < 1e-12);
}

#[test]
fn step_loads_are_keyed_by_path_for_one_execution() {
    let loads = compute_step_loads(&nested_program(), 2);
    let mut paths: Vec<&Vec<u32>> = loads.keys().collect();
    paths.sort();
    assert_eq!(paths, vec![&vec![0], &vec![2, 1]]);
    // One execution each (the Repeat does not multiply a load).
    assert_eq!(loads[&vec![0]].cycles, 11 + 256 + 120);
    assert_eq!(loads[&vec![2, 1]].cycles, 288 + 1);
    assert_eq!(loads[&vec![2, 1]].busy_tiles, 1);
}

#[test]
fn rotary_combine_and_cast_cost_their_operations_or_their_bytes() {
    // Rotary over 4 x 8 = 32 elements: 3 FP32 operations each (96 at 4:
    // 24 cycles) against 4 bytes each (128 at 8: 16).
    let rotary = Kernel::Rotary {
        input: operand(),
        output: operand(),
        groups: 1,
        rows: 4,
        cols: 8,
        first_row: 0,
        first_col: 0,
        head_dim: 8,
        grid: 2,
        class_token: false,
    };
    assert_eq!(kernel_cycles(&rotary), 11 + 24);
    // Combining 2 slices of 4 queries with dimension 6: 4 x (6 + 2) x 2 =
    // 64 values, 2 operations each (128 at 4: 32) against 4 bytes each
    // (256 at 8: 32).
    let combine = Kernel::AttentionCombine {
        local: location(),
        received: location(),
        slice_bytes: 128,
        count: 2,
        output: operand(),
        groups: 1,
        stride_groups: 1,
        queries: 4,
        dimension: 6,
    };
    assert_eq!(kernel_cycles(&combine), 11 + 32);
    // FP16 to FP32 over 4 x 8 = 32 elements: 32 operations (8 cycles)
    // against 2 + 4 bytes each (192 at 8: 24).
    let cast = Kernel::Cast {
        input: operand(),
        output: operand(),
        from: ElementType::F16,
        to: ElementType::F32,
        groups: 1,
        rows: 4,
        cols: 8,
    };
    assert_eq!(kernel_cycles(&cast), 11 + 24);
}
