//! Model configurations: the shape of every Vision Transformer encoder the
//! compiler builds (the presets of `WORKLOADS.md` and user-described custom
//! shapes), with the parameter and weight-byte arithmetic derived from a shape.
//!
//! This module owns plain shape data and arithmetic only. It must not read
//! files, validate user input (that is `crate::build_file::validate`'s job) or know
//! anything about the machine; its methods never panic, whatever the fields
//! hold, so a half-validated configuration can still be described safely.

use std::hash::{Hash, Hasher};

use serde::Serialize;

/// Which form of GELU the MLP uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GeluForm {
    /// The tanh approximation (SigLIP).
    Tanh,
    /// Exact GELU via the error function (PE, ViT).
    Erf,
}

/// The head that turns the final token sequence into one embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pooling {
    /// Multihead attention pooling (SigLIP): a learned probe cross-attends to
    /// the tokens (no residual), then `x + MLP(LN(x))`, then token 0.
    Map { heads: u32 },
    /// PE attention pooling: a probe cross-attends, then `x + MLP(LN(x))`,
    /// then the optional output projection.
    AttentionPool { heads: u32 },
    /// Take the class token (ViT).
    ClassToken,
}

impl Pooling {
    /// The number of attention heads of the pooling head, if it has any.
    pub fn heads(&self) -> Option<u32> {
        match self {
            Pooling::Map { heads } | Pooling::AttentionPool { heads } => Some(*heads),
            Pooling::ClassToken => None,
        }
    }
}

/// How token positions are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Positions {
    /// Learned absolute position embeddings added after patch embedding.
    Learned,
    /// Learned absolute embeddings plus 2D rotary embeddings on q and k (PE):
    /// adjacent pairs, the first half of each head's pairs turned by the
    /// patch's column and the second by its row, counted from 1, the class
    /// token unturned (`crate::sim::kernels::rotary_angle`).
    LearnedWithRotary,
}

/// The shape of one Vision Transformer encoder.
///
/// `PartialEq`, `Eq` and `Hash` compare `layer_norm_epsilon` by its bits, so
/// the configuration can key memoized queries.
#[derive(Clone, Debug, Serialize)]
pub struct ModelConfig {
    /// `siglip-so400m`, `pe-core-l14`, `vit-b16` or `custom`.
    pub name: String,
    /// Residual stream width.
    pub width: u32,
    /// MLP hidden width.
    pub mlp: u32,
    /// Number of transformer layers.
    pub layers: u32,
    /// Attention heads per layer.
    pub heads: u32,
    /// Patch side in pixels.
    pub patch: u32,
    /// Image channels (3).
    pub channels: u32,
    /// Number of patch tokens (grid x grid).
    pub patches: u32,
    /// Whether a learned class token is prepended to the patch tokens.
    pub class_token: bool,
    pub positions: Positions,
    pub gelu: GeluForm,
    pub pooling: Pooling,
    /// A LayerNorm before the first layer (PE's `ln_pre`).
    pub pre_norm: bool,
    /// Output width of a final projection after pooling (PE; timm's `head`,
    /// which has a bias), if any.
    pub projection: Option<u32>,
    pub layer_norm_epsilon: f32,
}

/// The names of the shipped presets, in the order they are listed to users.
pub const PRESET_NAMES: &[&str] = &["siglip-so400m", "pe-core-l14", "vit-b16"];

/// The model name that means "no preset: every shape field comes from the query".
pub const CUSTOM_MODEL_NAME: &str = "custom";

impl ModelConfig {
    /// SigLIP so400m/14 at 384 pixels.
    pub fn siglip_so400m() -> Self {
        ModelConfig {
            name: "siglip-so400m".to_string(),
            width: 1152,
            mlp: 4304,
            layers: 27,
            heads: 16,
            patch: 14,
            channels: 3,
            patches: 27 * 27,
            class_token: false,
            positions: Positions::Learned,
            gelu: GeluForm::Tanh,
            pooling: Pooling::Map { heads: 16 },
            pre_norm: false,
            projection: None,
            layer_norm_epsilon: 1e-6,
        }
    }

    /// PE-Core-L14 at 336 pixels, as timm's `vit_pe_core_large_patch14_336`
    /// computes it (checked by `tests/fidelity/pe_core.rs`). The graph keeps a
    /// patch-embedding bias that PE does not have: a checkpoint supplies
    /// zeros, and any bias equals the same model with the bias added to the
    /// patch tokens' learned positions.
    pub fn pe_core_l14() -> Self {
        ModelConfig {
            name: "pe-core-l14".to_string(),
            width: 1024,
            mlp: 4096,
            layers: 24,
            heads: 16,
            patch: 14,
            channels: 3,
            patches: 24 * 24,
            class_token: true,
            positions: Positions::LearnedWithRotary,
            gelu: GeluForm::Erf,
            pooling: Pooling::AttentionPool { heads: 8 },
            pre_norm: true,
            projection: Some(1024),
            layer_norm_epsilon: 1e-5,
        }
    }

    /// ViT-B/16 at 224 pixels.
    pub fn vit_b16() -> Self {
        ModelConfig {
            name: "vit-b16".to_string(),
            width: 768,
            mlp: 3072,
            layers: 12,
            heads: 12,
            patch: 16,
            channels: 3,
            patches: 14 * 14,
            class_token: true,
            positions: Positions::Learned,
            gelu: GeluForm::Erf,
            pooling: Pooling::ClassToken,
            pre_norm: false,
            projection: None,
            layer_norm_epsilon: 1e-6,
        }
    }

    /// The preset called `name`, if there is one (`custom` is not a preset).
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "siglip-so400m" => Some(Self::siglip_so400m()),
            "pe-core-l14" => Some(Self::pe_core_l14()),
            "vit-b16" => Some(Self::vit_b16()),
            _ => None,
        }
    }

    /// Sequence length: patch tokens plus the class token, if any.
    /// (Saturates at `u32::MAX`; validation keeps `patches` far below it.)
    pub fn tokens(&self) -> u32 {
        self.patches.saturating_add(u32::from(self.class_token))
    }

    /// Width of one attention head; 0 when `heads` is 0 (which validation rejects).
    pub fn head_dim(&self) -> u32 {
        self.width.checked_div(self.heads).unwrap_or(0)
    }

    /// Side of the square patch grid, if `patches` is a perfect square.
    pub fn grid(&self) -> Option<u32> {
        let root = (f64::from(self.patches)).sqrt().round() as u64;
        let candidates = [root.saturating_sub(1), root, root.saturating_add(1)];
        candidates
            .into_iter()
            .find(|side| side.saturating_mul(*side) == u64::from(self.patches))
            .and_then(|side| u32::try_from(side).ok())
    }

    /// Every weight and bias of the model.
    pub fn parameter_count(&self) -> u64 {
        let tally = self.tally();
        tally.matrix.saturating_add(tally.vector)
    }

    /// Bytes of resident weights: matrices take 1 byte per element when
    /// `fp8_matrices` (else 2), vectors (biases, norms, positions, probes,
    /// class token) always 2 (FP16).
    pub fn weight_bytes(&self, fp8_matrices: bool) -> u64 {
        let tally = self.tally();
        let matrix_bytes = if fp8_matrices { 1 } else { 2 };
        tally
            .matrix
            .saturating_mul(matrix_bytes)
            .saturating_add(tally.vector.saturating_mul(2))
    }

    /// Matrix and vector element counts. Saturating arithmetic: a count that
    /// exceeds `u64` can only come from an absurd shape, which then fails the
    /// fit check instead of wrapping.
    fn tally(&self) -> ParameterTally {
        let width = u64::from(self.width);
        let mlp = u64::from(self.mlp);
        let mut tally = ParameterTally::default();

        // Patch embedding: a (channels * patch * patch) x width kernel and a bias.
        let patch_inputs = u64::from(self.channels)
            .saturating_mul(u64::from(self.patch))
            .saturating_mul(u64::from(self.patch));
        tally.linear(patch_inputs, width);
        // Learned positions for every token, and the class token itself.
        tally.vectors(u64::from(self.tokens()).saturating_mul(width));
        if self.class_token {
            tally.vectors(width);
        }
        if self.pre_norm {
            tally.layer_norm(width);
        }

        let mut layer = ParameterTally::default();
        layer.layer_norm(width);
        layer.linear(width, width.saturating_mul(3));
        layer.linear(width, width);
        layer.layer_norm(width);
        layer.linear(width, mlp);
        layer.linear(mlp, width);
        tally.add_times(&layer, u64::from(self.layers));

        // Final norm (PE's ln_post).
        tally.layer_norm(width);

        match self.pooling {
            Pooling::Map { .. } | Pooling::AttentionPool { .. } => {
                tally.vectors(width); // the probe
                for _ in 0..4 {
                    tally.linear(width, width); // q, k, v, out
                }
                tally.layer_norm(width);
                tally.linear(width, mlp);
                tally.linear(mlp, width);
            }
            Pooling::ClassToken => {}
        }
        if let Some(projection) = self.projection {
            tally.matrix(width.saturating_mul(u64::from(projection)));
        }
        tally
    }
}

#[derive(Default)]
struct ParameterTally {
    matrix: u64,
    vector: u64,
}

impl ParameterTally {
    fn matrix(&mut self, elements: u64) {
        self.matrix = self.matrix.saturating_add(elements);
    }

    fn vectors(&mut self, elements: u64) {
        self.vector = self.vector.saturating_add(elements);
    }

    /// An `inputs x outputs` weight matrix and its bias.
    fn linear(&mut self, inputs: u64, outputs: u64) {
        self.matrix(inputs.saturating_mul(outputs));
        self.vectors(outputs);
    }

    /// Scale and shift.
    fn layer_norm(&mut self, width: u64) {
        self.vectors(width.saturating_mul(2));
    }

    fn add_times(&mut self, other: &ParameterTally, times: u64) {
        self.matrix(other.matrix.saturating_mul(times));
        self.vectors(other.vector.saturating_mul(times));
    }
}

impl PartialEq for ModelConfig {
    fn eq(&self, other: &Self) -> bool {
        let ModelConfig {
            name,
            width,
            mlp,
            layers,
            heads,
            patch,
            channels,
            patches,
            class_token,
            positions,
            gelu,
            pooling,
            pre_norm,
            projection,
            layer_norm_epsilon,
        } = self;
        *name == other.name
            && *width == other.width
            && *mlp == other.mlp
            && *layers == other.layers
            && *heads == other.heads
            && *patch == other.patch
            && *channels == other.channels
            && *patches == other.patches
            && *class_token == other.class_token
            && *positions == other.positions
            && *gelu == other.gelu
            && *pooling == other.pooling
            && *pre_norm == other.pre_norm
            && *projection == other.projection
            && layer_norm_epsilon.to_bits() == other.layer_norm_epsilon.to_bits()
    }
}

impl Eq for ModelConfig {}

impl Hash for ModelConfig {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.width.hash(state);
        self.mlp.hash(state);
        self.layers.hash(state);
        self.heads.hash(state);
        self.patch.hash(state);
        self.channels.hash(state);
        self.patches.hash(state);
        self.class_token.hash(state);
        self.positions.hash(state);
        self.gelu.hash(state);
        self.pooling.hash(state);
        self.pre_norm.hash(state);
        self.projection.hash(state);
        self.layer_norm_epsilon.to_bits().hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siglip_parameter_count_is_about_428_million() {
        let count = ModelConfig::siglip_so400m().parameter_count();
        assert!((400_000_000..=440_000_000).contains(&count), "{count}");
    }

    #[test]
    fn pe_parameter_count_is_about_316_million() {
        let count = ModelConfig::pe_core_l14().parameter_count();
        assert!((290_000_000..=330_000_000).contains(&count), "{count}");
    }

    #[test]
    fn vit_b_parameter_count_is_about_86_million() {
        let count = ModelConfig::vit_b16().parameter_count();
        assert!((84_000_000..=88_000_000).contains(&count), "{count}");
    }

    #[test]
    fn token_counts_and_head_dims_match_the_workload_table() {
        let siglip = ModelConfig::siglip_so400m();
        assert_eq!((siglip.tokens(), siglip.head_dim()), (729, 72));
        let pe = ModelConfig::pe_core_l14();
        assert_eq!((pe.tokens(), pe.head_dim()), (577, 64));
        let vit = ModelConfig::vit_b16();
        assert_eq!(
            (vit.tokens(), vit.head_dim(), vit.grid()),
            (197, 64, Some(14))
        );
    }

    #[test]
    fn fp8_weights_make_siglip_resident_sized() {
        let siglip = ModelConfig::siglip_so400m();
        let fp8 = siglip.weight_bytes(true);
        let fp16 = siglip.weight_bytes(false);
        assert!(fp8 < fp16);
        assert!((800_000_000..=900_000_000).contains(&fp16), "{fp16}");
        assert!((400_000_000..=450_000_000).contains(&fp8), "{fp8}");
    }

    #[test]
    fn degenerate_shapes_do_not_panic() {
        let mut config = ModelConfig::vit_b16();
        config.heads = 0;
        config.width = u32::MAX;
        config.mlp = u32::MAX;
        config.layers = u32::MAX;
        config.patches = u32::MAX;
        config.projection = Some(u32::MAX);
        assert_eq!(config.head_dim(), 0);
        assert_eq!(config.parameter_count(), u64::MAX);
        assert_eq!(config.weight_bytes(true), u64::MAX);
        assert_eq!(config.tokens(), u32::MAX);
    }

    #[test]
    fn equality_and_hash_use_epsilon_bits() {
        use std::collections::hash_map::DefaultHasher;
        let first = ModelConfig::siglip_so400m();
        let mut second = first.clone();
        assert_eq!(first, second);
        let hash = |config: &ModelConfig| {
            let mut hasher = DefaultHasher::new();
            config.hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(hash(&first), hash(&second));
        second.layer_norm_epsilon = 1e-5;
        assert_ne!(first, second);
    }
}
