//! The matrix-product kernels: an FP16 block (rounded to FP8 at its scale
//! first when the product's inputs are FP8) times an FP8 weight block with
//! the plan's accumulation precision (reading only the valid extents, the
//! rest of both blocks zero), written as partial sums or as the final FP16
//! output with bias; and the reduce-scatter sum of partial slices with bias.

use super::notes::KernelNotes;
use super::operands::{
    other_kind, partial_type, read, read_activation, read_weight, round_all, round_to_fp8, write,
};
use crate::expand::program::{ElementType, Kernel, MatMulOutput, Operand};
use crate::numerics::dot::{
    Accumulation, ActivationStore, ProductInputs, matmul_block_transposed_b,
};
use crate::numerics::half_float::round_f16;
use crate::sim::memory::{KernelRead, KernelWrite, SimError};

/// `Kernel::MatMul`.
pub(super) fn matmul(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
    fp8_table: &[f32; 256],
) -> Result<KernelNotes, SimError> {
    let Kernel::MatMul {
        a,
        weight,
        output,
        rows,
        reduction,
        cols,
        valid_rows: a_rows,
        valid_reduction,
        valid_cols: weight_cols,
        accumulation,
        inputs,
        activations,
    } = *kernel
    else {
        return Err(other_kind("matrix product"));
    };
    let (m, k, n) = (rows as usize, reduction as usize, cols as usize);
    let (a_rows, valid_k, weight_cols) = (
        a_rows.min(rows) as usize,
        valid_reduction.min(reduction) as usize,
        weight_cols.min(cols) as usize,
    );
    // Only the valid extents are read; the rest of both blocks is zero.
    let mut a_values = read_a_block(reader, (a, activations), m, k, a_rows, valid_k)?;
    let mut notes = KernelNotes::default();
    if let (ProductInputs::Fp8 { activation_scale }, ActivationStore::F16) = (inputs, activations) {
        notes.fp8_activations = (a_rows * valid_k) as u64;
        notes.saturated_activations = round_to_fp8(&mut a_values, i32::from(activation_scale));
    }
    let weight_values = read_weight_block(reader, weight, n, k, valid_k, weight_cols, fp8_table)?;
    let mut product = vec![0.0f32; m * n];
    matmul_block_transposed_b(
        &a_values,
        k,
        &weight_values,
        k,
        m,
        k,
        n,
        accumulation,
        &mut product,
        n,
    )?;
    write_product(reader, writer, output, accumulation, rows, cols, product)?;
    Ok(notes)
}

/// The `m x k` activation block of `a` (FP16, or FP8 codes decoded at
/// their scale) whose first `a_rows` rows and `valid_k` columns are read,
/// the rest zero.
fn read_a_block(
    reader: &impl KernelRead,
    (a, store): (Operand, ActivationStore),
    m: usize,
    k: usize,
    a_rows: usize,
    valid_k: usize,
) -> Result<Vec<f32>, SimError> {
    let mut a_values = vec![0.0f32; m * k];
    if valid_k > 0 {
        let valid_a = read_activation(reader, a, store, (1, a_rows as u32, valid_k as u32))?;
        for (row, values) in valid_a.chunks_exact(valid_k).enumerate() {
            a_values[row * k..row * k + valid_k].copy_from_slice(values);
        }
    }
    Ok(a_values)
}

/// The FP8 weight block as `n` rows of `k` values, of which the first
/// `weight_cols` rows' first `valid_k` codes are read, the rest zero.
fn read_weight_block(
    reader: &impl KernelRead,
    weight: Operand,
    n: usize,
    k: usize,
    valid_k: usize,
    weight_cols: usize,
    fp8_table: &[f32; 256],
) -> Result<Vec<f32>, SimError> {
    let mut weight_values = vec![0.0f32; n * k];
    let valid_weight = read_weight(
        reader,
        weight,
        valid_k as u32,
        weight_cols as u32,
        fp8_table,
    )?;
    if valid_k > 0 {
        for (col, values) in valid_weight.chunks_exact(valid_k).enumerate() {
            weight_values[col * k..col * k + valid_k].copy_from_slice(values);
        }
    }
    Ok(weight_values)
}

/// The `rows x cols` product written as partial sums (rounded to FP16
/// under FP16 accumulation) or as the final output's valid extent plus bias.
fn write_product(
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
    output: MatMulOutput,
    accumulation: Accumulation,
    rows: u32,
    cols: u32,
    mut product: Vec<f32>,
) -> Result<(), SimError> {
    let n = cols as usize;
    match output {
        MatMulOutput::Partial(partial) => {
            if accumulation == Accumulation::F16 {
                round_all(&mut product);
            }
            write(
                writer,
                partial,
                partial_type(accumulation),
                1,
                rows,
                cols,
                &product,
            )
        }
        MatMulOutput::Final {
            output,
            bias,
            valid_rows,
            valid_cols,
        } => {
            let bias_values = read(reader, bias, ElementType::F16, 1, 1, valid_cols)?;
            let mut result = Vec::with_capacity((valid_rows * valid_cols) as usize);
            for row in 0..valid_rows as usize {
                for col in 0..valid_cols as usize {
                    result.push(round_f16(product[row * n + col] + bias_values[col]));
                }
            }
            write(
                writer,
                output,
                ElementType::F16,
                1,
                valid_rows,
                valid_cols,
                &result,
            )
        }
    }
}

/// `Kernel::ReduceBias`.
pub(super) fn reduce_bias(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<(), SimError> {
    let Kernel::ReduceBias {
        local,
        received,
        received_slice_bytes,
        count,
        partial,
        bias,
        output,
        rows,
        cols,
    } = *kernel
    else {
        return Err(other_kind("reduce-bias"));
    };
    let mut sum = read(reader, local, partial, 1, rows, cols)?;
    for slice in 0..count - 1 {
        let mut operand = received;
        operand.location.offset += slice * received_slice_bytes;
        let values = read(reader, operand, partial, 1, rows, cols)?;
        sum.iter_mut()
            .zip(values)
            .for_each(|(total, value)| *total += value);
    }
    let bias_values = read(reader, bias, ElementType::F16, 1, 1, cols)?;
    for (index, value) in sum.iter_mut().enumerate() {
        *value = round_f16(*value + bias_values[index % cols as usize]);
    }
    write(writer, output, ElementType::F16, 1, rows, cols, &sum)
}
