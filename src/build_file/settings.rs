//! The build query as a flat list of `key = value` settings, each tagged with
//! the salsa input field (`BuildInputs`) it lands in, so a rebuild can say
//! "fp8_scale: workload.fp8_scale -4 -> -3" instead of only "fp8_scale".
//!
//! The settings are the field table's (`build_file::fields::FIELDS`): each
//! field that lands in a build input reads its resolved value from the
//! query with its own reader, under the input the table names, so a key is
//! written once, in the table; this module only runs the readers and
//! compares two queries' settings.

use super::BuildQuery;
use super::fields::{FIELDS, Input, Reader};

/// One setting of a build query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuerySetting {
    /// The `BuildInputs` field the setting belongs to.
    pub input: &'static str,
    /// The key as in the build file, e.g. `workload.fp8_scale`.
    pub key: String,
    pub value: String,
}

/// A setting whose value differs between two queries (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingChange {
    pub input: &'static str,
    pub key: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// Every setting of `query`, input by input in `BuildInputs`' order and
/// within an input in the field table's order: each key is a build-file key
/// (for an array of tables or a table of per-op entries, the key `--set`
/// writes for the entry, `schedule.override.PHASE`), its value what the
/// field's reader reads.
pub fn query_settings(query: &BuildQuery) -> Vec<QuerySetting> {
    let mut settings = Vec::new();
    for input in Input::ALL {
        for field in FIELDS.iter().filter(|field| field.input == Some(input)) {
            let mut push = |key: String, value: String| {
                settings.push(QuerySetting {
                    input: input.name(),
                    key,
                    value,
                });
            };
            match field.reader {
                Reader::Unread | Reader::Member => {}
                Reader::Value(read) => push(field.key.to_string(), read(query)),
                Reader::Optional(read) => {
                    if let Some(value) = read(query) {
                        push(field.key.to_string(), value);
                    }
                }
                Reader::Entries(read) => {
                    for (key, value) in read(query) {
                        push(key, value);
                    }
                }
            }
        }
    }
    settings
}

/// The settings that differ between `old` and `new`: `old`'s order first,
/// then settings only `new` has.
pub fn setting_changes(old: &BuildQuery, new: &BuildQuery) -> Vec<SettingChange> {
    let before = query_settings(old);
    let after = query_settings(new);
    let find = |settings: &[QuerySetting], key: &str| {
        settings
            .iter()
            .find(|setting| setting.key == key)
            .map(|setting| setting.value.clone())
    };
    let mut changes = Vec::new();
    for setting in &before {
        let new_value = find(&after, &setting.key);
        if new_value.as_deref() != Some(setting.value.as_str()) {
            changes.push(SettingChange {
                input: setting.input,
                key: setting.key.clone(),
                old: Some(setting.value.clone()),
                new: new_value,
            });
        }
    }
    for setting in &after {
        if find(&before, &setting.key).is_none() {
            changes.push(SettingChange {
                input: setting.input,
                key: setting.key.clone(),
                old: None,
                new: Some(setting.value.clone()),
            });
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::build_file::fields::{
        KeyKind, LAYOUT_OVERRIDE_PREFIX, MATRIX_INPUTS_OVERRIDE_PREFIX, PHASE_OVERRIDE_PREFIX,
        field_of, table_and_name,
    };
    use crate::build_file::{WeightSource, load_query};

    fn tiny(sets: &[&str]) -> BuildQuery {
        let sets: Vec<String> = sets.iter().map(|set| set.to_string()).collect();
        load_query(Path::new("queries/vit-tiny.toml"), &sets).expect("the tiny query loads")
    }

    /// The tiny query, with entries of every kind, and with a checkpoint's
    /// weights: between them every reader has something to read.
    fn every_kind_of_query() -> Vec<BuildQuery> {
        let with_entries = tiny(&[
            "schedule.override.layer.mlp.down#0=latency/word32",
            "layout.override.layer.mlp.down=1x1x16",
            "planning.matrix_inputs.layer.mlp.up=fp16",
        ]);
        let mut checkpoint = tiny(&[]);
        checkpoint.workload.weights = WeightSource::SafeTensors {
            path: PathBuf::from("model.safetensors"),
            naming: None,
        };
        vec![tiny(&[]), with_entries, checkpoint]
    }

    /// Every key of the field table that reaches the compiler is a setting
    /// (so a change to it is shown), under the input the table names: a
    /// value's under its own key, an entry's under the key `--set` writes
    /// for it.
    #[test]
    fn every_compiler_key_of_the_table_is_a_setting_under_its_input() {
        let settings: Vec<QuerySetting> = every_kind_of_query()
            .iter()
            .flat_map(query_settings)
            .collect();
        for field in FIELDS {
            let Some(input) = field.input else { continue };
            let shown: Vec<&QuerySetting> = match field.reader {
                Reader::Unread => panic!("{} lands in {} unread", field.key, input.name()),
                // Checked with its array's entries, below.
                Reader::Member => continue,
                Reader::Value(_) | Reader::Optional(_) => settings
                    .iter()
                    .filter(|setting| setting.key == field.key)
                    .collect(),
                Reader::Entries(read) => {
                    let keys: Vec<String> = every_kind_of_query()
                        .iter()
                        .flat_map(read)
                        .map(|(key, _)| key)
                        .collect();
                    settings
                        .iter()
                        .filter(|setting| keys.contains(&setting.key))
                        .collect()
                }
            };
            assert!(!shown.is_empty(), "{} is not a setting", field.key);
            for setting in shown {
                assert_eq!(setting.input, input.name(), "{}", field.key);
            }
        }
    }

    /// A member of an array of tables is read by its array: the array
    /// reads entries, and every key under the array is a member.
    #[test]
    fn the_members_of_an_array_of_tables_are_its_entries() {
        for field in FIELDS {
            let (table, _) = table_and_name(field.key);
            let array = FIELDS.iter().find(|array| {
                array.kind == KeyKind::TableArray
                    && (table == array.key || table.starts_with(&format!("{}.", array.key)))
            });
            match array {
                Some(array) => {
                    assert!(matches!(field.reader, Reader::Member), "{}", field.key);
                    assert!(matches!(array.reader, Reader::Entries(_)), "{}", array.key);
                    assert_eq!(field.input, array.input, "{}", field.key);
                }
                None => assert!(!matches!(field.reader, Reader::Member), "{}", field.key),
            }
        }
    }

    /// An entry's setting is named as `--set` names it: the key the table
    /// knows (`planning.matrix_inputs`, `layout.override`,
    /// `schedule.override`) and the op or phase.
    #[test]
    fn an_entry_is_named_as_set_names_it() {
        let settings = query_settings(&every_kind_of_query()[1]);
        let value_of = |key: &str| {
            settings
                .iter()
                .find(|setting| setting.key == key)
                .map(|setting| (setting.input, setting.value.as_str()))
        };
        assert_eq!(
            value_of("schedule.override.layer.mlp.down#0"),
            Some(("overrides", "latency/word32"))
        );
        assert_eq!(
            value_of("layout.override.layer.mlp.down"),
            Some(("planning", "1x1x16"))
        );
        assert_eq!(
            value_of("planning.matrix_inputs.layer.mlp.up"),
            Some(("planning", "fp16"))
        );
        for prefix in [
            LAYOUT_OVERRIDE_PREFIX,
            PHASE_OVERRIDE_PREFIX,
            MATRIX_INPUTS_OVERRIDE_PREFIX,
        ] {
            let key = prefix.trim_end_matches('.');
            assert!(
                field_of(key).is_some(),
                "{prefix} is not a key of the table"
            );
        }
    }

    /// No two settings of a query share a key (a change is found by key).
    #[test]
    fn every_setting_has_a_key_of_its_own() {
        for query in every_kind_of_query() {
            let settings = query_settings(&query);
            let mut keys: Vec<&str> = settings
                .iter()
                .map(|setting| setting.key.as_str())
                .collect();
            keys.sort_unstable();
            let count = keys.len();
            keys.dedup();
            assert_eq!(keys.len(), count, "{settings:?}");
        }
    }

    #[test]
    fn a_changed_pooling_head_count_is_a_setting_change() {
        let changes = setting_changes(
            &tiny(&["workload.pooling=map", "workload.class_token=false"]),
            &tiny(&[
                "workload.pooling=map",
                "workload.class_token=false",
                "workload.pooling_heads=1",
            ]),
        );
        let keys: Vec<&str> = changes.iter().map(|change| change.key.as_str()).collect();
        assert!(keys.contains(&"workload.pooling_heads"), "{changes:?}");
    }
}
