//! Parameter values for a graph: deterministic seeded random weights by
//! default, or real weights read from a SafeTensors file. Values are stored
//! already quantised to the precision the program uses (FP8 codes for matrix
//! weights, FP16-rounded values for vectors), so that the interpreter and the
//! FP32 reference see exactly the same numbers.
//!
//! Owns weight generation and superstep's own SafeTensors
//! naming scheme (`layers.{i}.attn.qkv.weight` for iterated weights, the
//! value name for the others, shape `[rows, cols]`); libraries' namings and
//! their conversions are `crate::model::checkpoint`'s, the scales and
//! rounding `crate::model::quantisation`'s. It does not place or lay out
//! weights.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::checkpoint::{CheckpointError, Naming, read_values};
use super::graph::{Graph, ValueId, ValueKind};
pub use super::quantisation::WeightData;
use super::quantisation::{Fp8Scale, InstanceQuantisation, quantise};
use super::safetensors::{SafeTensors, SafeTensorsError};
use crate::numerics::fp8::quantise_in_place;
use crate::numerics::half_float;
use crate::numerics::wide::with_wide_vectors;

/// All parameters of a graph plus the host input.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// The scale policy the FP8 tensors were quantised under.
    pub fp8_scale: Fp8Scale,
    /// What quantising cost, per FP8 tensor instance, in graph order.
    pub quantisation: Vec<InstanceQuantisation>,
    /// Shared, so that weights with another input (`--image`, `--input`)
    /// are a copy of the input alone, not of every tensor.
    pub tensors: Arc<BTreeMap<ValueId, WeightData>>,
    /// The image patches, FP16-rounded.
    pub input: Vec<f32>,
}

#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    #[error("reading weights: {0}")]
    SafeTensors(#[from] SafeTensorsError),
    #[error("{0}")]
    Checkpoint(#[from] CheckpointError),
    #[error("the graph has no input value")]
    NoInput,
    #[error(
        "{path}: `{value}` has {count} non-finite elements (the first, element {index}, is {first}); \
         a checkpoint's weights and input must be finite numbers"
    )]
    NonFinite {
        path: String,
        value: String,
        count: usize,
        index: usize,
        first: f32,
    },
    #[error(
        "{path}: `{value}` has {count} elements beyond FP16's range of ±65504 (the first, element \
         {index}, is {first}); the program stores it in FP16: scale the checkpoint's values down"
    )]
    BeyondFp16 {
        path: String,
        value: String,
        count: usize,
        index: usize,
        first: f32,
    },
    #[error(
        "{path}: `{value}` (layer {instance}) needs an FP8 scale of 2^{scale}, beyond the range \
         a scale may have (-32..=32): its values are too large for the program to compute with; \
         scale the checkpoint's values down"
    )]
    ScaleBeyondRange {
        path: String,
        value: String,
        instance: u32,
        scale: i32,
    },
}

/// The largest scale `fp8_scale = "auto"` may choose for a checkpoint's
/// tensor: the range a fixed `workload.fp8_scale` accepts (-32..=32). A
/// tensor needing more (an element beyond 240 x 2^32, about 1e12) is
/// refused: its products overflow every activation the program computes.
pub const MAX_AUTO_SCALE: i32 = 32;

/// `Err` naming `value` when a value stored in FP16 lies beyond FP16's
/// range (it would be clamped to 65504 silently).
fn check_fp16_range(path: &Path, value: &str, values: &[f32]) -> Result<(), WeightError> {
    let beyond = |number: &f32| number.abs() > half_float::F16_MAX;
    let Some(index) = values.iter().position(beyond) else {
        return Ok(());
    };
    Err(WeightError::BeyondFp16 {
        path: path.display().to_string(),
        value: value.to_string(),
        count: values.iter().filter(|number| beyond(number)).count(),
        index,
        first: values[index],
    })
}

/// `Err` naming the first FP8 instance whose scale is beyond [`MAX_AUTO_SCALE`].
fn check_scales(path: &Path, costs: &[InstanceQuantisation]) -> Result<(), WeightError> {
    match costs.iter().find(|cost| cost.scale > MAX_AUTO_SCALE) {
        Some(cost) => Err(WeightError::ScaleBeyondRange {
            path: path.display().to_string(),
            value: cost.tensor.clone(),
            instance: cost.instance,
            scale: cost.scale,
        }),
        None => Ok(()),
    }
}

/// `Err` naming `value` when `values` holds a NaN or an infinity.
fn check_finite(path: &Path, value: &str, values: &[f32]) -> Result<(), WeightError> {
    let Some(index) = values.iter().position(|number| !number.is_finite()) else {
        return Ok(());
    };
    Err(WeightError::NonFinite {
        path: path.display().to_string(),
        value: value.to_string(),
        count: values.iter().filter(|number| !number.is_finite()).count(),
        index,
        first: values[index],
    })
}

/// SplitMix64: a small, well-mixed deterministic generator.
#[derive(Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(SPLITMIX_GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub fn next_symmetric(&mut self) -> f32 {
        SplitMix::symmetric(self.next_u64())
    }

    /// The generator after `count` draws (SplitMix's state only counts).
    pub fn skipped(seed: u64, count: u64) -> SplitMix {
        SplitMix(seed.wrapping_add(count.wrapping_mul(SPLITMIX_GAMMA)))
    }

    /// Draw `index` (from 0) of the generator seeded with `seed`, without
    /// drawing the ones before it: what `skipped(seed, index).next_u64()`
    /// returns. Each draw stands alone, so a loop of them vectorises.
    #[inline]
    pub fn draw_at(seed: u64, index: u64) -> u64 {
        let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(SPLITMIX_GAMMA));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// [`SplitMix::next_symmetric`] of the draw `bits`.
    #[inline]
    pub fn symmetric(bits: u64) -> f32 {
        ((bits >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const SPLITMIX_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn name_seed(seed: u64, name: &str, instance: u32) -> u64 {
    // FNV-1a over the name, mixed with the seed and instance.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash ^ seed.rotate_left(17) ^ (instance as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// How a generated weight is distributed, from its role in the name
/// (decided once per tensor, not per element).
#[derive(Clone, Copy)]
enum Distribution {
    /// Unit-variance outputs: uniform with variance 1 / fan_in, `factor`
    /// being `sqrt(3 / rows)`.
    Weight { factor: f32 },
    /// LayerNorm gains: about 1.
    Gamma,
    /// Biases and LayerNorm shifts: small.
    Shift,
    /// Positions, class token, probe.
    Other,
}

impl Distribution {
    fn of(name: &str, rows: u32) -> Distribution {
        if name.ends_with(".weight") {
            Distribution::Weight {
                factor: (3.0 / rows as f32).sqrt(),
            }
        } else if name.ends_with(".gamma") {
            Distribution::Gamma
        } else if name.ends_with(".bias") || name.ends_with(".beta") {
            Distribution::Shift
        } else {
            Distribution::Other
        }
    }

    /// Fills `out` with draws `first..first + out.len()` of the generator
    /// seeded with `seed`, in this distribution (the values a generator
    /// skipped to `first` draws one after another).
    /// Inlined, so that a loop run under
    /// [`with_wide_vectors`](crate::numerics::wide::with_wide_vectors)
    /// vectorises with it.
    #[inline(always)]
    fn fill(self, seed: u64, first: u64, out: &mut [f32]) {
        #[inline(always)]
        fn each(seed: u64, first: u64, out: &mut [f32], shape: impl Fn(f32) -> f32) {
            for (index, slot) in (first..).zip(out.iter_mut()) {
                *slot = shape(SplitMix::symmetric(SplitMix::draw_at(seed, index)));
            }
        }
        match self {
            Distribution::Weight { factor } => each(seed, first, out, |uniform| uniform * factor),
            Distribution::Gamma => each(seed, first, out, |uniform| 1.0 + 0.1 * uniform),
            Distribution::Shift => each(seed, first, out, |uniform| 0.02 * uniform),
            Distribution::Other => each(seed, first, out, |uniform| 0.5 * uniform),
        }
    }
}

/// Elements generated per parallel job of [`generated_instance`].
const GENERATION_CHUNK: usize = 1 << 16;

/// Instance `instance` of seeded weight `id` before quantisation: its own
/// generator's draws in element order (made in chunks over the cores, each
/// chunk's generator skipped to its first draw: the same values).
fn generated_instance(graph: &Graph, seed: u64, id: ValueId, instance: u32) -> Vec<f32> {
    generated_instance_and_largest(graph, seed, id, instance).0
}

/// [`generated_instance`] and its largest magnitude, taken from each chunk
/// as it is made (while the chunk is still in cache).
fn generated_instance_and_largest(
    graph: &Graph,
    seed: u64,
    id: ValueId,
    instance: u32,
) -> (Vec<f32>, f32) {
    use rayon::prelude::*;
    let value = graph.value(id);
    let elements = value.shape.elements() as usize;
    let start = name_seed(seed, &value.name, instance);
    let distribution = Distribution::of(&value.name, value.shape.rows);
    let mut values = vec![0.0f32; elements];
    let largest = values
        .par_chunks_mut(GENERATION_CHUNK)
        .enumerate()
        .map(|(chunk, out)| {
            with_wide_vectors(|| {
                distribution.fill(start, (chunk * GENERATION_CHUNK) as u64, out);
                largest_magnitude(out)
            })
        })
        .reduce(|| 0.0f32, f32::max);
    (values, largest)
}

/// [`generated_instance`] stored as FP8 at the fixed `scale` (each value
/// rounded to F143 and decoded), made and rounded chunk by chunk while
/// each chunk is in cache: the values `StreamedSeededWeights::instance`
/// gives, in one pass instead of three (a fixed scale needs no largest).
fn generated_fp8_instance(
    graph: &Graph,
    seed: u64,
    id: ValueId,
    instance: u32,
    scale: i32,
) -> Vec<f32> {
    use rayon::prelude::*;
    let value = graph.value(id);
    let start = name_seed(seed, &value.name, instance);
    let distribution = Distribution::of(&value.name, value.shape.rows);
    let mut values = vec![0.0f32; value.shape.elements() as usize];
    values
        .par_chunks_mut(GENERATION_CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            with_wide_vectors(|| {
                distribution.fill(start, (chunk * GENERATION_CHUNK) as u64, out);
                quantise_in_place(out, scale);
            })
        });
    values
}

/// The largest magnitude in `values` (0 for none; NaNs are passed over, as
/// `f32::max` passes them), over sixteen lanes at once: a fold through
/// `f32::max` is one dependent comparison per value.
#[inline(always)]
fn largest_magnitude(values: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [0.0f32; LANES];
    let mut blocks = values.chunks_exact(LANES);
    for block in &mut blocks {
        for (lane, &value) in lanes.iter_mut().zip(block) {
            let magnitude = value.abs();
            if magnitude > *lane {
                *lane = magnitude;
            }
        }
    }
    blocks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(0.0f32, |most, value| most.max(value.abs()))
}

/// Seeded parameters made when the reference reads them, one tensor
/// instance at a time: the values [`seeded_weights`] stores, without
/// holding every layer's at once (the reference reads a layer's weights
/// once, so a pass over the model holds about one layer's).
pub struct StreamedSeededWeights<'graph> {
    graph: &'graph Graph,
    seed: u64,
    fp8_scale: Fp8Scale,
    input: Vec<f32>,
}

impl<'graph> StreamedSeededWeights<'graph> {
    /// Streams `graph`'s seeded weights (`seed`, quantised under
    /// `fp8_scale`) with `input` (the graph's input, FP16-rounded), or the
    /// seeded input when `None`.
    pub fn new(
        graph: &'graph Graph,
        seed: u64,
        fp8_scale: Fp8Scale,
        input: Option<Vec<f32>>,
    ) -> Result<StreamedSeededWeights<'graph>, WeightError> {
        let input = match input {
            Some(input) => input,
            None => seeded_input_only(graph, seed, fp8_scale)?.input,
        };
        Ok(StreamedSeededWeights {
            graph,
            seed,
            fp8_scale,
            input,
        })
    }

    /// Instance `instance` of weight `id`, as [`seeded_weights`] stores it.
    pub fn instance(&self, id: ValueId, instance: u32) -> Vec<f32> {
        use rayon::prelude::*;
        let value = self.graph.value(id);
        if let (super::graph::Precision::F8, Fp8Scale::Fixed(scale)) =
            (value.precision, self.fp8_scale)
        {
            return generated_fp8_instance(self.graph, self.seed, id, instance, scale);
        }
        let (values, largest) = generated_instance_and_largest(self.graph, self.seed, id, instance);
        match value.precision {
            super::graph::Precision::F8 => {
                let mut values = values;
                let scale = self.fp8_scale.scale_for(largest);
                values
                    .par_chunks_mut(GENERATION_CHUNK)
                    .for_each(|chunk| with_wide_vectors(|| quantise_in_place(chunk, scale)));
                values
            }
            super::graph::Precision::F16 => {
                values.into_par_iter().map(half_float::round_f16).collect()
            }
            super::graph::Precision::F32 => values,
            // Stored weights never have an activation's precision; were one
            // given it, its own scale is what it would be stored at.
            super::graph::Precision::F8Activation { scale } => {
                let mut values = values;
                values.par_chunks_mut(GENERATION_CHUNK).for_each(|chunk| {
                    with_wide_vectors(|| quantise_in_place(chunk, i32::from(scale)))
                });
                values
            }
        }
    }

    /// The input patches.
    pub fn input(&self) -> &[f32] {
        &self.input
    }
}

fn instances_of(graph: &Graph, iterated: bool) -> u32 {
    if iterated {
        graph.repeat.as_ref().map_or(1, |repeat| repeat.iterations)
    } else {
        1
    }
}

/// Deterministic random weights and input for `graph`.
pub fn seeded_weights(
    graph: &Graph,
    seed: u64,
    fp8_scale: Fp8Scale,
) -> Result<Weights, WeightError> {
    let mut tensors = BTreeMap::new();
    let mut quantisation = Vec::new();
    let mut input = None;
    for id in graph.value_ids() {
        let value = graph.value(id);
        let elements = value.shape.elements() as usize;
        match value.kind {
            ValueKind::Weight { iterated } => {
                let instances = instances_of(graph, iterated);
                let mut values = Vec::with_capacity(elements * instances as usize);
                for instance in 0..instances {
                    values.extend(generated_instance(graph, seed, id, instance));
                }
                let (data, costs) =
                    quantise(&value.name, values, value.precision, fp8_scale, instances);
                tensors.insert(id, data);
                quantisation.extend(costs);
            }
            ValueKind::Input => {
                let mut generator = SplitMix::new(name_seed(seed, &value.name, 0));
                input = Some(
                    (0..elements)
                        .map(|_| half_float::round_f16(generator.next_symmetric()))
                        .collect(),
                );
            }
            ValueKind::Activation => {}
        }
    }
    Ok(Weights {
        fp8_scale,
        quantisation,
        tensors: Arc::new(tensors),
        input: input.ok_or(WeightError::NoInput)?,
    })
}

/// The SafeTensors name of one instance of a weight in superstep's own
/// naming (kept here for writers of such files).
pub use super::checkpoint::tensor_name;

/// Real weights from a SafeTensors checkpoint in `naming` (`None`: the
/// naming its tensors show); the input patches stay seeded (`seed`) unless
/// the file is in superstep's naming and has an `input.patches` tensor.
pub fn safetensors_weights(
    graph: &Graph,
    path: &Path,
    naming: Option<Naming>,
    seed: u64,
    fp8_scale: Fp8Scale,
) -> Result<Weights, WeightError> {
    let file = SafeTensors::read_checkpoint(path)?;
    let values = read_values(graph, &file, path, naming)?;
    let mut weights = seeded_input_only(graph, seed, fp8_scale)?;
    let instances = instances_of(graph, true);
    for (id, values) in values.tensors {
        let value = graph.value(id);
        check_finite(path, &value.name, &values)?;
        if value.precision == super::graph::Precision::F16 {
            check_fp16_range(path, &value.name, &values)?;
        }
        let iterated = matches!(value.kind, ValueKind::Weight { iterated: true });
        let count = if iterated { instances } else { 1 };
        let (data, costs) = quantise(&value.name, values, value.precision, fp8_scale, count);
        check_scales(path, &costs)?;
        Arc::make_mut(&mut weights.tensors).insert(id, data);
        weights.quantisation.extend(costs);
    }
    if let Some(input) = values.input {
        check_finite(path, "input.patches", &input)?;
        check_fp16_range(path, "input.patches", &input)?;
        weights.input = input.into_iter().map(half_float::round_f16).collect();
    }
    Ok(weights)
}

fn seeded_input_only(
    graph: &Graph,
    seed: u64,
    fp8_scale: Fp8Scale,
) -> Result<Weights, WeightError> {
    let input_value = graph
        .value_ids()
        .find(|&id| graph.value(id).kind == ValueKind::Input)
        .ok_or(WeightError::NoInput)?;
    let value = graph.value(input_value);
    let mut generator = SplitMix::new(name_seed(seed, &value.name, 0));
    Ok(Weights {
        fp8_scale,
        quantisation: Vec::new(),
        tensors: Arc::default(),
        input: (0..value.shape.elements())
            .map(|_| half_float::round_f16(generator.next_symmetric()))
            .collect(),
    })
}
