//! The attention kernels: whole attention of a query block against all its
//! keys (materialized or flash, as the matrix unit computes it), partial
//! softmax statistics against one key block, and the combination of the
//! partial statistics of disjoint key blocks into normalised FP16 outputs.

use super::KernelNotes;
use super::operands::{other_kind, read, round_all, write_activation};
use crate::expand::program::{AttentionKind, ElementType, Kernel, Location, Operand};
use crate::numerics::dot::{Accumulation, matmul_block, matmul_block_transposed_b};
use crate::numerics::half_float::round_f16;
use crate::numerics::rows::{OnlineSoftmax, softmax_row_in_place};
use crate::sim::memory::{KernelRead, KernelWrite, SimError};

/// The FP16 query, key and value blocks of one group.
struct GroupBlocks {
    query: Vec<f32>,
    key: Vec<f32>,
    value: Vec<f32>,
}

/// Reads group `group`'s `queries x dimension` query block and
/// `keys x dimension` key and value blocks (each operand shifted by its
/// matrix stride).
fn read_group(
    reader: &impl KernelRead,
    (query, key, value): (Operand, Operand, Operand),
    group: u32,
    queries: u32,
    keys: u32,
    dimension: u32,
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
    let v = read(reader, offset(value), ElementType::F16, 1, keys, dimension)?;
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
        ..
    } = *kernel
    else {
        return Err(other_kind("attention"));
    };
    let d = dimension as usize;
    let mut result = Vec::with_capacity((groups * queries * dimension) as usize);
    for group in 0..groups {
        let blocks = read_group(reader, (query, key, value), group, queries, keys, dimension)?;
        let mut out = vec![0.0f32; queries as usize * d];
        attention_group(
            &blocks.query,
            &blocks.key,
            &blocks.value,
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
    write_activation(writer, output, store, (groups, queries, dimension), &result)
}

/// `Kernel::AttentionPartial`.
pub(super) fn attention_partial(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<(), SimError> {
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
    } = *kernel
    else {
        return Err(other_kind("partial attention"));
    };
    let d = dimension as usize;
    let row_bytes = (dimension + 2) * 4;
    for group in 0..groups {
        let blocks = read_group(reader, (query, key, value), group, queries, keys, dimension)?;
        for row in 0..queries as usize {
            let statistics = partial_statistics(
                &blocks.query[row * d..(row + 1) * d],
                &blocks.key,
                &blocks.value,
                keys as usize,
                d,
                scale.get(),
                kind,
            )?;
            let mut location = partial;
            location.offset += (row as u32 * stride_groups + group) * row_bytes;
            write_statistics(writer, location, row_bytes, &statistics)?;
        }
    }
    Ok(())
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
