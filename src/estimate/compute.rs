//! Cycle estimates of compute steps from the target's rates: each kernel run
//! costs its matrix-unit or vector-unit work plus a launch (matrix products
//! at FP8, attention's `QK^T` and `AV` at FP16 on the matrix unit); a step lasts as
//! long as its busiest tile (the barrier waits for the slowest). Local copies
//! and fills cost a call plus 8 bytes per cycle.

use crate::expand::program::{ElementType, Kernel, MatMulOutput, Step};
use crate::target::costs::{
    self, KERNEL_LAUNCH_CYCLES, MatrixPrecision, VECTOR_TRANSCENDENTAL_OPS_PER_CYCLE,
    VectorPrecision,
};

fn element_bytes(element: ElementType) -> u64 {
    match element {
        ElementType::F32 => 4,
        ElementType::F16 => 2,
        ElementType::F8 => 1,
    }
}

/// Cycles of one kernel run on its tile.
pub fn kernel_cycles(kernel: &Kernel) -> u64 {
    match *kernel {
        Kernel::MatMul {
            rows,
            reduction,
            cols,
            output,
            ..
        } => {
            let macs = rows as u64 * reduction as u64 * cols as u64;
            let bias = match output {
                MatMulOutput::Final {
                    valid_rows,
                    valid_cols,
                    ..
                } => valid_rows as u64 * valid_cols as u64,
                MatMulOutput::Partial(_) => 0,
            };
            KERNEL_LAUNCH_CYCLES
                + costs::matrix_cycles(macs, MatrixPrecision::Float8)
                + bias.div_ceil(costs::VECTOR_F32_OPS_PER_CYCLE)
        }
        Kernel::ReduceBias {
            rows,
            cols,
            count,
            partial,
            ..
        } => {
            let elements = rows as u64 * cols as u64;
            costs::elementwise_cycles(
                elements * count as u64,
                elements * (count as u64 * element_bytes(partial) + 2),
                VectorPrecision::Float32,
            )
        }
        Kernel::LayerNorm { rows, cols, .. } => {
            let elements = rows as u64 * cols as u64;
            // Mean, variance, normalise, scale, shift.
            costs::elementwise_cycles(elements * 5, elements * 4, VectorPrecision::Float32)
        }
        Kernel::Gelu {
            groups, rows, cols, ..
        } => {
            let elements = groups as u64 * rows as u64 * cols as u64;
            KERNEL_LAUNCH_CYCLES + elements.div_ceil(VECTOR_TRANSCENDENTAL_OPS_PER_CYCLE)
        }
        Kernel::Add {
            groups, rows, cols, ..
        } => {
            let elements = groups as u64 * rows as u64 * cols as u64;
            costs::elementwise_cycles(elements, elements * 6, VectorPrecision::Float16)
        }
        Kernel::Rotary {
            groups, rows, cols, ..
        } => {
            let elements = groups as u64 * rows as u64 * cols as u64;
            costs::elementwise_cycles(elements * 3, elements * 4, VectorPrecision::Float32)
        }
        Kernel::Attention {
            groups,
            queries,
            keys,
            dimension,
            ..
        }
        | Kernel::AttentionPartial {
            groups,
            queries,
            keys,
            dimension,
            ..
        } => {
            let scores = groups as u64 * queries as u64 * keys as u64;
            let products = groups as u64
                * costs::attention_matrix_macs(queries as u64, keys as u64, dimension as u64);
            KERNEL_LAUNCH_CYCLES
                + costs::matrix_cycles(products, MatrixPrecision::Float16)
                + scores.div_ceil(VECTOR_TRANSCENDENTAL_OPS_PER_CYCLE)
        }
        Kernel::AttentionCombine {
            groups,
            queries,
            dimension,
            count,
            ..
        } => {
            let values = groups as u64 * queries as u64 * (dimension as u64 + 2) * count as u64;
            costs::elementwise_cycles(values * 2, values * 4, VectorPrecision::Float32)
        }
        Kernel::Cast {
            groups,
            rows,
            cols,
            to,
            ..
        } => {
            let elements = groups as u64 * rows as u64 * cols as u64;
            costs::elementwise_cycles(
                elements,
                elements * (2 + element_bytes(to)),
                VectorPrecision::Float32,
            )
        }
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
pub fn compute_step_cycles(step: &Step, tiles: u32) -> u64 {
    compute_step_load(step, tiles).cycles
}

/// The load of a compute step; all zero for exchanges, Repeats and
/// checkpoints.
pub fn compute_step_load(step: &Step, tiles: u32) -> StepLoad {
    let mut per_tile = vec![0u64; tiles as usize];
    match step {
        Step::Kernels { runs, .. } => {
            for run in runs {
                per_tile[run.tile as usize] += kernel_cycles(&run.kernel);
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
        Step::Exchange { .. } | Step::Repeat { .. } | Step::Checkpoint { .. } => {
            return StepLoad::default();
        }
    }
    StepLoad {
        cycles: per_tile.iter().copied().max().unwrap_or(0),
        busy_tiles: per_tile.iter().filter(|&&cycles| cycles > 0).count() as u32,
        busy_tile_cycles: per_tile.iter().sum(),
    }
}
