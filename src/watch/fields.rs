//! The build query as a flat list of `key = value` settings, each tagged with
//! the salsa input field (`BuildInputs`) it lands in, so a rebuild can say
//! "fp8_scale: workload.fp8_scale -4 -> -3" instead of only "fp8_scale".
//!
//! Keys follow the build file's spelling (`workload.heads`, `machine.tiles`);
//! the input-field names are those `Session::update` reports.

use crate::build_file::{BuildQuery, WeightSource};

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

/// Every setting of `query`, in input-field order.
pub fn query_settings(query: &BuildQuery) -> Vec<QuerySetting> {
    let mut settings = Vec::new();
    let mut add = |input: &'static str, key: &str, value: String| {
        settings.push(QuerySetting {
            input,
            key: key.to_string(),
            value,
        })
    };
    add("name", "name", query.name.clone());
    let model = &query.workload.model;
    add("model", "workload.model", model.name.clone());
    add("model", "workload.width", model.width.to_string());
    add("model", "workload.mlp", model.mlp.to_string());
    add("model", "workload.layers", model.layers.to_string());
    add("model", "workload.heads", model.heads.to_string());
    add("model", "workload.patch", model.patch.to_string());
    add("model", "workload.channels", model.channels.to_string());
    add("model", "workload.patches", model.patches.to_string());
    add(
        "model",
        "workload.class_token",
        model.class_token.to_string(),
    );
    add(
        "model",
        "workload.positions",
        format!("{:?}", model.positions),
    );
    add("model", "workload.gelu", format!("{:?}", model.gelu));
    add("model", "workload.pooling", format!("{:?}", model.pooling));
    add("model", "workload.pre_norm", model.pre_norm.to_string());
    add(
        "model",
        "workload.projection",
        model
            .projection
            .map_or_else(|| String::from("none"), |width| width.to_string()),
    );
    add(
        "model",
        "workload.layer_norm_epsilon",
        model.layer_norm_epsilon.to_string(),
    );
    let workload = &query.workload;
    add("batch", "workload.batch", workload.batch.to_string());
    add(
        "fuse_qkv",
        "workload.fuse_qkv",
        workload.fuse_qkv.to_string(),
    );
    add(
        "fp8_scale",
        "workload.fp8_scale",
        workload.fp8_scale.to_string(),
    );
    add(
        "attention",
        "workload.attention",
        format!("{:?}", workload.attention),
    );
    let weights = match &workload.weights {
        WeightSource::Seeded { seed } => format!("seeded {seed}"),
        WeightSource::SafeTensors { path, naming } => match naming {
            Some(naming) => format!("safetensors {} ({naming} naming)", path.display()),
            None => format!("safetensors {}", path.display()),
        },
    };
    add("weights", "workload.weights", weights);
    add("machine", "machine.preset", query.machine.preset.clone());
    add("machine", "machine.tiles", query.machine.tiles.to_string());
    let planning = &query.planning;
    add(
        "planning",
        "planning.accumulation",
        format!("{:?}", planning.accumulation),
    );
    add(
        "planning",
        "planning.copy_motion",
        planning.copy_motion.to_string(),
    );
    add(
        "planning",
        "planning.fusion",
        planning.fusion.name().to_string(),
    );
    add(
        "planning",
        "planning.repeat_base",
        planning.repeat_base.to_string(),
    );
    add(
        "planning",
        "planning.reserved_bytes_per_tile",
        planning.reserved_bytes_per_tile.to_string(),
    );
    add(
        "planning",
        "planning.max_partition_candidates",
        planning.max_partition_candidates.to_string(),
    );
    add(
        "planning",
        "planning.auto_f16_max_parts",
        planning.auto_f16_max_parts.to_string(),
    );
    add(
        "schedule",
        "schedule.policy",
        query.schedule.policy.to_string(),
    );
    add(
        "schedule",
        "schedule.width",
        format!("{:?}", query.schedule.width),
    );
    add(
        "schedule",
        "schedule.row_allowance",
        query.schedule.row_allowance.to_string(),
    );
    add(
        "schedule",
        "schedule.prune_by_bounds",
        query.schedule.prune_by_bounds.to_string(),
    );
    for phase_override in &query.overrides {
        add(
            "overrides",
            &format!("schedule.override.{}", phase_override.phase),
            match phase_override.width {
                Some(width) => format!("{}/{}", phase_override.policy, width.name()),
                None => phase_override.policy.to_string(),
            },
        );
    }
    let outputs = &query.outputs;
    add(
        "outputs",
        "outputs.directory",
        outputs.directory.display().to_string(),
    );
    add("outputs", "outputs.report", outputs.report.to_string());
    add(
        "outputs",
        "outputs.phases_csv",
        outputs.phases_csv.to_string(),
    );
    add("outputs", "outputs.html", outputs.html.to_string());
    add("outputs", "outputs.package", outputs.package.to_string());
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
