//! Meta's perception_models PE-Core (`core.vision_encoder.pe`, the
//! `VisionTransformer` of a PE-Core checkpoint, alone or as the `visual.`
//! tower of a whole CLIP model): OpenCLIP's naming. `conv1` without a bias
//! (zeros here), `class_embedding [width]`, `positional_embedding [tokens,
//! width]`, `ln_pre`, blocks under `transformer.resblocks.N` with one
//! `torch.nn.MultiheadAttention` each (`in_proj_weight` fused q, k, v;
//! `out_proj`), `ln_1` / `ln_2`, `mlp.c_fc` / `mlp.c_proj`; `ln_post`; the
//! attention pool `attn_pool` (`probe`, `attn` with its own fused input
//! projection, `layernorm`, `mlp`); and the projection `proj [width,
//! projection]`, already `[inputs, outputs]`, without a bias (zeros here).
//! These are the names timm's own converter (`eva._convert_pe`) maps onto
//! `timm_pe_core`'s.

use super::module::{Module, value_recipe};
use super::recipe::{Part, Recipe};

pub fn recipe(value: &str, layer: u32, prefix: &str) -> Option<Recipe> {
    let at = |name: &str| format!("{prefix}{name}");
    let whole = |value: &str| match value {
        "embed.class_token" => Some(Recipe::vector(at("class_embedding"))),
        "embed.positions" => Some(Recipe::Table(at("positional_embedding"))),
        "head.probe" => Some(Recipe::vector(at("attn_pool.probe"))),
        "head.projection.weight" => Some(Recipe::Exact(at("proj"))),
        "head.projection.bias" => Some(Recipe::Zeros),
        _ => None,
    };
    let block = at(&format!("transformer.resblocks.{layer}"));
    let attention = format!("{block}.attn");
    let pool = at("attn_pool");
    let module = |stem: &str| {
        Some(match stem {
            "embed.patch" => Module::Patch {
                module: at("conv1"),
                bias: false,
            },
            "embed.ln_pre" => Module::norm(at("ln_pre")),
            "layer.ln1" => Module::norm(format!("{block}.ln_1")),
            "layer.attn.qkv" => Module::in_projection(&attention, Part::WHOLE),
            "layer.attn.q" => Module::in_projection(&attention, Part::of_three(0)),
            "layer.attn.k" => Module::in_projection(&attention, Part::of_three(1)),
            "layer.attn.v" => Module::in_projection(&attention, Part::of_three(2)),
            "layer.attn.out" => Module::linear(format!("{attention}.out_proj")),
            "layer.ln2" => Module::norm(format!("{block}.ln_2")),
            "layer.mlp.up" => Module::linear(format!("{block}.mlp.c_fc")),
            "layer.mlp.down" => Module::linear(format!("{block}.mlp.c_proj")),
            "head.norm" => Module::norm(at("ln_post")),
            "head.pool.q" => Module::in_projection(&format!("{pool}.attn"), Part::of_three(0)),
            "head.pool.k" => Module::in_projection(&format!("{pool}.attn"), Part::of_three(1)),
            "head.pool.v" => Module::in_projection(&format!("{pool}.attn"), Part::of_three(2)),
            "head.pool.out" => Module::linear(format!("{pool}.attn.out_proj")),
            "head.pool.ln" => Module::norm(format!("{pool}.layernorm")),
            "head.pool.mlp.up" => Module::linear(format!("{pool}.mlp.c_fc")),
            "head.pool.mlp.down" => Module::linear(format!("{pool}.mlp.c_proj")),
            _ => return None,
        })
    };
    value_recipe(value, whole, module)
}
