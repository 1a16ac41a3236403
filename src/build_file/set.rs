//! `--set KEY=VALUE`: overriding one field of a parsed build file by its
//! dotted path (`workload.layers=2`, `schedule.policy=S256`,
//! `workload.weights.seeded=7`, `schedule.override.layer.mlp.up#0=latency`,
//! `schedule.override.layer.mlp.up#0=S64/paired64` with the phase's width).
//!
//! This module owns the parsing of `--set` arguments and their application to
//! the serde layer, and records which dotted paths each argument set so that
//! validation can name the argument instead of a file span. It must not judge
//! values (ranges and spellings are `crate::build_file::validate`'s job); it only
//! checks that the key exists and the value has the key's TOML type.
//!
//! Keys and their kinds come from the table of fields
//! (`crate::build_file::fields`, through `schema::keys_of`); writing a typed
//! value into the parsed file is one arm per key (`assign`), and a test
//! (`every_value_field_of_the_table_can_be_set`) holds that every value
//! field of the table has one.
//!
//! A value is parsed as a TOML value (`value = VALUE`); when that fails it is
//! taken as a string, so `schedule.policy=B256` works unquoted. String keys
//! also take the literal text of a number or boolean (`name=2024`).

use std::collections::BTreeMap;

use toml::Spanned;

use crate::build_file::error::QueryError;
use crate::build_file::schema::{
    self, KeyKind, LayoutOverrideEntry, OverrideEntry, QueryFile, ScaleSetting, WeightsSection,
    WorkloadSection,
};

/// The paths each `--set` argument set, mapped to the argument that set them.
pub type SetOrigins = BTreeMap<String, String>;

/// The key prefix of per-product input overrides: `planning.matrix_inputs.OP=fp8|fp16`.
pub const MATRIX_INPUTS_OVERRIDE_PREFIX: &str = "planning.matrix_inputs.";

/// The same overrides named as the build file's table holds them:
/// `planning.matrix_inputs_by_op.OP=fp8|fp16`.
pub const MATRIX_INPUTS_BY_OP_PREFIX: &str = "planning.matrix_inputs_by_op.";

/// The key prefix of per-phase policy overrides: `schedule.override.PHASE=POLICY`.
pub const PHASE_OVERRIDE_PREFIX: &str = "schedule.override.";

/// The key prefix of per-operator layout overrides:
/// `layout.override.OP=PARTITION[/ORDER]`.
pub const LAYOUT_OVERRIDE_PREFIX: &str = "layout.override.";

/// The `--set` key of a SafeTensors file's naming.
const WEIGHTS_NAMING: &str = "workload.weights.naming";

/// Applies every `--set` argument in order and returns which paths they
/// set. A key given twice is an error naming both arguments: one of them
/// would be dropped without a word.
pub fn apply_sets(file: &mut QueryFile, sets: &[String]) -> Result<SetOrigins, QueryError> {
    let mut keys: BTreeMap<&str, &str> = BTreeMap::new();
    for argument in sets {
        // An argument without a key is refused on its own, below.
        let Some((key, _)) = argument.split_once('=') else {
            continue;
        };
        if key.trim().is_empty() {
            continue;
        }
        if let Some(first) = keys.insert(key.trim(), argument) {
            return Err(QueryError::set(
                argument,
                Some(key.trim()),
                format!("`{}` is set twice, first by --set {first}", key.trim()),
                Some(String::from("give each key one --set")),
            ));
        }
    }
    let mut origins = SetOrigins::new();
    for argument in sets {
        apply_set(file, argument, &mut origins)?;
    }
    Ok(origins)
}

/// A `--set` value after type checking against its key.
#[derive(Clone, Debug, PartialEq)]
enum SetValue {
    Integer(i64),
    Float(f64),
    Boolean(bool),
    String(String),
}

fn apply_set(
    file: &mut QueryFile,
    argument: &str,
    origins: &mut SetOrigins,
) -> Result<(), QueryError> {
    let Some((raw_key, raw_value)) = argument.split_once('=') else {
        return Err(QueryError::set(
            argument,
            None,
            "expected KEY=VALUE but there is no `=`",
            Some(String::from(
                "write the dotted key, `=`, and the value, e.g. --set workload.layers=2",
            )),
        ));
    };
    let key = raw_key.trim();
    let raw_value = raw_value.trim();
    if key.is_empty() {
        return Err(QueryError::set(
            argument,
            None,
            "the key before `=` is empty",
            Some(String::from(
                "name a dotted key, e.g. --set machine.tiles=64",
            )),
        ));
    }

    if let Some(phase) = key.strip_prefix(PHASE_OVERRIDE_PREFIX) {
        return set_phase_override(file, argument, key, phase, raw_value);
    }
    if key == LAYOUT_OVERRIDE_PREFIX.trim_end_matches('.') && raw_value == "auto" {
        // Every op back to the cost model's plan.
        file.layout.overrides.clear();
        return Ok(());
    }
    if let Some(op) = key.strip_prefix(LAYOUT_OVERRIDE_PREFIX) {
        return set_layout_override(file, argument, key, op, raw_value);
    }
    let matrix_inputs_op = key
        .strip_prefix(MATRIX_INPUTS_OVERRIDE_PREFIX)
        .or_else(|| key.strip_prefix(MATRIX_INPUTS_BY_OP_PREFIX));
    if let Some(op) = matrix_inputs_op {
        if op.is_empty() {
            return Err(QueryError::set(
                argument,
                Some(key),
                "the op name after `planning.matrix_inputs.` is empty",
                Some(String::from(
                    "name the product, e.g. --set planning.matrix_inputs.layer.mlp.down=fp16",
                )),
            ));
        }
        // The value is checked with the op's name when the query is resolved.
        replace_or_push(
            &mut file.planning.matrix_input_overrides,
            (op.to_string(), raw_value.to_string(), argument.to_string()),
            |(existing, _, _)| existing == op,
        );
        return Ok(());
    }

    let kind = find_kind(argument, key)?;
    let value = convert(argument, key, kind, raw_value)?;
    assign(file, argument, key, value)?;

    // A later argument replaces what an earlier one set under the same table
    // entry (the two weight sources exclude each other; a naming stays with
    // a new file).
    if key.starts_with("workload.weights.") && key != WEIGHTS_NAMING {
        let keeps_naming = key == "workload.weights.safetensors";
        origins.retain(|path, _| {
            !path.starts_with("workload.weights.") || (keeps_naming && path == WEIGHTS_NAMING)
        });
    }
    origins.insert(key.to_string(), argument.to_string());
    Ok(())
}

/// Walks the dotted key through the known tables and returns the kind of the
/// final key, or an error naming the first unknown segment.
fn find_kind(argument: &str, key: &str) -> Result<KeyKind, QueryError> {
    let mut table = String::new();
    let segments: Vec<&str> = key.split('.').collect();
    for (index, segment) in segments.iter().enumerate() {
        let path = if table.is_empty() {
            (*segment).to_string()
        } else {
            format!("{table}.{segment}")
        };
        let Some(kind) = schema::key_in(&table, segment) else {
            let under = schema::known_keys_phrase(&table);
            let suggestion = schema::closest_key(&table, segment).map(|close| {
                if table.is_empty() {
                    format!("did you mean `{close}`? ")
                } else {
                    format!("did you mean `{table}.{close}`? ")
                }
            });
            return Err(QueryError::set(
                argument,
                Some(key),
                format!(
                    "unknown key `{path}`; {under}: {}",
                    schema::key_list(&table)
                ),
                Some(format!(
                    "{}see the commented files in queries/ for every key",
                    suggestion.unwrap_or_default()
                )),
            ));
        };
        let last = index + 1 == segments.len();
        match kind {
            KeyKind::Table if last => {
                let keys = schema::keys_of(&path)
                    .map(|keys| {
                        keys.iter()
                            .map(|(name, _)| format!("{path}.{name}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                return Err(QueryError::set(
                    argument,
                    Some(key),
                    format!("`{path}` is a table, not a value; set one of its keys: {keys}"),
                    Some(format!("e.g. --set {path}.{}=...", first_key(&path))),
                ));
            }
            KeyKind::StringArray => {
                return Err(QueryError::set(
                    argument,
                    Some(key),
                    format!("`{path}` is a list, not set with --set"),
                    Some(String::from(
                        "name each trusted key with --cache-trusted-key ed25519:HEX",
                    )),
                ));
            }
            KeyKind::StringTable => {
                return Err(QueryError::set(
                    argument,
                    Some(key),
                    format!("`{path}` entries are set one product at a time"),
                    Some(String::from(
                        "write --set planning.matrix_inputs.OP=fp8|fp16, e.g. \
                         --set planning.matrix_inputs.layer.attn.qkv=fp16",
                    )),
                ));
            }
            KeyKind::TableArray if path == "layout.override" => {
                return Err(QueryError::set(
                    argument,
                    Some(key),
                    format!("`{path}` entries are set one op at a time"),
                    Some(String::from(
                        "write --set layout.override.OP=PARTITION[/ORDER], e.g. \
                         --set layout.override.layer.mlp.down=8x8x23 (OP=auto drops one \
                         entry, --set layout.override=auto every entry)",
                    )),
                ));
            }
            KeyKind::TableArray => {
                return Err(QueryError::set(
                    argument,
                    Some(key),
                    format!("`{path}` entries are set one phase at a time"),
                    Some(String::from(
                        "write --set schedule.override.PHASE=POLICY, e.g. \
                         --set schedule.override.layer.mlp.up#0=latency",
                    )),
                ));
            }
            KeyKind::Table => table = path,
            _ if last => return Ok(kind),
            _ => {
                return Err(QueryError::set(
                    argument,
                    Some(key),
                    format!(
                        "`{path}` is {}, not a table, so `{key}` does not exist",
                        kind.describe()
                    ),
                    Some(format!("set `{path}` itself, e.g. --set {path}=...")),
                ));
            }
        }
    }
    // `split` yields at least one segment, so the loop always returns; keep a
    // typed error rather than a panic all the same.
    Err(QueryError::set(
        argument,
        Some(key),
        "the key is empty",
        None,
    ))
}

fn first_key(table: &str) -> &'static str {
    schema::keys_of(table)
        .and_then(|keys| keys.first())
        .map(|(name, _)| *name)
        .unwrap_or("key")
}

/// Parses `raw` as a TOML value, falling back to the raw text as a string.
fn parse_value(raw: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("value = {raw}")) {
        Ok(mut table) if table.len() == 1 => table
            .remove("value")
            .unwrap_or_else(|| toml::Value::String(raw.to_string())),
        _ => toml::Value::String(raw.to_string()),
    }
}

fn describe_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(text) => format!("the string {text:?}"),
        toml::Value::Integer(number) => format!("the integer {number}"),
        toml::Value::Float(number) => format!("the number {number}"),
        toml::Value::Boolean(flag) => format!("the boolean {flag}"),
        toml::Value::Datetime(datetime) => format!("the date-time {datetime}"),
        toml::Value::Array(_) => String::from("an array"),
        toml::Value::Table(_) => String::from("a table"),
    }
}

fn convert(argument: &str, key: &str, kind: KeyKind, raw: &str) -> Result<SetValue, QueryError> {
    let value = parse_value(raw);
    let converted = match (kind, &value) {
        (KeyKind::Integer | KeyKind::Scale, toml::Value::Integer(number)) => {
            Some(SetValue::Integer(*number))
        }
        // Digits TOML could not read as an integer are out of range, not a word.
        (KeyKind::Scale, toml::Value::String(text)) if !is_signed_digits(raw) => {
            Some(SetValue::String(text.clone()))
        }
        (KeyKind::Float, toml::Value::Float(number)) => Some(SetValue::Float(*number)),
        (KeyKind::Float, toml::Value::Integer(number)) => Some(SetValue::Float(*number as f64)),
        (KeyKind::Boolean, toml::Value::Boolean(flag)) => Some(SetValue::Boolean(*flag)),
        (KeyKind::String, toml::Value::String(text)) => Some(SetValue::String(text.clone())),
        (
            KeyKind::String,
            toml::Value::Integer(_)
            | toml::Value::Float(_)
            | toml::Value::Boolean(_)
            | toml::Value::Datetime(_),
        ) => Some(SetValue::String(raw.to_string())),
        _ => None,
    };
    converted.ok_or_else(|| {
        // A run of digits TOML could not read is out of the 64-bit range:
        // too large (or too small), not the wrong type.
        if matches!(kind, KeyKind::Integer | KeyKind::Scale | KeyKind::Float)
            && is_signed_digits(raw)
        {
            let side = if raw.trim().starts_with('-') {
                "too small"
            } else {
                "too large"
            };
            return QueryError::set(
                argument,
                Some(key),
                format!(
                    "`{key}` expects {}, but {} is {side} for any number a build file holds \
                     (64-bit integers: -9,223,372,036,854,775,808 to 9,223,372,036,854,775,807)",
                    kind.describe(),
                    raw.trim()
                ),
                Some(format!(
                    "give a value in the range `{key}` accepts (the shipped build files, \
                     queries/*.toml, state each field's range)"
                )),
            );
        }
        let example = match kind {
            KeyKind::Integer => "2",
            KeyKind::Scale => "auto",
            KeyKind::Float => "1e-6",
            KeyKind::Boolean => "true",
            _ => "text",
        };
        QueryError::set(
            argument,
            Some(key),
            format!(
                "`{key}` expects {}, but the value is {}",
                kind.describe(),
                describe_value(&value)
            ),
            Some(format!("e.g. --set {key}={example}")),
        )
    })
}

/// Whether `raw` is an optionally signed run of decimal digits.
fn is_signed_digits(raw: &str) -> bool {
    let digits = raw.trim().trim_start_matches(['+', '-']);
    !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit())
}

fn workload(file: &mut QueryFile) -> &mut WorkloadSection {
    file.workload
        .get_or_insert_with(|| Spanned::new(0..0, WorkloadSection::default()))
        .get_mut()
}

fn unset<T>(value: T) -> Option<Spanned<T>> {
    Some(Spanned::new(0..0, value))
}

fn assign(
    file: &mut QueryFile,
    argument: &str,
    key: &str,
    value: SetValue,
) -> Result<(), QueryError> {
    use SetValue::{Boolean, Float, Integer, String as Text};
    match (key, value) {
        ("name", Text(text)) => file.name = unset(text),
        ("workload.model", Text(text)) => workload(file).model = unset(text),
        ("workload.layers", Integer(number)) => workload(file).layers = unset(number),
        ("workload.batch", Integer(number)) => workload(file).batch = unset(number),
        ("workload.fuse_qkv", Boolean(flag)) => workload(file).fuse_qkv = unset(flag),
        ("workload.fp8_scale", Integer(number)) => {
            workload(file).fp8_scale = unset(ScaleSetting::Exponent(number))
        }
        ("workload.calibration", Text(text)) => workload(file).calibration = unset(text),
        ("workload.fp8_scale", Text(text)) => {
            workload(file).fp8_scale = unset(ScaleSetting::Word(text))
        }
        ("workload.attention", Text(text)) => workload(file).attention = unset(text),
        ("workload.weights.seeded", Integer(number)) => {
            workload(file).weights = unset(WeightsSection {
                seeded: unset(number),
                ..WeightsSection::default()
            })
        }
        // A new file keeps the naming said for the old one.
        ("workload.weights.safetensors", Text(text)) => {
            let naming = workload(file)
                .weights
                .take()
                .and_then(|weights| weights.into_inner().naming);
            workload(file).weights = unset(WeightsSection {
                seeded: None,
                safetensors: unset(text),
                naming,
            })
        }
        ("workload.weights.naming", Text(text)) => {
            let mut weights = workload(file)
                .weights
                .take()
                .map(Spanned::into_inner)
                .unwrap_or_default();
            weights.naming = unset(text);
            workload(file).weights = unset(weights);
        }
        ("workload.width", Integer(number)) => workload(file).width = unset(number),
        ("workload.mlp", Integer(number)) => workload(file).mlp = unset(number),
        ("workload.heads", Integer(number)) => workload(file).heads = unset(number),
        ("workload.patches", Integer(number)) => workload(file).patches = unset(number),
        ("workload.patch", Integer(number)) => workload(file).patch = unset(number),
        ("workload.class_token", Boolean(flag)) => workload(file).class_token = unset(flag),
        ("workload.gelu", Text(text)) => workload(file).gelu = unset(text),
        ("workload.pooling", Text(text)) => workload(file).pooling = unset(text),
        ("workload.pooling_heads", Integer(number)) => workload(file).pooling_heads = unset(number),
        ("workload.rotary", Boolean(flag)) => workload(file).rotary = unset(flag),
        ("workload.projection", Integer(number)) => workload(file).projection = unset(number),
        ("workload.pre_norm", Boolean(flag)) => workload(file).pre_norm = unset(flag),
        ("workload.layer_norm_epsilon", Float(number)) => {
            workload(file).layer_norm_epsilon = unset(number)
        }
        ("machine.preset", Text(text)) => file.machine.preset = unset(text),
        ("machine.tiles", Integer(number)) => file.machine.tiles = unset(number),
        ("machine.calibration", Text(text)) => file.machine.calibration = unset(text),
        ("planning.accumulation", Text(text)) => file.planning.accumulation = unset(text),
        ("planning.copy_motion", Boolean(flag)) => file.planning.copy_motion = unset(flag),
        ("planning.fusion", Text(text)) => file.planning.fusion = unset(text),
        ("planning.repeat_base", Boolean(flag)) => file.planning.repeat_base = unset(flag),
        ("planning.reserved_bytes_per_tile", Integer(number)) => {
            file.planning.reserved_bytes_per_tile = unset(number)
        }
        ("planning.max_partition_candidates", Integer(number)) => {
            file.planning.max_partition_candidates = unset(number)
        }
        ("planning.auto_f16_max_parts", Integer(number)) => {
            file.planning.auto_f16_max_parts = unset(number)
        }
        ("planning.matrix_inputs", Text(text)) => file.planning.matrix_inputs = unset(text),
        ("planning.fp8_cast", Text(text)) => file.planning.fp8_cast = unset(text),
        ("planning.activation_scale", Integer(number)) => {
            file.planning.activation_scale = unset(ScaleSetting::Exponent(number))
        }
        ("planning.activation_scale", Text(text)) => {
            file.planning.activation_scale = unset(ScaleSetting::Word(text))
        }
        ("schedule.policy", Text(text)) => file.schedule.policy = unset(text),
        ("schedule.width", Text(text)) => file.schedule.width = unset(text),
        ("schedule.row_allowance", Integer(number)) => file.schedule.row_allowance = unset(number),
        ("schedule.prune_by_bounds", Boolean(flag)) => file.schedule.prune_by_bounds = unset(flag),
        ("outputs.directory", Text(text)) => file.outputs.directory = unset(text),
        ("outputs.report", Boolean(flag)) => file.outputs.report = unset(flag),
        ("outputs.phases_csv", Boolean(flag)) => file.outputs.phases_csv = unset(flag),
        ("outputs.html", Boolean(flag)) => file.outputs.html = unset(flag),
        ("outputs.package", Boolean(flag)) => file.outputs.package = unset(flag),
        ("cache.remote", Text(text)) => file.cache.remote = unset(text),
        ("cache.remote_timeout_ms", Integer(number)) => {
            file.cache.remote_timeout_ms = unset(number)
        }
        ("cache.remote_deadline_ms", Integer(number)) => {
            file.cache.remote_deadline_ms = unset(number)
        }
        _ => {
            return Err(QueryError::set(
                argument,
                Some(key),
                format!("`{key}` cannot be set from the command line"),
                Some(String::from("set it in the build file instead")),
            ));
        }
    }
    Ok(())
}

/// `schedule.override.PHASE=POLICY[/WIDTH]`: replaces the file's entry for
/// PHASE or adds one.
fn set_phase_override(
    file: &mut QueryFile,
    argument: &str,
    key: &str,
    phase: &str,
    raw_value: &str,
) -> Result<(), QueryError> {
    let value = convert(argument, key, KeyKind::String, raw_value)?;
    let SetValue::String(policy) = value else {
        return Err(QueryError::set(
            argument,
            Some(key),
            "a phase override takes a policy string",
            None,
        ));
    };
    // `POLICY/WIDTH` also sets the phase's transfer width.
    let (policy, width) = split_suffix(policy);
    let entry = OverrideEntry {
        phase: unset(phase.to_string()),
        policy: unset(policy),
        width,
        set_argument: Some(argument.to_string()),
    };
    replace_or_push(&mut file.schedule.overrides, entry, |candidate| {
        candidate.phase.as_ref().map(|name| name.get_ref().as_str()) == Some(phase)
    });
    Ok(())
}

/// `layout.override.OP=PARTITION[/ORDER]`: replaces the file's entry for
/// OP or adds one; `layout.override.OP=auto` removes it (the cost model
/// chooses).
fn set_layout_override(
    file: &mut QueryFile,
    argument: &str,
    key: &str,
    op: &str,
    raw_value: &str,
) -> Result<(), QueryError> {
    if op.is_empty() {
        return Err(QueryError::set(
            argument,
            Some(key),
            "the op name after `layout.override.` is empty",
            Some(String::from(
                "name the op, e.g. --set layout.override.layer.mlp.down=8x8x23",
            )),
        ));
    }
    let SetValue::String(value) = convert(argument, key, KeyKind::String, raw_value)? else {
        return Err(QueryError::set(
            argument,
            Some(key),
            "a layout override takes a partition such as `8x8x23` or `23x4/kq`",
            None,
        ));
    };
    if value.trim() == "auto" {
        // `auto`: the cost model's own plan; drops the file's entry.
        file.layout.overrides.retain(|candidate| {
            candidate
                .op
                .as_ref()
                .is_none_or(|existing| existing.get_ref().trim() != op)
        });
        return Ok(());
    }
    let (partition, order) = split_suffix(value);
    let entry = LayoutOverrideEntry {
        op: unset(op.to_string()),
        partition: unset(partition),
        order,
        when: None,
        set_argument: Some(argument.to_string()),
    };
    replace_or_push(&mut file.layout.overrides, entry, |candidate| {
        candidate.op.as_ref().map(|name| name.get_ref().as_str()) == Some(op)
    });
    Ok(())
}

/// `VALUE[/SUFFIX]` of an override: the value and the suffix (a phase's
/// width, an op's tile order), each trimmed.
fn split_suffix(value: String) -> (String, Option<Spanned<String>>) {
    match value.split_once('/') {
        Some((value, suffix)) => (value.trim().to_string(), unset(suffix.trim().to_string())),
        None => (value, None),
    }
}

/// Replaces the entry `same` picks, or appends `entry` when there is none.
fn replace_or_push<T>(entries: &mut Vec<T>, entry: T, same: impl Fn(&T) -> bool) {
    match entries.iter_mut().find(|candidate| same(candidate)) {
        Some(slot) => *slot = entry,
        None => entries.push(entry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scalar key of the schema table can be set, so the table and the
    /// assignment above cannot drift apart.
    #[test]
    fn every_known_scalar_key_is_settable() {
        for (table, keys) in schema::known_keys() {
            for (name, kind) in keys {
                let key = if table.is_empty() {
                    (*name).to_string()
                } else {
                    format!("{table}.{name}")
                };
                let value = match kind {
                    KeyKind::Integer | KeyKind::Scale => "3",
                    KeyKind::Float => "0.5",
                    KeyKind::Boolean => "true",
                    KeyKind::String => "text",
                    KeyKind::Table
                    | KeyKind::TableArray
                    | KeyKind::StringTable
                    | KeyKind::StringArray => continue,
                };
                if *table == "schedule.override" || *table == "layout.override" {
                    continue;
                }
                let mut file = QueryFile::default();
                let result = apply_sets(&mut file, &[format!("{key}={value}")]);
                assert!(result.is_ok(), "{key}: {:?}", result.err());
            }
        }
    }

    #[test]
    fn values_parse_as_toml_then_as_text() {
        assert_eq!(parse_value("2"), toml::Value::Integer(2));
        assert_eq!(parse_value("B256"), toml::Value::String("B256".into()));
        assert_eq!(parse_value("\"x\""), toml::Value::String("x".into()));
        assert_eq!(
            parse_value("1\nother = 2"),
            toml::Value::String("1\nother = 2".into())
        );
    }
}
