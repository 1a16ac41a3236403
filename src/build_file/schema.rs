//! The serde layer of a build query: the TOML file exactly as written, every
//! value wrapped in `toml::Spanned` so errors can point at it, plus the table
//! of known keys that both the file check and `--set` use.
//!
//! This module owns the file's shape only. It must not apply defaults, resolve
//! presets or judge values (that is `crate::build_file::validate`); integers are
//! read as `i64` and enumerations as strings so that validation, not serde,
//! words the errors about ranges and spellings.

use serde::Deserialize;
use toml::Spanned;

/// The whole build file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryFile {
    pub name: Option<Spanned<String>>,
    pub workload: Option<Spanned<WorkloadSection>>,
    #[serde(default)]
    pub machine: MachineSection,
    #[serde(default)]
    pub planning: PlanningSection,
    #[serde(default)]
    pub layout: LayoutSection,
    #[serde(default)]
    pub schedule: ScheduleSection,
    #[serde(default)]
    pub outputs: OutputsSection,
    #[serde(default)]
    pub cache: CacheSection,
}

/// `[workload]`: the model and how it is run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    pub model: Option<Spanned<String>>,
    pub layers: Option<Spanned<i64>>,
    pub batch: Option<Spanned<i64>>,
    pub fuse_qkv: Option<Spanned<bool>>,
    pub fp8_scale: Option<Spanned<ScaleSetting>>,
    pub calibration: Option<Spanned<String>>,
    pub attention: Option<Spanned<String>>,
    pub weights: Option<Spanned<WeightsSection>>,
    pub width: Option<Spanned<i64>>,
    pub mlp: Option<Spanned<i64>>,
    pub heads: Option<Spanned<i64>>,
    pub patches: Option<Spanned<i64>>,
    pub patch: Option<Spanned<i64>>,
    pub class_token: Option<Spanned<bool>>,
    pub gelu: Option<Spanned<String>>,
    pub pooling: Option<Spanned<String>>,
    pub pooling_heads: Option<Spanned<i64>>,
    pub rotary: Option<Spanned<bool>>,
    pub projection: Option<Spanned<i64>>,
    pub pre_norm: Option<Spanned<bool>>,
    pub layer_norm_epsilon: Option<Spanned<f64>>,
}

/// `workload.fp8_scale` or `planning.activation_scale` as written: an
/// exponent, or a word (`"auto"`, `"calibrate"`; validation says which).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScaleSetting {
    Exponent(i64),
    Word(String),
}

impl<'de> Deserialize<'de> for ScaleSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ScaleSetting;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(KeyKind::Scale.describe())
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<ScaleSetting, E> {
                Ok(ScaleSetting::Exponent(value))
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<ScaleSetting, E> {
                i64::try_from(value)
                    .map(ScaleSetting::Exponent)
                    .map_err(|_| E::custom("the integer is too large"))
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<ScaleSetting, E> {
                Ok(ScaleSetting::Word(value.to_string()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `workload.weights`: exactly one of the two sources, and for a
/// SafeTensors file optionally the naming it is in.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightsSection {
    pub seeded: Option<Spanned<i64>>,
    pub safetensors: Option<Spanned<String>>,
    pub naming: Option<Spanned<String>>,
}

/// `[machine]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSection {
    pub preset: Option<Spanned<String>>,
    pub tiles: Option<Spanned<i64>>,
    pub calibration: Option<Spanned<String>>,
}

/// `[planning]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanningSection {
    pub accumulation: Option<Spanned<String>>,
    pub copy_motion: Option<Spanned<bool>>,
    pub fusion: Option<Spanned<String>>,
    pub repeat_base: Option<Spanned<bool>>,
    pub reserved_bytes_per_tile: Option<Spanned<i64>>,
    pub max_partition_candidates: Option<Spanned<i64>>,
    pub auto_f16_max_parts: Option<Spanned<i64>>,
    pub matrix_inputs: Option<Spanned<String>>,
    pub fp8_cast: Option<Spanned<String>>,
    pub activation_scale: Option<Spanned<ScaleSetting>>,
    /// `[planning.matrix_inputs_by_op]`: `"OP" = "fp8"|"fp16"` per product
    /// whose inputs differ from `matrix_inputs` (a table beside the string,
    /// since TOML cannot make `matrix_inputs` both), by op name.
    #[serde(default)]
    pub matrix_inputs_by_op: std::collections::BTreeMap<Spanned<String>, Spanned<String>>,
    /// `--set planning.matrix_inputs.OP=VALUE` entries, in order: (op,
    /// value, the argument); each wins over the file's entry for its op.
    /// The file's `planning.matrix_inputs` is the string every other
    /// product takes.
    #[serde(skip)]
    pub matrix_input_overrides: Vec<(String, String, String)>,
}

/// `[layout]` and its `[[layout.override]]` entries.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutSection {
    #[serde(default, rename = "override")]
    pub overrides: Vec<LayoutOverrideEntry>,
}

/// One `[[layout.override]]` entry: an op, its partition and optionally its
/// tile order.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutOverrideEntry {
    pub op: Option<Spanned<String>>,
    pub partition: Option<Spanned<String>>,
    pub order: Option<Spanned<String>>,
    /// `when = { batch = 1, ... }`: the configurations the entry holds for
    /// (absent: every one).
    pub when: Option<Spanned<toml::Table>>,
    /// The `--set` argument that created this entry, if it did not come from the file.
    #[serde(skip)]
    pub set_argument: Option<String>,
}

/// `[schedule]` and its `[[schedule.override]]` entries.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSection {
    pub policy: Option<Spanned<String>>,
    pub width: Option<Spanned<String>>,
    pub row_allowance: Option<Spanned<i64>>,
    pub prune_by_bounds: Option<Spanned<bool>>,
    #[serde(default, rename = "override")]
    pub overrides: Vec<OverrideEntry>,
}

/// One `[[schedule.override]]` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideEntry {
    pub phase: Option<Spanned<String>>,
    pub policy: Option<Spanned<String>>,
    /// The transfer width of this phase (`auto`, `word32`, `paired64`);
    /// absent: `schedule.width`.
    pub width: Option<Spanned<String>>,
    /// The `--set` argument that created this entry, if it did not come from the file.
    #[serde(skip)]
    pub set_argument: Option<String>,
}

/// `[outputs]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputsSection {
    pub directory: Option<Spanned<String>>,
    pub report: Option<Spanned<bool>>,
    pub phases_csv: Option<Spanned<bool>>,
    pub html: Option<Spanned<bool>>,
    pub package: Option<Spanned<bool>>,
}

/// `[cache]`: the shared remote tier behind the local persistent cache.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    pub remote: Option<Spanned<String>>,
    pub remote_timeout_ms: Option<Spanned<i64>>,
    pub remote_deadline_ms: Option<Spanned<i64>>,
    pub trusted_keys: Option<Spanned<Vec<Spanned<String>>>>,
}

pub use super::fields::KeyKind;

/// One table's path and its keys with their kinds.
pub type KnownTable = (&'static str, Vec<(&'static str, KeyKind)>);

/// Every key the file may hold, with its kind, by table (the empty string
/// is the top level), in the order of [`crate::build_file::fields::FIELDS`],
/// from which it is made. A unit test checks that each listed key is
/// accepted by the serde layer.
pub fn known_keys() -> &'static [KnownTable] {
    static KNOWN: std::sync::OnceLock<Vec<KnownTable>> = std::sync::OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut tables: Vec<KnownTable> = vec![("", Vec::new())];
        for field in super::fields::FIELDS {
            let (table, name) = super::fields::table_and_name(field.key);
            match tables.iter_mut().find(|(path, _)| *path == table) {
                Some((_, keys)) => keys.push((name, field.kind)),
                None => tables.push((table, vec![(name, field.kind)])),
            }
        }
        tables
    })
}

/// The known keys of the table at `table_path` (`""` for the top level).
pub fn keys_of(table_path: &str) -> Option<&'static [(&'static str, KeyKind)]> {
    known_keys()
        .iter()
        .find(|(path, _)| *path == table_path)
        .map(|(_, keys)| keys.as_slice())
}

/// The kind of the key at a dotted path, if the path is known.
pub fn kind_of(dotted_path: &str) -> Option<KeyKind> {
    let (table, key) = match dotted_path.rsplit_once('.') {
        Some((table, key)) => (table, key),
        None => ("", dotted_path),
    };
    key_in(table, key)
}

/// The kind of `key` in the table at `table_path`, if both are known.
pub fn key_in(table_path: &str, key: &str) -> Option<KeyKind> {
    keys_of(table_path)?
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, kind)| *kind)
}

/// "known top-level keys" or "known keys under `TABLE`", for messages
/// about a key that is not one of them.
pub fn known_keys_phrase(table_path: &str) -> String {
    if table_path.is_empty() {
        String::from("known top-level keys")
    } else {
        format!("known keys under `{table_path}`")
    }
}

/// The known key names under `table_path`, comma separated, for messages.
pub fn key_list(table_path: &str) -> String {
    keys_of(table_path)
        .map(|keys| {
            keys.iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The known key closest in spelling to `unknown` under `table_path`, if any
/// is close enough to be a plausible typo.
pub fn closest_key(table_path: &str, unknown: &str) -> Option<&'static str> {
    let keys = keys_of(table_path)?;
    keys.iter()
        .map(|(name, _)| (*name, edit_distance(name, unknown)))
        .filter(|(name, distance)| *distance <= (name.len() / 3).max(1))
        .min_by_key(|(_, distance)| *distance)
        .map(|(name, _)| name)
}

pub use crate::text::edit_distance;
