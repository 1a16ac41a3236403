//! Exact reference semantics of every kernel on allocation-relative memory:
//! FP8 x FP16 matrix products with the plan's accumulation precision, the
//! reduce-scatter sum with bias, LayerNorm (FP32 statistics), GELU (both
//! forms), residual add, 2D rotary, attention (materialized or flash) and
//! casts. Activations are rounded to FP16 on every write, as the device
//! stores them.
//!
//! One implementation shared by every executor of programs (the low-program
//! interpreter and the package simulator). It must not know about layouts
//! or the graph.
//!
//! `execute` dispatches by kind to one function per kernel, by family:
//! `matmul` (matrix products, reduce-bias), `blockwise` (LayerNorm, GELU,
//! add, cast), `rotary`, `attention` (whole, partial, combine); `operands`
//! reads and writes their blocks.

mod attention;
mod blockwise;
mod matmul;
mod notes;
mod operands;
mod rotary;

use super::memory::{KernelRead, KernelWrite, SimError};
use crate::expand::program::Kernel;

pub use notes::KernelNotes;
pub use rotary::{ROTARY_BASE, ROTARY_GRID_OFFSET, RotaryPlace, rotary_angle, rotate_row};

/// Runs one kernel. `fp8_table` decodes weight codes at the program's scale.
pub fn execute(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
    fp8_table: &[f32; 256],
) -> Result<KernelNotes, SimError> {
    let nothing = |result: Result<(), SimError>| result.map(|()| KernelNotes::default());
    match kernel {
        Kernel::MatMul { .. } => matmul::matmul(kernel, reader, writer, fp8_table),
        Kernel::ReduceBias { .. } => nothing(matmul::reduce_bias(kernel, reader, writer)),
        Kernel::LayerNorm { .. } => blockwise::layer_norm(kernel, reader, writer),
        Kernel::Gelu { .. } => blockwise::gelu(kernel, reader, writer),
        Kernel::Add { .. } => nothing(blockwise::add(kernel, reader, writer)),
        Kernel::Rotary { .. } => nothing(rotary::rotary(kernel, reader, writer)),
        Kernel::Attention { .. } => attention::attention(kernel, reader, writer),
        Kernel::AttentionPartial { .. } => attention::attention_partial(kernel, reader, writer),
        Kernel::AttentionCombine { .. } => attention::attention_combine(kernel, reader, writer),
        Kernel::Cast { .. } => nothing(blockwise::cast(kernel, reader, writer)),
    }
}

#[cfg(test)]
mod tests;
