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
mod operands;
mod rotary;

use super::memory::{KernelRead, KernelWrite, SimError};
use crate::expand::program::Kernel;

pub use rotary::{ROTARY_BASE, ROTARY_GRID_OFFSET, RotaryPlace, rotary_angle, rotate_row};

/// What a kernel run noticed about its values: how many activations it
/// rounded to FP8 for an FP8 x FP8 product (a product casting its FP16
/// block, an attention casting its value block for an FP8 `PV` product,
/// or a producer writing FP8 for such products; attention's probabilities,
/// which cannot saturate, are not counted), and how many of those were
/// beyond the format's range at their scale (saturated to +-240 x 2^scale).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelNotes {
    pub fp8_activations: u64,
    pub saturated_activations: u64,
}

impl std::ops::AddAssign for KernelNotes {
    fn add_assign(&mut self, other: KernelNotes) {
        self.fp8_activations += other.fp8_activations;
        self.saturated_activations += other.saturated_activations;
    }
}

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
