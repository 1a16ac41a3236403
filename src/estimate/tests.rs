//! Tests of the estimate's compute costs and totals. Each program kernel is
//! charged as the calls the hardware makes for it, priced by the fitted
//! kernel cost table (`target::kernel_cost`, whose formulas are checked
//! against CALIBRATION.md's measurements on their own): the expected
//! figures below are written out from the table's constants by hand, term
//! by term. A local copy or fill costs a 378-cycle call plus 8 bytes per
//! cycle, a step is as long as its busiest tile, and each exchange phase
//! 255 cycles of setup and sync, all weighted by Repeat executions.

use std::cell::RefCell;
use std::collections::HashMap;

use super::compute::{compute_step_cycles, compute_step_load, kernel_cycles};
use super::*;
use crate::expand::program::{
    AllocationId, AttentionKind, Destination, ElementType, GeluForm, Kernel, KernelRun, LocalCopy,
    Location, MatMulOutput, Operand, Provenance, Real, Reason, TransferList, ZeroFill,
};
use crate::numerics::dot::Accumulation;
use crate::target::kernel_cost::{Constant, CostTable};

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
        inputs: crate::numerics::dot::ProductInputs::Fp16,
        activations: crate::numerics::dot::ActivationStore::F16,
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

fn table() -> CostTable {
    CostTable::shipped()
}

fn constant(constant: Constant) -> f64 {
    table().get(constant)
}

fn cycles(kernel: &Kernel) -> u64 {
    kernel_cycles(kernel, &table())
}

/// The matrix unit's work and fitted terms of one FP16 product call of
/// `rows` rows through `panels` K16 x C16 panels of `col_panels` columns.
fn fp16_product(rows: u64, panels: u64, col_panels: u64) -> u64 {
    (rows as f64 * panels as f64 * 4.0
        + constant(Constant::MatMulCall)
        + panels as f64 * constant(Constant::MatMulPerPanel)
        + (rows * col_panels) as f64 * constant(Constant::MatMulPerRowPanel))
    .round() as u64
}

/// One vector call over `count` units at `per`.
fn vector_call(count: u64, per: Constant) -> u64 {
    (constant(Constant::VectorCall) + count as f64 * constant(per)).round() as u64
}

#[test]
fn a_matrix_product_widens_its_weights_and_runs_at_the_fp16_rate() {
    // 32 x 64 x 16: FP8 weights widened into 64 x 16 = 1,024 FP16 panel
    // elements (a cast call), then 4 K16 x C16 panels: 32 rows x 4 panels
    // x 4 cycles = 512 matrix-unit cycles plus the call, panel and
    // row-panel terms; the bias over 30 x 16 = 480 written elements at the
    // add rate, without a call of its own.
    let widening = vector_call(1_024, Constant::CastPanelsPerElement);
    let product = fp16_product(32, 4, 1);
    let bias = (480.0 * constant(Constant::AddPerElement)).round() as u64;
    assert_eq!(
        cycles(&matmul(final_output(30, 16))),
        product + widening + bias
    );
    // Partial sums add no bias.
    assert_eq!(
        cycles(&matmul(MatMulOutput::Partial(operand()))),
        product + widening
    );
    // A small block still fills whole panels: 3 x 4 x 2 is one panel.
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
        inputs: crate::numerics::dot::ProductInputs::Fp16,
        activations: crate::numerics::dot::ActivationStore::F16,
    };
    let bias = (6.0 * constant(Constant::AddPerElement)).round() as u64;
    assert_eq!(
        cycles(&small),
        fp16_product(3, 1, 1) + vector_call(8, Constant::CastPanelsPerElement) + bias
    );
}

#[test]
fn attention_is_two_fp16_products_per_head_and_one_softmax() {
    // Two heads of 16 queries over 16 keys, dimension 16: per head QK^T
    // (16 rows through 1 x 1 panels) and AV (the same), and one softmax of
    // 32 rows over 16 keys: split over the workers, ceil(32 / 6) = 6 rows
    // of 16 keys on the busiest worker (cheaper than 32 segmented rows).
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
        store: crate::numerics::dot::ActivationStore::F16,
        value_product: crate::numerics::dot::ProductInputs::Fp16,
    };
    let softmax = vector_call(6 * 16, Constant::SoftmaxPerWorkerElement);
    assert_eq!(cycles(&attention), 2 * 2 * fp16_product(16, 1, 1) + softmax);
    // One head of dimension 8 against 40 keys: QK^T is 16 rows through
    // ceil(8/16) x ceil(40/16) = 3 panels of 3 column panels, AV 16 rows
    // through ceil(40/16) x ceil(8/16) = 3 panels of 1 column panel; the
    // softmax of 16 rows x 40 keys splits 3 rows onto the busiest worker.
    let partial = Kernel::AttentionPartial {
        query: operand(),
        key: operand(),
        value: operand(),
        partial: location(),
        groups: 1,
        stride_groups: 1,
        queries: 16,
        keys: 40,
        dimension: 8,
        scale: Real::new(0.25),
        kind: AttentionKind::Flash { key_block: 16 },
        value_product: crate::numerics::dot::ProductInputs::Fp16,
    };
    assert_eq!(
        cycles(&partial),
        fp16_product(16, 3, 3)
            + fp16_product(16, 3, 1)
            + vector_call(3 * 40, Constant::SoftmaxPerWorkerElement)
    );
}

#[test]
fn an_fp8_value_product_runs_at_the_fp8_rate_after_its_casts() {
    // The partial attention of the test above with FP8 `PV` inputs: QK^T
    // as before at FP16; PV 16 rows through ceil(40/32) x ceil(8/16) = 2
    // K32 x C16 panels (4 cycles per row per panel at 128 MACs per cycle,
    // as an FP16 panel at 64); the value block's 40 x 8 cast into panels
    // (a call) and the 16 x 40 probabilities written in FP8 by the
    // softmax (the fused cast's per-element work, no call).
    let partial = |value_product| Kernel::AttentionPartial {
        query: operand(),
        key: operand(),
        value: operand(),
        partial: location(),
        groups: 1,
        stride_groups: 1,
        queries: 16,
        keys: 40,
        dimension: 8,
        scale: Real::new(0.25),
        kind: AttentionKind::Flash { key_block: 16 },
        value_product,
    };
    let fp8 = partial(crate::numerics::dot::ProductInputs::Fp8 {
        activation_scale: -3,
    });
    let probabilities = (16.0 * 40.0 * constant(Constant::CastRowMajorPerElement)).round() as u64;
    assert_eq!(
        cycles(&fp8),
        fp16_product(16, 3, 3)
            + fp16_product(16, 2, 1)
            + vector_call(3 * 40, Constant::SoftmaxPerWorkerElement)
            + vector_call(40 * 8, Constant::CastPanelsPerElement)
            + probabilities
    );
    // Half the PV MACs at the FP8 rate, the QK^T half at FP16.
    let macs = super::breakdown::kernel_matrix_macs(&fp8);
    assert_eq!((macs.fp8, macs.fp16), (16 * 40 * 8, 16 * 40 * 8));
    let fp16 = partial(crate::numerics::dot::ProductInputs::Fp16);
    let macs = super::breakdown::kernel_matrix_macs(&fp16);
    assert_eq!((macs.fp8, macs.fp16), (0, 2 * 16 * 40 * 8));
}

#[test]
fn vector_kernels_are_one_call_of_their_family() {
    let layer_norm = Kernel::LayerNorm {
        input: operand(),
        gamma: operand(),
        beta: operand(),
        output: operand(),
        rows: 4,
        cols: 64,
        epsilon: Real::new(1e-6),
        store: crate::numerics::dot::ActivationStore::F16,
    };
    assert_eq!(
        cycles(&layer_norm),
        vector_call(256, Constant::LayerNormPerElement)
    );
    let add = Kernel::Add {
        a: operand(),
        b: operand(),
        output: operand(),
        groups: 1,
        rows: 4,
        cols: 16,
    };
    assert_eq!(cycles(&add), vector_call(64, Constant::AddPerElement));
    let gelu = Kernel::Gelu {
        input: operand(),
        output: operand(),
        groups: 2,
        rows: 2,
        cols: 8,
        form: GeluForm::Tanh,
        store: crate::numerics::dot::ActivationStore::F16,
    };
    assert_eq!(cycles(&gelu), vector_call(32, Constant::GeluPerElement));
    // Reduce-bias of 3 slices over 2 x 8 = 16 elements: the output
    // elements and the partial elements, whatever the partials' type.
    let expected_reduce = (constant(Constant::VectorCall)
        + 16.0 * constant(Constant::ReducePerElement)
        + 48.0 * constant(Constant::ReducePerPartialElement))
    .round() as u64;
    for (partial, slice_bytes) in [(ElementType::F32, 64), (ElementType::F16, 32)] {
        let reduce = Kernel::ReduceBias {
            local: operand(),
            received: operand(),
            received_slice_bytes: slice_bytes,
            count: 3,
            partial,
            bias: operand(),
            output: operand(),
            rows: 2,
            cols: 8,
        };
        assert_eq!(cycles(&reduce), expected_reduce);
    }
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
    // 3 rows of 100 bytes: 378 + 300 / 8 (rounded up) = 378 + 38.
    let copies = Step::Copies {
        provenance: provenance(),
        copies: vec![copy(1, 3, 100)],
    };
    assert_eq!(compute_step_cycles(&copies, 4, &table()), 416);
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
    assert_eq!(compute_step_cycles(&fills, 4, &table()), 379);
}

#[test]
fn a_step_lasts_as_long_as_its_busiest_tile() {
    // Tile 0 runs two products, tile 2 one.
    let whole = cycles(&matmul(final_output(30, 16)));
    let partial = cycles(&matmul(MatMulOutput::Partial(operand())));
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
    let load = compute_step_load(&step, 4, &table());
    assert_eq!(load.cycles, whole + partial);
    assert_eq!(load.busy_tiles, 2);
    assert_eq!(load.busy_tile_cycles, 2 * whole + partial);
    // Two copies on one tile add up: 2 x (378 + 10) = 776; one on another
    // tile: 378 + 1 = 379.
    let copies = Step::Copies {
        provenance: provenance(),
        copies: vec![copy(3, 1, 80), copy(1, 1, 8), copy(3, 2, 40)],
    };
    let load = compute_step_load(&copies, 4, &table());
    assert_eq!(load.cycles, 776);
    assert_eq!(load.busy_tiles, 2);
    assert_eq!(load.busy_tile_cycles, 776 + 379);
    // Exchanges and checkpoints are not compute.
    assert_eq!(
        compute_step_load(&exchange(), 4, &table()),
        compute::StepLoad::default()
    );
    assert_eq!(
        compute_step_load(&Step::Checkpoint { name: 0 }, 4, &table()),
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
    // 255 cycles of setup and sync per executed phase.
    assert_eq!(estimate.sync_cycles, 11 * 255);
    assert_eq!(estimate.patch_cycles, 3 * 162 + 6 * 54);
    let total = 110 + 3_100 + 2_805 + 810;
    assert_eq!(estimate.total_cycles, total);
    assert!((estimate.milliseconds - total as f64 / 1.5e6).abs() < 1e-12);
}

#[test]
fn step_loads_are_keyed_by_path_for_one_execution() {
    let loads = compute_step_loads(&nested_program(), 2, &table());
    let mut paths: Vec<&Vec<u32>> = loads.keys().collect();
    paths.sort();
    assert_eq!(paths, vec![&vec![0], &vec![2, 1]]);
    // One execution each (the Repeat does not multiply a load).
    assert_eq!(
        loads[&vec![0]].cycles,
        cycles(&matmul(final_output(30, 16)))
    );
    assert_eq!(loads[&vec![2, 1]].cycles, 378 + 1);
    assert_eq!(loads[&vec![2, 1]].busy_tiles, 1);
}

#[test]
fn rotary_combine_and_cast_are_priced_as_their_nearest_measured_family() {
    // Rotary over 4 x 8 = 32 elements: a multiply and a multiply-add per
    // element, two adds' work each.
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
    assert_eq!(cycles(&rotary), vector_call(64, Constant::AddPerElement));
    // Combining 2 slices of 4 queries with dimension 6: a reduction of
    // 4 x (6 + 2) = 32 elements over 2 partials.
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
        store: crate::numerics::dot::ActivationStore::F16,
    };
    let expected = (constant(Constant::VectorCall)
        + 32.0 * constant(Constant::ReducePerElement)
        + 64.0 * constant(Constant::ReducePerPartialElement))
    .round() as u64;
    assert_eq!(cycles(&combine), expected);
    // A cast over 4 x 8 = 32 elements, row-major.
    let cast = Kernel::Cast {
        input: operand(),
        output: operand(),
        from: ElementType::F16,
        to: ElementType::F32,
        groups: 1,
        rows: 4,
        cols: 8,
    };
    assert_eq!(
        cycles(&cast),
        vector_call(32, Constant::CastRowMajorPerElement)
    );
}
