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
        };
        let reader = Memory {
            bytes: memory.bytes.clone(),
            written: memory.written.clone(),
        };
        let result = execute(&kernel, &reader, &mut memory, &table);
        result.map(|()| memory.bytes[2].clone())
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
