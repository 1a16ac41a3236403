//! Cycle estimates of compute steps from the kernel cost model fitted to
//! hardware measurements (`crate::target::kernel_cost`, CALIBRATION.md):
//! each kernel run is priced as the calls the hardware makes for it (a
//! matrix product of FP16 activations and FP8 weights widens the weights
//! and runs at the FP16 rate; attention is an FP16 `QK^T` product per head,
//! a `PV` product at its kernel's inputs (with FP8 inputs, after casting
//! its value block and writing FP8 probabilities) and a softmax; a product
//! whose activations arrive in FP8 casts nothing, and their producer pays
//! the fused cast's per-element work); a step lasts as long as its busiest
//! tile (the barrier waits for the slowest). Local copies and fills cost a call plus 8 bytes per
//! cycle.

use crate::expand::program::{Kernel, MatMulOutput, Step};
use crate::numerics::dot::{ActivationStore, ProductInputs};
use crate::target::costs;
use crate::target::kernel_cost::{
    CastInto, CostTable, KernelCall, MatrixInputs, call_cycles, composite,
};

/// The matrix unit's input precision of a product's inputs.
pub fn matrix_inputs(inputs: ProductInputs) -> MatrixInputs {
    match inputs {
        ProductInputs::Fp16 => MatrixInputs::Fp16,
        ProductInputs::Fp8 { .. } => MatrixInputs::Fp8,
    }
}

/// The cast of `elements` outputs to FP8 fused into their producer, when
/// it stores them so.
fn fused_cast(store: ActivationStore, elements: u64, table: &CostTable) -> u64 {
    match store {
        ActivationStore::F16 => 0,
        ActivationStore::Fp8 { .. } => composite::fused_cast(elements, table),
    }
}

/// Cycles of one kernel run on its tile.
pub fn kernel_cycles(kernel: &Kernel, table: &CostTable) -> u64 {
    match *kernel {
        Kernel::MatMul {
            rows,
            reduction,
            cols,
            output,
            inputs,
            activations,
            ..
        } => {
            let bias = match output {
                MatMulOutput::Final {
                    valid_rows,
                    valid_cols,
                    ..
                } => valid_rows as u64 * valid_cols as u64,
                MatMulOutput::Partial(_) => 0,
            };
            if activations.is_fp8() {
                return composite::product_of_fp8_activations(
                    rows as u64,
                    reduction as u64,
                    cols as u64,
                    bias,
                    table,
                );
            }
            composite::product(
                rows as u64,
                reduction as u64,
                cols as u64,
                bias,
                matrix_inputs(inputs),
                table,
            )
        }
        Kernel::ReduceBias {
            rows, cols, count, ..
        } => call_cycles(
            KernelCall::Reduce {
                elements: rows as u64 * cols as u64,
                parts: count as u64,
            },
            table,
        ),
        Kernel::LayerNorm {
            rows, cols, store, ..
        } => {
            call_cycles(
                KernelCall::LayerNorm {
                    rows: rows as u64,
                    width: cols as u64,
                },
                table,
            ) + fused_cast(store, rows as u64 * cols as u64, table)
        }
        Kernel::Gelu {
            groups,
            rows,
            cols,
            store,
            ..
        } => {
            let elements = groups as u64 * rows as u64 * cols as u64;
            call_cycles(KernelCall::Gelu { elements }, table) + fused_cast(store, elements, table)
        }
        Kernel::Add {
            groups, rows, cols, ..
        } => call_cycles(
            KernelCall::Add {
                elements: groups as u64 * rows as u64 * cols as u64,
            },
            table,
        ),
        // Rotation: a multiply and a multiply-add per element; priced as
        // two adds' work per element in one call (model: no measurement).
        Kernel::Rotary {
            groups, rows, cols, ..
        } => call_cycles(
            KernelCall::Add {
                elements: 2 * groups as u64 * rows as u64 * cols as u64,
            },
            table,
        ),
        Kernel::Attention {
            groups,
            queries,
            keys,
            dimension,
            store,
            value_product,
            ..
        } => {
            composite::attention(
                groups as u64,
                queries as u64,
                keys as u64,
                dimension as u64,
                matrix_inputs(value_product),
                table,
            ) + fused_cast(
                store,
                groups as u64 * queries as u64 * dimension as u64,
                table,
            )
        }
        Kernel::AttentionPartial {
            groups,
            queries,
            keys,
            dimension,
            value_product,
            ..
        } => composite::attention(
            groups as u64,
            queries as u64,
            keys as u64,
            dimension as u64,
            matrix_inputs(value_product),
            table,
        ),
        // Weighted partial statistics summed over `count` slices: priced as
        // a partial-sum reduction of the same elements (model).
        Kernel::AttentionCombine {
            groups,
            queries,
            dimension,
            count,
            store,
            ..
        } => {
            call_cycles(
                KernelCall::Reduce {
                    elements: groups as u64 * queries as u64 * (dimension as u64 + 2),
                    parts: count as u64,
                },
                table,
            ) + fused_cast(
                store,
                groups as u64 * queries as u64 * dimension as u64,
                table,
            )
        }
        Kernel::Cast {
            groups, rows, cols, ..
        } => call_cycles(
            KernelCall::Cast {
                rows: groups as u64 * rows as u64,
                cols: cols as u64,
                into: CastInto::RowMajor,
            },
            table,
        ),
    }
}

/// How a compute step loads the machine for one execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepLoad {
    /// Its busiest tile's cycles: what the step costs.
    pub cycles: u64,
    /// Tiles with any work.
    pub busy_tiles: u32,
    /// Every tile's busy cycles, summed.
    pub busy_tile_cycles: u64,
}

/// Cycles of a compute step (kernels, copies or fills): its busiest tile.
/// Exchanges, Repeats and checkpoints are not compute steps (0).
pub fn compute_step_cycles(step: &Step, tiles: u32, table: &CostTable) -> u64 {
    compute_step_load(step, tiles, table).cycles
}

/// Every tile's busy cycles in a compute step (kernels, copies or fills),
/// as the estimate charges them; all zero for exchanges, Repeats and
/// checkpoints.
pub fn compute_step_tile_cycles(step: &Step, tiles: u32, table: &CostTable) -> Vec<u64> {
    let mut per_tile = vec![0u64; tiles as usize];
    match step {
        Step::Kernels { runs, .. } => {
            for run in runs {
                per_tile[run.tile as usize] += kernel_cycles(&run.kernel, table);
            }
        }
        Step::Copies { copies, .. } => {
            for copy in copies {
                per_tile[copy.tile as usize] +=
                    costs::local_copy_cycles(copy.rows as u64 * copy.row_bytes as u64);
            }
        }
        Step::Fills { fills, .. } => {
            for fill in fills {
                per_tile[fill.tile as usize] +=
                    costs::local_copy_cycles(fill.rows as u64 * fill.row_bytes as u64);
            }
        }
        Step::Exchange { .. } | Step::Repeat { .. } | Step::Checkpoint { .. } => {}
    }
    per_tile
}

/// The load of a compute step; all zero for exchanges, Repeats and
/// checkpoints.
pub fn compute_step_load(step: &Step, tiles: u32, table: &CostTable) -> StepLoad {
    if matches!(
        step,
        Step::Exchange { .. } | Step::Repeat { .. } | Step::Checkpoint { .. }
    ) {
        return StepLoad::default();
    }
    let per_tile = compute_step_tile_cycles(step, tiles, table);
    StepLoad {
        cycles: per_tile.iter().copied().max().unwrap_or(0),
        busy_tiles: per_tile.iter().filter(|&&cycles| cycles > 0).count() as u32,
        busy_tile_cycles: per_tile.iter().sum(),
    }
}
