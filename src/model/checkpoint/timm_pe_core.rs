//! timm's PE-Core (`Eva` as `vit_pe_core_large_patch14_336`, `state_dict`
//! saved with `safetensors.torch.save_file`): ViT's block naming
//! (`timm_vit`) plus `norm_pre` (ln_pre), no patch-embedding bias (zeros
//! here), and the attention pool `attn_pool` with its learned `latent`, a
//! `q` projection and one fused `kv` (split here), then `head` (the
//! projection, with a bias).

use super::module::{Module, value_recipe};
use super::recipe::{Part, Recipe};
use super::timm_vit;

pub fn recipe(value: &str, layer: u32) -> Option<Recipe> {
    let whole = |value: &str| match value {
        "head.probe" => Some(Recipe::vector("attn_pool.latent")),
        _ => timm_vit::whole(value),
    };
    let module = |stem: &str| {
        Some(match stem {
            "embed.patch" => Module::Patch {
                module: "patch_embed.proj".to_string(),
                bias: false,
            },
            "embed.ln_pre" => Module::norm("norm_pre"),
            "head.pool.q" => Module::linear("attn_pool.q"),
            "head.pool.k" => Module::linear_part("attn_pool.kv", Part::of_two(0)),
            "head.pool.v" => Module::linear_part("attn_pool.kv", Part::of_two(1)),
            "head.pool.out" => Module::linear("attn_pool.proj"),
            "head.pool.ln" => Module::norm("attn_pool.norm"),
            "head.pool.mlp.up" => Module::linear("attn_pool.mlp.fc1"),
            "head.pool.mlp.down" => Module::linear("attn_pool.mlp.fc2"),
            "head.projection" => Module::linear("head"),
            _ => return timm_vit::block_module(stem, layer),
        })
    };
    value_recipe(value, whole, module)
}
