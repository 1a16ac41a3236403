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
//! As cargo's `--config KEY=VALUE`, a plain key edits the TOML document
//! before it is deserialised ([`edit_document`]): the key is found in the
//! table of fields (`crate::build_file::fields`, through
//! `schema::keys_of`), its value checked against the key's kind and written
//! at its dotted path, so no key has code of its own, and a test
//! (`every_value_field_of_the_table_can_be_set`) holds that every value
//! field of the table lands in the deserialised file. The override lists'
//! entries (`schedule.override.PHASE`, `layout.override.OP`,
//! `planning.matrix_inputs.OP`, their prefixes the field table's) are added
//! to the deserialised file ([`add_entries`]).
//!
//! A value is parsed as a TOML value (`value = VALUE`); when that fails it is
//! taken as a string, so `schedule.policy=B256` works unquoted. String keys
//! also take the literal text of a number or boolean (`name=2024`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::build_file::error::QueryError;
use crate::build_file::fields::{
    LAYOUT_OVERRIDE_PREFIX, MATRIX_INPUTS_BY_OP_PREFIX, MATRIX_INPUTS_OVERRIDE_PREFIX,
    PHASE_OVERRIDE_PREFIX,
};
use crate::build_file::schema::{self, KeyKind, LayoutOverrideEntry, OverrideEntry, QueryFile};

/// The paths each `--set` argument set, mapped to the argument that set them.
pub type SetOrigins = BTreeMap<String, String>;

/// The `--set` key of a SafeTensors file's naming.
const WEIGHTS_NAMING: &str = "workload.weights.naming";

/// Applies every `--set` argument of a plain key to the build file's
/// document before it is deserialised, as cargo's `--config KEY=VALUE`
/// does, and returns which paths they set. Arguments that add entries to
/// the override lists are left to [`add_entries`]. A key given twice is an
/// error naming both arguments: one of them would be dropped without a
/// word.
pub fn edit_document<'a>(
    document: &mut DeTable<'a>,
    sets: &'a [String],
) -> Result<SetOrigins, QueryError> {
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
        let (key, raw_value) = split_argument(argument)?;
        if is_entry_key(key, raw_value) {
            continue;
        }
        let kind = find_kind(argument, key)?;
        let value = convert(argument, key, kind, raw_value)?;
        insert_value(document, argument, key, document_value(value, raw_value))?;
        // A later argument replaces what an earlier one set under the same
        // table entry (the two weight sources exclude each other; a naming
        // stays with a new file).
        if key.starts_with("workload.weights.") && key != WEIGHTS_NAMING {
            let keeps_naming = key == "workload.weights.safetensors";
            origins.retain(|path, _| {
                !path.starts_with("workload.weights.") || (keeps_naming && path == WEIGHTS_NAMING)
            });
        }
        origins.insert(key.to_string(), argument.to_string());
    }
    Ok(origins)
}

/// Applies the `--set` arguments that add to the deserialised file's
/// override lists: `schedule.override.PHASE`, `layout.override.OP` (and
/// `layout.override=auto`) and `planning.matrix_inputs.OP`, each replacing
/// the file's entry of its phase or op.
pub fn add_entries(file: &mut QueryFile, sets: &[String]) -> Result<(), QueryError> {
    for argument in sets {
        let (key, raw_value) = split_argument(argument)?;
        if let Some(phase) = key.strip_prefix(PHASE_OVERRIDE_PREFIX) {
            set_phase_override(file, argument, key, phase, raw_value)?;
        } else if key == LAYOUT_OVERRIDE_PREFIX.trim_end_matches('.') && raw_value == "auto" {
            // Every op back to the cost model's plan.
            file.layout.overrides.clear();
        } else if let Some(op) = key.strip_prefix(LAYOUT_OVERRIDE_PREFIX) {
            set_layout_override(file, argument, key, op, raw_value)?;
        } else if let Some(op) = key
            .strip_prefix(MATRIX_INPUTS_OVERRIDE_PREFIX)
            .or_else(|| key.strip_prefix(MATRIX_INPUTS_BY_OP_PREFIX))
        {
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
        }
    }
    Ok(())
}

/// Whether `KEY=VALUE` adds an override entry ([`add_entries`]) rather
/// than setting a value of the document.
fn is_entry_key(key: &str, raw_value: &str) -> bool {
    key.starts_with(PHASE_OVERRIDE_PREFIX)
        || key.starts_with(LAYOUT_OVERRIDE_PREFIX)
        || key.starts_with(MATRIX_INPUTS_OVERRIDE_PREFIX)
        || key.starts_with(MATRIX_INPUTS_BY_OP_PREFIX)
        || (key == LAYOUT_OVERRIDE_PREFIX.trim_end_matches('.') && raw_value == "auto")
}

/// The trimmed key and value of `KEY=VALUE`, or an error saying what is
/// missing.
fn split_argument(argument: &str) -> Result<(&str, &str), QueryError> {
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
    Ok((key, raw_value.trim()))
}

/// A `--set` value after type checking against its key.
#[derive(Clone, Debug, PartialEq)]
enum SetValue {
    Integer(i64),
    Float(f64),
    Boolean(bool),
    String(String),
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

/// The document value of a checked `--set` value: numbers as written
/// (TOML reads them again), text and flags as they are.
fn document_value<'a>(value: SetValue, raw: &'a str) -> DeValue<'a> {
    match value {
        SetValue::Integer(_) | SetValue::Float(_) => match DeValue::parse(raw) {
            Ok(parsed) => parsed.into_inner(),
            // `convert` read it as a TOML number already; keep the text.
            Err(_) => DeValue::String(Cow::Borrowed(raw)),
        },
        SetValue::Boolean(flag) => DeValue::Boolean(flag),
        SetValue::String(text) => DeValue::String(Cow::Owned(text)),
    }
}

/// A document key or value that came from the command line: no span in the
/// file (validation names the `--set` argument instead, by its origin).
fn from_command_line<T>(value: T) -> Spanned<T> {
    Spanned::new(0..0, value)
}

/// An entry's field that came from the command line.
fn command_line_field<T>(value: T) -> Option<Spanned<T>> {
    Some(from_command_line(value))
}

/// Writes `value` at the dotted `key` of the document, making the tables on
/// the way. The weight sources exclude each other: a seed replaces the
/// whole `[workload.weights]` table, a SafeTensors file drops the seed and
/// keeps the naming.
fn insert_value<'a>(
    document: &mut DeTable<'a>,
    argument: &str,
    key: &str,
    value: DeValue<'a>,
) -> Result<(), QueryError> {
    let segments: Vec<&str> = key.split('.').collect();
    let Some((last, tables)) = segments.split_last() else {
        return Err(QueryError::set(
            argument,
            Some(key),
            "the key is empty",
            None,
        ));
    };
    let mut table = document;
    let mut path = String::new();
    for segment in tables {
        path = if path.is_empty() {
            (*segment).to_string()
        } else {
            format!("{path}.{segment}")
        };
        let entry = table
            .entry(from_command_line(Cow::Owned((*segment).to_string())))
            .or_insert_with(|| from_command_line(DeValue::Table(DeTable::new())));
        let DeValue::Table(inner) = entry.get_mut() else {
            return Err(QueryError::set(
                argument,
                Some(key),
                format!(
                    "the build file gives `{path}` a value, not a table, so `{key}` cannot be set"
                ),
                Some(format!(
                    "make `{path}` a table in the build file (`[{path}]`)"
                )),
            ));
        };
        table = inner;
    }
    match key {
        "workload.weights.seeded" => *table = DeTable::new(),
        "workload.weights.safetensors" => {
            table.remove("seeded");
        }
        _ => {}
    }
    table.insert(
        from_command_line(Cow::Owned((*last).to_string())),
        from_command_line(value),
    );
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
        phase: command_line_field(phase.to_string()),
        policy: command_line_field(policy),
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
        op: command_line_field(op.to_string()),
        partition: command_line_field(partition),
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
        Some((value, suffix)) => (
            value.trim().to_string(),
            command_line_field(suffix.trim().to_string()),
        ),
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

    /// Every scalar key of the schema table can be set into an empty
    /// document, which then deserialises: the table and the file's types
    /// cannot drift apart.
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
                let sets = [format!("{key}={value}")];
                let mut document = DeTable::new();
                let result = edit_document(&mut document, &sets);
                assert!(result.is_ok(), "{key}: {:?}", result.err());
                let document = Spanned::new(0..0, document);
                let file = <QueryFile as serde::Deserialize>::deserialize(
                    toml::de::Deserializer::from(document),
                );
                assert!(file.is_ok(), "{key}: {:?}", file.err());
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
