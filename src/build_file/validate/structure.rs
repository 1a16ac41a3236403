//! Structure checks of a build file: known keys and TOML types, checked on
//! the syntax tree before serde sees it, so errors name the dotted path.

use toml::de::{DeTable, DeValue};

use super::keys::*;
use crate::build_file::error::{Issue, IssueBody, Origin};
use crate::build_file::schema::{self, KeyKind};

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
        if schema_path == "cache" && is_secret_key_name(name) {
            return Err(Issue::new(
                path.clone(),
                Origin::File(key.span()),
                format!("`{path}`: a build file never holds a cache signing key"),
            )
            .label("a secret in a build file")
            .help(
                "remove the key from the file; a writer's secret comes from the \
                 SUPERSTEP_CACHE_SIGNING_KEY environment variable or a file named by \
                 SUPERSTEP_CACHE_SIGNING_KEY_FILE; readers list public keys in \
                 cache.trusted_keys",
            )
            .secret());
        }
        let Some(kind) = schema::key_in(schema_path, name) else {
            let under = schema::known_keys_phrase(display_path);
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
            | (KeyKind::String, DeValue::String(_))
            | (KeyKind::Scale, DeValue::Integer(_) | DeValue::String(_)) => true,
            (KeyKind::Table, DeValue::Table(inner)) => {
                check_table(inner, &schema_child, &path)?;
                true
            }
            (KeyKind::StringTable, DeValue::Table(inner)) => {
                check_string_table(inner, &path)?;
                true
            }
            (KeyKind::StringArray, DeValue::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    if !matches!(item.get_ref(), DeValue::String(_)) {
                        let item_path = format!("{path}[{index}]");
                        return Err(Issue::new(
                            item_path.clone(),
                            Origin::File(item.span()),
                            format!(
                                "`{item_path}` must be a string, but it is {}",
                                describe_found(item.get_ref())
                            ),
                        )
                        .label("expected a string")
                        .help(type_help(kind, &path)));
                    }
                }
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

/// Whether a `[cache]` key names a signing secret (refused by name, so the
/// message says where the secret belongs instead of "unknown key").
fn is_secret_key_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("secret") || name.contains("signing") || name.contains("private")
}

/// A table of user-named keys (`[planning.matrix_inputs_by_op]`): every
/// value a string (what the keys name is validation's to judge).
fn check_string_table(table: &DeTable<'_>, path: &str) -> Result<(), Issue> {
    for (key, value) in table.iter() {
        if matches!(value.get_ref(), DeValue::String(_)) {
            continue;
        }
        let entry = format!("{path}.\"{}\"", key.get_ref());
        return Err(Issue::new(
            path.to_string(),
            Origin::File(value.span()),
            format!(
                "`{entry}` must be a string, but it is {}",
                describe_found(value.get_ref())
            ),
        )
        .label("expected a string")
        .help(format!(
            "write each entry as `\"OP\" = \"VALUE\"` under [{path}], e.g. \
             `\"layer.attn.qkv\" = \"fp16\"`"
        )));
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
        KeyKind::StringArray => {
            format!("write an array of quoted strings, e.g. `{key} = [\"ed25519:...\"]`")
        }
        KeyKind::StringTable => format!(
            "write a [{path}] section of `\"OP\" = \"VALUE\"` entries, e.g. \
             `\"layer.attn.qkv\" = \"fp16\"`"
        ),
        KeyKind::Scale => {
            let word = if path == PLANNING_ACTIVATION_SCALE {
                "calibrate"
            } else {
                "auto"
            };
            format!("write a power-of-two exponent such as `{key} = -4`, or `{key} = \"{word}\"`")
        }
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
    let mut detail = error.message().trim_end().to_string();
    if detail.contains("i128") || detail.contains("u128") {
        // TOML reads integers beyond 64 bits as 128-bit ones, which no field takes.
        detail = String::from(
            "the number is too large: whole numbers in a build file are at most \
             9,223,372,036,854,775,807, and every field's own range is far smaller \
             (the commented files in queries/ give each range)",
        );
    }
    let message = match &field {
        Some(path) => format!("`{path}`: {detail}"),
        None => format!("invalid build query: {detail}"),
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
        secret: false,
    })
}
