//! What configuration a checkpoint's shapes say it is (width, MLP width,
//! layers, patch side, positions, projection; heads when the library's
//! `config.json` sits beside it, since no tensor shape shows them), what
//! the build's graph needs, and the sentence naming the difference and the
//! preset the checkpoint looks like.

use std::fmt;
use std::path::Path;

use super::naming::Naming;
use crate::model::config::{ModelConfig, PRESET_NAMES};
use crate::model::graph::{Graph, OpKind, ViewKind};
use crate::model::safetensors::SafeTensors;

/// Layers are counted up to this many (a guard against absurd files).
const MAXIMUM_LAYERS: u32 = 10_000;

/// A model's shape as far as a checkpoint can tell it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShapeSummary {
    pub width: Option<usize>,
    pub mlp: Option<usize>,
    pub layers: Option<u32>,
    pub patch: Option<usize>,
    pub positions: Option<usize>,
    pub projection: Option<usize>,
    pub heads: Option<u32>,
}

impl ShapeSummary {
    /// What `file`'s tensors (in `naming` under `prefix`) say, plus the
    /// heads of a `config.json` beside `path`.
    pub fn of_checkpoint(file: &SafeTensors, naming: Naming, prefix: &str, path: &Path) -> Self {
        let shape = |value: &str| naming.recipe(value, 0, prefix)?.value_shape(file);
        let patch_matrix = shape("embed.patch.weight");
        let layers = (0..MAXIMUM_LAYERS)
            .find(|&layer| {
                naming
                    .recipe("layer.ln1.gamma", layer, prefix)
                    .and_then(|recipe| recipe.first_tensor().map(str::to_string))
                    .is_none_or(|tensor| file.shape(&tensor).is_none())
            })
            .filter(|&count| count > 0);
        ShapeSummary {
            width: patch_matrix.map(|[_, width]| width),
            mlp: shape("layer.mlp.up.weight").map(|[_, mlp]| mlp),
            layers,
            patch: patch_matrix.map(|[rows, _]| patch_side(rows)),
            positions: shape("embed.positions").map(|[rows, _]| rows),
            projection: shape("head.projection.weight").map(|[_, cols]| cols),
            heads: library_config_heads(path),
        }
    }

    /// What `graph` needs.
    pub fn of_graph(graph: &Graph) -> Self {
        let shape = |name: &str| {
            graph
                .value_ids()
                .map(|id| graph.value(id))
                .find(|value| value.name == name)
                .map(|value| [value.shape.rows as usize, value.shape.cols as usize])
        };
        let patch_matrix = shape("embed.patch.weight");
        let heads = graph.ops.iter().find_map(|op| match &op.kind {
            OpKind::View(ViewKind::SplitHeads { heads, .. }) if op.name == "layer.attn.split_q" => {
                Some(*heads)
            }
            _ => None,
        });
        ShapeSummary {
            width: patch_matrix.map(|[_, width]| width),
            mlp: shape("layer.mlp.up.weight").map(|[_, mlp]| mlp),
            layers: graph.repeat.as_ref().map(|repeat| repeat.iterations),
            patch: patch_matrix.map(|[rows, _]| patch_side(rows)),
            positions: shape("embed.positions").map(|[rows, _]| rows),
            projection: shape("head.projection.weight").map(|[_, cols]| cols),
            heads,
        }
    }

    /// Fields both summaries know and that differ.
    fn differs_from(&self, other: &ShapeSummary) -> bool {
        fn differ<T: PartialEq>(first: Option<T>, second: Option<T>) -> bool {
            matches!((first, second), (Some(first), Some(second)) if first != second)
        }
        differ(self.width, other.width)
            || differ(self.mlp, other.mlp)
            || differ(self.layers, other.layers)
            || differ(self.patch, other.patch)
            || differ(self.positions, other.positions)
            || differ(self.projection, other.projection)
            || differ(self.heads, other.heads)
    }

    /// A preset's shape.
    fn of_config(config: &ModelConfig) -> Self {
        ShapeSummary {
            width: Some(config.width as usize),
            mlp: Some(config.mlp as usize),
            layers: Some(config.layers),
            patch: Some(config.patch as usize),
            positions: Some(config.tokens() as usize),
            projection: config.projection.map(|projection| projection as usize),
            heads: Some(config.heads),
        }
    }

    /// The shipped preset of this shape, if any (heads compared when
    /// known; any layer count, since a checkpoint may hold fewer layers
    /// than its model was trained with).
    pub(super) fn preset(&self) -> Option<&'static str> {
        PRESET_NAMES.iter().copied().find(|name| {
            ModelConfig::preset(name).is_some_and(|config| {
                let preset = ShapeSummary::of_config(&config);
                ShapeSummary {
                    heads: self.heads.and(preset.heads),
                    layers: self.layers,
                    ..preset
                } == *self
            })
        })
    }

    /// What to set for a build of this checkpoint: the preset it looks
    /// like and, when it has another depth, its layer count.
    fn preset_advice(&self) -> Option<String> {
        let name = self.preset()?;
        let preset_layers = ModelConfig::preset(name).map(|config| config.layers);
        Some(match self.layers {
            Some(layers) if Some(layers) != preset_layers => format!(
                " (the `{name}` preset with {layers} layers; set workload.model = \"{name}\" \
                 and workload.layers = {layers})"
            ),
            _ => format!(" (the `{name}` preset; set workload.model = \"{name}\")"),
        })
    }
}

impl fmt::Display for ShapeSummary {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let number = |value: Option<usize>| value.map(|value| value.to_string());
        let count = |value: Option<u32>| value.map(|value| value.to_string());
        let parts: Vec<String> = [
            number(self.width).map(|width| format!("width {width}")),
            number(self.mlp).map(|mlp| format!("MLP {mlp}")),
            count(self.layers).map(|layers| format!("{layers} layers")),
            count(self.heads).map(|heads| format!("{heads} heads")),
            number(self.patch).map(|patch| format!("patch {patch}")),
            number(self.positions).map(|positions| format!("{positions} positions")),
            number(self.projection).map(|projection| format!("projection {projection}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        formatter.write_str(&parts.join(", "))
    }
}

/// A checkpoint whose configuration is not the build's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub checkpoint: ShapeSummary,
    pub model: ShapeSummary,
}

impl Mismatch {
    /// `Some` when the checkpoint's known fields differ from the model's.
    pub fn between(checkpoint: ShapeSummary, model: ShapeSummary) -> Option<Box<Mismatch>> {
        checkpoint
            .differs_from(&model)
            .then(|| Box::new(Mismatch { checkpoint, model }))
    }

    /// `"; {mismatch}"`, or nothing: the tail of a tensor's message.
    pub fn sentence(mismatch: &Option<Box<Mismatch>>) -> String {
        mismatch
            .as_ref()
            .map(|mismatch| format!("; {mismatch}"))
            .unwrap_or_default()
    }
}

/// `the checkpoint looks like … (the `vit-b16` preset; …), this build has …`.
impl fmt::Display for Mismatch {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let preset = self.checkpoint.preset_advice().unwrap_or_default();
        write!(
            formatter,
            "the checkpoint looks like {}{preset}, this build has {}",
            self.checkpoint, self.model
        )
    }
}

/// The side of a square patch of 3 channels from the patch matrix's rows.
fn patch_side(rows: usize) -> usize {
    ((rows / 3) as f64).sqrt().round() as usize
}

/// `num_attention_heads` of a transformers `config.json` next to the
/// checkpoint (top level, or under `vision_config` for a whole model).
fn library_config_heads(path: &Path) -> Option<u32> {
    let text = crate::input_file::read_text(
        &path.parent()?.join("config.json"),
        crate::model::safetensors::MAX_INDEX_BYTES,
        "a model configuration",
    )
    .ok()?;
    let config: serde_json::Value = serde_json::from_str(&text).ok()?;
    let heads = config
        .get("vision_config")
        .unwrap_or(&config)
        .get("num_attention_heads")?;
    u32::try_from(heads.as_u64()?).ok()
}
