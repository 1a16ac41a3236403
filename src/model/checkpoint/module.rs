//! A library's module (a `torch.nn.Linear`, part of a fused one, a
//! LayerNorm, the patch convolution) and the recipes of the superstep
//! values it holds: the vocabulary the namings are written in.

use super::recipe::{Part, Recipe};

pub enum Module {
    /// Block `part` of a linear layer's `weight` / `bias` tensors.
    Linear {
        weight: String,
        bias: String,
        part: Part,
    },
    /// Separate linear layers that superstep fuses (q, k, v).
    FusedLinear(Vec<String>),
    /// A LayerNorm: `weight` is superstep's gamma, `bias` its beta.
    Norm(String),
    /// The patch convolution; `bias: false` when the library has none.
    Patch { module: String, bias: bool },
}

impl Module {
    /// `{module}.weight` and `{module}.bias`, whole.
    pub fn linear(module: impl Into<String>) -> Module {
        Module::linear_part(module, Part::WHOLE)
    }

    /// Block `part` of `{module}.weight` and `{module}.bias`.
    pub fn linear_part(module: impl Into<String>, part: Part) -> Module {
        let module = module.into();
        Module::Linear {
            weight: format!("{module}.weight"),
            bias: format!("{module}.bias"),
            part,
        }
    }

    /// Block `part` of a `torch.nn.MultiheadAttention`'s fused input
    /// projection (`in_proj_weight`, `in_proj_bias`).
    pub fn in_projection(module: &str, part: Part) -> Module {
        Module::Linear {
            weight: format!("{module}.in_proj_weight"),
            bias: format!("{module}.in_proj_bias"),
            part,
        }
    }

    pub fn norm(module: impl Into<String>) -> Module {
        Module::Norm(module.into())
    }

    /// The recipe of the value `{stem}.{leaf}` this module holds (`leaf`:
    /// `weight`, `bias`, `gamma` or `beta`).
    pub fn recipe(&self, leaf: &str) -> Option<Recipe> {
        match (self, leaf) {
            (Module::Linear { weight, part, .. }, "weight") => {
                Some(Recipe::linear_weight(weight.clone(), *part))
            }
            (Module::Linear { bias, part, .. }, "bias") => {
                Some(Recipe::vector_part(bias.clone(), *part))
            }
            (Module::FusedLinear(modules), "weight") => Some(Recipe::FusedLinearWeights(
                modules
                    .iter()
                    .map(|module| format!("{module}.weight"))
                    .collect(),
            )),
            (Module::FusedLinear(modules), "bias") => Some(Recipe::FusedVectors(
                modules
                    .iter()
                    .map(|module| format!("{module}.bias"))
                    .collect(),
            )),
            (Module::Norm(module), "gamma") => Some(Recipe::vector(format!("{module}.weight"))),
            (Module::Norm(module), "beta") => Some(Recipe::vector(format!("{module}.bias"))),
            (Module::Patch { module, .. }, "weight") => {
                Some(Recipe::PatchKernel(format!("{module}.weight")))
            }
            (Module::Patch { module, bias: true }, "bias") => {
                Some(Recipe::vector(format!("{module}.bias")))
            }
            (Module::Patch { bias: false, .. }, "bias") => Some(Recipe::Zeros),
            _ => None,
        }
    }
}

/// The recipe of `value`: `whole`'s, for values that are one tensor each
/// (class token, positions, probe), or else the recipe of its leaf in the
/// module its stem names.
pub fn value_recipe(
    value: &str,
    whole: impl FnOnce(&str) -> Option<Recipe>,
    module: impl FnOnce(&str) -> Option<Module>,
) -> Option<Recipe> {
    if let Some(recipe) = whole(value) {
        return Some(recipe);
    }
    let (stem, leaf) = value.rsplit_once('.')?;
    module(stem)?.recipe(leaf)
}
