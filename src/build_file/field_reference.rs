//! The build-file reference (`docs/build-file.md`), rendered from the one
//! table of fields (`fields::FIELDS`): a section per table, a row per key
//! with its type, default, allowed values, input and meaning.

use super::fields::{FIELDS, Field, KeyKind};

/// The allowed values of a field, in words.
fn allowed(field: &Field) -> std::string::String {
    if field.choices.is_empty() {
        field.allowed.to_string()
    } else {
        field.choices.join(" | ")
    }
}

/// The build-file reference (`docs/build-file.md`), rendered from
/// [`FIELDS`].
pub fn reference() -> std::string::String {
    let mut text = std::string::String::from(
        "# Build-file reference\n\n\
         Every key a build file (`queries/*.toml`) may hold, and every key `--set KEY=VALUE` \
         may name. Generated from `src/build_file/fields/table.rs` (the one table the parser, `--set`, \
         their errors, the compiler's inputs and `watch` read); a test fails when this page is \
         stale. The input is the compiler input a key's value lands in: a change re-runs only \
         what reads that input, and its durability (high, medium, low: how rarely it changes) \
         lets salsa skip checking queries that read only more durable inputs. Regenerate it with \
         `SUPERSTEP_WRITE_DOCS=1 cargo test --test suite cli::build_file_reference`.\n",
    );
    for section in FIELDS.iter().filter(|field| field.kind == KeyKind::Table) {
        text.push_str(&format!(
            "\n## `[{}]`\n\n{}\n\n",
            section.key, section.meaning
        ));
        text.push_str("| key | type | default | allowed | input (durability) | meaning |\n|---|---|---|---|---|---|\n");
        let prefix = format!("{}.", section.key);
        for entry in FIELDS.iter().filter(|field| {
            field.kind != KeyKind::Table
                && field.key.starts_with(&prefix)
                && !FIELDS.iter().any(|inner| {
                    inner.kind == KeyKind::Table
                        && inner.key.len() > section.key.len()
                        && field.key.starts_with(&format!("{}.", inner.key))
                })
        }) {
            text.push_str(&row(entry));
        }
    }
    text.push_str(
        "\n## Top level\n\n| key | type | default | allowed | input (durability) | meaning |\n|---|---|---|---|---|---|\n",
    );
    for entry in FIELDS
        .iter()
        .filter(|field| field.kind != KeyKind::Table && !field.key.contains('.'))
    {
        text.push_str(&row(entry));
    }
    text
}

fn row(field: &Field) -> std::string::String {
    let input = match field.input {
        Some(input) => format!("`{}` ({})", input.name(), input.durability().name()),
        None => std::string::String::from("the command line only"),
    };
    format!(
        "| `{}` | {} | {} | {} | {} | {} |\n",
        field.key,
        field.kind.describe(),
        field.default,
        allowed(field).replace('|', "\\|"),
        input,
        field.meaning.replace('|', "\\|")
    )
}
