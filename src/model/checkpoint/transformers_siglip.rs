//! transformers' SigLIP vision tower (`SiglipVisionModel.save_pretrained`,
//! or a whole `SiglipModel` with the tower under `vision_model.`): separate
//! q, k, v projections (fused here when the build fuses them), the MAP
//! head's `torch.nn.MultiheadAttention` with one fused input projection
//! (split here), the probe `[1, 1, width]`, positions `[tokens, width]`.

use super::module::{Module, value_recipe};
use super::recipe::{Part, Recipe};

pub fn recipe(value: &str, layer: u32, prefix: &str) -> Option<Recipe> {
    let at = |name: &str| format!("{prefix}{name}");
    let whole = |value: &str| match value {
        "embed.positions" => Some(Recipe::Table(at("embeddings.position_embedding.weight"))),
        "head.probe" => Some(Recipe::vector(at("head.probe"))),
        _ => None,
    };
    let attention = at(&format!("encoder.layers.{layer}.self_attn"));
    let module = |stem: &str| {
        let block = at(&format!("encoder.layers.{layer}"));
        Some(match stem {
            "embed.patch" => Module::Patch {
                module: at("embeddings.patch_embedding"),
                bias: true,
            },
            "layer.ln1" => Module::norm(format!("{block}.layer_norm1")),
            "layer.attn.qkv" => Module::FusedLinear(
                ["q_proj", "k_proj", "v_proj"]
                    .map(|projection| format!("{attention}.{projection}"))
                    .to_vec(),
            ),
            "layer.attn.q" => Module::linear(format!("{attention}.q_proj")),
            "layer.attn.k" => Module::linear(format!("{attention}.k_proj")),
            "layer.attn.v" => Module::linear(format!("{attention}.v_proj")),
            "layer.attn.out" => Module::linear(format!("{attention}.out_proj")),
            "layer.ln2" => Module::norm(format!("{block}.layer_norm2")),
            "layer.mlp.up" => Module::linear(format!("{block}.mlp.fc1")),
            "layer.mlp.down" => Module::linear(format!("{block}.mlp.fc2")),
            "head.norm" => Module::norm(at("post_layernorm")),
            "head.pool.q" => Module::in_projection(&at("head.attention"), Part::of_three(0)),
            "head.pool.k" => Module::in_projection(&at("head.attention"), Part::of_three(1)),
            "head.pool.v" => Module::in_projection(&at("head.attention"), Part::of_three(2)),
            "head.pool.out" => Module::linear(at("head.attention.out_proj")),
            "head.pool.ln" => Module::norm(at("head.layernorm")),
            "head.pool.mlp.up" => Module::linear(at("head.mlp.fc1")),
            "head.pool.mlp.down" => Module::linear(at("head.mlp.fc2")),
            _ => return None,
        })
    };
    value_recipe(value, whole, module)
}
