//! The kernels computed independently on every element or row of a block:
//! LayerNorm (FP32 statistics), GELU (both forms), the residual add and
//! casts between element types. LayerNorm and GELU write FP16, or FP8 when
//! FP8 products read their output.

use super::notes::KernelNotes;
use super::operands::{other_kind, read, round_all, write, write_activation};
use crate::expand::program::{ElementType, GeluForm, Kernel};
use crate::numerics::activation::{gelu_erf, gelu_tanh};
use crate::numerics::half_float::round_f16;
use crate::numerics::rows::layer_norm_row;
use crate::sim::memory::{KernelRead, KernelWrite, SimError};

/// `Kernel::LayerNorm`.
pub(super) fn layer_norm(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<KernelNotes, SimError> {
    let Kernel::LayerNorm {
        input,
        gamma,
        beta,
        output,
        rows,
        cols,
        epsilon,
        store,
    } = *kernel
    else {
        return Err(other_kind("LayerNorm"));
    };
    let values = read(reader, input, ElementType::F16, 1, rows, cols)?;
    let gamma = read(reader, gamma, ElementType::F16, 1, 1, cols)?;
    let beta = read(reader, beta, ElementType::F16, 1, 1, cols)?;
    let mut result = vec![0.0f32; values.len()];
    for (row, out) in values
        .chunks_exact(cols as usize)
        .zip(result.chunks_exact_mut(cols as usize))
    {
        layer_norm_row(row, &gamma, &beta, epsilon.get(), out)?;
    }
    round_all(&mut result);
    write_activation(writer, output, store, (1, rows, cols), &result)
}

/// `Kernel::Gelu`.
pub(super) fn gelu(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<KernelNotes, SimError> {
    let Kernel::Gelu {
        input,
        output,
        groups,
        rows,
        cols,
        form,
        store,
    } = *kernel
    else {
        return Err(other_kind("GELU"));
    };
    let mut values = read(reader, input, ElementType::F16, groups, rows, cols)?;
    for value in values.iter_mut() {
        *value = round_f16(match form {
            GeluForm::Tanh => gelu_tanh(*value),
            GeluForm::Erf => gelu_erf(*value),
        });
    }
    write_activation(writer, output, store, (groups, rows, cols), &values)
}

/// `Kernel::Add`.
pub(super) fn add(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<(), SimError> {
    let Kernel::Add {
        a,
        b,
        output,
        groups,
        rows,
        cols,
    } = *kernel
    else {
        return Err(other_kind("add"));
    };
    let mut values = read(reader, a, ElementType::F16, groups, rows, cols)?;
    let other = read(reader, b, ElementType::F16, groups, rows, cols)?;
    values
        .iter_mut()
        .zip(other)
        .for_each(|(value, addend)| *value = round_f16(*value + addend));
    write(
        writer,
        output,
        ElementType::F16,
        groups,
        rows,
        cols,
        &values,
    )
}

/// `Kernel::Cast`.
pub(super) fn cast(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<(), SimError> {
    let Kernel::Cast {
        input,
        output,
        from,
        to,
        groups,
        rows,
        cols,
    } = *kernel
    else {
        return Err(other_kind("cast"));
    };
    let values = read(reader, input, from, groups, rows, cols)?;
    write(writer, output, to, groups, rows, cols, &values)
}
