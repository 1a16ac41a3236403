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

/// One group's attention of `queries` FP16 query rows against `keys` key
/// and value rows of `dimension`, run whole (`Kernel::Attention`) or as
/// one key block's partial statistics combined alone
/// (`Kernel::AttentionPartial` then `Kernel::AttentionCombine`): the FP16
/// output and the kernels' notes.
struct AttentionCase {
    queries: u32,
    keys: u32,
    dimension: u32,
    query: Vec<f32>,
    key: Vec<f32>,
    value: Vec<f32>,
}

impl AttentionCase {
    fn random(seed: u64, queries: u32, keys: u32, dimension: u32) -> AttentionCase {
        let mut random = crate::numerics::test_random::TestRandom::new(seed);
        let mut half = |length: u32, range: f32| -> Vec<f32> {
            random
                .vector(length as usize, -range, range)
                .into_iter()
                .map(round_f16)
                .collect()
        };
        AttentionCase {
            queries,
            keys,
            dimension,
            query: half(queries * dimension, 2.0),
            key: half(keys * dimension, 2.0),
            value: half(keys * dimension, 3.0),
        }
    }

    fn halves(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&value| to_f16_bits(value).to_le_bytes())
            .collect()
    }

    fn run(
        &self,
        kind: crate::expand::program::AttentionKind,
        value_product: crate::numerics::dot::ProductInputs,
        partial: bool,
    ) -> (Vec<f32>, KernelNotes) {
        use crate::expand::program::Real;
        let (queries, keys, dimension) = (self.queries, self.keys, self.dimension);
        let line = dimension * 2;
        let partial_bytes = (queries * (dimension + 2) * 4) as usize;
        let output_bytes = (queries * line) as usize;
        let mut memory = Memory {
            bytes: vec![
                Self::halves(&self.query),
                Self::halves(&self.key),
                Self::halves(&self.value),
                vec![0; output_bytes],
                vec![0; partial_bytes],
            ],
            written: vec![
                vec![true; self.query.len() * 2],
                vec![true; self.key.len() * 2],
                vec![true; self.value.len() * 2],
                vec![false; output_bytes],
                vec![false; partial_bytes],
            ],
        };
        let scale = Real::new(1.0 / (dimension as f32).sqrt());
        let store = crate::numerics::dot::ActivationStore::F16;
        let kernels = if partial {
            vec![
                Kernel::AttentionPartial {
                    query: operand(0, line),
                    key: operand(1, line),
                    value: operand(2, line),
                    partial: operand(4, 0).location,
                    groups: 1,
                    stride_groups: 1,
                    queries,
                    keys,
                    dimension,
                    scale,
                    kind,
                    value_product,
                },
                Kernel::AttentionCombine {
                    local: operand(4, 0).location,
                    received: operand(4, 0).location,
                    slice_bytes: 0,
                    count: 1,
                    output: operand(3, line),
                    groups: 1,
                    stride_groups: 1,
                    queries,
                    dimension,
                    store,
                },
            ]
        } else {
            vec![Kernel::Attention {
                query: operand(0, line),
                key: operand(1, line),
                value: operand(2, line),
                output: operand(3, line),
                scratch: operand(4, 0).location,
                groups: 1,
                queries,
                keys,
                dimension,
                scale,
                kind,
                store,
                value_product,
            }]
        };
        let mut notes = KernelNotes::default();
        for kernel in kernels {
            let reader = Memory {
                bytes: memory.bytes.clone(),
                written: memory.written.clone(),
            };
            notes += execute(&kernel, &reader, &mut memory, &decode_table(0)).expect("attention");
        }
        let output = memory.bytes[3]
            .chunks_exact(2)
            .map(|bits| {
                crate::numerics::half_float::from_f16_bits(u16::from_le_bytes([bits[0], bits[1]]))
            })
            .collect();
        (output, notes)
    }
}

/// An FP8 `PV` product multiplies the probabilities rounded to F143 at
/// 2^-7 and the values rounded to F143 at their scale: two keys of equal
/// score (probabilities 0.5, exact in both formats) weigh values 0.3 and
/// 1.0; at scale -4, 0.3 is 4.8 x 2^-4 and rounds to 5 x 2^-4 = 0.3125.
#[test]
fn an_fp8_value_product_rounds_the_values_at_their_scale() {
    use crate::expand::program::AttentionKind;
    use crate::numerics::dot::ProductInputs;
    let case = AttentionCase {
        queries: 1,
        keys: 2,
        dimension: 1,
        query: vec![1.0],
        key: vec![0.5, 0.5],
        value: vec![round_f16(0.3), 1.0],
    };
    let fp8 = ProductInputs::Fp8 {
        activation_scale: -4,
    };
    for kind in [
        AttentionKind::Materialized,
        AttentionKind::Flash { key_block: 1 },
    ] {
        for partial in [false, true] {
            let (output, notes) = case.run(kind, fp8, partial);
            assert_eq!(output, vec![round_f16(0.5 * 0.3125 + 0.5)], "{kind:?}");
            assert_eq!((notes.fp8_activations, notes.saturated_activations), (2, 0));
            let (output, notes) = case.run(kind, ProductInputs::Fp16, partial);
            assert_eq!(output, vec![round_f16(0.5 * round_f16(0.3) + 0.5)]);
            assert_eq!(notes, KernelNotes::default());
        }
    }
    // Values beyond 240 x 2^-4 = 15 saturate, and are counted.
    let loud = AttentionCase {
        value: vec![20.0, 1.0],
        ..case
    };
    let (output, notes) = loud.run(AttentionKind::Materialized, fp8, false);
    assert_eq!(output, vec![round_f16(0.5 * 15.0 + 0.5)]);
    assert_eq!(notes.saturated_activations, 1);
}

/// The probabilities too are rounded: three keys whose softmax weights
/// are 1/(1 + 2e^-1) and e^-1/(1 + 2e^-1) (0.5761 and 0.2119), against
/// values 1, 0 and 0, give the first probability as F143 at 2^-7 holds it
/// (0.5625: spacing 2^-4 in [0.5, 1)).
#[test]
fn an_fp8_value_product_rounds_the_probabilities_at_two_to_the_minus_seven() {
    use crate::expand::program::AttentionKind;
    use crate::numerics::dot::{PROBABILITY_SCALE, ProductInputs};
    use crate::numerics::fp8;
    let case = AttentionCase {
        queries: 1,
        keys: 3,
        dimension: 1,
        query: vec![1.0],
        key: vec![1.0, 0.0, 0.0],
        value: vec![1.0, 0.0, 0.0],
    };
    let fp8 = ProductInputs::Fp8 {
        activation_scale: 0,
    };
    let (output, _) = case.run(AttentionKind::Materialized, fp8, false);
    let probability = 1.0 / (1.0 + 2.0 * (-1.0f32).exp());
    let expected = fp8::decode(
        fp8::encode(round_f16(probability), PROBABILITY_SCALE),
        PROBABILITY_SCALE,
    );
    assert_eq!(expected, 0.5625);
    assert_eq!(output, vec![expected]);
    let (output, _) = case.run(AttentionKind::Materialized, ProductInputs::Fp16, false);
    assert_eq!(output, vec![round_f16(probability)]);
}

/// On random heads, the FP8 `PV` product stays within F143's rounding of
/// the FP16 one: each probability (or block weight) and each value is
/// within 2^-4 of its FP16 value relatively (3 mantissa bits; the
/// subnormals' absolute error is far below the slack), so the weighted sum
/// is within 2 x 2^-4 + 2^-8 of M = sum |p v|; where the weights are
/// normalised after rounding (partial statistics, flash) their sum is off
/// by up to 2^-4 too, which adds (1/16) / (15/16) of M to the error and
/// divides the first part by 15/16: at most 0.21 M in all, plus FP16
/// output rounding. And it does differ.
#[test]
fn an_fp8_value_product_stays_within_fp8_rounding_of_the_fp16_one() {
    use crate::expand::program::AttentionKind;
    use crate::numerics::dot::ProductInputs;
    let case = AttentionCase::random(11, 7, 45, 24);
    let fp8 = ProductInputs::Fp8 {
        activation_scale: -5,
    };
    // The magnitude each output is the weighted sum of: sum_k p_k |v_k|.
    let (dimension, keys) = (case.dimension as usize, case.keys as usize);
    let scale = 1.0 / (dimension as f32).sqrt();
    let mut differs = false;
    for kind in [
        AttentionKind::Materialized,
        AttentionKind::Flash { key_block: 16 },
    ] {
        for partial in [false, true] {
            let (exact, _) = case.run(kind, ProductInputs::Fp16, partial);
            let (rounded, notes) = case.run(kind, fp8, partial);
            assert_eq!(notes.fp8_activations, (keys * dimension) as u64);
            assert_eq!(notes.saturated_activations, 0);
            for query in 0..case.queries as usize {
                let q = &case.query[query * dimension..][..dimension];
                let mut scores: Vec<f32> = (0..keys)
                    .map(|key| {
                        let k = &case.key[key * dimension..][..dimension];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
                    })
                    .collect();
                crate::numerics::rows::softmax_row_in_place(&mut scores, 1.0).unwrap();
                for column in 0..dimension {
                    let magnitude: f32 = (0..keys)
                        .map(|key| scores[key] * case.value[key * dimension + column].abs())
                        .sum();
                    let index = query * dimension + column;
                    let error = (rounded[index] - exact[index]).abs();
                    let bound = 0.21 * magnitude + 2f32.powi(-10) * exact[index].abs() + 1e-4;
                    assert!(
                        error <= bound,
                        "{kind:?} partial {partial} ({query}, {column}): {} vs {}, bound {bound}",
                        rounded[index],
                        exact[index]
                    );
                    differs |= rounded[index] != exact[index];
                }
            }
        }
    }
    assert!(differs, "rounding to FP8 changes some output");
}
