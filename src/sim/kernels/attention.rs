//! The attention kernels: whole attention of a query block against all its
//! keys (materialized or flash, as the matrix unit computes it), partial
//! softmax statistics against one key block, and the combination of the
//! partial statistics of disjoint key blocks into normalised FP16 outputs.
//!
//! `QK^T` multiplies FP16 queries and keys. The `PV` product multiplies
//! the probabilities (or the flash method's block weights) and the values
//! at the kernel's `value_product` inputs: FP16 both, or FP8 F143 both,
//! the kernel casting its FP16 value block to FP8 at the activation scale
//! once and each probability, rounded to FP16, to FP8 at
//! [`PROBABILITY_SCALE`] as the softmax writes it. Decoded FP8 values
//! carry their power-of-two scales, so the FP32 accumulation of their
//! products is the accumulation of the codes' products un-scaled, exactly.

use super::notes::KernelNotes;
use super::operands::{other_kind, read, round_to_fp8, write_activation};
use crate::expand::program::{AttentionKind, ElementType, Kernel, Location, Operand};
use crate::numerics::dot::{
    Accumulation, PROBABILITY_SCALE, ProductInputs, matmul_block, matmul_block_transposed_b,
};
use crate::numerics::fp8;
use crate::numerics::half_float::round_f16;
use crate::numerics::rows::{OnlineSoftmax, softmax_row_in_place};
use crate::sim::memory::{KernelRead, KernelWrite, SimError};

/// How the `PV` product's operands reach the matrix unit.
struct ValueProduct {
    /// With FP8 inputs: F143 codes decoded at [`PROBABILITY_SCALE`].
    probability_table: Option<[f32; 256]>,
    /// With FP8 inputs: the value block's scale.
    value_scale: Option<i32>,
}

impl ValueProduct {
    fn of(inputs: ProductInputs) -> ValueProduct {
        match inputs {
            ProductInputs::Fp16 => ValueProduct {
                probability_table: None,
                value_scale: None,
            },
            ProductInputs::Fp8 { activation_scale } => ValueProduct {
                probability_table: Some(fp8::decode_table(PROBABILITY_SCALE)),
                value_scale: Some(i32::from(activation_scale)),
            },
        }
    }

    /// A probability or block weight (in `[0, 1]`) as the matrix unit
    /// multiplies it: rounded to FP16, then with FP8 inputs to F143 at
    /// [`PROBABILITY_SCALE`] (nearest even; 1.0 is a code, so nothing
    /// saturates).
    fn probability(&self, weight: f32) -> f32 {
        let half = round_f16(weight);
        match &self.probability_table {
            None => half,
            Some(table) => table[usize::from(fp8::encode(half, PROBABILITY_SCALE))],
        }
    }

    /// With FP8 inputs, the kernel's cast of one group's FP16 value block
    /// to FP8 at its scale (saturating), counted in `notes`.
    fn cast_values(&self, values: &mut [f32], notes: &mut KernelNotes) {
        if let Some(scale) = self.value_scale {
            notes.fp8_activations += values.len() as u64;
            notes.saturated_activations += round_to_fp8(values, scale);
        }
    }
}

/// The FP16 query and key blocks and the value block (FP16, or rounded to
/// FP8 for an FP8 `PV` product) of one group.
struct GroupBlocks {
    query: Vec<f32>,
    key: Vec<f32>,
    value: Vec<f32>,
}

/// Reads group `group`'s `queries x dimension` query block and
/// `keys x dimension` key and value blocks (each operand shifted by its
/// matrix stride), the value block cast as `product` multiplies it.
#[allow(clippy::too_many_arguments)] // the operands, the block's extents and the cast
fn read_group(
    reader: &impl KernelRead,
    (query, key, value): (Operand, Operand, Operand),
    group: u32,
    queries: u32,
    keys: u32,
    dimension: u32,
    product: &ValueProduct,
    notes: &mut KernelNotes,
) -> Result<GroupBlocks, SimError> {
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
    let mut v = read(reader, offset(value), ElementType::F16, 1, keys, dimension)?;
    product.cast_values(&mut v, notes);
    Ok(GroupBlocks {
        query: q,
        key: k,
        value: v,
    })
}

/// `Kernel::Attention`.
pub(super) fn attention(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<KernelNotes, SimError> {
    let Kernel::Attention {
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
        store,
        value_product,
        ..
    } = *kernel
    else {
        return Err(other_kind("attention"));
    };
    let product = ValueProduct::of(value_product);
    let mut notes = KernelNotes::default();
    let d = dimension as usize;
    let mut result = Vec::with_capacity((groups * queries * dimension) as usize);
    for group in 0..groups {
        let blocks = read_group(
            reader,
            (query, key, value),
            group,
            queries,
            keys,
            dimension,
            &product,
            &mut notes,
        )?;
        let mut out = vec![0.0f32; queries as usize * d];
        attention_group(
            &blocks,
            (queries as usize, keys as usize, d),
            scale.get(),
            kind,
            &product,
            &mut out,
        )?;
        out.iter_mut().for_each(|value| *value = round_f16(*value));
        result.extend(out);
    }
    notes += write_activation(writer, output, store, (groups, queries, dimension), &result)?;
    Ok(notes)
}

/// `Kernel::AttentionPartial`.
pub(super) fn attention_partial(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<KernelNotes, SimError> {
    let Kernel::AttentionPartial {
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
        value_product,
    } = *kernel
    else {
        return Err(other_kind("partial attention"));
    };
    let product = ValueProduct::of(value_product);
    let mut notes = KernelNotes::default();
    let d = dimension as usize;
    let row_bytes = (dimension + 2) * 4;
    for group in 0..groups {
        let blocks = read_group(
            reader,
            (query, key, value),
            group,
            queries,
            keys,
            dimension,
            &product,
            &mut notes,
        )?;
        for row in 0..queries as usize {
            let statistics = partial_statistics(
                &blocks.query[row * d..(row + 1) * d],
                (&blocks.key, &blocks.value),
                (keys as usize, d),
                scale.get(),
                kind,
                &product,
            )?;
            let mut location = partial;
            location.offset += (row as u32 * stride_groups + group) * row_bytes;
            write_statistics(writer, location, row_bytes, &statistics)?;
        }
    }
    Ok(notes)
}

/// One row of partial statistics, FP32, at `location`.
fn write_statistics(
    writer: &mut impl KernelWrite,
    location: Location,
    row_bytes: u32,
    statistics: &[f32],
) -> Result<(), SimError> {
    let bytes = writer.bytes_mut(location, row_bytes as usize)?;
    for (chunk, value) in bytes.chunks_exact_mut(4).zip(statistics) {
        chunk.copy_from_slice(&value.to_le_bytes());
    }
    Ok(())
}

/// `Kernel::AttentionCombine`.
pub(super) fn attention_combine(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<KernelNotes, SimError> {
    let Kernel::AttentionCombine {
        local,
        received,
        slice_bytes,
        count,
        output,
        groups,
        stride_groups,
        queries,
        dimension,
        store,
    } = *kernel
    else {
        return Err(other_kind("attention combine"));
    };
    let d = dimension as usize;
    let row_bytes = (dimension + 2) * 4;
    let mut result = vec![0.0f32; (groups * queries) as usize * d];
    for group in 0..groups {
        for row in 0..queries {
            let row_offset = (row * stride_groups + group) * row_bytes;
            let parts = read_partial_rows(
                reader,
                (local, received),
                slice_bytes,
                count,
                row_offset,
                row_bytes,
            )?;
            let target = &mut result[((group * queries + row) as usize) * d
                ..((group * queries + row) as usize + 1) * d];
            combine_statistics(&parts, target);
        }
    }
    write_activation(writer, output, store, (groups, queries, dimension), &result)
}

/// The `count` partial statistics of one row at `row_offset`: the first
/// from `local`, the others from `received`, `slice_bytes` apart.
fn read_partial_rows(
    reader: &impl KernelRead,
    (local, received): (Location, Location),
    slice_bytes: u32,
    count: u32,
    row_offset: u32,
    row_bytes: u32,
) -> Result<Vec<Vec<f32>>, SimError> {
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
                .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
                .collect::<Vec<f32>>(),
        );
    }
    Ok(parts)
}

/// Partial statistics `[max, sum, weighted values...]` of one query row
/// against a block of keys. Materialized: weights `exp(score - max)` are
/// rounded to the matrix unit's input (`ValueProduct::probability`)
/// before use; flash: streamed over sub-blocks, each block's rounded
/// weights times the values accumulated in FP32 on the matrix unit
/// (`OnlineSoftmax::absorb_matrix_unit_rounded`).
fn partial_statistics(
    q: &[f32],
    (k, v): (&[f32], &[f32]),
    (keys, d): (usize, usize),
    scale: f32,
    kind: AttentionKind,
    product: &ValueProduct,
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
                let weight = product.probability((score - maximum).exp());
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
                state.absorb_matrix_unit_rounded(
                    &scores[start..end],
                    &v[start * d..end * d],
                    |weight| product.probability(weight),
                )?;
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

/// Attention for one group as the matrix unit computes it: QK^T from
/// FP16 inputs accumulated in FP32, softmax in FP32, and the probabilities
/// (materialized) or block weights (flash) rounded to the `PV` product's
/// inputs (`ValueProduct::probability`) before it multiplies them by the
/// (already cast) values, accumulated in FP32.
fn attention_group(
    blocks: &GroupBlocks,
    (queries, keys, d): (usize, usize, usize),
    scale: f32,
    kind: AttentionKind,
    product: &ValueProduct,
    out: &mut [f32],
) -> Result<(), SimError> {
    let (q, k, v) = (&blocks.query, &blocks.key, &blocks.value);
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
            scores
                .iter_mut()
                .for_each(|weight| *weight = product.probability(*weight));
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
                    state.absorb_matrix_unit_rounded(
                        &scores[..end - start],
                        &v[start * d..end * d],
                        |weight| product.probability(weight),
                    )?;
                    start = end;
                }
                state.finish(&mut out[query * d..(query + 1) * d])?;
            }
        }
    }
    Ok(())
}
