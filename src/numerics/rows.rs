//! Row-wise reference kernels on f32 slices: layer norm, softmax, rotary
//! position rotation and the streaming (flash-style) softmax-weighted
//! accumulation over key blocks. Statistics are kept in f32, as the target
//! keeps them. It owns per-row arithmetic; it must not know about tensors,
//! heads, tiles or how rows are laid out in memory.

use crate::numerics::NumericsError;
use crate::numerics::half_float::round_f16;

/// `output = (input - mean) / sqrt(variance + epsilon) * gamma + beta`, with
/// the mean and then the (biased) variance computed in two f32 passes.
pub fn layer_norm_row(
    input: &[f32],
    gamma: &[f32],
    beta: &[f32],
    epsilon: f32,
    output: &mut [f32],
) -> Result<(), NumericsError> {
    let width = input.len();
    if width == 0 {
        return Err(NumericsError::EmptyRow { what: "layer norm" });
    }
    check_length("layer norm gamma", width, gamma.len())?;
    check_length("layer norm beta", width, beta.len())?;
    check_length("layer norm output", width, output.len())?;
    let count = width as f32;
    let mean = input.iter().sum::<f32>() / count;
    let variance = input
        .iter()
        .map(|&value| (value - mean) * (value - mean))
        .sum::<f32>()
        / count;
    let inverse_deviation = 1.0 / (variance + epsilon).sqrt();
    for (((out, &value), &scale), &shift) in output.iter_mut().zip(input).zip(gamma).zip(beta) {
        *out = (value - mean) * inverse_deviation * scale + shift;
    }
    Ok(())
}

/// `row = softmax(row * scale)`, subtracting the maximum before `exp`.
/// Scores of `-inf` (masked) get weight 0; a row with no finite score is an
/// error rather than NaN.
pub fn softmax_row_in_place(row: &mut [f32], scale: f32) -> Result<(), NumericsError> {
    for value in row.iter_mut() {
        *value *= scale;
    }
    let maximum = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if maximum == f32::NEG_INFINITY {
        return Err(NumericsError::NoFiniteScore);
    }
    let mut sum = 0.0f32;
    for value in row.iter_mut() {
        *value = (*value - maximum).exp();
        sum += *value;
    }
    let inverse_sum = 1.0 / sum;
    for value in row.iter_mut() {
        *value *= inverse_sum;
    }
    Ok(())
}

/// Rotates each consecutive pair `(row[2i], row[2i+1])` by the angle whose
/// cosine and sine are `cos[i]`, `sin[i]`:
/// `(x cos - y sin, x sin + y cos)`.
pub fn rotary_pair_in_place(
    row: &mut [f32],
    cos: &[f32],
    sin: &[f32],
) -> Result<(), NumericsError> {
    if !row.len().is_multiple_of(2) {
        return Err(NumericsError::OddRowLength { length: row.len() });
    }
    let pairs = row.len() / 2;
    check_length("rotary cos", pairs, cos.len())?;
    check_length("rotary sin", pairs, sin.len())?;
    for ((pair, &cosine), &sine) in row.chunks_exact_mut(2).zip(cos).zip(sin) {
        let (x, y) = (pair[0], pair[1]);
        pair[0] = x * cosine - y * sine;
        pair[1] = x * sine + y * cosine;
    }
    Ok(())
}

/// Streaming softmax-weighted sum of value rows for one query, absorbing one
/// key block at a time (flash attention): it keeps the running maximum, the
/// running sum of `exp(score - maximum)` and the running weighted sum of value
/// rows, rescaling both when the maximum grows. All state is f32.
#[derive(Debug, Clone, PartialEq)]
pub struct OnlineSoftmax {
    value_width: usize,
    maximum: f32,
    weight_sum: f32,
    accumulator: Vec<f32>,
}

impl OnlineSoftmax {
    pub fn new(value_width: usize) -> Self {
        Self {
            value_width,
            maximum: f32::NEG_INFINITY,
            weight_sum: 0.0,
            accumulator: vec![0.0; value_width],
        }
    }

    pub fn value_width(&self) -> usize {
        self.value_width
    }

    /// Absorbs one key block: `scores` are this query's already-scaled scores
    /// for the block's keys (`-inf` = masked), `values` the block's value rows
    /// (`scores.len()` rows of `value_width`, row-major).
    pub fn absorb(&mut self, scores: &[f32], values: &[f32]) -> Result<(), NumericsError> {
        let expected = scores.len().saturating_mul(self.value_width);
        check_length("online softmax values", expected, values.len())?;
        let block_maximum = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if block_maximum == f32::NEG_INFINITY {
            return Ok(());
        }
        let new_maximum = self.maximum.max(block_maximum);
        // exp(-inf) = 0 on the first block, when the accumulator is still 0.
        let correction = (self.maximum - new_maximum).exp();
        self.maximum = new_maximum;
        self.weight_sum *= correction;
        for value in self.accumulator.iter_mut() {
            *value *= correction;
        }
        if self.value_width == 0 {
            for &score in scores {
                self.weight_sum += (score - new_maximum).exp();
            }
            return Ok(());
        }
        for (&score, value_row) in scores.iter().zip(values.chunks_exact(self.value_width)) {
            let weight = (score - new_maximum).exp();
            self.weight_sum += weight;
            for (accumulated, &value) in self.accumulator.iter_mut().zip(value_row) {
                *accumulated += weight * value;
            }
        }
        Ok(())
    }

    /// Absorbs one key block as the matrix unit computes it: each weight
    /// `exp(score - maximum)` is rounded to f16 (the AMP's input precision),
    /// the block's weighted value sum is accumulated in f32 from zero in
    /// increasing key order (the AMP's accumulators, as
    /// [`Accumulation::F32`](crate::numerics::dot::Accumulation::F32)) and then added to
    /// the rescaled running sum on the vector unit. The weight sum adds the
    /// rounded weights, so the normalisation matches what was multiplied.
    pub fn absorb_matrix_unit(
        &mut self,
        scores: &[f32],
        values: &[f32],
    ) -> Result<(), NumericsError> {
        self.absorb_matrix_unit_rounded(scores, values, round_f16)
    }

    /// As [`OnlineSoftmax::absorb_matrix_unit`], each weight rounded by
    /// `round` to the matrix unit's input precision instead of to f16 (an
    /// FP8 product rounds it to f16 and then to FP8); the weight sum adds
    /// the rounded weights.
    pub fn absorb_matrix_unit_rounded(
        &mut self,
        scores: &[f32],
        values: &[f32],
        round: impl Fn(f32) -> f32,
    ) -> Result<(), NumericsError> {
        let expected = scores.len().saturating_mul(self.value_width);
        check_length("online softmax values", expected, values.len())?;
        let block_maximum = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if block_maximum == f32::NEG_INFINITY {
            return Ok(());
        }
        let new_maximum = self.maximum.max(block_maximum);
        let correction = (self.maximum - new_maximum).exp();
        self.maximum = new_maximum;
        self.weight_sum *= correction;
        let mut block_sum = vec![0.0f32; self.value_width];
        let mut block_weight_sum = 0.0f32;
        for (key, &score) in scores.iter().enumerate() {
            let weight = round((score - new_maximum).exp());
            block_weight_sum += weight;
            if self.value_width > 0 {
                let row = &values[key * self.value_width..(key + 1) * self.value_width];
                for (accumulated, &value) in block_sum.iter_mut().zip(row) {
                    *accumulated += weight * value;
                }
            }
        }
        self.weight_sum += block_weight_sum;
        for (accumulated, block) in self.accumulator.iter_mut().zip(&block_sum) {
            *accumulated = *accumulated * correction + block;
        }
        Ok(())
    }

    /// The unnormalised state: running maximum, weight sum and weighted sums.
    pub fn statistics(&self) -> (f32, f32, &[f32]) {
        (self.maximum, self.weight_sum, &self.accumulator)
    }

    /// Writes the normalised weighted sum; an error if no finite score was
    /// absorbed.
    pub fn finish(&self, out: &mut [f32]) -> Result<(), NumericsError> {
        check_length("online softmax output", self.value_width, out.len())?;
        if self.weight_sum <= 0.0 || self.maximum == f32::NEG_INFINITY {
            return Err(NumericsError::NoFiniteScore);
        }
        let inverse_sum = 1.0 / self.weight_sum;
        for (out, &accumulated) in out.iter_mut().zip(&self.accumulator) {
            *out = accumulated * inverse_sum;
        }
        Ok(())
    }
}

fn check_length(what: &'static str, expected: usize, actual: usize) -> Result<(), NumericsError> {
    if expected == actual {
        Ok(())
    } else {
        Err(NumericsError::LengthMismatch {
            what,
            expected,
            actual,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numerics::test_random::TestRandom;

    #[test]
    fn layer_norm_known_row() {
        let mut output = [0.0; 4];
        layer_norm_row(
            &[1.0, 2.0, 3.0, 4.0],
            &[1.0; 4],
            &[0.0; 4],
            0.0,
            &mut output,
        )
        .unwrap();
        let unit = 1.0 / 1.25f32.sqrt();
        let expected = [-1.5 * unit, -0.5 * unit, 0.5 * unit, 1.5 * unit];
        for (actual, expected) in output.iter().zip(expected) {
            assert!((actual - expected).abs() < 1e-6);
        }
        layer_norm_row(
            &[1.0, 2.0, 3.0, 4.0],
            &[2.0; 4],
            &[1.0; 4],
            0.0,
            &mut output,
        )
        .unwrap();
        assert!((output[3] - (3.0 * unit + 1.0)).abs() < 1e-6);
    }

    #[test]
    fn layer_norm_matches_f64_reference() {
        let mut random = TestRandom::new(7);
        let width = 1152;
        let input: Vec<f32> = random.vector(width, -3.0, 5.0);
        let gamma = random.vector(width, 0.5, 1.5);
        let beta = random.vector(width, -0.1, 0.1);
        let mut output = vec![0.0; width];
        layer_norm_row(&input, &gamma, &beta, 1e-6, &mut output).unwrap();
        let mean = input.iter().map(|&v| f64::from(v)).sum::<f64>() / width as f64;
        let variance = input
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / width as f64;
        for index in 0..width {
            let expected = (f64::from(input[index]) - mean) / (variance + 1e-6).sqrt()
                * f64::from(gamma[index])
                + f64::from(beta[index]);
            assert!((f64::from(output[index]) - expected).abs() < 1e-4);
        }
    }

    #[test]
    fn layer_norm_rejects_bad_lengths() {
        let mut output = [0.0; 3];
        assert_eq!(
            layer_norm_row(&[1.0, 2.0, 3.0], &[1.0; 2], &[0.0; 3], 1e-5, &mut output),
            Err(NumericsError::LengthMismatch {
                what: "layer norm gamma",
                expected: 3,
                actual: 2
            })
        );
        assert_eq!(
            layer_norm_row(&[], &[], &[], 1e-5, &mut []),
            Err(NumericsError::EmptyRow { what: "layer norm" })
        );
    }

    #[test]
    fn softmax_is_stable_and_normalised() {
        let mut row = [1000.0, 1001.0, f32::NEG_INFINITY, 999.0];
        softmax_row_in_place(&mut row, 1.0).unwrap();
        let denominator = 1.0 + 1f64.exp() + (-1f64).exp();
        let expected = [
            1.0 / denominator,
            1f64.exp() / denominator,
            0.0,
            (-1f64).exp() / denominator,
        ];
        for (actual, expected) in row.iter().zip(expected) {
            assert!((f64::from(*actual) - expected).abs() < 1e-6);
        }
        let mut scaled = [2.0, 4.0];
        softmax_row_in_place(&mut scaled, 0.5).unwrap();
        assert!((f64::from(scaled[1]) - 1f64.exp() / (1.0 + 1f64.exp())).abs() < 1e-6);
        let mut masked = [f32::NEG_INFINITY; 3];
        assert_eq!(
            softmax_row_in_place(&mut masked, 1.0),
            Err(NumericsError::NoFiniteScore)
        );
        assert_eq!(
            softmax_row_in_place(&mut [], 1.0),
            Err(NumericsError::NoFiniteScore)
        );
    }

    #[test]
    fn rotary_rotates_pairs_by_their_own_angle() {
        let mut row = [1.0, 0.0, 0.0, 2.0, 3.0, 4.0];
        let angles = [
            std::f32::consts::FRAC_PI_2,
            std::f32::consts::FRAC_PI_2,
            0.3,
        ];
        let cos: Vec<f32> = angles.iter().map(|a| a.cos()).collect();
        let sin: Vec<f32> = angles.iter().map(|a| a.sin()).collect();
        rotary_pair_in_place(&mut row, &cos, &sin).unwrap();
        assert!((row[0] - 0.0).abs() < 1e-6 && (row[1] - 1.0).abs() < 1e-6);
        assert!((row[2] + 2.0).abs() < 1e-6 && (row[3] - 0.0).abs() < 1e-6);
        assert!((row[4].hypot(row[5]) - 5.0).abs() < 1e-5);
        assert!((row[4] - (3.0 * 0.3f32.cos() - 4.0 * 0.3f32.sin())).abs() < 1e-6);
        assert_eq!(
            rotary_pair_in_place(&mut [1.0, 2.0, 3.0], &[1.0], &[0.0]),
            Err(NumericsError::OddRowLength { length: 3 })
        );
        assert!(rotary_pair_in_place(&mut [1.0, 2.0], &[1.0, 1.0], &[0.0]).is_err());
    }

    #[test]
    fn online_softmax_matches_materialized_softmax() {
        let mut random = TestRandom::new(42);
        for trial in 0..50 {
            let keys = random.between(1, 300);
            let value_width = random.between(1, 80);
            let spread = if trial % 2 == 0 { 4.0 } else { 40.0 };
            let mut scores = random.vector(keys, -spread, spread);
            if trial % 5 == 0 {
                // A fully masked prefix block exercises the skip path.
                for score in scores.iter_mut().take(keys / 3) {
                    *score = f32::NEG_INFINITY;
                }
            }
            let values = random.vector(keys * value_width, -2.0, 2.0);

            let mut online = OnlineSoftmax::new(value_width);
            let mut start = 0;
            while start < keys {
                let block = random.between(1, 64).min(keys - start);
                online
                    .absorb(
                        &scores[start..start + block],
                        &values[start * value_width..(start + block) * value_width],
                    )
                    .unwrap();
                start += block;
            }
            let mut streamed = vec![0.0; value_width];
            online.finish(&mut streamed).unwrap();

            let mut weights = scores.clone();
            softmax_row_in_place(&mut weights, 1.0).unwrap();
            for column in 0..value_width {
                let mut expected = 0.0f64;
                let mut magnitude = 0.0f64;
                for key in 0..keys {
                    let term =
                        f64::from(weights[key]) * f64::from(values[key * value_width + column]);
                    expected += term;
                    magnitude += term.abs();
                }
                let error = (f64::from(streamed[column]) - expected).abs();
                assert!(
                    error <= 1e-5 * magnitude.max(1e-30),
                    "trial {trial} column {column}: {} vs {expected}",
                    streamed[column]
                );
            }
        }
    }

    #[test]
    fn matrix_unit_online_softmax_rounds_weights_and_accumulates_per_block() {
        let mut random = TestRandom::new(7);
        for trial in 0..40 {
            let keys = random.between(1, 200);
            let value_width = random.between(1, 72);
            let scores = random.vector(keys, -6.0, 6.0);
            let values: Vec<f32> = random
                .vector(keys * value_width, -2.0, 2.0)
                .into_iter()
                .map(round_f16)
                .collect();
            let block = random.between(1, 64);
            let mut online = OnlineSoftmax::new(value_width);
            let mut start = 0;
            while start < keys {
                let end = keys.min(start + block);
                online
                    .absorb_matrix_unit(
                        &scores[start..end],
                        &values[start * value_width..end * value_width],
                    )
                    .unwrap();
                start = end;
            }
            // Independent f64 model: the same f16 weights against the block maxima.
            let (maximum, weight_sum, accumulator) = online.statistics();
            let global = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(maximum, global, "trial {trial}");
            let mut expected_sum = 0.0f64;
            let mut expected = vec![0.0f64; value_width];
            let mut start = 0;
            while start < keys {
                let end = keys.min(start + block);
                let running = scores[..end]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max);
                let rescale = f64::from(running - global).exp();
                for key in start..end {
                    let weight = f64::from(round_f16((scores[key] - running).exp())) * rescale;
                    expected_sum += weight;
                    for column in 0..value_width {
                        expected[column] += weight * f64::from(values[key * value_width + column]);
                    }
                }
                start = end;
            }
            assert!(
                (f64::from(weight_sum) - expected_sum).abs() <= 1e-5 * expected_sum,
                "trial {trial}: {weight_sum} vs {expected_sum}"
            );
            for column in 0..value_width {
                let error = (f64::from(accumulator[column]) - expected[column]).abs();
                assert!(
                    error <= 1e-4 * expected_sum.max(1.0),
                    "trial {trial} column {column}"
                );
            }
            // The weights really are rounded: a single block equals the f16 sum exactly.
            let mut single = OnlineSoftmax::new(0);
            single.absorb_matrix_unit(&scores, &[]).unwrap();
            let rounded: f32 = scores
                .iter()
                .map(|&score| round_f16((score - global).exp()))
                .sum();
            assert_eq!(single.statistics().1, rounded, "trial {trial}");
        }
    }

    #[test]
    fn online_softmax_rejects_bad_input() {
        let mut online = OnlineSoftmax::new(2);
        assert!(online.absorb(&[1.0, 2.0], &[0.0; 3]).is_err());
        let mut out = [0.0; 2];
        assert_eq!(online.finish(&mut out), Err(NumericsError::NoFiniteScore));
        online.absorb(&[f32::NEG_INFINITY], &[1.0, 1.0]).unwrap();
        assert_eq!(online.finish(&mut out), Err(NumericsError::NoFiniteScore));
        online.absorb(&[0.5], &[1.0, -1.0]).unwrap();
        assert!(online.finish(&mut [0.0; 3]).is_err());
        online.finish(&mut out).unwrap();
        assert_eq!(out, [1.0, -1.0]);
    }
}
