//! Issue 44, item 6: a checkpoint a build accepts is one `run` computes
//! with. A finite but huge weight that `fp8_scale = "auto"` would scale
//! beyond the range a fixed scale has, a value beyond FP16's range in a
//! tensor stored in FP16, and a PE-Core checkpoint read for a model without
//! PE-Core's pre-norm and attention pool are each refused by the build,
//! exit code 2, naming the tensor.

use crate::common;

use std::path::{Path, PathBuf};

use common::{scratch, superstep, write_superstep_checkpoint};
use superstep::build_file::load_query;
use superstep::direct::load_weights;
use superstep::model::builder::{GraphKnobs, build_graph};
use superstep::model::config::{ModelConfig, Pooling};
use superstep::model::graph::{Precision, ValueKind};
use superstep::model::quantisation::Fp8Scale;
use superstep::model::weights::safetensors_weights;
use superstep::session::Session;

const TINY: &str = "queries/vit-tiny.toml";

/// The tiny ViT's seeded weights as a checkpoint, with `edit` applied to
/// the first weight of `precision`: (checkpoint, that weight's name).
fn edited_checkpoint(
    directory: &Path,
    precision: Precision,
    edit: impl Fn(&mut Vec<f32>),
) -> (PathBuf, String) {
    let query = load_query(Path::new(TINY), &[]).expect("query");
    let mut session = Session::new(&query);
    let graph = session.graph().clone();
    session.build_low_program().expect("front");
    let seeded = load_weights(&query, &graph).expect("seeded weights");
    let target = graph
        .value_ids()
        .map(|id| graph.value(id))
        .find(|value| {
            matches!(value.kind, ValueKind::Weight { .. }) && value.precision == precision
        })
        .expect("a weight of that precision")
        .name
        .clone();
    let path = directory.join("model.safetensors");
    write_superstep_checkpoint(&graph, &seeded, &path, |name, instance, values| {
        if name == target && instance == 0 {
            edit(values);
        }
    });
    (path, target)
}

fn build(checkpoint: &Path, directory: &Path, scale: &str) -> std::process::Output {
    superstep(&[
        "build",
        TINY,
        "--no-cache",
        "--quiet",
        "--set",
        &format!("workload.weights.safetensors={}", checkpoint.display()),
        "--set",
        &format!("workload.fp8_scale={scale}"),
        "--set",
        &format!("outputs.directory={}", directory.display()),
    ])
}

#[test]
fn a_huge_finite_weight_under_auto_scales_is_refused_by_the_build() {
    let directory = scratch("checkpoint-ranges", "huge");
    let (checkpoint, tensor) =
        edited_checkpoint(&directory, Precision::F8, |values| values[0] = 1e38);
    let output = build(&checkpoint, &directory, "auto");
    let message = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains(&tensor), "{message}");
    assert!(message.contains("-32..=32"), "{message}");
    // A large but usable weight still builds under `auto`.
    let (checkpoint, _) = edited_checkpoint(&directory, Precision::F8, |values| values[0] = 1e3);
    let output = build(&checkpoint, &directory, "auto");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_value_beyond_fp16_in_an_fp16_tensor_is_refused_not_clamped() {
    let directory = scratch("checkpoint-ranges", "fp16");
    let (checkpoint, tensor) =
        edited_checkpoint(&directory, Precision::F16, |values| values[0] = 1e6);
    let output = build(&checkpoint, &directory, "-4");
    let message = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains(&tensor), "{message}");
    assert!(message.contains("beyond FP16's range"), "{message}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_pe_core_checkpoint_is_refused_for_a_plain_vit() {
    for folder in ["timm_pe_core", "perception_models_pe_core"] {
        let model = crate::fidelity::fixture(&format!("checkpoints/{folder}/model.safetensors"));
        let expected =
            crate::fidelity::read_fixture(&format!("checkpoints/{folder}/expected.safetensors"));
        let number =
            |key: &str| u32::try_from(crate::fidelity::metadata_number(&expected, key)).expect(key);
        // ViT-B/16's kind of model (class token, no pre-norm, no attention
        // pool) in the fixture's shape.
        let mut config = ModelConfig::vit_b16();
        config.width = number("width");
        config.mlp = number("mlp");
        config.layers = number("layers");
        config.heads = number("heads");
        config.patch = number("patch");
        config.patches = number("grid") * number("grid");
        assert!(matches!(config.pooling, Pooling::ClassToken));
        let graph = build_graph(
            &config,
            GraphKnobs {
                batch: 1,
                fuse_qkv: false,
            },
        );
        let error = safetensors_weights(&graph, &model, None, 0, Fp8Scale::Fixed(-4))
            .expect_err("a PE-Core checkpoint is not a plain ViT's")
            .to_string();
        assert!(
            error.contains("the checkpoint is PE-Core"),
            "{folder}: {error}"
        );
        assert!(error.contains("pe-core-l14"), "{folder}: {error}");
    }
}
