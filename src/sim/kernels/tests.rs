//! Tests of the kernel semantics on hand-built memory: expected values
//! written down, not just "runs".

use std::borrow::Cow;

use super::*;
use crate::expand::program::{AllocationId, Location, MatMulOutput, Operand};
use crate::numerics::dot::Accumulation;
use crate::numerics::fp8::decode_table;
use crate::numerics::half_float::{round_f16, to_f16_bits};

/// Allocations as bytes with a written mask: reading a byte never
/// written is an error, as in the package simulator's strict mode.
struct Memory {
    bytes: Vec<Vec<u8>>,
    written: Vec<Vec<bool>>,
}

impl KernelRead for Memory {
    fn bytes(&self, location: Location, length: usize) -> Result<Cow<'_, [u8]>, SimError> {
        let (allocation, start) = (location.allocation.0 as usize, location.offset as usize);
        if self.written[allocation][start..start + length]
            .iter()
            .any(|&written| !written)
        {
            return Err(SimError::Weights(format!(
                "read of unwritten bytes {start}..{} of allocation {allocation}",
                start + length
            )));
        }
        Ok(Cow::Borrowed(
            &self.bytes[allocation][start..start + length],
        ))
    }
}

impl KernelWrite for Memory {
    fn bytes_mut(&mut self, location: Location, length: usize) -> Result<&mut [u8], SimError> {
        let (allocation, start) = (location.allocation.0 as usize, location.offset as usize);
        self.written[allocation][start..start + length].fill(true);
        Ok(&mut self.bytes[allocation][start..start + length])
    }
}

fn operand(allocation: u32, line: u32) -> Operand {
    Operand {
        location: Location {
            allocation: AllocationId(allocation),
            offset: 0,
        },
        line,
        matrix: 0,
    }
}

/// A matrix product reads only its valid extents (padding stays
/// unwritten, even poisoned) and gives bit for bit what zero-filled
/// padding gives.
#[test]
fn matmul_reads_only_valid_extents() {
    let (rows, reduction, cols) = (4u32, 8u32, 4u32);
    let (valid_rows, valid_reduction, valid_cols) = (3u32, 5u32, 2u32);
    let table = decode_table(-4);
    let run = |valid: [u32; 3], padding_written: bool| {
        let mut memory = Memory {
            bytes: vec![
                vec![0; (rows * reduction * 2) as usize],
                vec![0; (cols * reduction) as usize],
                vec![0; (rows * cols * 4) as usize],
            ],
            written: vec![
                vec![padding_written; (rows * reduction * 2) as usize],
                vec![padding_written; (cols * reduction) as usize],
                vec![false; (rows * cols * 4) as usize],
            ],
        };
        if !padding_written {
            // Poison: NaN halves and FP8 codes the kernel must not read.
            memory.bytes[0].fill(0xff);
            memory.bytes[1].fill(0xff);
        }
        for row in 0..valid_rows {
            for column in 0..valid_reduction {
                let value = round_f16((row * 7 + column) as f32 * 0.125 - 1.0);
                let at = ((row * reduction + column) * 2) as usize;
                memory.bytes[0][at..at + 2].copy_from_slice(&to_f16_bits(value).to_le_bytes());
                memory.written[0][at..at + 2].fill(true);
            }
        }
        for col in 0..valid_cols {
            for index in 0..valid_reduction {
                let at = (col * reduction + index) as usize;
                memory.bytes[1][at] = (0x30 + col * 9 + index) as u8;
                memory.written[1][at] = true;
            }
        }
        let kernel = Kernel::MatMul {
            a: operand(0, reduction * 2),
            weight: operand(1, reduction),
            output: MatMulOutput::Partial(operand(2, cols * 4)),
            rows,
            reduction,
            cols,
            valid_rows: valid[0],
            valid_reduction: valid[1],
            valid_cols: valid[2],
            accumulation: Accumulation::F32,
            inputs: crate::numerics::dot::ProductInputs::Fp16,
            activations: crate::numerics::dot::ActivationStore::F16,
        };
        let reader = Memory {
            bytes: memory.bytes.clone(),
            written: memory.written.clone(),
        };
        let result = execute(&kernel, &reader, &mut memory, &table);
        result.map(|_| memory.bytes[2].clone())
    };
    // Whole blocks read from zero-filled padding, as before.
    let filled = run([rows, reduction, cols], true).expect("zero-filled blocks");
    // Valid extents read from memory whose padding is never written.
    let valid = run([valid_rows, valid_reduction, valid_cols], false).expect("valid extents");
    assert_eq!(valid, filled);
    assert!(filled.iter().any(|&byte| byte != 0));
    // Reading whole blocks of that memory touches the unwritten padding.
    assert!(run([rows, reduction, cols], false).is_err());
}

/// An FP8-input product rounds each activation to the nearest F143 value
/// at the activation scale (saturating at 240 x 2^scale) before
/// multiplying; the weights are the same FP8 codes either way.
#[test]
fn fp8_inputs_round_the_activations_before_the_product() {
    // One row of two activations times one weight column of 1.0 (code 0x40
    // at weight scale 0): the product is the sum of the rounded activations.
    let table = decode_table(0);
    let one = crate::numerics::fp8::encode(1.0, 0);
    let run = |inputs: crate::numerics::dot::ProductInputs, activations: [f32; 2]| {
        let mut memory = Memory {
            bytes: vec![vec![0; 4], vec![one, one], vec![0; 4]],
            written: vec![vec![true; 4], vec![true; 2], vec![false; 4]],
        };
        for (index, value) in activations.into_iter().enumerate() {
            memory.bytes[0][index * 2..index * 2 + 2]
                .copy_from_slice(&to_f16_bits(round_f16(value)).to_le_bytes());
        }
        let kernel = Kernel::MatMul {
            a: operand(0, 4),
            weight: operand(1, 2),
            output: MatMulOutput::Partial(operand(2, 4)),
            rows: 1,
            reduction: 2,
            cols: 1,
            valid_rows: 1,
            valid_reduction: 2,
            valid_cols: 1,
            accumulation: Accumulation::F32,
            inputs,
            activations: crate::numerics::dot::ActivationStore::F16,
        };
        let reader = Memory {
            bytes: memory.bytes.clone(),
            written: memory.written.clone(),
        };
        let notes = execute(&kernel, &reader, &mut memory, &table).expect("product");
        let value = f32::from_le_bytes(memory.bytes[2][..4].try_into().unwrap());
        (value, notes.saturated_activations)
    };
    use crate::numerics::dot::ProductInputs;
    let fp8 = ProductInputs::Fp8 {
        activation_scale: -4,
    };
    // 0.3 in F143 at scale -4: 4.8 x 2^-4, and 4.8 rounds to 5.0 (the
    // spacing is 0.5 between 4 and 8): 0.3125. 1.0 is exact.
    assert_eq!(run(fp8, [0.3, 1.0]), (0.3125 + 1.0, 0));
    // FP16 inputs keep 0.3 as its FP16 value.
    assert_eq!(
        run(ProductInputs::Fp16, [0.3, 1.0]),
        (round_f16(0.3) + 1.0, 0)
    );
    // 100 saturates at 240 x 2^-4 = 15, and is counted.
    assert_eq!(run(fp8, [100.0, 0.0]), (15.0, 1));
}
