//! Activation calibration: the power-of-two scale of every FP8 product
//! position, chosen from the FP32 reference run on a calibration input.
//!
//! A product position is a matrix product of the graph, named by its op
//! (`layer.attn.qkv`), or the `PV` product of an attention op
//! (`layer.attn.core`, whose activation is the values `V`): the layers of
//! the Repeat share it, as they share the op. The reference ([`evaluate_reference_observed`], the same evaluation
//! the simulators are compared against) shows the calibration every
//! product's activation operand; per position it keeps the largest
//! magnitude and a histogram of the magnitudes by binary exponent, from
//! which the error of rounding to FP8 F143 at any scale is exact (see
//! [`Histogram`]). The chosen scale is the least at which the largest
//! magnitude seen, times [`HEADROOM`], is still within F143's range
//! (`240 x 2^scale`): nothing saturates on the calibration input, with one
//! binade of room for inputs that reach further.
//!
//! It owns the choice and its figures; where the scales go (the plan's
//! products) is the query layer's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::memory::SimError;
use super::reference::{ReferenceParameters, evaluate_reference_observed};
use crate::build_file::ActivationScale;
use crate::model::graph::{Graph, Op, OpKind};
use crate::numerics::dot::{ProductInputs, ProductRecipe};
use crate::numerics::fp8;
use crate::target::kernel_cost::MatrixInputs;

/// How far beyond the largest magnitude seen the chosen scale's range
/// reaches, at least: F143's largest magnitude at the chosen scale is at
/// least `HEADROOM` times the largest activation of the calibration input.
pub const HEADROOM: f32 = 2.0;

/// The scales an activation scale may have (`planning.activation_scale`).
pub const SCALE_RANGE: std::ops::RangeInclusive<i32> = -32..=32;

/// Which operand of its product a position calibrates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CalibratedOperand {
    /// A matrix product's activation (left) operand.
    Activations,
    /// Attention's values, the right operand of its `PV` product.
    Values,
}

impl CalibratedOperand {
    /// How the build's calibration table names it.
    pub fn name(self) -> &'static str {
        match self {
            CalibratedOperand::Activations => "activations",
            CalibratedOperand::Values => "PV values",
        }
    }
}

/// One product position's calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PositionScale {
    /// The product's op (`layer.mlp.up`).
    pub op: String,
    /// The operand whose magnitudes chose the scale.
    pub operand: CalibratedOperand,
    /// The chosen scale: activations are stored as value x 2^-scale.
    pub scale: i8,
    /// The largest activation magnitude seen, over every layer (an FP32
    /// value, kept as f64 so that every JSON writer prints it alike).
    pub largest: f64,
    /// `sqrt(sum (fp8(x) - x)^2 / sum x^2)` over every activation seen, at
    /// `scale` (0 when every activation is 0).
    pub relative_rms: f64,
    /// Activations seen (every layer's).
    pub elements: u64,
}

/// Every product position's calibration, sorted by op name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActivationCalibration {
    pub positions: Vec<PositionScale>,
}

impl ActivationCalibration {
    /// The calibration of position `op`.
    pub fn position(&self, op: &str) -> Option<&PositionScale> {
        self.positions
            .binary_search_by(|position| position.op.as_str().cmp(op))
            .ok()
            .map(|index| &self.positions[index])
    }
}

/// Which operand of `op` is a product position's activation, if any: the
/// left operand of every matrix product, and the values `V` of attention
/// (the right operand of its `PV` product; the probabilities `P` take the
/// fixed [`crate::numerics::dot::PROBABILITY_SCALE`]).
fn activation_operand(op: &Op) -> Option<(usize, CalibratedOperand)> {
    match op.kind {
        OpKind::MatMul { .. } => Some((0, CalibratedOperand::Activations)),
        OpKind::Attention { .. } => Some((2, CalibratedOperand::Values)),
        _ => None,
    }
}

/// The product positions of `graph`, sorted: its matrix products and
/// attention ops, whose activation is [`activation_operand`].
pub fn product_positions(graph: &Graph) -> Vec<String> {
    graph.product_names()
}

/// Runs the reference on `parameters` (whose input is the calibration
/// input) and chooses every product position's scale.
pub fn calibrate(
    graph: &Graph,
    parameters: &dyn ReferenceParameters,
) -> Result<ActivationCalibration, SimError> {
    calibrate_checked(graph, parameters, &|| {})
}

/// [`calibrate`], calling `before_op` before every op the reference runs
/// (a query passes its cancellation check, which may unwind: a long
/// reference then stops within one op of a cancel).
pub fn calibrate_checked(
    graph: &Graph,
    parameters: &dyn ReferenceParameters,
    before_op: &dyn Fn(),
) -> Result<ActivationCalibration, SimError> {
    let mut histograms: BTreeMap<String, (CalibratedOperand, Histogram)> = BTreeMap::new();
    let mut observe = |op: &Op, inputs: &[&[f32]]| {
        before_op();
        let Some((slot, operand)) = activation_operand(op) else {
            return;
        };
        if let Some(values) = inputs.get(slot) {
            histograms
                .entry(op.name.clone())
                .or_insert_with(|| (operand, Histogram::new()))
                .1
                .add(values);
        }
    };
    let output = evaluate_reference_observed(graph, parameters, Some(&mut observe))?;
    if let Some(index) = output.iter().position(|value| !value.is_finite()) {
        return Err(SimError::MissingValue(format!(
            "the FP32 reference's output element {index} is {} on the calibration input",
            output[index]
        )));
    }
    let positions = histograms
        .into_iter()
        .map(|(op, (operand, histogram))| {
            let scale = chosen_scale(histogram.largest);
            PositionScale {
                op,
                operand,
                scale: scale as i8,
                largest: f64::from(histogram.largest),
                relative_rms: histogram.relative_rms(scale),
                elements: histogram.elements,
            }
        })
        .collect();
    Ok(ActivationCalibration { positions })
}

/// The least scale at which `largest x HEADROOM` does not saturate, within
/// [`SCALE_RANGE`].
pub fn chosen_scale(largest: f32) -> i32 {
    fp8::unsaturated_scale(largest * HEADROOM).clamp(*SCALE_RANGE.start(), *SCALE_RANGE.end())
}

/// F143's smallest normal exponent (`2^-7`) and its mantissa bits.
const MINIMUM_NORMAL_EXPONENT: i32 = -7;
const MANTISSA_BITS: i32 = 3;
/// Buckets of the histogram: one per f32 biased exponent.
const BUCKETS: usize = 256;
/// Activations per chunk of a histogram made in parallel (a fixed size, so
/// the chunks, and the order their sums are added in, do not depend on the
/// number of threads).
const HISTOGRAM_CHUNK: usize = 1 << 16;

/// Magnitudes by binary exponent. Rounding `x` (in `[2^e, 2^(e+1))`) to
/// F143 at scale `s` keeps all 3 mantissa bits when `e - s >= -7` (a
/// normal code), `3 + (e - s + 7)` bits for the three binades below (the
/// subnormals' fixed spacing `q = 2^(s - 10)`), rounds to `q` or 0 in the
/// binade below that (error `(q - x)^2` either way, ties to even going
/// to 0), and to 0 further down. So per bucket the sums of the squared
/// errors of keeping 3, 2, 1 and 0 bits, with the count and the sums of
/// `x` and `x^2`, give the exact error at every scale that does not
/// saturate.
#[derive(Clone, Debug)]
struct Histogram {
    buckets: Vec<Bucket>,
    largest: f32,
    elements: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    count: u64,
    sum: f64,
    sum_of_squares: f64,
    /// Index `k`: the squared error of keeping `k` mantissa bits.
    kept_bits_error: [f64; 4],
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            buckets: vec![Bucket::default(); BUCKETS],
            largest: 0.0,
            elements: 0,
        }
    }

    /// Adds `values`, in chunks over the cores: each chunk's histogram is
    /// made on its own and the chunks are merged in order, so the sums are
    /// the same on any number of threads.
    fn add(&mut self, values: &[f32]) {
        use rayon::prelude::*;
        let chunks: Vec<Histogram> = values
            .par_chunks(HISTOGRAM_CHUNK)
            .map(|chunk| {
                let mut histogram = Histogram::new();
                histogram.add_serially(chunk);
                histogram
            })
            .collect();
        for chunk in &chunks {
            self.merge(chunk);
        }
    }

    /// Adds the counts and sums of `other`.
    fn merge(&mut self, other: &Histogram) {
        self.elements += other.elements;
        self.largest = self.largest.max(other.largest);
        for (bucket, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            bucket.count += theirs.count;
            bucket.sum += theirs.sum;
            bucket.sum_of_squares += theirs.sum_of_squares;
            for (error, their_error) in bucket
                .kept_bits_error
                .iter_mut()
                .zip(&theirs.kept_bits_error)
            {
                *error += their_error;
            }
        }
    }

    fn add_serially(&mut self, values: &[f32]) {
        self.elements += values.len() as u64;
        for &value in values {
            let magnitude = value.abs();
            if !magnitude.is_finite() {
                self.largest = f32::INFINITY;
                continue;
            }
            self.largest = self.largest.max(magnitude);
            let bits = magnitude.to_bits();
            let bucket = &mut self.buckets[(bits >> 23) as usize];
            let x = f64::from(magnitude);
            bucket.count += 1;
            bucket.sum += x;
            bucket.sum_of_squares += x * x;
            if bits >> 23 == 0 {
                // f32 subnormals and zero: far below any F143 code.
                continue;
            }
            for (kept, error) in bucket.kept_bits_error.iter_mut().enumerate() {
                let rounded = f64::from(round_mantissa(magnitude, kept as u32));
                *error += (rounded - x) * (rounded - x);
            }
        }
    }

    /// The relative RMS error of rounding every value to F143 at `scale`
    /// (which must not saturate the largest).
    fn relative_rms(&self, scale: i32) -> f64 {
        let quantum = 2f64.powi(scale + MINIMUM_NORMAL_EXPONENT - MANTISSA_BITS);
        let (mut error, mut energy) = (0.0f64, 0.0f64);
        for (biased, bucket) in self.buckets.iter().enumerate() {
            if bucket.count == 0 {
                continue;
            }
            energy += bucket.sum_of_squares;
            let exponent = biased as i32 - 127;
            let below_normal = exponent - scale - MINIMUM_NORMAL_EXPONENT;
            error += if biased == 0 || below_normal < -MANTISSA_BITS - 1 {
                bucket.sum_of_squares
            } else if below_normal == -MANTISSA_BITS - 1 {
                bucket.count as f64 * quantum * quantum - 2.0 * quantum * bucket.sum
                    + bucket.sum_of_squares
            } else {
                let kept = (below_normal + MANTISSA_BITS).min(MANTISSA_BITS);
                bucket.kept_bits_error[kept as usize]
            };
        }
        if energy > 0.0 {
            (error.max(0.0) / energy).sqrt()
        } else {
            0.0
        }
    }
}

/// A positive normal `magnitude` rounded to `kept` mantissa bits after its
/// leading one, to nearest with ties to even.
fn round_mantissa(magnitude: f32, kept: u32) -> f32 {
    let bits = magnitude.to_bits();
    let dropped = 23 - kept;
    let mask = (1u32 << dropped) - 1;
    let half = 1u32 << (dropped - 1);
    let low = bits & mask;
    let base = bits & !mask;
    // The last kept bit; with no mantissa bits kept it is the leading one.
    let odd = kept == 0 || (bits >> dropped) & 1 == 1;
    if low > half || (low == half && odd) {
        f32::from_bits(base + (1 << dropped))
    } else {
        f32::from_bits(base)
    }
}

/// The products' inputs of `planning`, with `calibration`'s scales when
/// the planning calibrates them. A product the calibration did not see
/// (there is none: every product of the graph is a position) takes the
/// largest scale any position needed.
pub fn recipe(
    planning: &crate::build_file::PlanningFlags,
    calibration: Option<&ActivationCalibration>,
) -> ProductRecipe {
    let fp8 = |op: Option<&str>| -> ProductInputs {
        let activation_scale = match (&planning.activation_scale, calibration) {
            (ActivationScale::Fixed(scale), _) => *scale,
            (ActivationScale::Calibrate { .. }, Some(calibration)) => op
                .and_then(|op| calibration.position(op))
                .map(|position| position.scale)
                .or_else(|| {
                    calibration
                        .positions
                        .iter()
                        .map(|position| position.scale)
                        .max()
                })
                .unwrap_or(crate::build_file::validate::DEFAULT_ACTIVATION_SCALE),
            (ActivationScale::Calibrate { .. }, None) => {
                crate::build_file::validate::DEFAULT_ACTIVATION_SCALE
            }
        };
        ProductInputs::Fp8 { activation_scale }
    };
    let of = |inputs: MatrixInputs, op: Option<&str>| match inputs {
        MatrixInputs::Fp16 => ProductInputs::Fp16,
        MatrixInputs::Fp8 => fp8(op),
    };
    let mut by_op = std::collections::BTreeMap::new();
    if let Some(calibration) = calibration {
        for position in &calibration.positions {
            by_op.insert(
                position.op.clone(),
                of(planning.matrix_inputs, Some(&position.op)),
            );
        }
    }
    for (op, inputs) in &planning.matrix_input_overrides {
        by_op.insert(op.clone(), of(*inputs, Some(op)));
    }
    ProductRecipe {
        default: of(planning.matrix_inputs, None),
        by_op,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::weights::SplitMix;

    /// The error straight from the encoder: every value encoded and decoded.
    fn encoded_rms(values: &[f32], scale: i32) -> f64 {
        let (mut error, mut energy) = (0.0f64, 0.0f64);
        for &value in values {
            let stored = f64::from(fp8::decode(fp8::encode(value, scale), scale));
            error += (stored - f64::from(value)).powi(2);
            energy += f64::from(value).powi(2);
        }
        (error / energy).sqrt()
    }

    #[test]
    fn the_histogram_error_is_the_encoders_at_every_scale() {
        let mut generator = SplitMix::new(7);
        // Magnitudes over 30 binades, so every scale below sees normal,
        // subnormal, rounded-to-quantum and rounded-to-zero values.
        let values: Vec<f32> = (0..20_000)
            .map(|_| {
                let exponent = (generator.next_u64() % 30) as i32 - 20;
                generator.next_symmetric() * 2f32.powi(exponent)
            })
            .chain([
                0.0,
                3.0 * 2f32.powi(-18),
                -2f32.powi(-17),
                1.5 * 2f32.powi(-14),
            ])
            .collect();
        let mut histogram = Histogram::new();
        histogram.add(&values);
        // Every scale from the chosen one up (none saturates).
        let least = chosen_scale(histogram.largest);
        for scale in least..least + 12 {
            let expected = encoded_rms(&values, scale);
            let measured = histogram.relative_rms(scale);
            assert!(
                (measured - expected).abs() <= 1e-9 * expected.max(1e-12),
                "scale {scale}: histogram {measured}, encoder {expected}"
            );
        }
    }

    #[test]
    fn the_chosen_scale_holds_the_largest_with_headroom_and_no_more() {
        for largest in [0.3f32, 1.0, 7.5, 15.0, 120.0, 121.0, 3000.0] {
            let scale = chosen_scale(largest);
            let range = fp8::F143_MAX * 2f32.powi(scale);
            assert!(largest * HEADROOM <= range, "{largest}: {scale}");
            assert!(largest * HEADROOM > range / 2.0, "{largest}: {scale}");
        }
    }

    #[test]
    fn streamed_weights_calibrate_as_the_stored_weights_do() {
        let query = crate::build_file::load_query(
            std::path::Path::new("queries/vit-tiny.toml"),
            &["workload.layers=3".to_string()],
        )
        .expect("query");
        let graph = crate::direct::build_query_graph(&query);
        let crate::build_file::WeightSource::Seeded { seed } = query.workload.weights else {
            panic!("vit-tiny has seeded weights");
        };
        // A fixed scale streams FP8 weights in one fused pass, "auto" in
        // passes (the largest first): both give the stored values.
        use crate::model::quantisation::Fp8Scale;
        for fp8_scale in [Fp8Scale::Fixed(-3), Fp8Scale::Auto] {
            let stored =
                crate::model::weights::seeded_weights(&graph, seed, fp8_scale).expect("weights");
            let streamed =
                crate::model::weights::StreamedSeededWeights::new(&graph, seed, fp8_scale, None)
                    .expect("streamed");
            for (id, data) in stored.tensors.iter() {
                for instance in 0..data.instances {
                    assert_eq!(
                        streamed.instance(*id, instance),
                        data.instance(instance),
                        "{fp8_scale:?}"
                    );
                }
            }
        }
        let stored = crate::model::weights::seeded_weights(&graph, seed, query.workload.fp8_scale)
            .expect("weights");
        let streamed = crate::model::weights::StreamedSeededWeights::new(
            &graph,
            seed,
            query.workload.fp8_scale,
            None,
        )
        .expect("streamed");
        assert_eq!(streamed.input(), &stored.input[..]);
        let from_stored = calibrate(&graph, &stored).expect("calibrates");
        assert_eq!(
            calibrate(&graph, &streamed).expect("calibrates"),
            from_stored
        );
        assert_eq!(from_stored.positions.len(), product_positions(&graph).len());
    }

    #[test]
    fn a_skipped_generator_continues_the_sequence() {
        // Streamed weights generate in chunks, each from a skipped generator.
        let mut sequential = SplitMix::new(99);
        let draws: Vec<u64> = (0..200_000).map(|_| sequential.next_u64()).collect();
        for start in [0usize, 1, 65_536, 131_072, 199_999] {
            let mut skipped = SplitMix::skipped(99, start as u64);
            assert_eq!(skipped.next_u64(), draws[start], "{start}");
            assert_eq!(SplitMix::draw_at(99, start as u64), draws[start], "{start}");
        }
    }

    #[test]
    fn rounding_keeps_the_asked_bits_with_ties_to_even() {
        assert_eq!(round_mantissa(1.0625, 3), 1.0);
        assert_eq!(round_mantissa(1.1875, 3), 1.25);
        assert_eq!(round_mantissa(1.5, 0), 2.0);
        assert_eq!(round_mantissa(1.25, 1), 1.0);
        assert_eq!(round_mantissa(1.75, 1), 2.0);
        assert_eq!(round_mantissa(1.9999, 3), 2.0);
    }
}
