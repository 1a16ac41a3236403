//! Quantisation of parameter values to the precision the program stores
//! them in: FP8 codes for the matrix weights under the scale policy of
//! `workload.fp8_scale` (one power of two for every tensor, or `"auto"`:
//! per tensor and per layer the least power of two under which nothing
//! saturates), FP16 rounding for vectors. Owns what quantising cost, per
//! FP8 tensor instance (scale, relative RMS error, saturated elements), and
//! its summary per tensor kind for the build's report and warnings.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::graph::Precision;
use crate::numerics::{fp8, half_float};

/// How FP8 weights are scaled: stored code `c` of a tensor instance with
/// scale `s` means `decode(c) x 2^s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fp8Scale {
    /// One scale for every FP8 tensor.
    Fixed(i32),
    /// Per tensor instance (a layer of an iterated weight is an instance),
    /// the least scale under which its largest magnitude does not saturate.
    Auto,
}

impl fmt::Display for Fp8Scale {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fp8Scale::Fixed(scale) => write!(formatter, "{scale}"),
            Fp8Scale::Auto => formatter.write_str("auto"),
        }
    }
}

impl Fp8Scale {
    /// The scale of one instance whose largest magnitude is `largest`.
    pub fn scale_for(self, largest: f32) -> i32 {
        match self {
            Fp8Scale::Fixed(scale) => scale,
            Fp8Scale::Auto => fp8::unsaturated_scale(largest),
        }
    }
}

/// What quantising one FP8 tensor instance to its scale cost.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceQuantisation {
    /// The graph value's name (the tensor kind: one per layer position).
    pub tensor: String,
    /// The layer (0 for a tensor outside the repeated layers).
    pub instance: u32,
    pub scale: i32,
    pub elements: u64,
    /// Elements whose magnitude exceeds the scale's largest code
    /// (`240 x 2^scale`) and were stored as that code.
    pub saturated: u64,
    /// `sqrt(sum (stored - original)^2 / sum original^2)`; 0 for an
    /// all-zero instance.
    pub relative_rms: f64,
}

/// One weight tensor's data for every instance (one per layer when iterated).
#[derive(Clone, Debug, PartialEq)]
pub struct WeightData {
    /// FP8 codes for F8 weights (empty otherwise), instance-major.
    pub codes: Vec<u8>,
    /// Decoded (FP8) or FP16-rounded values, instance-major.
    pub values: Vec<f32>,
    /// The FP8 scale of every instance (empty for FP16 and FP32 values).
    pub scales: Vec<i32>,
    pub instances: u32,
}

impl WeightData {
    pub fn instance(&self, index: u32) -> &[f32] {
        let size = self.values.len() / self.instances as usize;
        &self.values[index as usize * size..(index as usize + 1) * size]
    }

    pub fn instance_codes(&self, index: u32) -> &[u8] {
        let size = self.codes.len() / self.instances as usize;
        &self.codes[index as usize * size..(index as usize + 1) * size]
    }
}

/// Stores `values` (`instances` consecutive instances of tensor `name`) in
/// `precision`: FP8 codes and their decoded values under `policy` (with
/// the cost of every instance), FP16-rounded values, or FP32 as given.
pub fn quantise(
    name: &str,
    values: Vec<f32>,
    precision: Precision,
    policy: Fp8Scale,
    instances: u32,
) -> (WeightData, Vec<InstanceQuantisation>) {
    match precision {
        Precision::F8 => quantise_fp8(name, &values, policy, instances),
        // Stored data never has an activation's precision; were it given
        // one, its own scale is the only meaningful policy.
        Precision::F8Activation { scale } => {
            quantise_fp8(name, &values, Fp8Scale::Fixed(i32::from(scale)), instances)
        }
        Precision::F16 => (
            WeightData {
                codes: Vec::new(),
                values: values.into_iter().map(half_float::round_f16).collect(),
                scales: Vec::new(),
                instances,
            },
            Vec::new(),
        ),
        Precision::F32 => (
            WeightData {
                codes: Vec::new(),
                values,
                scales: Vec::new(),
                instances,
            },
            Vec::new(),
        ),
    }
}

fn quantise_fp8(
    name: &str,
    values: &[f32],
    policy: Fp8Scale,
    instances: u32,
) -> (WeightData, Vec<InstanceQuantisation>) {
    let size = values.len() / instances.max(1) as usize;
    let mut codes = Vec::with_capacity(values.len());
    let mut decoded = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(instances as usize);
    let mut costs = Vec::with_capacity(instances as usize);
    for (instance, original) in values.chunks(size.max(1)).enumerate() {
        let largest = original
            .iter()
            .fold(0.0f32, |most, value| most.max(value.abs()));
        let scale = policy.scale_for(largest);
        let table = fp8::decode_table(scale);
        let limit = f64::from(fp8::F143_MAX) * 2f64.powi(scale);
        let (mut error, mut energy, mut saturated) = (0.0f64, 0.0f64, 0u64);
        for &value in original {
            let code = fp8::encode(value, scale);
            let stored = table[usize::from(code)];
            error += (f64::from(stored) - f64::from(value)).powi(2);
            energy += f64::from(value).powi(2);
            saturated += u64::from(f64::from(value.abs()) > limit);
            codes.push(code);
            decoded.push(stored);
        }
        scales.push(scale);
        costs.push(InstanceQuantisation {
            tensor: name.to_string(),
            instance: instance as u32,
            scale,
            elements: original.len() as u64,
            saturated,
            relative_rms: if energy > 0.0 {
                (error / energy).sqrt()
            } else {
                0.0
            },
        });
    }
    (
        WeightData {
            codes,
            values: decoded,
            scales,
            instances,
        },
        costs,
    )
}

/// One tensor kind's quantisation over its instances.
#[derive(Clone, Debug, PartialEq)]
pub struct KindSummary {
    pub tensor: String,
    pub instances: u32,
    pub smallest_scale: i32,
    pub largest_scale: i32,
    /// The relative RMS error over all instances together.
    pub relative_rms: f64,
    pub worst_relative_rms: f64,
    pub saturated: u64,
    pub elements: u64,
}

/// The per-kind summaries of `costs`, in the order the kinds first appear.
pub fn summarise(costs: &[InstanceQuantisation]) -> Vec<KindSummary> {
    let mut summaries: Vec<(KindSummary, f64)> = Vec::new();
    for cost in costs {
        // Squared error relative to the kind's energy: weight each
        // instance's square by its element count (instances of a kind have
        // equal sizes and similar energy, so this is the pooled figure).
        let squared = cost.relative_rms.powi(2) * cost.elements as f64;
        match summaries
            .iter_mut()
            .find(|(summary, _)| summary.tensor == cost.tensor)
        {
            Some((summary, pooled)) => {
                summary.instances += 1;
                summary.smallest_scale = summary.smallest_scale.min(cost.scale);
                summary.largest_scale = summary.largest_scale.max(cost.scale);
                summary.worst_relative_rms = summary.worst_relative_rms.max(cost.relative_rms);
                summary.saturated += cost.saturated;
                summary.elements += cost.elements;
                *pooled += squared;
            }
            None => summaries.push((
                KindSummary {
                    tensor: cost.tensor.clone(),
                    instances: 1,
                    smallest_scale: cost.scale,
                    largest_scale: cost.scale,
                    relative_rms: 0.0,
                    worst_relative_rms: cost.relative_rms,
                    saturated: cost.saturated,
                    elements: cost.elements,
                },
                squared,
            )),
        }
    }
    summaries
        .into_iter()
        .map(|(mut summary, pooled)| {
            summary.relative_rms = (pooled / summary.elements.max(1) as f64).sqrt();
            summary
        })
        .collect()
}

/// The report's lines: a heading and one line per FP8 tensor kind.
pub fn report_lines(policy: Fp8Scale, costs: &[InstanceQuantisation]) -> Vec<String> {
    let summaries = summarise(costs);
    let mut lines = vec![format!(
        "quantisation (fp8_scale = {}): {} FP8 tensor kinds; scale, relative RMS error (all layers / worst layer), saturated elements",
        match policy {
            Fp8Scale::Fixed(scale) => scale.to_string(),
            Fp8Scale::Auto => "\"auto\"".to_string(),
        },
        summaries.len()
    )];
    let width = summaries
        .iter()
        .map(|summary| summary.tensor.len())
        .max()
        .unwrap_or(0);
    for summary in &summaries {
        let scales = if summary.smallest_scale == summary.largest_scale {
            format!("2^{}", summary.smallest_scale)
        } else {
            format!("2^{}..2^{}", summary.smallest_scale, summary.largest_scale)
        };
        lines.push(format!(
            "  {:<width$}  {:>2} x  scale {:<12} rms {:.5} / {:.5}  saturated {}",
            summary.tensor,
            summary.instances,
            scales,
            summary.relative_rms,
            summary.worst_relative_rms,
            summary.saturated,
        ));
    }
    lines
}

/// One warning per tensor kind with a saturated instance, naming the kind,
/// its saturated layers and what to change.
pub fn saturation_warnings(policy: Fp8Scale, costs: &[InstanceQuantisation]) -> Vec<String> {
    let mut warnings = Vec::new();
    for summary in summarise(costs)
        .iter()
        .filter(|summary| summary.saturated > 0)
    {
        let saturated: Vec<&InstanceQuantisation> = costs
            .iter()
            .filter(|cost| cost.tensor == summary.tensor && cost.saturated > 0)
            .collect();
        let layers: Vec<String> = saturated
            .iter()
            .map(|cost| cost.instance.to_string())
            .collect();
        let smallest = saturated.iter().map(|cost| cost.scale).min().unwrap_or(0);
        warnings.push(format!(
            "`{}`: {} of {} elements exceed FP8's largest value ({} at scale 2^{}) and were \
             stored as it, in {} of {} layers ({}); {}",
            summary.tensor,
            summary.saturated,
            summary.elements,
            fp8::F143_MAX * 2f32.powi(smallest),
            smallest,
            saturated.len(),
            summary.instances,
            if layers.len() > 8 {
                format!("layers {} ... {}", layers[..4].join(", "), layers[layers.len() - 2..].join(", "))
            } else {
                format!("layer {}", layers.join(", "))
            },
            match policy {
                Fp8Scale::Fixed(_) => {
                    "set workload.fp8_scale = \"auto\" (a scale per tensor and layer) or a larger fixed scale"
                }
                Fp8Scale::Auto => {
                    "under \"auto\" the largest element sets the scale, so this is a bug: please report it"
                }
            }
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_scales_each_instance_and_never_saturates() {
        // Two instances two binades apart: each gets its own scale.
        let values: Vec<f32> = (0..64)
            .map(|index| (index as f32 - 32.0) / 32.0)
            .chain((0..64).map(|index| (index as f32 - 32.0) / 128.0))
            .collect();
        let (data, costs) = quantise("w", values.clone(), Precision::F8, Fp8Scale::Auto, 2);
        assert_eq!(data.scales, vec![-7, -9]);
        assert!(costs.iter().all(|cost| cost.saturated == 0));
        for (instance, scale) in data.scales.iter().enumerate() {
            for index in 0..64 {
                let slot = instance * 64 + index;
                assert_eq!(
                    data.values[slot],
                    fp8::decode(data.codes[slot], *scale),
                    "decoded values are the codes at the instance's scale"
                );
            }
        }
        // Both instances have the same relative error: scaling is exact.
        assert!((costs[0].relative_rms - costs[1].relative_rms).abs() < 1e-12);
        assert!(costs[0].relative_rms > 0.0 && costs[0].relative_rms < 0.04);
    }

    #[test]
    fn a_fixed_scale_counts_and_warns_of_saturation() {
        let values = vec![1.0, 20.0, -16.0, 15.0];
        let (data, costs) = quantise("w", values, Precision::F8, Fp8Scale::Fixed(-4), 1);
        assert_eq!(data.values, vec![1.0, 15.0, -15.0, 15.0]);
        assert_eq!(costs[0].saturated, 2);
        let warnings = saturation_warnings(Fp8Scale::Fixed(-4), &costs);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .contains("`w`: 2 of 4 elements exceed FP8's largest value (15 at scale 2^-4)"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[0].contains("in 1 of 1 layers (layer 0)"),
            "{}",
            warnings[0]
        );
        let summary = summarise(&costs);
        assert_eq!(summary[0].saturated, 2);
        let expected = ((25.0f64 + 1.0) / (1.0 + 400.0 + 256.0 + 225.0)).sqrt();
        assert!((summary[0].relative_rms - expected).abs() < 1e-12);
    }
}
