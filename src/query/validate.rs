//! Validation of build queries: known keys and TOML types, then every value's
//! range and spelling, the relations between values (heads divide the width,
//! the model fits the chosen tiles), and the documented defaults, producing
//! the resolved `BuildQuery`.
//!
//! This module owns what is valid and what the defaults are. It must not read
//! the build file (it gets parsed data), must not plan anything and must not
//! silently adjust a value: a value that cannot be used is an `Issue` located
//! at the value (a file span, or the `--set` argument that set it).

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::model::config::{
    CUSTOM_MODEL_NAME, GeluForm, ModelConfig, PRESET_NAMES, Pooling, Positions,
};
use crate::query::error::{Issue, IssueBody, Origin};
use crate::query::overrides::SetOrigins;
use crate::query::schema::{self, KeyKind, QueryFile, WorkloadSection};
use crate::query::{
    AccumulationChoice, AttentionChoice, BuildQuery, MachineSettings, Outputs, PhaseOverride,
    PlanningFlags, SchedulePolicy, ScheduleSettings, TransferWidth, WeightSource, Workload,
};

/// Tiles of the IPU21 C600.
pub const C600_TILES: u32 = 1472;
/// SRAM of one tile in bytes (624 KiB).
pub const SRAM_BYTES_PER_TILE: u32 = 624 * 1024;

/// The machine presets a query may name.
pub const MACHINE_PRESETS: &[&str] = &["c600"];

// Documented defaults of optional fields.
pub const DEFAULT_MACHINE_PRESET: &str = "c600";
pub const DEFAULT_BATCH: u32 = 1;
pub const DEFAULT_FUSE_QKV: bool = true;
pub const DEFAULT_FP8_SCALE: i32 = -4;
pub const DEFAULT_SEED: u64 = 1;
pub const DEFAULT_COPY_MOTION: bool = true;
pub const DEFAULT_RESERVED_BYTES_PER_TILE: u32 = 65536;
pub const DEFAULT_MAX_PARTITION_CANDIDATES: u32 = 64;
pub const DEFAULT_POLICY: SchedulePolicy = SchedulePolicy::Balanced { words: 1024 };
pub const DEFAULT_OUTPUT_DIRECTORY: &str = "artifacts";
/// The range of `workload.fp8_scale`.
pub const FP8_SCALE_RANGE: std::ops::RangeInclusive<i64> = -32..=32;

/// The activation estimate of the fit check: tokens x width x 2 bytes x batch
/// x this many live copies.
const ACTIVATION_COPIES: u128 = 4;

/// Checks a machine preset and tile count and returns the number of tiles
/// to use (the preset's full count when `tiles` is `None`).
pub fn validate_machine(preset: &str, tiles: Option<u32>) -> Result<u32, String> {
    if preset != "c600" {
        return Err(format!(
            "machine.preset = \"{preset}\" is not a known machine; known presets: {}",
            MACHINE_PRESETS.join(", ")
        ));
    }
    match tiles {
        None => Ok(C600_TILES),
        Some(0) => Err(format!(
            "machine.tiles = 0: a build needs at least one tile (the c600 has {C600_TILES})"
        )),
        Some(count) if count > C600_TILES => Err(format!(
            "machine.tiles = {count} exceeds the {C600_TILES} tiles of the c600"
        )),
        Some(count) => Ok(count),
    }
}

// ---------------------------------------------------------------------------
// Structure: known keys and TOML types, checked on the syntax tree.
// ---------------------------------------------------------------------------

/// Rejects unknown keys and values of the wrong TOML type, pointing at them.
pub fn check_structure(document: &DeTable<'_>) -> Result<(), Issue> {
    check_table(document, "", "")
}

fn join(table: &str, key: &str) -> String {
    if table.is_empty() {
        key.to_string()
    } else {
        format!("{table}.{key}")
    }
}

fn describe_found(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn check_table(table: &DeTable<'_>, schema_path: &str, display_path: &str) -> Result<(), Issue> {
    for (key, value) in table.iter() {
        let name: &str = key.get_ref();
        let path = join(display_path, name);
        let known = schema::keys_of(schema_path)
            .and_then(|keys| keys.iter().find(|(known, _)| *known == name))
            .map(|(_, kind)| *kind);
        let Some(kind) = known else {
            let under = if display_path.is_empty() {
                String::from("known top-level keys")
            } else {
                format!("known keys under `{display_path}`")
            };
            let mut issue = Issue::new(
                path.clone(),
                Origin::File(key.span()),
                format!(
                    "unknown key `{path}`; {under}: {}",
                    schema::key_list(schema_path)
                ),
            )
            .label("unknown key");
            issue = match schema::closest_key(schema_path, name) {
                Some(close) => issue.help(format!("did you mean `{close}`?")),
                None => issue.help(
                    "remove the key or fix its spelling; the files in queries/ list every key",
                ),
            };
            return Err(issue);
        };
        let schema_child = join(schema_path, name);
        let matches = match (kind, value.get_ref()) {
            (KeyKind::Integer, DeValue::Integer(_))
            | (KeyKind::Float, DeValue::Float(_) | DeValue::Integer(_))
            | (KeyKind::Boolean, DeValue::Boolean(_))
            | (KeyKind::String, DeValue::String(_)) => true,
            (KeyKind::Table, DeValue::Table(inner)) => {
                check_table(inner, &schema_child, &path)?;
                true
            }
            (KeyKind::TableArray, DeValue::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    let item_path = format!("{path}[{index}]");
                    match item.get_ref() {
                        DeValue::Table(inner) => check_table(inner, &schema_child, &item_path)?,
                        other => {
                            return Err(Issue::new(
                                item_path.clone(),
                                Origin::File(item.span()),
                                format!(
                                    "`{item_path}` must be a table, but it is {}",
                                    describe_found(other)
                                ),
                            )
                            .label("expected a table")
                            .help(format!("write each entry as a [[{path}]] table")));
                        }
                    }
                }
                true
            }
            _ => false,
        };
        if !matches {
            return Err(Issue::new(
                path.clone(),
                Origin::File(value.span()),
                format!(
                    "`{path}` must be {}, but it is {}",
                    kind.describe(),
                    describe_found(value.get_ref())
                ),
            )
            .label(format!("expected {}", kind.describe()))
            .help(type_help(kind, &path)));
        }
    }
    Ok(())
}

fn type_help(kind: KeyKind, path: &str) -> String {
    let key = path.rsplit('.').next().unwrap_or(path);
    match kind {
        KeyKind::Integer => format!("write a whole number without quotes, e.g. `{key} = 2`"),
        KeyKind::Float => format!("write a number without quotes, e.g. `{key} = 1e-6`"),
        KeyKind::Boolean => format!("write `{key} = true` or `{key} = false`"),
        KeyKind::String => format!("write the value in double quotes, e.g. `{key} = \"auto\"`"),
        KeyKind::Table => {
            format!("write a [{path}] section or an inline table `{key} = {{ ... }}`")
        }
        KeyKind::TableArray => format!("write each entry as a [[{path}]] table"),
    }
}

/// The dotted path of the deepest key or value containing `offset`. Tables
/// written as `[section]` headers do not span their bodies, so every table is
/// searched, not only those whose span contains the offset.
fn locate(table: &DeTable<'_>, offset: usize, prefix: &str) -> Option<String> {
    for (key, value) in table.iter() {
        let path = join(prefix, key.get_ref());
        let deeper = match value.get_ref() {
            DeValue::Table(inner) => locate(inner, offset, &path),
            DeValue::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
                let item_path = format!("{path}[{index}]");
                match item.get_ref() {
                    DeValue::Table(inner) => locate(inner, offset, &item_path),
                    _ if item.span().contains(&offset) => Some(item_path),
                    _ => None,
                }
            }),
            _ => None,
        };
        if deeper.is_some() {
            return deeper;
        }
        if key.span().contains(&offset) || value.span().contains(&offset) {
            return Some(path);
        }
    }
    None
}

/// An issue for an error of the serde layer (a backstop: the structure check
/// catches unknown keys and wrong types first).
pub fn serde_issue(error: &toml::de::Error, document: &DeTable<'_>) -> Issue {
    let span = error.span().unwrap_or(0..0);
    let field = locate(document, span.start, "");
    let message = match &field {
        Some(path) => format!("`{path}`: {}", error.message().trim_end()),
        None => format!("invalid build query: {}", error.message().trim_end()),
    };
    Issue::from(IssueBody {
        field,
        message,
        label: String::from("here"),
        help: Some(String::from(
            "the commented files in queries/ show every key and its type",
        )),
        origin: Origin::File(span),
        related: Vec::new(),
    })
}

// ---------------------------------------------------------------------------
// Values: ranges, spellings, relations and defaults.
// ---------------------------------------------------------------------------

/// Resolves a parsed (and `--set`-overridden) file into a `BuildQuery`.
pub fn resolve(
    file: &QueryFile,
    origins: &SetOrigins,
    base_dir: Option<&Path>,
    source_name: &str,
) -> Result<BuildQuery, Issue> {
    let resolver = Resolver { origins };
    let (workload, model_origin, layers_origin) = resolver.workload(file, base_dir)?;
    let machine = resolver.machine(file)?;
    let planning = resolver.planning(file)?;
    let schedule = resolver.schedule(file)?;
    let overrides = resolver.phase_overrides(file)?;
    let outputs = resolver.outputs(file)?;
    let name = resolver.name(file, source_name, &workload.model)?;
    check_fit(&workload, &machine, &planning, model_origin, layers_origin)?;
    Ok(BuildQuery {
        name,
        source_path: None,
        workload,
        machine,
        planning,
        schedule,
        overrides,
        outputs,
    })
}

struct Resolver<'a> {
    origins: &'a SetOrigins,
}

/// An integer shape value with where it came from.
#[derive(Clone)]
struct Sourced {
    value: u32,
    origin: Origin,
    /// Whether the query wrote it (as opposed to taking it from the preset).
    explicit: bool,
}

fn describe_bounds(minimum: i64, maximum: i64) -> String {
    if maximum >= i64::from(u32::MAX) - 1 {
        format!("at least {minimum}")
    } else {
        format!("between {minimum} and {maximum}")
    }
}

fn with_separators(value: u128) -> String {
    let digits = value.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

/// A divisor of `width` near `target` for which `accept(width / divisor)` holds.
fn nearest_divisor(width: u32, target: u32, accept: impl Fn(u32) -> bool) -> Option<u32> {
    let good = |candidate: u32| {
        candidate > 0 && width.is_multiple_of(candidate) && accept(width / candidate)
    };
    for distance in 0..=4096u32 {
        let below = target.checked_sub(distance);
        let above = target.checked_add(distance);
        for candidate in [below, above].into_iter().flatten() {
            if candidate <= width && good(candidate) {
                return Some(candidate);
            }
        }
    }
    (1..=width.min(4096)).find(|candidate| good(*candidate))
}

impl Resolver<'_> {
    /// Where the value at `path` came from.
    fn origin<T>(&self, path: &str, field: &Spanned<T>) -> Origin {
        match self.origins.get(path) {
            Some(argument) => Origin::Set(argument.clone()),
            None => Origin::File(field.span()),
        }
    }

    fn integer(
        &self,
        path: &str,
        field: &Spanned<i64>,
        minimum: i64,
        maximum: i64,
        help: &str,
    ) -> Result<i64, Issue> {
        let value = *field.get_ref();
        if (minimum..=maximum).contains(&value) {
            return Ok(value);
        }
        let side = if value < minimum {
            "too small"
        } else {
            "too large"
        };
        Err(Issue::new(
            path,
            self.origin(path, field),
            format!(
                "{path} = {value} is {side}; it must be {}",
                describe_bounds(minimum, maximum)
            ),
        )
        .label(format!("must be {}", describe_bounds(minimum, maximum)))
        .help(help))
    }

    fn unsigned(
        &self,
        path: &str,
        field: &Spanned<i64>,
        minimum: u32,
        maximum: u32,
        help: &str,
    ) -> Result<u32, Issue> {
        let value = self.integer(path, field, i64::from(minimum), i64::from(maximum), help)?;
        u32::try_from(value).map_err(|_| {
            Issue::new(
                path,
                self.origin(path, field),
                format!("{path} = {value} does not fit 32 bits"),
            )
            .help(help)
        })
    }

    fn choice<T: Copy>(
        &self,
        path: &str,
        field: &Spanned<String>,
        options: &[(&str, T)],
    ) -> Result<T, Issue> {
        let text = field.get_ref().as_str();
        if let Some((_, value)) = options.iter().find(|(name, _)| *name == text) {
            return Ok(*value);
        }
        let names: Vec<&str> = options.iter().map(|(name, _)| *name).collect();
        let close = names
            .iter()
            .map(|name| (*name, schema::edit_distance(name, text)))
            .filter(|(name, distance)| *distance <= (name.len() / 3).max(1))
            .min_by_key(|(_, distance)| *distance)
            .map(|(name, _)| name);
        let help = match close {
            Some(name) => format!("did you mean \"{name}\"?"),
            None => format!("write one of: {}", names.join(", ")),
        };
        Err(Issue::new(
            path,
            self.origin(path, field),
            format!(
                "{path} = \"{text}\" is not one of the accepted values: {}",
                names.join(" | ")
            ),
        )
        .label(format!("expected {}", names.join(" | ")))
        .help(help))
    }

    fn workload(
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
                "workload.model",
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
        let model_origin = self.origin("workload.model", model_field);
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
                "workload.model",
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
            .map(|field| self.origin("workload.layers", field));

        let batch = match &section.batch {
            Some(field) => self.unsigned(
                "workload.batch",
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
            Some(field) => {
                let value = self.integer(
                    "workload.fp8_scale",
                    field,
                    *FP8_SCALE_RANGE.start(),
                    *FP8_SCALE_RANGE.end(),
                    "the scale is a power of two (stored value x 2^fp8_scale); -4 suits \
                     weights of magnitude below about 30",
                )?;
                i32::try_from(value).unwrap_or(DEFAULT_FP8_SCALE)
            }
            None => DEFAULT_FP8_SCALE,
        };
        let attention = match &section.attention {
            Some(field) => self.choice(
                "workload.attention",
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
    fn shape(
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

    fn model(
        &self,
        section: &WorkloadSection,
        preset: Option<&ModelConfig>,
        model_name: &str,
        model_origin: &Origin,
    ) -> Result<ModelConfig, Issue> {
        let from_preset = |read: fn(&ModelConfig) -> u32| preset.map(read);
        let width = self.shape(
            "workload.width",
            &section.width,
            from_preset(|config| config.width),
            model_origin,
            "the width is the residual stream size, e.g. 768",
        )?;
        let mlp = self.shape(
            "workload.mlp",
            &section.mlp,
            from_preset(|config| config.mlp),
            model_origin,
            "the MLP hidden width, usually 4 x width",
        )?;
        let heads = self.shape(
            "workload.heads",
            &section.heads,
            from_preset(|config| config.heads),
            model_origin,
            "the number of attention heads; it must divide the width",
        )?;
        let layers = self.shape(
            "workload.layers",
            &section.layers,
            from_preset(|config| config.layers),
            model_origin,
            "a model needs at least one transformer layer",
        )?;
        let patches = self.shape(
            "workload.patches",
            &section.patches,
            from_preset(|config| config.patches),
            model_origin,
            "the number of patch tokens (grid x grid), e.g. 196 for a 14 x 14 grid",
        )?;
        let patch = self.shape(
            "workload.patch",
            &section.patch,
            from_preset(|config| config.patch),
            model_origin,
            "the patch side in pixels, e.g. 16",
        )?;

        if width.value % 2 != 0 {
            return Err(Issue::new(
                "workload.width",
                width.origin.clone(),
                format!("workload.width = {} is odd", width.value),
            )
            .label("odd width")
            .help(
                "activations move as 32-bit words of two FP16 values, so the width must be \
                 even; choose an even width",
            ));
        }
        let (head_path, head_origin) = if heads.explicit || !width.explicit {
            ("workload.heads", heads.origin.clone())
        } else {
            ("workload.width", width.origin.clone())
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
            .map(|field| self.origin("workload.rotary", field));
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
                (Some(origin), false) => ("workload.rotary", origin.clone()),
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
                "workload.patches",
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
                "workload.gelu",
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
                    "workload.projection",
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
                        "workload.layer_norm_epsilon",
                        self.origin("workload.layer_norm_epsilon", field),
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

    fn pooling(
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
                    "workload.pooling",
                    field,
                    &[
                        ("map", Kind::Map),
                        ("attention", Kind::Attention),
                        ("class-token", Kind::ClassToken),
                    ],
                )?,
                self.origin("workload.pooling", field),
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
                    "workload.pooling_heads",
                    self.origin("workload.pooling_heads", field),
                    "workload.pooling_heads is set but workload.pooling is \"class-token\", \
                     which has no attention heads",
                )
                .label("unused with class-token pooling")
                .help("remove pooling_heads, or choose pooling = \"map\" or \"attention\""));
            }
            if !class_token {
                let origin = match &section.class_token {
                    Some(field) if section.pooling.is_none() => {
                        self.origin("workload.class_token", field)
                    }
                    _ => kind_origin,
                };
                return Err(Issue::new(
                    "workload.pooling",
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
                    "workload.pooling_heads",
                    field,
                    1,
                    u32::MAX,
                    "the attention heads of the pooling head; they must divide the width",
                )?,
                self.origin("workload.pooling_heads", field),
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
                "workload.pooling_heads",
                origin,
                format!(
                    "workload.pooling_heads = {pooling_heads} does not divide workload.width = {}",
                    width.value
                ),
            )
            .label("does not divide the width")
            .help(suggestion));
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

    fn weights(
        &self,
        section: &WorkloadSection,
        base_dir: Option<&Path>,
    ) -> Result<WeightSource, Issue> {
        let Some(weights_field) = &section.weights else {
            return Ok(WeightSource::Seeded { seed: DEFAULT_SEED });
        };
        let weights = weights_field.get_ref();
        match (&weights.seeded, &weights.safetensors) {
            (Some(seed), None) => {
                let value = self.integer(
                    "workload.weights.seeded",
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
                let origin = self.origin("workload.weights.safetensors", path_field);
                let path = match (&origin, base_dir) {
                    (Origin::File(_), Some(base)) => base.join(written),
                    _ => PathBuf::from(written),
                };
                if written.is_empty() || !path.is_file() {
                    let problem = if path.exists() { "is not a file" } else { "does not exist" };
                    return Err(Issue::new(
                        "workload.weights.safetensors",
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
                Ok(WeightSource::SafeTensors { path })
            }
            (Some(_), Some(_)) | (None, None) => Err(Issue::new(
                "workload.weights",
                self.origin("workload.weights", weights_field),
                "workload.weights must name exactly one source: `seeded` or `safetensors`",
            )
            .label("expected exactly one of seeded, safetensors")
            .help(
                "write weights = { seeded = 1 } or weights = { safetensors = \"file.safetensors\" }",
            )),
        }
    }

    fn machine(&self, file: &QueryFile) -> Result<MachineSettings, Issue> {
        let section = &file.machine;
        let preset = section
            .preset
            .as_ref()
            .map_or(DEFAULT_MACHINE_PRESET, |field| field.get_ref().as_str());
        let tiles_help = format!(
            "the c600 has {C600_TILES} tiles; choose a count in 1..={C600_TILES} \
             (tests use 16), or omit machine.tiles to use all of them"
        );
        let tiles = match &section.tiles {
            Some(field) => Some(self.unsigned("machine.tiles", field, 0, u32::MAX, &tiles_help)?),
            None => None,
        };
        validate_machine(preset, tiles)
            .map_err(|message| {
                let preset_known = MACHINE_PRESETS.contains(&preset);
                match (&section.preset, &section.tiles) {
                    (Some(field), _) if !preset_known => Issue::new(
                        "machine.preset",
                        self.origin("machine.preset", field),
                        message,
                    )
                    .label("unknown preset")
                    .help(format!("known presets: {}", MACHINE_PRESETS.join(", "))),
                    (_, Some(field)) => Issue::new(
                        "machine.tiles",
                        self.origin("machine.tiles", field),
                        message,
                    )
                    .label(format!("must be in 1..={C600_TILES}"))
                    .help(tiles_help.clone()),
                    _ => Issue::new("machine", Origin::File(0..0), message),
                }
            })
            .map(|tiles| MachineSettings {
                preset: preset.to_string(),
                tiles,
            })
    }

    fn planning(&self, file: &QueryFile) -> Result<PlanningFlags, Issue> {
        let section = &file.planning;
        let accumulation = match &section.accumulation {
            Some(field) => self.choice(
                "planning.accumulation",
                field,
                &[
                    ("auto", AccumulationChoice::Auto),
                    ("f32", AccumulationChoice::F32),
                    ("f16", AccumulationChoice::F16),
                ],
            )?,
            None => AccumulationChoice::Auto,
        };
        let copy_motion = section
            .copy_motion
            .as_ref()
            .map_or(DEFAULT_COPY_MOTION, |field| *field.get_ref());
        let reserved_bytes_per_tile = match &section.reserved_bytes_per_tile {
            Some(field) => self.unsigned(
                "planning.reserved_bytes_per_tile",
                field,
                0,
                SRAM_BYTES_PER_TILE - 1,
                &format!(
                    "a tile has {SRAM_BYTES_PER_TILE} bytes (624 KiB) of SRAM; the reserve must \
                     leave room for the model (the default is {DEFAULT_RESERVED_BYTES_PER_TILE})"
                ),
            )?,
            None => DEFAULT_RESERVED_BYTES_PER_TILE,
        };
        let max_partition_candidates = match &section.max_partition_candidates {
            Some(field) => self.unsigned(
                "planning.max_partition_candidates",
                field,
                1,
                u32::MAX,
                &format!(
                    "the cost model needs at least one candidate per operator \
                     (the default is {DEFAULT_MAX_PARTITION_CANDIDATES})"
                ),
            )?,
            None => DEFAULT_MAX_PARTITION_CANDIDATES,
        };
        Ok(PlanningFlags {
            accumulation,
            copy_motion,
            reserved_bytes_per_tile,
            max_partition_candidates,
        })
    }

    fn policy(&self, path: &str, field: &Spanned<String>) -> Result<SchedulePolicy, Issue> {
        field
            .get_ref()
            .parse()
            .map_err(|error: crate::query::PolicyParseError| {
                Issue::new(path, self.origin(path, field), format!("{path}: {error}"))
                    .label("not a schedule policy")
                    .help(
                        "write \"latency\", \"S<W>\" (stream) or \"B<W>\" (balanced) with W wave \
                     words in 1..=65536, e.g. \"S256\" or \"B1024\"",
                    )
            })
    }

    fn schedule(&self, file: &QueryFile) -> Result<ScheduleSettings, Issue> {
        let section = &file.schedule;
        let policy = match &section.policy {
            Some(field) => self.policy("schedule.policy", field)?,
            None => DEFAULT_POLICY,
        };
        let width = match &section.width {
            Some(field) => self.choice(
                "schedule.width",
                field,
                &[
                    ("auto", TransferWidth::Auto),
                    ("word32", TransferWidth::Word32),
                    ("paired64", TransferWidth::Paired64),
                ],
            )?,
            None => TransferWidth::Auto,
        };
        Ok(ScheduleSettings { policy, width })
    }

    fn phase_overrides(&self, file: &QueryFile) -> Result<Vec<PhaseOverride>, Issue> {
        let mut resolved: Vec<PhaseOverride> = Vec::new();
        let mut first_seen: Vec<(String, String, Origin)> = Vec::new();
        for (index, entry) in file.schedule.overrides.iter().enumerate() {
            let entry_path = format!("schedule.override[{index}]");
            let origin_of = |field_span: Range<usize>| match &entry.set_argument {
                Some(argument) => Origin::Set(argument.clone()),
                None => Origin::File(field_span),
            };
            let Some(phase_field) = &entry.phase else {
                let span = entry.policy.as_ref().map_or(0..0, Spanned::span);
                return Err(Issue::new(
                    format!("{entry_path}.phase"),
                    origin_of(span),
                    format!("{entry_path} has no `phase`"),
                )
                .label("this override names no phase")
                .help("add phase = \"OPERATOR#ORDINAL\", e.g. phase = \"layer.mlp.up#0\""));
            };
            let phase = phase_field.get_ref();
            let phase_origin = origin_of(phase_field.span());
            let well_formed = phase.rsplit_once('#').is_some_and(|(provenance, ordinal)| {
                !provenance.is_empty()
                    && !provenance.chars().any(char::is_whitespace)
                    && !ordinal.is_empty()
                    && ordinal.chars().all(|character| character.is_ascii_digit())
                    && ordinal.parse::<u32>().is_ok()
            });
            if !well_formed {
                return Err(Issue::new(
                    format!("{entry_path}.phase"),
                    phase_origin,
                    format!("{entry_path}.phase = \"{phase}\" is not a phase key"),
                )
                .label("expected OPERATOR#ORDINAL")
                .help(
                    "a phase key is the operator's provenance, '#', and the phase's ordinal \
                     within it, e.g. \"layer.mlp.up#0\" (`superstep phases` lists them)",
                ));
            }
            let Some(policy_field) = &entry.policy else {
                return Err(Issue::new(
                    format!("{entry_path}.policy"),
                    phase_origin,
                    format!("{entry_path} (phase \"{phase}\") has no `policy`"),
                )
                .label("this override names no policy")
                .help("add policy = \"latency\", \"S256\", \"B1024\", ..."));
            };
            let policy = match &entry.set_argument {
                Some(argument) => policy_field.get_ref().parse().map_err(
                    |error: crate::query::PolicyParseError| {
                        Issue::new(
                            format!("schedule.override.{phase}"),
                            Origin::Set(argument.clone()),
                            error.to_string(),
                        )
                    },
                )?,
                None => self.policy(&format!("{entry_path}.policy"), policy_field)?,
            };
            if let Some((_, first_path, first_origin)) =
                first_seen.iter().find(|(seen, _, _)| seen == phase)
            {
                return Err(Issue::new(
                    format!("{entry_path}.phase"),
                    phase_origin,
                    format!(
                        "{entry_path}.phase = \"{phase}\" overrides the same phase as \
                         {first_path}.phase; each phase may be overridden once"
                    ),
                )
                .label("second override of this phase")
                .related("first override of this phase", first_origin.clone())
                .help("keep one [[schedule.override]] entry per phase"));
            }
            first_seen.push((phase.clone(), entry_path.clone(), phase_origin));
            resolved.push(PhaseOverride {
                phase: phase.clone(),
                policy,
            });
        }
        Ok(resolved)
    }

    fn outputs(&self, file: &QueryFile) -> Result<Outputs, Issue> {
        let section = &file.outputs;
        let directory = match &section.directory {
            Some(field) if field.get_ref().trim().is_empty() => {
                return Err(Issue::new(
                    "outputs.directory",
                    self.origin("outputs.directory", field),
                    "outputs.directory is empty",
                )
                .label("empty path")
                .help("name a folder, e.g. \"artifacts\" (relative to the current directory)"));
            }
            Some(field) => PathBuf::from(field.get_ref()),
            None => PathBuf::from(DEFAULT_OUTPUT_DIRECTORY),
        };
        let flag =
            |field: &Option<Spanned<bool>>| field.as_ref().is_none_or(|value| *value.get_ref());
        Ok(Outputs {
            directory,
            report: flag(&section.report),
            phases_csv: flag(&section.phases_csv),
            package: flag(&section.package),
        })
    }

    fn name(
        &self,
        file: &QueryFile,
        source_name: &str,
        model: &ModelConfig,
    ) -> Result<String, Issue> {
        let Some(field) = &file.name else {
            let stem = source_name
                .strip_suffix(".toml")
                .and_then(|path| Path::new(path).file_name())
                .and_then(|stem| stem.to_str())
                .filter(|stem| name_problem(stem).is_none());
            return Ok(stem.map_or_else(|| model.name.clone(), str::to_string));
        };
        let name = field.get_ref();
        match name_problem(name) {
            None => Ok(name.clone()),
            Some(problem) => Err(Issue::new(
                "name",
                self.origin("name", field),
                format!("name = \"{name}\" cannot name the artifacts folder: {problem}"),
            )
            .label("not a folder name")
            .help("use letters, digits, '-', '_' and '.', e.g. name = \"siglip-so400m\"")),
        }
    }
}

/// Why `name` cannot be a folder name under the outputs directory, if it cannot.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > 128 {
        return Some("it is longer than 128 bytes");
    }
    if name.starts_with('.') {
        return Some("it starts with '.'");
    }
    if !name
        .chars()
        .all(|character| character.is_ascii_alphanumeric() || "-_.".contains(character))
    {
        return Some("it may hold only letters, digits, '-', '_' and '.'");
    }
    None
}

/// The capacity check: FP8 weights plus an activation estimate against the
/// SRAM the chosen tiles leave after the per-tile reserve.
fn check_fit(
    workload: &Workload,
    machine: &MachineSettings,
    planning: &PlanningFlags,
    model_origin: Origin,
    layers_origin: Option<Origin>,
) -> Result<(), Issue> {
    let model = &workload.model;
    let weights = u128::from(model.weight_bytes(true));
    let activations = u128::from(model.tokens())
        * u128::from(model.width)
        * 2
        * u128::from(workload.batch)
        * ACTIVATION_COPIES;
    let needed = weights + activations;
    let per_tile = u128::from(SRAM_BYTES_PER_TILE.saturating_sub(planning.reserved_bytes_per_tile));
    let available = u128::from(machine.tiles) * per_tile;
    if needed <= available {
        return Ok(());
    }
    let tiles_needed = needed.div_ceil(per_tile.max(1));
    let (field, origin) = match layers_origin {
        Some(origin) => ("workload.layers", origin),
        None => ("workload.model", model_origin),
    };
    let subject = if field == "workload.layers" {
        format!(
            "workload.model = \"{}\" with workload.layers = {}",
            model.name, model.layers
        )
    } else {
        format!("workload.model = \"{}\"", model.name)
    };
    let more_tiles = if tiles_needed <= u128::from(C600_TILES) {
        format!("use at least {tiles_needed} tiles (machine.tiles)")
    } else {
        format!(
            "it needs {tiles_needed} tiles at this reserve, more than the {C600_TILES} of the c600"
        )
    };
    Err(Issue::new(
        field,
        origin,
        format!(
            "{subject} does not fit on {} tiles: it needs about {} bytes ({} of FP8 weights and \
             {} of activations at batch {}) but {} tiles x {} bytes = {} bytes are available",
            machine.tiles,
            with_separators(needed),
            with_separators(weights),
            with_separators(activations),
            workload.batch,
            machine.tiles,
            with_separators(per_tile),
            with_separators(available),
        ),
    )
    .label("does not fit")
    .help(format!(
        "{more_tiles}, use fewer layers (workload.layers), or reduce \
         planning.reserved_bytes_per_tile (now {}) to free SRAM per tile",
        planning.reserved_bytes_per_tile
    )))
}
