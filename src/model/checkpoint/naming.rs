//! The tensor namings superstep reads, how a checkpoint's naming is
//! recognised (by one signature tensor each), and the dispatch from a
//! model value to the naming's recipe for it.

use serde::Serialize;

use super::recipe::Recipe;
use super::{perception_models, superstep, timm_pe_core, timm_vit, transformers_siglip};
use crate::model::safetensors::SafeTensors;

/// Whose names and layouts a checkpoint uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Naming {
    /// superstep's own: value names, `[inputs, outputs]` matrices
    /// (`tensor_name`).
    Superstep,
    /// transformers' SigLIP vision tower: `SiglipVisionModel`, or a whole
    /// `SiglipModel` with the tower under `vision_model.`.
    TransformersSiglip,
    /// timm's `VisionTransformer` (`vit_base_patch16_224`).
    TimmVit,
    /// timm's `Eva` as `vit_pe_core_large_patch14_336`.
    TimmPeCore,
    /// Meta's perception_models PE-Core (OpenCLIP naming), alone or as the
    /// `visual.` tower of a whole CLIP model.
    PerceptionModelsPeCore,
}

impl Naming {
    pub const ALL: [Naming; 5] = [
        Naming::Superstep,
        Naming::TransformersSiglip,
        Naming::TimmVit,
        Naming::TimmPeCore,
        Naming::PerceptionModelsPeCore,
    ];

    /// The name written in build files (`naming = "timm-vit"`).
    pub fn name(self) -> &'static str {
        match self {
            Naming::Superstep => "superstep",
            Naming::TransformersSiglip => "transformers-siglip",
            Naming::TimmVit => "timm-vit",
            Naming::TimmPeCore => "timm-pe-core",
            Naming::PerceptionModelsPeCore => "perception-models-pe-core",
        }
    }

    pub fn from_name(name: &str) -> Option<Naming> {
        Naming::ALL.into_iter().find(|naming| naming.name() == name)
    }

    /// The tensors whose presence identifies the naming.
    pub fn signature(self) -> &'static [&'static str] {
        match self {
            Naming::Superstep => &["embed.patch.weight"],
            Naming::TransformersSiglip => &["embeddings.patch_embedding.weight"],
            Naming::TimmVit => &["patch_embed.proj.weight", "cls_token"],
            Naming::TimmPeCore => &[
                "patch_embed.proj.weight",
                "norm_pre.weight",
                "attn_pool.latent",
            ],
            Naming::PerceptionModelsPeCore => &["conv1.weight", "ln_pre.weight", "attn_pool.probe"],
        }
    }

    /// The naming `file` is in, and the prefix its names carry (a whole
    /// `SiglipModel` keeps the vision tower under `vision_model.`, a whole
    /// perception_models CLIP model under `visual.`). timm's PE-Core
    /// is tried before ViT, whose tensors it has too.
    pub fn detect(file: &SafeTensors) -> Option<(Naming, &'static str)> {
        let order = [
            Naming::Superstep,
            Naming::TransformersSiglip,
            Naming::PerceptionModelsPeCore,
            Naming::TimmPeCore,
            Naming::TimmVit,
        ];
        order
            .into_iter()
            .find_map(|naming| Some((naming, naming.prefix_in(file)?)))
    }

    /// The prefix under which `file` holds all of this naming's signature.
    pub fn prefix_in(self, file: &SafeTensors) -> Option<&'static str> {
        let prefixes: &[&'static str] = match self {
            Naming::TransformersSiglip => &["", "vision_model."],
            Naming::PerceptionModelsPeCore => &["", "visual."],
            _ => &[""],
        };
        prefixes.iter().copied().find(|prefix| {
            self.signature()
                .iter()
                .all(|name| file.shape(&format!("{prefix}{name}")).is_some())
        })
    }

    /// How this naming stores one instance (`layer` for iterated values)
    /// of the model value `value`; `None` when it has no such tensor.
    pub fn recipe(self, value: &str, layer: u32, prefix: &str) -> Option<Recipe> {
        match self {
            Naming::Superstep => superstep::recipe(value, layer),
            Naming::TransformersSiglip => transformers_siglip::recipe(value, layer, prefix),
            Naming::TimmVit => timm_vit::recipe(value, layer),
            Naming::TimmPeCore => timm_pe_core::recipe(value, layer),
            Naming::PerceptionModelsPeCore => perception_models::recipe(value, layer, prefix),
        }
    }
}

impl std::fmt::Display for Naming {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}
