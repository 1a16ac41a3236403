//! How kernels reach their operands: FP16 and FP32 blocks read and written
//! row by row through an `Operand`'s line and matrix strides, FP8 weight
//! blocks decoded through the program's table, the element type of partial
//! sums, the FP16 rounding of every activation write, and the error of a
//! kernel handed to the semantics of another kind.

use super::notes::KernelNotes;
use crate::expand::program::{ElementType, Operand};
use crate::numerics::dot::{Accumulation, ActivationStore};
use crate::numerics::fp8;
use crate::numerics::half_float::{from_f16_bits, round_f16, to_f16_bits};
use crate::sim::memory::{KernelRead, KernelWrite, SimError};

fn element_size(element: ElementType) -> usize {
    match element {
        ElementType::F32 => 4,
        ElementType::F16 => 2,
        ElementType::F8 => 1,
    }
}

/// Reads `groups x rows x cols` elements of `element` type through `operand`.
pub(super) fn read(
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

/// Writes `groups x rows x cols` elements of `element` type through `operand`.
pub(super) fn write(
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

/// Writes FP16-rounded `values` as an activation stored in `store`: FP16,
/// or FP8 F143 codes at the store's scale (nearest even, saturating; the
/// cast fused into the producer). Returns what the rounding noticed.
pub(super) fn write_activation(
    writer: &mut impl KernelWrite,
    operand: Operand,
    store: ActivationStore,
    (groups, rows, cols): (u32, u32, u32),
    values: &[f32],
) -> Result<KernelNotes, SimError> {
    let ActivationStore::Fp8 { scale } = store else {
        write(
            writer,
            operand,
            ElementType::F16,
            groups,
            rows,
            cols,
            values,
        )?;
        return Ok(KernelNotes::default());
    };
    let scale = i32::from(scale);
    let largest = fp8::decode(fp8::F143_MAX_CODE, scale);
    let mut notes = KernelNotes::default();
    let mut index = 0;
    for group in 0..groups {
        for row in 0..rows {
            let mut location = operand.location;
            location.offset += group * operand.matrix + row * operand.line;
            let bytes = writer.bytes_mut(location, cols as usize)?;
            for (code, &value) in bytes.iter_mut().zip(&values[index..index + cols as usize]) {
                notes.saturated_activations += u64::from(value.abs() > largest);
                *code = fp8::encode(value, scale);
            }
            index += cols as usize;
        }
    }
    notes.fp8_activations = index as u64;
    Ok(notes)
}

/// Reads `groups x rows x cols` activations stored in `store` (FP8 codes
/// decoded at the store's scale).
pub(super) fn read_activation(
    reader: &impl KernelRead,
    operand: Operand,
    store: ActivationStore,
    (groups, rows, cols): (u32, u32, u32),
) -> Result<Vec<f32>, SimError> {
    let ActivationStore::Fp8 { scale } = store else {
        return read(reader, operand, ElementType::F16, groups, rows, cols);
    };
    let table = fp8::decode_table(i32::from(scale));
    let mut values = Vec::with_capacity((groups * rows * cols) as usize);
    for group in 0..groups {
        for row in 0..rows {
            let mut location = operand.location;
            location.offset += group * operand.matrix + row * operand.line;
            let codes = reader.bytes(location, cols as usize)?;
            values.extend(codes.iter().map(|&code| table[usize::from(code)]));
        }
    }
    Ok(values)
}

/// Column-major FP8 weight block as `cols` rows of `reduction` values.
pub(super) fn read_weight(
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

/// The element type partial sums accumulated in `accumulation` are stored in.
pub(super) fn partial_type(accumulation: Accumulation) -> ElementType {
    match accumulation {
        Accumulation::F32 => ElementType::F32,
        Accumulation::F16 => ElementType::F16,
    }
}

/// Rounds every value to FP16, as the device stores activations.
pub(super) fn round_all(values: &mut [f32]) {
    values
        .iter_mut()
        .for_each(|value| *value = round_f16(*value));
}

/// Rounds every activation to FP8 F143 at `scale` (nearest even,
/// saturating), as the cast before an FP8 x FP8 product does; returns how
/// many were beyond the largest magnitude, 240 x 2^scale.
pub(super) fn round_to_fp8(values: &mut [f32], scale: i32) -> u64 {
    let table = fp8::decode_table(scale);
    let largest = table[usize::from(fp8::F143_MAX_CODE)];
    let mut saturated = 0;
    for value in values {
        saturated += u64::from(value.abs() > largest);
        *value = table[usize::from(fp8::encode(*value, scale))];
    }
    saturated
}

/// The error of a kernel handed to the semantics of `expected` (never seen:
/// `execute` dispatches by kind).
pub(super) fn other_kind(expected: &'static str) -> SimError {
    SimError::KernelKind(expected)
}
