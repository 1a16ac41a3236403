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

use super::memory::{KernelRead, KernelWrite, SimError};
use crate::expand::program::{AttentionKind, ElementType, GeluForm, Kernel, MatMulOutput, Operand};
use crate::numerics::activation::{gelu_erf, gelu_tanh};
use crate::numerics::dot::{Accumulation, matmul_block, matmul_block_transposed_b};
use crate::numerics::half_float::{from_f16_bits, round_f16, to_f16_bits};
use crate::numerics::rows::{
    OnlineSoftmax, layer_norm_row, rotary_pair_in_place, softmax_row_in_place,
};

/// Rotary base frequency (model: the common 10,000 of RoPE).
pub const ROTARY_BASE: f32 = 10_000.0;

/// The angle by which rotary pair `pair` of token `token` turns: pairs in
/// the first half follow the patch's grid row, the second half its column;
/// a class token (token 0 when present) does not turn.
pub fn rotary_angle(token: u32, pair: u32, head_dim: u32, grid: u32, class_token: bool) -> f32 {
    if class_token && token == 0 {
        return 0.0;
    }
    let patch = token - u32::from(class_token);
    let (grid_row, grid_col) = (patch / grid.max(1), patch % grid.max(1));
    let quarter = (head_dim / 4).max(1);
    let (position, index) = if pair < quarter {
        (grid_row, pair)
    } else {
        (grid_col, pair - quarter)
    };
    let frequency = ROTARY_BASE.powf(-(index as f32) / quarter as f32);
    position as f32 * frequency
}

fn element_size(element: ElementType) -> usize {
    match element {
        ElementType::F32 => 4,
        ElementType::F16 => 2,
        ElementType::F8 => 1,
    }
}

/// Reads `groups x rows x cols` elements of `element` type through `operand`.
fn read(
    reader: &impl KernelRead,
    operand: Operand,
    element: ElementType,
    groups: u32,
    rows: u32,
    cols: u32,
) -> Result<Vec<f32>, SimError> {
    let size = element_size(element);
    let mut values = Vec::with_capacity((groups * rows * cols) as usize);
    for group in 0..groups {
        for row in 0..rows {
            let mut location = operand.location;
            location.offset += group * operand.matrix + row * operand.line;
            let bytes = reader.bytes(location, cols as usize * size)?;
            match element {
                ElementType::F16 => values.extend(
                    bytes
                        .chunks_exact(2)
                        .map(|pair| from_f16_bits(u16::from_le_bytes([pair[0], pair[1]]))),
                ),
                ElementType::F32 => values.extend(
                    bytes
                        .chunks_exact(4)
                        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]])),
                ),
                ElementType::F8 => {
                    return Err(SimError::Weights(
                        "FP8 operands are read through the weight path".into(),
                    ));
                }
            }
        }
    }
    Ok(values)
}

fn write(
    writer: &mut impl KernelWrite,
    operand: Operand,
    element: ElementType,
    groups: u32,
    rows: u32,
    cols: u32,
    values: &[f32],
) -> Result<(), SimError> {
    let size = element_size(element);
    let mut index = 0;
    for group in 0..groups {
        for row in 0..rows {
            let mut location = operand.location;
            location.offset += group * operand.matrix + row * operand.line;
            let bytes = writer.bytes_mut(location, cols as usize * size)?;
            let row_values = &values[index..index + cols as usize];
            index += cols as usize;
            match element {
                ElementType::F16 => {
                    for (chunk, &value) in bytes.chunks_exact_mut(2).zip(row_values) {
                        chunk.copy_from_slice(&to_f16_bits(value).to_le_bytes());
                    }
                }
                ElementType::F32 => {
                    for (chunk, &value) in bytes.chunks_exact_mut(4).zip(row_values) {
                        chunk.copy_from_slice(&value.to_le_bytes());
                    }
                }
                ElementType::F8 => return Err(SimError::Weights("kernels never write FP8".into())),
            }
        }
    }
    Ok(())
}

/// Column-major FP8 weight block as `cols` rows of `reduction` values.
fn read_weight(
    reader: &impl KernelRead,
    operand: Operand,
    reduction: u32,
    cols: u32,
    table: &[f32; 256],
) -> Result<Vec<f32>, SimError> {
    let mut values = Vec::with_capacity((reduction * cols) as usize);
    for col in 0..cols {
        let mut location = operand.location;
        location.offset += col * operand.line;
        let codes = reader.bytes(location, reduction as usize)?;
        values.extend(codes.iter().map(|&code| table[code as usize]));
    }
    Ok(values)
}

fn partial_type(accumulation: Accumulation) -> ElementType {
    match accumulation {
        Accumulation::F32 => ElementType::F32,
        Accumulation::F16 => ElementType::F16,
    }
}

fn round_all(values: &mut [f32]) {
    values
        .iter_mut()
        .for_each(|value| *value = round_f16(*value));
}

/// Runs one kernel. `fp8_table` decodes weight codes at the program's scale.
pub fn execute(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
    fp8_table: &[f32; 256],
) -> Result<(), SimError> {
    match *kernel {
        Kernel::MatMul {
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
        } => {
            let (m, k, n) = (rows as usize, reduction as usize, cols as usize);
            let (a_rows, valid_k, weight_cols) = (
                a_rows.min(rows) as usize,
                valid_reduction.min(reduction) as usize,
                weight_cols.min(cols) as usize,
            );
            // Only the valid extents are read; the rest of both blocks is zero.
            let mut a_values = vec![0.0f32; m * k];
            if valid_k > 0 {
                let valid_a = read(
                    reader,
                    a,
                    ElementType::F16,
                    1,
                    a_rows as u32,
                    valid_k as u32,
                )?;
                for (row, values) in valid_a.chunks_exact(valid_k).enumerate() {
                    a_values[row * k..row * k + valid_k].copy_from_slice(values);
                }
            }
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
                    )?;
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
                    )?;
                }
            }
        }
        Kernel::ReduceBias {
            local,
            received,
            received_slice_bytes,
            count,
            partial,
            bias,
            output,
            rows,
            cols,
        } => {
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
            write(writer, output, ElementType::F16, 1, rows, cols, &sum)?;
        }
        Kernel::LayerNorm {
            input,
            gamma,
            beta,
            output,
            rows,
            cols,
            epsilon,
        } => {
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
            write(writer, output, ElementType::F16, 1, rows, cols, &result)?;
        }
        Kernel::Gelu {
            input,
            output,
            groups,
            rows,
            cols,
            form,
        } => {
            let mut values = read(reader, input, ElementType::F16, groups, rows, cols)?;
            for value in values.iter_mut() {
                *value = round_f16(match form {
                    GeluForm::Tanh => gelu_tanh(*value),
                    GeluForm::Erf => gelu_erf(*value),
                });
            }
            write(
                writer,
                output,
                ElementType::F16,
                groups,
                rows,
                cols,
                &values,
            )?;
        }
        Kernel::Add {
            a,
            b,
            output,
            groups,
            rows,
            cols,
        } => {
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
            )?;
        }
        Kernel::Rotary {
            input,
            output,
            groups,
            rows,
            cols,
            first_row,
            first_col,
            head_dim,
            grid,
            class_token,
        } => {
            let mut values = read(reader, input, ElementType::F16, groups, rows, cols)?;
            let pairs = (cols / 2) as usize;
            let mut cosines = vec![0.0f32; pairs];
            let mut sines = vec![0.0f32; pairs];
            for (row_index, row) in values.chunks_exact_mut(cols as usize).enumerate() {
                let token = first_row + (row_index as u32 % rows);
                for pair in 0..pairs {
                    let angle = rotary_angle(
                        token,
                        first_col / 2 + pair as u32,
                        head_dim,
                        grid,
                        class_token,
                    );
                    cosines[pair] = angle.cos();
                    sines[pair] = angle.sin();
                }
                rotary_pair_in_place(row, &cosines, &sines)?;
            }
            round_all(&mut values);
            write(
                writer,
                output,
                ElementType::F16,
                groups,
                rows,
                cols,
                &values,
            )?;
        }
        Kernel::Attention {
            query,
            key,
            value,
            output,
            groups,
            queries,
            keys,
            dimension,
            scale,
            kind,
            ..
        } => {
            let d = dimension as usize;
            let mut result = Vec::with_capacity((groups * queries * dimension) as usize);
            for group in 0..groups {
                let offset = |operand: Operand| {
                    let mut shifted = operand;
                    shifted.location.offset += group * operand.matrix;
                    shifted
                };
                let q = read(
                    reader,
                    offset(query),
                    ElementType::F16,
                    1,
                    queries,
                    dimension,
                )?;
                let k = read(reader, offset(key), ElementType::F16, 1, keys, dimension)?;
                let v = read(reader, offset(value), ElementType::F16, 1, keys, dimension)?;
                let mut out = vec![0.0f32; queries as usize * d];
                attention_group(
                    &q,
                    &k,
                    &v,
                    queries as usize,
                    keys as usize,
                    d,
                    scale.get(),
                    kind,
                    &mut out,
                )?;
                round_all(&mut out);
                result.extend(out);
            }
            write(
                writer,
                output,
                ElementType::F16,
                groups,
                queries,
                dimension,
                &result,
            )?;
        }
        Kernel::AttentionPartial {
            query,
            key,
            value,
            partial,
            groups,
            stride_groups,
            queries,
            keys,
            dimension,
            scale,
            kind,
        } => {
            let d = dimension as usize;
            let row_bytes = (dimension + 2) * 4;
            for group in 0..groups {
                let offset = |operand: Operand| {
                    let mut shifted = operand;
                    shifted.location.offset += group * operand.matrix;
                    shifted
                };
                let q = read(
                    reader,
                    offset(query),
                    ElementType::F16,
                    1,
                    queries,
                    dimension,
                )?;
                let k = read(reader, offset(key), ElementType::F16, 1, keys, dimension)?;
                let v = read(reader, offset(value), ElementType::F16, 1, keys, dimension)?;
                for row in 0..queries as usize {
                    let statistics = partial_statistics(
                        &q[row * d..(row + 1) * d],
                        &k,
                        &v,
                        keys as usize,
                        d,
                        scale.get(),
                        kind,
                    )?;
                    let mut location = partial;
                    location.offset += (row as u32 * stride_groups + group) * row_bytes;
                    let bytes = writer.bytes_mut(location, row_bytes as usize)?;
                    for (chunk, value) in bytes.chunks_exact_mut(4).zip(statistics) {
                        chunk.copy_from_slice(&value.to_le_bytes());
                    }
                }
            }
        }
        Kernel::AttentionCombine {
            local,
            received,
            slice_bytes,
            count,
            output,
            groups,
            stride_groups,
            queries,
            dimension,
        } => {
            let d = dimension as usize;
            let row_bytes = (dimension + 2) * 4;
            let mut result = vec![0.0f32; (groups * queries) as usize * d];
            for group in 0..groups {
                for row in 0..queries {
                    let row_offset = (row * stride_groups + group) * row_bytes;
                    let mut parts = Vec::with_capacity(count as usize);
                    for part in 0..count {
                        let mut location = if part == 0 { local } else { received };
                        location.offset += row_offset
                            + if part == 0 {
                                0
                            } else {
                                (part - 1) * slice_bytes
                            };
                        let bytes = reader.bytes(location, row_bytes as usize)?;
                        parts.push(
                            bytes
                                .chunks_exact(4)
                                .map(|word| {
                                    f32::from_le_bytes([word[0], word[1], word[2], word[3]])
                                })
                                .collect::<Vec<f32>>(),
                        );
                    }
                    let target = &mut result[((group * queries + row) as usize) * d
                        ..((group * queries + row) as usize + 1) * d];
                    combine_statistics(&parts, target);
                }
            }
            write(
                writer,
                output,
                ElementType::F16,
                groups,
                queries,
                dimension,
                &result,
            )?;
        }
        Kernel::Cast {
            input,
            output,
            from,
            to,
            groups,
            rows,
            cols,
        } => {
            let values = read(reader, input, from, groups, rows, cols)?;
            write(writer, output, to, groups, rows, cols, &values)?;
        }
    }
    Ok(())
}

/// Partial statistics `[max, sum, weighted values...]` of one query row
/// against a block of keys. Materialized: weights `exp(score - max)` are
/// rounded to FP16 (the matrix unit's input) before use; flash: streamed
/// over sub-blocks, each block's FP16 weights times the values accumulated
/// in FP32 on the matrix unit (`OnlineSoftmax::absorb_matrix_unit`).
fn partial_statistics(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keys: usize,
    d: usize,
    scale: f32,
    kind: AttentionKind,
) -> Result<Vec<f32>, SimError> {
    let scores: Vec<f32> = (0..keys)
        .map(|key| {
            q.iter()
                .zip(&k[key * d..(key + 1) * d])
                .map(|(a, b)| a * b)
                .sum::<f32>()
                * scale
        })
        .collect();
    let mut statistics = vec![0.0f32; d + 2];
    match kind {
        AttentionKind::Materialized => {
            let maximum = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for (key, &score) in scores.iter().enumerate() {
                let weight = round_f16((score - maximum).exp());
                sum += weight;
                for (total, &value) in statistics[2..].iter_mut().zip(&v[key * d..(key + 1) * d]) {
                    *total += weight * value;
                }
            }
            statistics[0] = maximum;
            statistics[1] = sum;
        }
        AttentionKind::Flash { key_block } => {
            let block = key_block.max(1) as usize;
            let mut state = OnlineSoftmax::new(d);
            let mut start = 0;
            while start < keys {
                let end = keys.min(start + block);
                state.absorb_matrix_unit(&scores[start..end], &v[start * d..end * d])?;
                start = end;
            }
            let (maximum, sum, weighted) = state.statistics();
            statistics[0] = maximum;
            statistics[1] = sum;
            statistics[2..].copy_from_slice(weighted);
        }
    }
    Ok(statistics)
}

/// Normalised output from partial statistics of disjoint key blocks.
fn combine_statistics(parts: &[Vec<f32>], out: &mut [f32]) {
    let maximum = parts
        .iter()
        .filter(|part| part[1] > 0.0)
        .map(|part| part[0])
        .fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    out.iter_mut().for_each(|value| *value = 0.0);
    for part in parts.iter().filter(|part| part[1] > 0.0) {
        let weight = (part[0] - maximum).exp();
        sum += part[1] * weight;
        for (total, &value) in out.iter_mut().zip(&part[2..]) {
            *total += value * weight;
        }
    }
    let inverse = if sum > 0.0 { 1.0 / sum } else { 0.0 };
    out.iter_mut()
        .for_each(|value| *value = round_f16(*value * inverse));
}

/// Attention for one group on FP16 values as the matrix unit computes it:
/// QK^T from FP16 inputs accumulated in FP32, softmax in FP32, and the
/// probabilities (materialized) or block weights (flash) rounded to FP16
/// before the AV product, accumulated in FP32.
#[allow(clippy::too_many_arguments)]
fn attention_group(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    queries: usize,
    keys: usize,
    d: usize,
    scale: f32,
    kind: AttentionKind,
    out: &mut [f32],
) -> Result<(), SimError> {
    match kind {
        AttentionKind::Materialized => {
            let mut scores = vec![0.0f32; queries * keys];
            matmul_block_transposed_b(
                q,
                d,
                k,
                d,
                queries,
                d,
                keys,
                Accumulation::F32,
                &mut scores,
                keys,
            )?;
            for row in scores.chunks_exact_mut(keys) {
                softmax_row_in_place(row, scale)?;
            }
            round_all(&mut scores);
            matmul_block(
                &scores,
                keys,
                v,
                d,
                queries,
                keys,
                d,
                Accumulation::F32,
                out,
                d,
            )?;
        }
        AttentionKind::Flash { key_block } => {
            let block = key_block.max(1) as usize;
            let mut scores = vec![0.0f32; block];
            for query in 0..queries {
                let mut state = OnlineSoftmax::new(d);
                let q_row = &q[query * d..(query + 1) * d];
                let mut start = 0;
                while start < keys {
                    let end = keys.min(start + block);
                    for (slot, key) in (start..end).enumerate() {
                        let k_row = &k[key * d..(key + 1) * d];
                        scores[slot] =
                            q_row.iter().zip(k_row).map(|(a, b)| a * b).sum::<f32>() * scale;
                    }
                    state.absorb_matrix_unit(&scores[..end - start], &v[start * d..end * d])?;
                    start = end;
                }
                state.finish(&mut out[query * d..(query + 1) * d])?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "kernels_tests.rs"]
mod tests;
