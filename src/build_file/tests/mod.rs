//! Tests of the build-query load API: the shipped queries, defaults, every
//! class of bad input (message names the field, the label points at the
//! offending text, exit code 2), `--set`, and a no-panic mutation sweep.
//!
//! These tests own no behaviour; they must not depend on the current
//! directory (paths come from `CARGO_MANIFEST_DIR`).

use std::path::{Path, PathBuf};

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};

use super::*;
use crate::model::config::{GeluForm, Pooling, Positions};

const SIGLIP: &str = include_str!("../../../queries/siglip-so400m.toml");
const VIT_TINY: &str = include_str!("../../../queries/vit-tiny.toml");

mod matrix_inputs_by_op;
mod override_width;
mod set;
mod shapes;
mod weights_naming;

fn queries_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("queries")
}

fn sets(arguments: &[&str]) -> Vec<String> {
    arguments
        .iter()
        .map(|argument| argument.to_string())
        .collect()
}

fn parse(text: &str, arguments: &[&str]) -> Result<BuildQuery, QueryError> {
    parse_query("test.toml", text, None, &sets(arguments))
}

/// `text` with the first occurrence of `from` replaced by `to` (which must exist).
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "test setup: `{from}` not in the text");
    text.replacen(from, to, 1)
}

fn render(error: &QueryError) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(200)
        .render_report(&mut out, error)
        .expect("rendering into a String cannot fail");
    out
}

fn labels(error: &QueryError) -> Vec<miette::LabeledSpan> {
    error
        .labels()
        .map(|labels| labels.collect())
        .unwrap_or_default()
}

fn expect_error(text: &str, arguments: &[&str]) -> QueryError {
    match parse(text, arguments) {
        Ok(query) => panic!("expected an error, got {query:#?}"),
        Err(error) => {
            assert_eq!(error.exit_code(), 2);
            error
        }
    }
}

/// Asserts a file error: the message and rendering name `field`, the primary
/// label covers exactly `offending`, and there is help. Returns the rendering.
fn expect_file_error(text: &str, field: &str, offending: &str) -> String {
    let error = expect_error(text, &[]);
    let message = error.to_string();
    assert!(
        message.contains(field),
        "message `{message}` does not name `{field}`"
    );
    assert_eq!(error.field(), Some(field), "{message}");
    let labels = labels(&error);
    let primary = labels
        .iter()
        .find(|label| label.primary())
        .unwrap_or_else(|| panic!("no primary label for `{message}`"));
    let start = primary.offset();
    let slice = &text[start..start + primary.len()];
    assert_eq!(slice, offending, "label of `{message}`");
    assert!(error.help().is_some(), "no help for `{message}`");
    let rendered = render(&error);
    assert!(rendered.contains(field), "{rendered}");
    assert!(
        rendered.contains(offending.lines().next().unwrap_or_default()),
        "{rendered}"
    );
    // The rendering wraps long lines, so substring checks also get the plain
    // message and help.
    let help = error
        .help()
        .map(|help| help.to_string())
        .unwrap_or_default();
    format!("{message}\n{help}\n{rendered}")
}

/// Asserts a `--set` error naming the argument and key; returns the message.
fn expect_set_error(text: &str, arguments: &[&str], argument: &str, key: Option<&str>) -> String {
    let error = expect_error(text, arguments);
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("--set {argument}:")),
        "message `{message}` does not name `--set {argument}`"
    );
    assert!(matches!(error.problem(), QueryProblem::Set(_)), "{message}");
    assert_eq!(error.field(), key);
    assert!(error.span().is_none());
    assert!(labels(&error).is_empty());
    let rendered = render(&error);
    assert!(rendered.contains(argument), "{rendered}");
    message
}

// --- shipped queries and defaults -------------------------------------------

#[test]
fn shipped_queries_load() {
    for name in ["siglip-so400m", "pe-core-l14", "vit-b16", "vit-tiny"] {
        let path = queries_dir().join(format!("{name}.toml"));
        let query =
            load_query(&path, &[]).unwrap_or_else(|error| panic!("{name}: {}", render(&error)));
        assert_eq!(query.name, name);
        assert_eq!(query.source_path.as_deref(), Some(path.as_path()));
    }
}

/// The default SigLIP query with one `[[schedule.override]]` entry.
fn siglip_with_override() -> String {
    format!("{SIGLIP}\n[[schedule.override]]\nphase = \"layer.mlp.up#0\"\npolicy = \"latency\"\n")
}

#[test]
fn siglip_query_resolves_the_preset() {
    let query = parse(SIGLIP, &[]).expect("siglip parses");
    assert_eq!(query.workload.model, ModelConfig::siglip_so400m());
    assert_eq!(query.machine.tiles, 1472);
    assert_eq!(query.schedule.policy, SchedulePolicy::Auto);
    assert!(query.overrides.is_empty());
    let query = parse(&siglip_with_override(), &[]).expect("siglip with an override parses");
    assert_eq!(
        query.overrides,
        vec![PhaseOverride {
            phase: "layer.mlp.up#0".into(),
            policy: SchedulePolicy::Latency,
            width: None,
        }]
    );
}

#[test]
fn pe_query_resolves_rotary_and_attention_pooling() {
    let query = load_query(&queries_dir().join("pe-core-l14.toml"), &[]).expect("pe parses");
    let model = &query.workload.model;
    assert_eq!(*model, ModelConfig::pe_core_l14());
    assert_eq!(model.positions, Positions::LearnedWithRotary);
    assert_eq!(model.pooling, Pooling::AttentionPool { heads: 8 });
    assert_eq!(model.tokens(), 577);
}

#[test]
fn vit_tiny_is_a_custom_model() {
    let query = parse(VIT_TINY, &[]).expect("vit-tiny parses");
    let model = &query.workload.model;
    assert_eq!(model.name, "custom");
    assert_eq!(
        (model.width, model.mlp, model.heads, model.layers),
        (64, 256, 4, 2)
    );
    assert_eq!((model.patches, model.patch, model.tokens()), (16, 4, 17));
    assert_eq!(model.gelu, GeluForm::Tanh);
    assert_eq!(model.pooling, Pooling::ClassToken);
    assert_eq!(query.machine.tiles, 16);
    assert_eq!(query.schedule.policy, SchedulePolicy::Latency);
}

#[test]
fn defaults_apply() {
    let query = parse_query(
        "queries/minimal.toml",
        "[workload]\nmodel = \"vit-b16\"\n",
        None,
        &[],
    )
    .expect("minimal parses");
    assert_eq!(query.name, "minimal", "the name defaults to the file name");
    assert_eq!(query.source_path, None);
    assert_eq!(
        query.workload,
        Workload {
            model: ModelConfig::vit_b16(),
            batch: 1,
            fuse_qkv: true,
            fp8_scale: crate::model::quantisation::Fp8Scale::Fixed(-4),
            attention: AttentionChoice::Auto,
            weights: WeightSource::Seeded { seed: 1 },
        }
    );
    assert_eq!(
        query.machine,
        MachineSettings {
            preset: "c600".into(),
            tiles: 1472,
            calibration: None,
            cost_table: crate::target::kernel_cost::CostTable::shipped(),
        }
    );
    assert_eq!(
        query.planning,
        PlanningFlags {
            accumulation: AccumulationChoice::Auto,
            copy_motion: true,
            fusion: crate::group::Fusion::Auto,
            repeat_base: true,
            reserved_bytes_per_tile: 65536,
            max_partition_candidates: 64,
            auto_f16_max_parts: 16,
            matrix_inputs: crate::target::kernel_cost::MatrixInputs::Fp8,
            matrix_input_overrides: Default::default(),
            activation_scale: crate::build_file::ActivationScale::Calibrate {
                input: crate::build_file::CalibrationInput::Seeded,
            },
            layout_overrides: Vec::new(),
            skipped_layout_overrides: 0,
            fp8_cast: Default::default(),
        }
    );
    assert_eq!(
        query.schedule,
        ScheduleSettings {
            policy: SchedulePolicy::Auto,
            width: TransferWidth::Auto,
            row_allowance: 256,
            prune_by_bounds: true,
        }
    );
    assert!(query.overrides.is_empty());
    assert_eq!(
        query.outputs,
        Outputs {
            directory: "artifacts".into(),
            report: true,
            phases_csv: true,
            html: true,
            package: true
        }
    );
    let unnamed =
        parse_query("<stdin>", "[workload]\nmodel = \"vit-b16\"\n", None, &[]).expect("parses");
    assert_eq!(
        unnamed.name, "vit-b16",
        "without a file name the model names the build"
    );
}

#[test]
fn policies_display_and_parse() {
    for text in [
        "latency", "S256", "B1024", "S1", "B65536", "list", "matching", "auto",
    ] {
        let policy: SchedulePolicy = text.parse().expect(text);
        assert_eq!(policy.to_string(), text);
    }
    for text in [
        "B0",
        "X12",
        "S",
        "",
        "B65537",
        "S-1",
        "s256",
        "B99999999999",
        "Latency",
    ] {
        let error = text.parse::<SchedulePolicy>().expect_err(text);
        assert!(
            error
                .to_string()
                .contains("expected `auto`, `list`, `matching`, `latency`, `S<W>` or `B<W>`")
        );
    }
}

// --- file errors --------------------------------------------------------------

#[test]
fn syntax_error_points_into_the_file() {
    let text = edit(SIGLIP, "batch = 1", "batch = = 1");
    let error = expect_error(&text, &[]);
    assert!(error.to_string().starts_with("invalid TOML"), "{error}");
    assert!(error.span().is_some());
    render(&error);
}

#[test]
fn unknown_key_names_the_field_and_suggests() {
    let text = edit(SIGLIP, "layers = 27", "layrs = 27");
    let rendered = expect_file_error(&text, "workload.layrs", "layrs");
    assert!(
        rendered.contains("known keys under `workload`: model, layers, batch"),
        "{rendered}"
    );
    assert!(rendered.contains("did you mean `layers`?"), "{rendered}");
}

#[test]
fn unknown_top_level_table() {
    let text = format!("{SIGLIP}\n[machin]\ntiles = 3\n");
    let rendered = expect_file_error(&text, "machin", "machin");
    assert!(rendered.contains("did you mean `machine`?"), "{rendered}");
}

#[test]
fn wrong_type_points_at_the_value() {
    let text = edit(SIGLIP, "layers = 27", "layers = \"many\"");
    let rendered = expect_file_error(&text, "workload.layers", "\"many\"");
    assert!(
        rendered.contains("must be an integer, but it is a string"),
        "{rendered}"
    );
    let text = edit(SIGLIP, "copy_motion = true", "copy_motion = 1");
    expect_file_error(&text, "planning.copy_motion", "1");
    let text = edit(SIGLIP, "repeat_base = true", "repeat_base = \"no\"");
    expect_file_error(&text, "planning.repeat_base", "\"no\"");
}

#[test]
fn unknown_model_lists_the_known_ones() {
    let text = edit(
        SIGLIP,
        "model = \"siglip-so400m\"",
        "model = \"siglip-so401m\"",
    );
    let rendered = expect_file_error(&text, "workload.model", "\"siglip-so401m\"");
    assert!(
        rendered.contains("known models: siglip-so400m, pe-core-l14, vit-b16, custom"),
        "{rendered}"
    );
    assert!(
        rendered.contains("did you mean \"siglip-so400m\"?"),
        "{rendered}"
    );
}

#[test]
fn missing_model_is_reported() {
    let error = expect_error("[machine]\ntiles = 16\n", &[]);
    assert_eq!(error.field(), Some("workload.model"));
    assert!(error.to_string().contains("missing workload.model"));
}

#[test]
fn unknown_machine_preset() {
    let text = edit(SIGLIP, "preset = \"c600\"", "preset = \"c700\"");
    let rendered = expect_file_error(&text, "machine.preset", "\"c700\"");
    assert!(rendered.contains("known presets: c600"), "{rendered}");
}

#[test]
fn tile_count_out_of_range() {
    let text = edit(SIGLIP, "tiles = 1472", "tiles = 0");
    expect_file_error(&text, "machine.tiles", "0");
    let text = edit(SIGLIP, "tiles = 1472", "tiles = 2000");
    let rendered = expect_file_error(&text, "machine.tiles", "2000");
    assert!(rendered.contains("between 1 and 1,472"), "{rendered}");
    let text = edit(SIGLIP, "tiles = 1472", "tiles = -5");
    expect_file_error(&text, "machine.tiles", "-5");
}

#[test]
fn zero_layers_and_zero_batch() {
    let text = edit(SIGLIP, "layers = 27", "layers = 0");
    let rendered = expect_file_error(&text, "workload.layers", "0");
    assert!(rendered.contains("workload.layers = 0 is too small; it must be at least 1"));
    let text = edit(SIGLIP, "batch = 1", "batch = 0");
    expect_file_error(&text, "workload.batch", "0");
}

#[test]
fn heads_must_divide_the_width() {
    let text = edit(SIGLIP, "layers = 27", "layers = 27\nheads = 7");
    let rendered = expect_file_error(&text, "workload.heads", "7");
    assert!(
        rendered.contains("workload.heads = 7 does not divide workload.width = 1152"),
        "{rendered}"
    );
    assert!(rendered.contains("choose a divisor such as"), "{rendered}");
    let text = edit(SIGLIP, "layers = 27", "layers = 27\nheads = 0");
    expect_file_error(&text, "workload.heads", "0");
}

#[test]
fn head_dimension_must_be_even() {
    let text = edit(VIT_TINY, "width = 64", "width = 66");
    let text = edit(&text, "heads = 4", "heads = 6");
    let rendered = expect_file_error(&text, "workload.heads", "6");
    assert!(rendered.contains("66 / 6 = 11"), "{rendered}");
    let text = edit(VIT_TINY, "width = 64", "width = 65");
    expect_file_error(&text, "workload.width", "65");
}

#[test]
fn rotary_needs_a_head_dimension_multiple_of_four() {
    let text = edit(
        VIT_TINY,
        "class_token = true",
        "class_token = true\nrotary = true",
    );
    let text = edit(&text, "heads = 4", "heads = 32");
    let rendered = expect_file_error(&text, "workload.heads", "32");
    assert!(rendered.contains("multiple of 4"), "{rendered}");
}

#[test]
fn zero_patches_and_zero_mlp() {
    let text = edit(VIT_TINY, "patches = 16", "patches = 0");
    expect_file_error(&text, "workload.patches", "0");
    let text = edit(VIT_TINY, "patches = 16", "patches = 20");
    let rendered = expect_file_error(&text, "workload.patches", "20");
    assert!(rendered.contains("use e.g. 16 or 25"), "{rendered}");
    let text = edit(VIT_TINY, "mlp = 256", "mlp = 0");
    expect_file_error(&text, "workload.mlp", "0");
}

#[test]
fn custom_model_requires_its_shape() {
    let text = edit(VIT_TINY, "mlp = 256", "");
    let rendered = expect_file_error(&text, "workload.mlp", "\"custom\"");
    assert!(rendered.contains("needs workload.mlp"), "{rendered}");
}

#[test]
fn fp8_scale_range() {
    let text = edit(SIGLIP, "fp8_scale = -4", "fp8_scale = 40");
    let rendered = expect_file_error(&text, "workload.fp8_scale", "40");
    assert!(rendered.contains("between -32 and 32"), "{rendered}");
}

#[test]
fn pooling_heads_must_divide_the_width() {
    let text = edit(SIGLIP, "layers = 27", "layers = 27\npooling_heads = 7");
    let rendered = expect_file_error(&text, "workload.pooling_heads", "7");
    assert!(
        rendered.contains("does not divide workload.width = 1152"),
        "{rendered}"
    );
    let text = edit(
        VIT_TINY,
        "pooling = \"class-token\"",
        "pooling = \"class-token\"\npooling_heads = 2",
    );
    expect_file_error(&text, "workload.pooling_heads", "2");
    let text = edit(VIT_TINY, "class_token = true", "class_token = false");
    expect_file_error(&text, "workload.pooling", "\"class-token\"");
}

#[test]
fn bad_choices_list_the_accepted_values() {
    let text = edit(SIGLIP, "attention = \"auto\"", "attention = \"flesh\"");
    let rendered = expect_file_error(&text, "workload.attention", "\"flesh\"");
    assert!(
        rendered.contains("auto | materialized | flash"),
        "{rendered}"
    );
    assert!(rendered.contains("did you mean \"flash\"?"), "{rendered}");
    let text = edit(SIGLIP, "width = \"auto\"", "width = \"word16\"");
    expect_file_error(&text, "schedule.width", "\"word16\"");
}

#[test]
fn unparseable_policies() {
    for bad in ["B0", "X12", "B70000"] {
        let text = edit(SIGLIP, "policy = \"auto\"", &format!("policy = \"{bad}\""));
        let rendered = expect_file_error(&text, "schedule.policy", &format!("\"{bad}\""));
        assert!(rendered.contains("S<W>"), "{rendered}");
    }
    let text = edit(
        &siglip_with_override(),
        "policy = \"latency\"",
        "policy = \"fast\"",
    );
    expect_file_error(&text, "schedule.override[0].policy", "\"fast\"");
}

#[test]
fn malformed_phase_key() {
    let text = edit(
        &siglip_with_override(),
        "phase = \"layer.mlp.up#0\"",
        "phase = \"layer.mlp.up\"",
    );
    expect_file_error(&text, "schedule.override[0].phase", "\"layer.mlp.up\"");
}

#[test]
fn duplicate_phase_overrides_name_both() {
    let text = format!(
        "{}\n[[schedule.override]]\nphase = \"layer.mlp.up#0\"\npolicy = \"S256\"\n",
        siglip_with_override()
    );
    expect_file_error(&text, "schedule.override[1].phase", "\"layer.mlp.up#0\"");
    let error = expect_error(&text, &[]);
    let spans: Vec<&str> = labels(&error)
        .iter()
        .map(|label| &text[label.offset()..label.offset() + label.len()])
        .collect();
    assert_eq!(spans, ["\"layer.mlp.up#0\"", "\"layer.mlp.up#0\""]);
    let offsets: Vec<usize> = labels(&error).iter().map(|label| label.offset()).collect();
    assert_ne!(offsets[0], offsets[1], "the two labels are the two entries");
    let rendered = render(&error);
    assert!(
        rendered.contains("first override of this phase"),
        "{rendered}"
    );
}

#[test]
fn reserved_bytes_and_candidates() {
    let text = edit(
        SIGLIP,
        "reserved_bytes_per_tile = 65536",
        "reserved_bytes_per_tile = 638976",
    );
    let rendered = expect_file_error(&text, "planning.reserved_bytes_per_tile", "638976");
    assert!(rendered.contains("624 KiB"), "{rendered}");
    let text = edit(
        SIGLIP,
        "max_partition_candidates = 64",
        "max_partition_candidates = 0",
    );
    expect_file_error(&text, "planning.max_partition_candidates", "0");
}

#[test]
fn model_that_does_not_fit() {
    let text = "[workload]\nmodel = \"vit-b16\"\n[machine]\ntiles = 16\n";
    let rendered = expect_file_error(text, "workload.model", "\"vit-b16\"");
    assert!(rendered.contains("does not fit on 16 tiles"), "{rendered}");
    assert!(
        rendered.contains(
            "16 tiles x 573,440 bytes (638,976 bytes of SRAM less \
             planning.reserved_bytes_per_tile = 65,536) = 9,175,040 bytes"
        ),
        "{rendered}"
    );
    assert!(rendered.contains("more tiles (machine.tiles"), "{rendered}");
    assert!(!rendered.contains("use at least"), "{rendered}");
    assert!(rendered.contains("reserved_bytes_per_tile"), "{rendered}");
    let text = "[workload]\nmodel = \"vit-b16\"\nlayers = 12\n[machine]\ntiles = 16\n";
    expect_file_error(text, "workload.layers", "12");
    // Batch 2 of SigLIP still fits a whole C600.
    let text = edit(SIGLIP, "batch = 1", "batch = 2");
    parse(&text, &[]).expect("siglip batch 2 fits");
}

#[test]
fn missing_safetensors_file() {
    let text = edit(
        SIGLIP,
        "weights = { seeded = 1 }",
        "weights = { safetensors = \"no/such/file.safetensors\" }",
    );
    let rendered = expect_file_error(
        &text,
        "workload.weights.safetensors",
        "\"no/such/file.safetensors\"",
    );
    assert!(rendered.contains("does not exist"), "{rendered}");
    let text = edit(
        SIGLIP,
        "weights = { seeded = 1 }",
        "weights = { seeded = 1, safetensors = \"x\" }",
    );
    expect_file_error(
        &text,
        "workload.weights",
        "{ seeded = 1, safetensors = \"x\" }",
    );
}

#[test]
fn safetensors_path_resolves_against_the_build_file() {
    let directory = std::env::temp_dir().join(format!("query_scratch_{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("temp dir");
    std::fs::write(directory.join("weights.safetensors"), b"{}").expect("write");
    let text = edit(
        SIGLIP,
        "weights = { seeded = 1 }",
        "weights = { safetensors = \"weights.safetensors\" }",
    );
    let query = parse_query("q.toml", &text, Some(&directory), &[]).expect("resolves");
    assert_eq!(
        query.workload.weights,
        WeightSource::SafeTensors {
            path: directory.join("weights.safetensors"),
            naming: None,
        }
    );
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn bad_name() {
    let text = edit(SIGLIP, "name = \"siglip-so400m\"", "name = \"../escape\"");
    expect_file_error(&text, "name", "\"../escape\"");
}

#[test]
fn unreadable_file_names_the_path() {
    let path = queries_dir().join("does-not-exist.toml");
    let error = load_query(&path, &[]).expect_err("missing file");
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().contains("does-not-exist.toml"), "{error}");
    assert!(matches!(error.problem(), QueryProblem::Read { .. }));
    render(&error);
}
