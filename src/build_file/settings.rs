//! The build query as a flat list of `key = value` settings, each tagged with
//! the salsa input field (`BuildInputs`) it lands in, so a rebuild can say
//! "fp8_scale: workload.fp8_scale -4 -> -3" instead of only "fp8_scale".
//!
//! Keys are the build file's (the field table's, `build_file::fields`), and
//! so is the input each lands in (the names `Session::update` reports); a
//! test holds that every key of the table that reaches the compiler is
//! listed here.

use super::fields::{Input, field_of};
use super::{BuildQuery, WeightSource};
use crate::model::config::Positions;

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

/// Every setting of `query`, in the field table's input order: each key is
/// a build-file key (for an array of tables, its entry's key and the op or
/// phase it names), and the input it lands in is the table's.
pub fn query_settings(query: &BuildQuery) -> Vec<QuerySetting> {
    let mut settings = Settings(Vec::new());
    settings.leaf("name", query.name.clone());
    let model = &query.workload.model;
    settings.leaf("workload.model", model.name.clone());
    settings.leaf("workload.width", model.width.to_string());
    settings.leaf("workload.mlp", model.mlp.to_string());
    settings.leaf("workload.layers", model.layers.to_string());
    settings.leaf("workload.heads", model.heads.to_string());
    settings.leaf("workload.patch", model.patch.to_string());
    settings.leaf("workload.patches", model.patches.to_string());
    settings.leaf("workload.class_token", model.class_token.to_string());
    settings.leaf(
        "workload.rotary",
        (model.positions == Positions::LearnedWithRotary).to_string(),
    );
    settings.leaf("workload.gelu", format!("{:?}", model.gelu));
    settings.leaf("workload.pooling", format!("{:?}", model.pooling));
    settings.leaf(
        "workload.pooling_heads",
        model
            .pooling
            .heads()
            .map_or_else(|| String::from("none"), |heads| heads.to_string()),
    );
    settings.leaf("workload.pre_norm", model.pre_norm.to_string());
    settings.leaf(
        "workload.projection",
        model
            .projection
            .map_or_else(|| String::from("none"), |width| width.to_string()),
    );
    settings.leaf(
        "workload.layer_norm_epsilon",
        model.layer_norm_epsilon.to_string(),
    );
    let workload = &query.workload;
    settings.leaf("workload.batch", workload.batch.to_string());
    settings.leaf("workload.fuse_qkv", workload.fuse_qkv.to_string());
    settings.leaf("workload.fp8_scale", workload.fp8_scale.to_string());
    settings.leaf("workload.attention", format!("{:?}", workload.attention));
    match &workload.weights {
        WeightSource::Seeded { seed } => settings.leaf("workload.weights.seeded", seed.to_string()),
        WeightSource::SafeTensors { path, naming } => {
            settings.leaf("workload.weights.safetensors", path.display().to_string());
            settings.leaf(
                "workload.weights.naming",
                naming.map_or_else(|| String::from("auto"), |naming| naming.to_string()),
            );
        }
    }
    settings.leaf("machine.preset", query.machine.preset.clone());
    settings.leaf("machine.tiles", query.machine.tiles.to_string());
    settings.leaf(
        "machine.calibration",
        query.machine.calibration.as_ref().map_or_else(
            || String::from("(the shipped table)"),
            |path| path.display().to_string(),
        ),
    );
    let planning = &query.planning;
    settings.leaf(
        "planning.accumulation",
        format!("{:?}", planning.accumulation),
    );
    settings.leaf(
        "planning.matrix_inputs",
        planning.matrix_inputs.name().to_string(),
    );
    settings.leaf("planning.fp8_cast", planning.fp8_cast.name().to_string());
    settings.leaf(
        "planning.activation_scale",
        match (&planning.matrix_inputs, &planning.activation_scale) {
            (crate::target::kernel_cost::MatrixInputs::Fp16, _) => {
                String::from("unused (matrix_inputs = fp16)")
            }
            (_, crate::build_file::ActivationScale::Fixed(scale)) => scale.to_string(),
            (_, crate::build_file::ActivationScale::Calibrate { input }) => match input {
                crate::build_file::CalibrationInput::Seeded => {
                    String::from("calibrate (on the seeded input)")
                }
                crate::build_file::CalibrationInput::File { path, .. } => {
                    format!("calibrate (on {})", path.display())
                }
            },
        },
    );
    for (op, inputs) in &planning.matrix_input_overrides {
        settings.entry(
            "planning.matrix_inputs",
            format!("planning.matrix_inputs.{op}"),
            inputs.name().to_string(),
        );
    }
    settings.leaf(
        "workload.calibration",
        match &planning.activation_scale {
            crate::build_file::ActivationScale::Calibrate {
                input: crate::build_file::CalibrationInput::File { path, .. },
            } => path.display().to_string(),
            _ => String::from("(the seeded input)"),
        },
    );
    settings.leaf("planning.copy_motion", planning.copy_motion.to_string());
    settings.leaf("planning.fusion", planning.fusion.name().to_string());
    settings.leaf("planning.repeat_base", planning.repeat_base.to_string());
    settings.leaf(
        "planning.reserved_bytes_per_tile",
        planning.reserved_bytes_per_tile.to_string(),
    );
    settings.leaf(
        "planning.max_partition_candidates",
        planning.max_partition_candidates.to_string(),
    );
    settings.leaf(
        "planning.auto_f16_max_parts",
        planning.auto_f16_max_parts.to_string(),
    );
    for layout_override in &planning.layout_overrides {
        settings.entry(
            "layout.override.partition",
            format!("layout.override.{}", layout_override.op),
            layout_override.partition.to_string(),
        );
    }
    settings.leaf("schedule.policy", query.schedule.policy.to_string());
    settings.leaf("schedule.width", query.schedule.width.to_string());
    settings.leaf(
        "schedule.row_allowance",
        query.schedule.row_allowance.to_string(),
    );
    settings.leaf(
        "schedule.prune_by_bounds",
        query.schedule.prune_by_bounds.to_string(),
    );
    for phase_override in &query.overrides {
        settings.entry(
            "schedule.override.policy",
            format!("schedule.override.{}", phase_override.phase),
            match phase_override.width {
                Some(width) => format!("{}/{}", phase_override.policy, width.name()),
                None => phase_override.policy.to_string(),
            },
        );
    }
    let outputs = &query.outputs;
    settings.leaf("outputs.directory", outputs.directory.display().to_string());
    settings.leaf("outputs.report", outputs.report.to_string());
    settings.leaf("outputs.phases_csv", outputs.phases_csv.to_string());
    settings.leaf("outputs.html", outputs.html.to_string());
    settings.leaf("outputs.package", outputs.package.to_string());
    settings.0
}

/// Settings in the making.
struct Settings(Vec<QuerySetting>);

impl Settings {
    /// `key`'s setting: `table_key` is the field table's key, `key` what
    /// the user sees (an entry of an array of tables adds the op or phase
    /// it names).
    fn entry(&mut self, table_key: &str, key: String, value: String) {
        let input = field_of(table_key)
            .and_then(|field| field.input)
            .map_or("(none)", Input::name);
        self.0.push(QuerySetting { input, key, value });
    }

    /// A key that is the table's own.
    fn leaf(&mut self, key: &str, value: String) {
        self.entry(key, key.to_string(), value);
    }
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
    use crate::build_file::fields::{FIELDS, KeyKind};
    use crate::build_file::load_query;

    fn tiny(sets: &[&str]) -> BuildQuery {
        let sets: Vec<String> = sets.iter().map(|set| set.to_string()).collect();
        load_query(Path::new("queries/vit-tiny.toml"), &sets).expect("the tiny query loads")
    }

    /// Every key of the field table that reaches the compiler is a setting
    /// (so a change to it is shown), under the input the table names.
    #[test]
    fn every_compiler_key_of_the_table_is_a_setting_under_its_input() {
        let with_entries = tiny(&[
            "schedule.override.layer.mlp.down#0=latency/word32",
            "layout.override.layer.mlp.down=1x1x16",
        ]);
        let mut checkpoint = tiny(&[]);
        checkpoint.workload.weights = WeightSource::SafeTensors {
            path: PathBuf::from("model.safetensors"),
            naming: None,
        };
        let settings: Vec<QuerySetting> = [tiny(&[]), with_entries, checkpoint]
            .iter()
            .flat_map(query_settings)
            .collect();
        for setting in &settings {
            assert_ne!(setting.input, "(none)", "{setting:?}");
        }
        for field in FIELDS {
            let Some(input) = field.input else { continue };
            // A table's entries are settings of their own
            // (`planning.matrix_inputs.OP`, tested with the overrides).
            if matches!(
                field.kind,
                KeyKind::Table | KeyKind::TableArray | KeyKind::StringTable | KeyKind::StringArray
            ) {
                continue;
            }
            // A member of an array of tables is shown as its entry
            // (`schedule.override.PHASE`), under the array's input.
            let array = ["layout.override.", "schedule.override."]
                .into_iter()
                .find(|prefix| field.key.starts_with(prefix));
            let shown = settings.iter().find(|setting| match array {
                Some(prefix) => setting.key.starts_with(prefix),
                None => setting.key == field.key,
            });
            let setting = shown.unwrap_or_else(|| panic!("{} is not a setting", field.key));
            assert_eq!(setting.input, input.name(), "{}", field.key);
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
