//! Resolution of the `[workload]` section: the model preset and its shape
//! overrides, pooling, weights, with the relations between them.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::keys::*;
use super::{
    DEFAULT_BATCH, DEFAULT_FP8_SCALE, DEFAULT_FUSE_QKV, DEFAULT_SEED, FP8_SCALE_RANGE, Resolver,
    Sourced, nearest_divisor,
};
use crate::build_file::error::{Issue, Origin};
use crate::build_file::schema::{self, QueryFile, ScaleSetting, WorkloadSection};
use crate::build_file::{AttentionChoice, WeightSource, Workload};
use crate::model::checkpoint::Naming;
use crate::model::config::{
    CUSTOM_MODEL_NAME, GeluForm, ModelConfig, PRESET_NAMES, Pooling, Positions,
};
use crate::model::quantisation::Fp8Scale;

impl Resolver<'_> {
    pub(super) fn workload(
        &self,
        file: &QueryFile,
        base_dir: Option<&Path>,
    ) -> Result<(Workload, Origin, Option<Origin>), Issue> {
        let empty = WorkloadSection::default();
        let section_span = file.workload.as_ref().map_or(0..0, Spanned::span);
        let section = file.workload.as_ref().map_or(&empty, Spanned::get_ref);

        let Some(model_field) = section.model.as_ref() else {
            let known = [PRESET_NAMES, &[CUSTOM_MODEL_NAME]].concat().join(", ");
            return Err(Issue::new(
                WORKLOAD_MODEL,
                Origin::File(section_span),
                "missing workload.model: the build query must name a model",
            )
            .label(if file.workload.is_some() {
                "no `model` in this table"
            } else {
                "no [workload] table in this file"
            })
            .help(format!(
                "add `model = \"siglip-so400m\"` under [workload]; known models: {known}"
            )));
        };
        let model_origin = self.origin(WORKLOAD_MODEL, model_field);
        let model_name = model_field.get_ref().as_str();
        let preset = ModelConfig::preset(model_name);
        if preset.is_none() && model_name != CUSTOM_MODEL_NAME {
            let known: Vec<&str> = PRESET_NAMES
                .iter()
                .copied()
                .chain([CUSTOM_MODEL_NAME])
                .collect();
            let close = known
                .iter()
                .map(|name| (*name, schema::edit_distance(name, model_name)))
                .filter(|(name, distance)| *distance <= name.len() / 3)
                .min_by_key(|(_, distance)| *distance)
                .map(|(name, _)| name);
            let help = match close {
                Some(name) => format!("did you mean \"{name}\"?"),
                None => String::from(
                    "use a preset, or \"custom\" with width, mlp, heads, layers, patches and patch",
                ),
            };
            return Err(Issue::new(
                WORKLOAD_MODEL,
                model_origin,
                format!(
                    "unknown model \"{model_name}\" in workload.model; known models: {}",
                    known.join(", ")
                ),
            )
            .label("unknown model")
            .help(help));
        }
        let model = self.model(section, preset.as_ref(), model_name, &model_origin)?;
        let layers_origin = section
            .layers
            .as_ref()
            .map(|field| self.origin(WORKLOAD_LAYERS, field));

        let batch = match &section.batch {
            Some(field) => self.unsigned(
                WORKLOAD_BATCH,
                field,
                1,
                u32::MAX,
                "the batch is the number of images per step; use 1 or more",
            )?,
            None => DEFAULT_BATCH,
        };
        let fuse_qkv = section
            .fuse_qkv
            .as_ref()
            .map_or(DEFAULT_FUSE_QKV, |field| *field.get_ref());
        let fp8_scale = match &section.fp8_scale {
            Some(field) => self.fp8_scale(field)?,
            None => DEFAULT_FP8_SCALE,
        };
        let attention = match &section.attention {
            Some(field) => self.choice(
                WORKLOAD_ATTENTION,
                field,
                &[
                    ("auto", AttentionChoice::Auto),
                    ("materialized", AttentionChoice::Materialized),
                    ("flash", AttentionChoice::Flash),
                ],
            )?,
            None => AttentionChoice::Auto,
        };
        let weights = self.weights(section, base_dir)?;
        Ok((
            Workload {
                model,
                batch,
                fuse_qkv,
                fp8_scale,
                attention,
                weights,
            },
            model_origin,
            layers_origin,
        ))
    }

    /// An integer shape field: the query's value, else the preset's, else
    /// (for `custom`) an error saying the field is required.
    /// `workload.fp8_scale`: an exponent in range, or `"auto"`.
    fn fp8_scale(&self, field: &Spanned<ScaleSetting>) -> Result<Fp8Scale, Issue> {
        const PATH: &str = "workload.fp8_scale";
        match field.get_ref() {
            ScaleSetting::Exponent(exponent) => {
                let exponent = Spanned::new(field.span(), *exponent);
                let value = self.integer(
                    PATH,
                    &exponent,
                    *FP8_SCALE_RANGE.start(),
                    *FP8_SCALE_RANGE.end(),
                    "the scale is a power of two (stored value x 2^fp8_scale) for every \
                     tensor; -4 suits weights of magnitude below 15, and \"auto\" chooses \
                     one per tensor and layer that does not saturate",
                )?;
                // In range, so it fits 32 bits.
                Ok(Fp8Scale::Fixed(value as i32))
            }
            ScaleSetting::Word(word) if word == "auto" => Ok(Fp8Scale::Auto),
            ScaleSetting::Word(word) => Err(Issue::new(
                PATH,
                self.origin(PATH, field),
                format!("{PATH} = \"{word}\" is neither an integer exponent nor \"auto\""),
            )
            .label("not a scale")
            .help(
                "write fp8_scale = \"auto\" (a scale per tensor and layer, from its largest \
                 element) or an exponent from -32 to 32 for every tensor (e.g. -4)",
            )),
        }
    }

    pub(super) fn shape(
        &self,
        path: &str,
        field: &Option<Spanned<i64>>,
        preset_value: Option<u32>,
        model_origin: &Origin,
        help: &str,
    ) -> Result<Sourced, Issue> {
        match (field, preset_value) {
            (Some(field), _) => Ok(Sourced {
                value: self.unsigned(path, field, 1, u32::MAX - 1, help)?,
                origin: self.origin(path, field),
                explicit: true,
            }),
            (None, Some(value)) => Ok(Sourced {
                value,
                origin: model_origin.clone(),
                explicit: false,
            }),
            (None, None) => {
                let key = path.rsplit('.').next().unwrap_or(path);
                Err(Issue::new(
                    path,
                    model_origin.clone(),
                    format!("workload.model = \"custom\" needs {path}, which is missing"),
                )
                .label(format!("custom model without `{key}`"))
                .help(format!(
                    "add `{key} = ...` under [workload] (a custom model needs width, mlp, \
                     heads, layers, patches and patch)"
                )))
            }
        }
    }

    pub(super) fn model(
        &self,
        section: &WorkloadSection,
        preset: Option<&ModelConfig>,
        model_name: &str,
        model_origin: &Origin,
    ) -> Result<ModelConfig, Issue> {
        let from_preset = |read: fn(&ModelConfig) -> u32| preset.map(read);
        let width = self.shape(
            WORKLOAD_WIDTH,
            &section.width,
            from_preset(|config| config.width),
            model_origin,
            "the width is the residual stream size, e.g. 768",
        )?;
        let mlp = self.shape(
            WORKLOAD_MLP,
            &section.mlp,
            from_preset(|config| config.mlp),
            model_origin,
            "the MLP hidden width, usually 4 x width",
        )?;
        let heads = self.shape(
            WORKLOAD_HEADS,
            &section.heads,
            from_preset(|config| config.heads),
            model_origin,
            "the number of attention heads; it must divide the width",
        )?;
        let layers = self.shape(
            WORKLOAD_LAYERS,
            &section.layers,
            from_preset(|config| config.layers),
            model_origin,
            "a model needs at least one transformer layer",
        )?;
        let patches = self.shape(
            WORKLOAD_PATCHES,
            &section.patches,
            from_preset(|config| config.patches),
            model_origin,
            "the number of patch tokens (grid x grid), e.g. 196 for a 14 x 14 grid",
        )?;
        let patch = self.shape(
            WORKLOAD_PATCH,
            &section.patch,
            from_preset(|config| config.patch),
            model_origin,
            "the patch side in pixels, e.g. 16",
        )?;

        if width.value % 2 != 0 {
            return Err(Issue::new(
                WORKLOAD_WIDTH,
                width.origin.clone(),
                format!("workload.width = {} is odd", width.value),
            )
            .label("odd width")
            .help(
                "activations move as 32-bit words of two FP16 values, so the width must be \
                 even; choose an even width",
            ));
        }
        if !mlp.value.is_multiple_of(2) {
            return Err(Issue::new(
                WORKLOAD_MLP,
                mlp.origin.clone(),
                format!("workload.mlp = {} is odd", mlp.value),
            )
            .label("odd MLP width")
            .help(format!(
                "the MLP's hidden activations move as 32-bit words of two FP16 values, so its \
                 width must be even; choose {} or {}",
                mlp.value - 1,
                mlp.value + 1
            )));
        }
        if !patch.value.is_multiple_of(2) {
            return Err(Issue::new(
                WORKLOAD_PATCH,
                patch.origin.clone(),
                format!(
                    "workload.patch = {} gives patches of 3 x {} x {} = {} values, an odd count",
                    patch.value,
                    patch.value,
                    patch.value,
                    3 * u64::from(patch.value) * u64::from(patch.value)
                ),
            )
            .label("odd patch side")
            .help(format!(
                "a patch's pixels (3 channels x patch x patch) move as 32-bit words of two FP16 \
                 values, so the patch side must be even; choose {}{}",
                if patch.value > 1 {
                    format!("{} or ", patch.value - 1)
                } else {
                    String::new()
                },
                patch.value + 1
            )));
        }
        let (head_path, head_origin) = if heads.explicit || !width.explicit {
            (WORKLOAD_HEADS, heads.origin.clone())
        } else {
            (WORKLOAD_WIDTH, width.origin.clone())
        };
        let divides = width.value % heads.value == 0;
        if !divides {
            let suggestion = nearest_divisor(width.value, heads.value, |dim| dim % 2 == 0)
                .map(|divisor| format!("choose a divisor such as {divisor}"))
                .unwrap_or_else(|| String::from("choose a divisor of the width"));
            return Err(Issue::new(
                head_path,
                head_origin,
                format!(
                    "workload.heads = {} does not divide workload.width = {}",
                    heads.value, width.value
                ),
            )
            .label("does not divide the width")
            .help(format!(
                "{suggestion}; every head gets width / heads channels"
            )));
        }
        let head_dim = width.value / heads.value;
        let rotary = match &section.rotary {
            Some(field) => *field.get_ref(),
            None => preset.is_some_and(|config| config.positions == Positions::LearnedWithRotary),
        };
        let rotary_origin = section
            .rotary
            .as_ref()
            .map(|field| self.origin(WORKLOAD_ROTARY, field));
        let needed_multiple = if rotary { 4 } else { 2 };
        if head_dim % needed_multiple != 0 {
            let why = if rotary {
                "2D rotary embeddings rotate pairs in two halves of each head, so the head \
                 dimension must be a multiple of 4"
            } else {
                "heads are split along 32-bit words of two FP16 values, so the head dimension \
                 must be even"
            };
            let suggestion =
                nearest_divisor(width.value, heads.value, |dim| dim % needed_multiple == 0)
                    .map(|divisor| format!("; e.g. workload.heads = {divisor}"))
                    .unwrap_or_default();
            let (path, origin) = match (&rotary_origin, heads.explicit) {
                (_, true) | (None, false) => (head_path, head_origin),
                (Some(origin), false) => (WORKLOAD_ROTARY, origin.clone()),
            };
            return Err(Issue::new(
                path,
                origin,
                format!(
                    "workload.width / workload.heads = {} / {} = {head_dim} is not a usable head \
                     dimension (it must be a multiple of {needed_multiple})",
                    width.value, heads.value
                ),
            )
            .label(format!("head dimension {head_dim}"))
            .help(format!("{why}{suggestion}")));
        }

        let grid = ModelConfig {
            patches: patches.value,
            ..ModelConfig::vit_b16()
        }
        .grid();
        if grid.is_none() {
            let root = f64::from(patches.value).sqrt().floor() as u64;
            return Err(Issue::new(
                WORKLOAD_PATCHES,
                patches.origin.clone(),
                format!(
                    "workload.patches = {} is not a square grid of patches",
                    patches.value
                ),
            )
            .label("not a square number")
            .help(format!(
                "patch grids are square; use e.g. {} or {}",
                root * root,
                (root + 1) * (root + 1)
            )));
        }

        let class_token = match &section.class_token {
            Some(field) => *field.get_ref(),
            None => preset.is_some_and(|config| config.class_token),
        };
        let gelu = match &section.gelu {
            Some(field) => self.choice(
                WORKLOAD_GELU,
                field,
                &[("tanh", GeluForm::Tanh), ("erf", GeluForm::Erf)],
            )?,
            None => preset.map_or(GeluForm::Erf, |config| config.gelu),
        };
        let pooling = self.pooling(
            section,
            preset,
            class_token,
            &width,
            heads.value,
            model_origin,
        )?;
        let projection = match &section.projection {
            Some(field) => {
                let value = self.unsigned(
                    WORKLOAD_PROJECTION,
                    field,
                    0,
                    u32::MAX,
                    "the output width of the final projection; 0 means no projection",
                )?;
                (value > 0).then_some(value)
            }
            None => preset.and_then(|config| config.projection),
        };
        let pre_norm = match &section.pre_norm {
            Some(field) => *field.get_ref(),
            None => preset.is_some_and(|config| config.pre_norm),
        };
        let layer_norm_epsilon = match &section.layer_norm_epsilon {
            Some(field) => {
                let value = *field.get_ref();
                let narrowed = value as f32;
                if !(value.is_finite() && value > 0.0 && value < 1.0 && narrowed > 0.0) {
                    return Err(Issue::new(
                        WORKLOAD_LAYER_NORM_EPSILON,
                        self.origin(WORKLOAD_LAYER_NORM_EPSILON, field),
                        format!("workload.layer_norm_epsilon = {value} is not a usable epsilon"),
                    )
                    .label("must be between 0 and 1, exclusive")
                    .help("use a small positive number representable in f32, e.g. 1e-6"));
                }
                narrowed
            }
            None => preset.map_or(1e-6, |config| config.layer_norm_epsilon),
        };

        Ok(ModelConfig {
            name: model_name.to_string(),
            width: width.value,
            mlp: mlp.value,
            layers: layers.value,
            heads: heads.value,
            patch: patch.value,
            channels: 3,
            patches: patches.value,
            class_token,
            positions: if rotary {
                Positions::LearnedWithRotary
            } else {
                Positions::Learned
            },
            gelu,
            pooling,
            pre_norm,
            projection,
            layer_norm_epsilon,
        })
    }

    pub(super) fn pooling(
        &self,
        section: &WorkloadSection,
        preset: Option<&ModelConfig>,
        class_token: bool,
        width: &Sourced,
        heads: u32,
        model_origin: &Origin,
    ) -> Result<Pooling, Issue> {
        #[derive(Clone, Copy, PartialEq)]
        enum Kind {
            Map,
            Attention,
            ClassToken,
        }
        let kind_of = |pooling: &Pooling| match pooling {
            Pooling::Map { .. } => Kind::Map,
            Pooling::AttentionPool { .. } => Kind::Attention,
            Pooling::ClassToken => Kind::ClassToken,
        };
        let (kind, kind_origin) = match &section.pooling {
            Some(field) => (
                self.choice(
                    WORKLOAD_POOLING,
                    field,
                    &[
                        ("map", Kind::Map),
                        ("attention", Kind::Attention),
                        ("class-token", Kind::ClassToken),
                    ],
                )?,
                self.origin(WORKLOAD_POOLING, field),
            ),
            None => {
                let kind = match preset {
                    Some(config) => kind_of(&config.pooling),
                    None if class_token => Kind::ClassToken,
                    None => Kind::Map,
                };
                (kind, model_origin.clone())
            }
        };
        if kind == Kind::ClassToken {
            if let Some(field) = &section.pooling_heads {
                return Err(Issue::new(
                    WORKLOAD_POOLING_HEADS,
                    self.origin(WORKLOAD_POOLING_HEADS, field),
                    "workload.pooling_heads is set but workload.pooling is \"class-token\", \
                     which has no attention heads",
                )
                .label("unused with class-token pooling")
                .help("remove pooling_heads, or choose pooling = \"map\" or \"attention\""));
            }
            if !class_token {
                let origin = match &section.class_token {
                    Some(field) if section.pooling.is_none() => {
                        self.origin(WORKLOAD_CLASS_TOKEN, field)
                    }
                    _ => kind_origin,
                };
                return Err(Issue::new(
                    WORKLOAD_POOLING,
                    origin,
                    "workload.pooling = \"class-token\" needs a class token, but \
                     workload.class_token is false",
                )
                .label("no class token to pool")
                .help("set class_token = true, or choose pooling = \"map\" or \"attention\""));
            }
            return Ok(Pooling::ClassToken);
        }
        let (pooling_heads, heads_origin) = match &section.pooling_heads {
            Some(field) => (
                self.unsigned(
                    WORKLOAD_POOLING_HEADS,
                    field,
                    1,
                    u32::MAX,
                    "the attention heads of the pooling head; they must divide the width",
                )?,
                self.origin(WORKLOAD_POOLING_HEADS, field),
            ),
            None => {
                let inherited = preset
                    .filter(|config| kind_of(&config.pooling) == kind)
                    .and_then(|config| config.pooling.heads());
                (inherited.unwrap_or(heads), kind_origin)
            }
        };
        if !width.value.is_multiple_of(pooling_heads) {
            let origin = if section.pooling_heads.is_some() || !width.explicit {
                heads_origin
            } else {
                width.origin.clone()
            };
            let suggestion = nearest_divisor(width.value, pooling_heads, |_| true)
                .map(|divisor| format!("choose a divisor such as {divisor}"))
                .unwrap_or_else(|| String::from("choose a divisor of the width"));
            return Err(Issue::new(
                WORKLOAD_POOLING_HEADS,
                origin,
                format!(
                    "workload.pooling_heads = {pooling_heads} does not divide workload.width = {}",
                    width.value
                ),
            )
            .label("does not divide the width")
            .help(suggestion));
        }
        let pooling_dim = width.value / pooling_heads;
        if !pooling_dim.is_multiple_of(2) {
            let origin = if section.pooling_heads.is_some() || !width.explicit {
                heads_origin
            } else {
                width.origin.clone()
            };
            let suggestion = nearest_divisor(width.value, pooling_heads, |dim| dim % 2 == 0)
                .map(|divisor| format!("; e.g. workload.pooling_heads = {divisor}"))
                .unwrap_or_default();
            return Err(Issue::new(
                WORKLOAD_POOLING_HEADS,
                origin,
                format!(
                    "workload.width / workload.pooling_heads = {} / {pooling_heads} = \
                     {pooling_dim} is not a usable pooling head dimension (it must be even)",
                    width.value
                ),
            )
            .label(format!("pooling head dimension {pooling_dim}"))
            .help(format!(
                "the pooling head's heads are split along 32-bit words of two FP16 values, so \
                 each must have an even number of channels{suggestion}"
            )));
        }
        Ok(match kind {
            Kind::Map => Pooling::Map {
                heads: pooling_heads,
            },
            _ => Pooling::AttentionPool {
                heads: pooling_heads,
            },
        })
    }

    pub(super) fn weights(
        &self,
        section: &WorkloadSection,
        base_dir: Option<&Path>,
    ) -> Result<WeightSource, Issue> {
        let Some(weights_field) = &section.weights else {
            return Ok(WeightSource::Seeded { seed: DEFAULT_SEED });
        };
        let weights = weights_field.get_ref();
        if let (Some(naming), None) = (&weights.naming, &weights.safetensors) {
            return Err(Issue::new(
                WORKLOAD_WEIGHTS_NAMING,
                self.origin(WORKLOAD_WEIGHTS_NAMING, naming),
                "workload.weights.naming says how a SafeTensors file names its tensors, \
                 and these weights are not from a file",
            )
            .label("needs safetensors = \"...\"")
            .help(
                "write weights = { safetensors = \"model.safetensors\", naming = \"timm-vit\" }",
            ));
        }
        match (&weights.seeded, &weights.safetensors) {
            (Some(seed), None) => {
                let value = self.integer(
                    WORKLOAD_WEIGHTS_SEEDED,
                    seed,
                    0,
                    i64::MAX,
                    "the seed is any non-negative integer",
                )?;
                Ok(WeightSource::Seeded {
                    seed: u64::try_from(value).unwrap_or(DEFAULT_SEED),
                })
            }
            (None, Some(path_field)) => {
                let written = path_field.get_ref();
                let origin = self.origin(WORKLOAD_WEIGHTS_SAFETENSORS, path_field);
                let path = match (&origin, base_dir) {
                    (Origin::File(_), Some(base)) => base.join(written),
                    _ => PathBuf::from(written),
                };
                if written.is_empty() || !path.is_file() {
                    let problem = if path.exists() { "is not a file" } else { "does not exist" };
                    return Err(Issue::new(
                        WORKLOAD_WEIGHTS_SAFETENSORS,
                        origin,
                        format!(
                            "workload.weights.safetensors = \"{written}\": `{}` {problem}",
                            path.display()
                        ),
                    )
                    .label(problem)
                    .help(
                        "paths in the build file are relative to the build file's folder; \
                         use { seeded = 1 } for deterministic random weights",
                    ));
                }
                let naming = match &weights.naming {
                    Some(field) => {
                        let mut options = vec![("auto", None)];
                        options.extend(Naming::ALL.map(|naming| (naming.name(), Some(naming))));
                        self.choice(WORKLOAD_WEIGHTS_NAMING, field, &options)?
                    }
                    None => None,
                };
                Ok(WeightSource::SafeTensors { path, naming })
            }
            (Some(_), Some(_)) | (None, None) => Err(Issue::new(
                WORKLOAD_WEIGHTS,
                self.origin(WORKLOAD_WEIGHTS, weights_field),
                "workload.weights must name exactly one source: `seeded` or `safetensors`",
            )
            .label("expected exactly one of seeded, safetensors")
            .help(
                "write weights = { seeded = 1 } or weights = { safetensors = \"file.safetensors\" }",
            )),
        }
    }
}
