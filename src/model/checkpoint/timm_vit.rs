//! timm's `VisionTransformer` (`vit_base_patch16_224`, `state_dict` saved
//! with `safetensors.torch.save_file`): one fused `qkv` per block (split
//! here when the build does not fuse), `cls_token [1, 1, width]`,
//! `pos_embed [1, tokens, width]`, the final `norm` before the class token
//! is taken. A classifier `head`, if saved, is not read.

use super::module::{Module, value_recipe};
use super::recipe::{Part, Recipe};

pub fn recipe(value: &str, layer: u32) -> Option<Recipe> {
    value_recipe(value, whole, |stem| block_module(stem, layer))
}

/// The tensors timm's ViT and Eva (PE-Core) name alike.
pub fn whole(value: &str) -> Option<Recipe> {
    match value {
        "embed.class_token" => Some(Recipe::vector("cls_token")),
        "embed.positions" => Some(Recipe::Table("pos_embed".to_string())),
        _ => None,
    }
}

/// The patch embedding, the blocks and the final norm, as timm's ViT and
/// Eva (PE-Core) both name them.
pub fn block_module(stem: &str, layer: u32) -> Option<Module> {
    let block = format!("blocks.{layer}");
    let qkv = format!("{block}.attn.qkv");
    Some(match stem {
        "embed.patch" => Module::Patch {
            module: "patch_embed.proj".to_string(),
            bias: true,
        },
        "layer.ln1" => Module::norm(format!("{block}.norm1")),
        "layer.attn.qkv" => Module::linear(qkv),
        "layer.attn.q" => Module::linear_part(qkv, Part::of_three(0)),
        "layer.attn.k" => Module::linear_part(qkv, Part::of_three(1)),
        "layer.attn.v" => Module::linear_part(qkv, Part::of_three(2)),
        "layer.attn.out" => Module::linear(format!("{block}.attn.proj")),
        "layer.ln2" => Module::norm(format!("{block}.norm2")),
        "layer.mlp.up" => Module::linear(format!("{block}.mlp.fc1")),
        "layer.mlp.down" => Module::linear(format!("{block}.mlp.fc2")),
        "head.norm" => Module::norm("norm"),
        _ => return None,
    })
}
