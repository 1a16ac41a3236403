//! The checkpoint reader on tiny checkpoints the libraries saved themselves
//! (`scripts/fixtures/checkpoints.py`): each naming is recognised, every
//! tensor converted, and superstep's FP32 reference then computes the
//! library's own output; a missing tensor, a checkpoint of another
//! configuration and a heads count that only the library's `config.json`
//! shows are refused by name.

use std::path::{Path, PathBuf};

use super::{MINIMUM_COSINE, agreement, fixture, metadata_number, read_fixture, tensor};
use crate::common::{scratch, superstep};
use superstep::model::builder::{GraphKnobs, build_graph};
use superstep::model::checkpoint::{CheckpointError, Naming};
use superstep::model::config::{ModelConfig, Pooling};
use superstep::model::graph::Graph;
use superstep::model::quantisation::Fp8Scale;
use superstep::model::safetensors::{SafeTensors, SafeTensorsWriter};
use superstep::model::weights::{WeightError, Weights, safetensors_weights};
use superstep::sim::reference::evaluate_reference;

/// One fixture folder: the library's `model.safetensors` and its
/// `expected.safetensors` (input patches, output, shape metadata).
struct Fixture {
    model: PathBuf,
    expected: SafeTensors,
}

impl Fixture {
    fn open(folder: &str) -> Fixture {
        Fixture {
            model: fixture(&format!("checkpoints/{folder}/model.safetensors")),
            expected: read_fixture(&format!("checkpoints/{folder}/expected.safetensors")),
        }
    }

    fn number(&self, key: &str) -> u32 {
        u32::try_from(metadata_number(&self.expected, key)).expect(key)
    }

    /// `preset` narrowed to the fixture's shape.
    fn config(&self, preset: ModelConfig) -> ModelConfig {
        let mut config = preset;
        config.width = self.number("width");
        config.mlp = self.number("mlp");
        config.layers = self.number("layers");
        config.heads = self.number("heads");
        config.patch = self.number("patch");
        config.patches = self.number("grid") * self.number("grid");
        config.pooling = match config.pooling {
            Pooling::Map { .. } => Pooling::Map {
                heads: self.number("pooling_heads"),
            },
            Pooling::AttentionPool { .. } => Pooling::AttentionPool {
                heads: self.number("pooling_heads"),
            },
            Pooling::ClassToken => Pooling::ClassToken,
        };
        if config.projection.is_some() {
            config.projection = Some(self.number("projection"));
        }
        config
    }

    fn load(&self, graph: &Graph, naming: Option<Naming>) -> Result<Weights, WeightError> {
        let fp8_scale = i32::try_from(metadata_number(&self.expected, "fp8_scale")).expect("scale");
        safetensors_weights(graph, &self.model, naming, 0, Fp8Scale::Fixed(fp8_scale))
    }

    /// superstep's FP32 reference on the checkpoint against the library's
    /// output, with q, k, v fused or not.
    fn check(&self, label: &str, config: &ModelConfig, fuse_qkv: bool) {
        let graph = build_graph(config, GraphKnobs { batch: 1, fuse_qkv });
        let mut weights = self.load(&graph, None).expect("checkpoint loads");
        weights.input = tensor(&self.expected, "input.patches");
        let reference = evaluate_reference(&graph, &weights).expect("reference");
        let agreement = agreement(
            &format!("{label} (fuse_qkv {fuse_qkv})"),
            &reference,
            &tensor(&self.expected, "expected.output"),
        );
        assert!(agreement.cosine >= MINIMUM_COSINE, "{label}: {agreement}");
        assert!(agreement.max_abs_error < 1e-4, "{label}: {agreement}");
    }
}

fn detected(path: &Path) -> Option<(Naming, &'static str)> {
    Naming::detect(&SafeTensors::read_checkpoint(path).expect("checkpoint"))
}

#[test]
fn sharded_checkpoint_is_read_through_its_index() {
    let mut fixture = Fixture::open("transformers_siglip_vision");
    fixture.model =
        super::fixture("checkpoints/transformers_siglip_sharded/model.safetensors.index.json");
    let shards = std::fs::read_dir(fixture.model.parent().unwrap())
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("model-") && name.ends_with(".safetensors")
        })
        .count();
    assert!(shards >= 2, "the fixture is sharded ({shards} shards)");
    assert_eq!(
        detected(&fixture.model),
        Some((Naming::TransformersSiglip, ""))
    );
    let config = fixture.config(ModelConfig::siglip_so400m());
    fixture.check("sharded SiglipVisionModel", &config, true);
}

/// A copy of the sharded fixture whose index `edit` rewrote: the error names
/// the index and what is wrong.
fn broken_index(name: &str, edit: impl Fn(&str) -> String, needle: &str) {
    let source = super::fixture("checkpoints/transformers_siglip_sharded");
    let directory = scratch("checkpoints", name);
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), directory.join(entry.file_name())).unwrap();
    }
    let index = directory.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&index).unwrap();
    std::fs::write(&index, edit(&text)).unwrap();
    let error = SafeTensors::read_checkpoint(&index)
        .expect_err("refused")
        .to_string();
    assert!(error.contains("model.safetensors.index.json"), "{error}");
    assert!(error.contains(needle), "`{needle}` not in: {error}");
}

#[test]
fn an_index_that_does_not_describe_its_shards_is_refused_by_name() {
    let first = "\"model-00001-of-00004.safetensors\"";
    broken_index(
        "moved",
        |text| text.replacen(first, "\"model-00002-of-00004.safetensors\"", 1),
        "but the index says `model-00002-of-00004.safetensors`",
    );
    broken_index(
        "traversal",
        |text| text.replace(first, "\"../model-00001-of-00004.safetensors\""),
        "is not a file name beside the index",
    );
    broken_index(
        "unlisted",
        |text| text.replacen("\"embeddings.patch_embedding.bias\": ", "\"renamed\": ", 1),
        "which the index does not list",
    );
    broken_index(
        "not json",
        |_| String::from("[1, 2"),
        "not a checkpoint index",
    );
}

/// The fixture in `folder` is recognised as `naming` under `prefix`, and
/// superstep's FP32 reference computes the library's output with q, k, v
/// fused and (unless `fused_only`) separate.
fn computes_the_library_output(
    folder: &str,
    naming: Naming,
    prefix: &str,
    preset: ModelConfig,
    label: &str,
    fused_only: bool,
) {
    let fixture = Fixture::open(folder);
    assert_eq!(detected(&fixture.model), Some((naming, prefix)));
    let config = fixture.config(preset);
    fixture.check(label, &config, true);
    if !fused_only {
        fixture.check(label, &config, false);
    }
}

#[test]
fn siglip_vision_model_checkpoint_computes_the_pooler_output() {
    computes_the_library_output(
        "transformers_siglip_vision",
        Naming::TransformersSiglip,
        "",
        ModelConfig::siglip_so400m(),
        "SiglipVisionModel",
        false,
    );
}

#[test]
fn whole_siglip_model_checkpoint_is_read_under_vision_model() {
    computes_the_library_output(
        "transformers_siglip_full",
        Naming::TransformersSiglip,
        "vision_model.",
        ModelConfig::siglip_so400m(),
        "SiglipModel",
        true,
    );
}

#[test]
fn timm_vit_checkpoint_computes_the_class_token() {
    computes_the_library_output(
        "timm_vit",
        Naming::TimmVit,
        "",
        ModelConfig::vit_b16(),
        "timm ViT (BF16)",
        false,
    );
}

#[test]
fn timm_pe_core_checkpoint_computes_the_projected_pool() {
    computes_the_library_output(
        "timm_pe_core",
        Naming::TimmPeCore,
        "",
        ModelConfig::pe_core_l14(),
        "timm PE-Core",
        false,
    );
}

#[test]
fn perception_models_pe_core_checkpoint_computes_what_timm_computes_from_it() {
    computes_the_library_output(
        "perception_models_pe_core",
        Naming::PerceptionModelsPeCore,
        "visual.",
        ModelConfig::pe_core_l14(),
        "perception_models PE-Core",
        false,
    );
}

/// The timm ViT checkpoint rewritten without one tensor (every other
/// tensor byte for byte as timm saved it).
fn without_tensor(fixture: &Fixture, dropped: &str, folder: &Path) -> PathBuf {
    let file = SafeTensors::read(&fixture.model).expect("checkpoint");
    let mut writer = SafeTensorsWriter::new();
    for name in file.names().filter(|name| *name != dropped) {
        let dtype = file.dtype(name).expect("dtype");
        let shape = file.shape(name).expect("shape").to_vec();
        let bytes = file.tensor_bytes(name).expect("bytes").to_vec();
        writer.add_bytes(name, dtype, &shape, bytes).expect("add");
    }
    let path = folder.join("model.safetensors");
    writer.write(&path).expect("write");
    path
}

#[test]
fn a_missing_tensor_is_named_with_the_value_it_was_for() {
    let fixture = Fixture::open("timm_vit");
    let folder = scratch("fidelity", "missing-tensor");
    let path = without_tensor(&fixture, "blocks.1.mlp.fc2.weight", &folder);
    let config = fixture.config(ModelConfig::vit_b16());
    let graph = build_graph(
        &config,
        GraphKnobs {
            batch: 1,
            fuse_qkv: true,
        },
    );
    let error =
        safetensors_weights(&graph, &path, None, 0, Fp8Scale::Fixed(-4)).expect_err("refused");
    let WeightError::Checkpoint(CheckpointError::MissingTensor {
        naming,
        tensor,
        value,
        mismatch,
    }) = &error
    else {
        panic!("not a missing tensor: {error}");
    };
    assert_eq!(
        (*naming, tensor.as_str(), value.as_str()),
        (
            Naming::TimmVit,
            "blocks.1.mlp.fc2.weight",
            "layers.1.mlp.down.weight"
        )
    );
    assert!(mismatch.is_none(), "{error}");
    std::fs::remove_dir_all(folder).ok();
}

#[test]
fn a_checkpoint_of_another_width_says_what_it_looks_like() {
    let fixture = Fixture::open("timm_vit");
    let mut config = fixture.config(ModelConfig::vit_b16());
    config.width = 64;
    config.mlp = 128;
    let graph = build_graph(
        &config,
        GraphKnobs {
            batch: 1,
            fuse_qkv: true,
        },
    );
    let error = fixture.load(&graph, None).expect_err("refused");
    let WeightError::Checkpoint(CheckpointError::ShapeMismatch {
        tensor, mismatch, ..
    }) = &error
    else {
        panic!("not a shape mismatch: {error}");
    };
    assert_eq!(tensor, "patch_embed.proj.weight");
    let mismatch = mismatch.as_ref().expect("configuration named");
    assert_eq!(
        (mismatch.checkpoint.width, mismatch.checkpoint.layers),
        (Some(48), Some(2))
    );
    assert_eq!(mismatch.model.width, Some(64));
    let message = error.to_string();
    assert!(
        message.contains("looks like width 48, MLP 96, 2 layers, patch 4, 17 positions"),
        "{message}"
    );
}

#[test]
fn a_checkpoint_with_fewer_layers_names_the_first_absent_one() {
    let fixture = Fixture::open("timm_pe_core");
    let mut config = fixture.config(ModelConfig::pe_core_l14());
    config.layers = 3;
    let graph = build_graph(
        &config,
        GraphKnobs {
            batch: 1,
            fuse_qkv: true,
        },
    );
    let error = fixture.load(&graph, None).expect_err("refused");
    let message = error.to_string();
    let WeightError::Checkpoint(CheckpointError::MissingTensor {
        tensor, mismatch, ..
    }) = &error
    else {
        panic!("not a missing tensor: {message}");
    };
    assert_eq!(tensor, "blocks.2.norm1.weight");
    let mismatch = mismatch.as_ref().expect("configuration named");
    assert_eq!(
        (mismatch.checkpoint.layers, mismatch.model.layers),
        (Some(2), Some(3))
    );
    assert!(message.contains("2 layers"), "{message}");
}

#[test]
fn heads_that_only_config_json_shows_are_checked() {
    let fixture = Fixture::open("transformers_siglip_vision");
    let mut config = fixture.config(ModelConfig::siglip_so400m());
    config.heads = 4;
    let graph = build_graph(
        &config,
        GraphKnobs {
            batch: 1,
            fuse_qkv: true,
        },
    );
    let error = fixture.load(&graph, None).expect_err("refused");
    let WeightError::Checkpoint(CheckpointError::Configuration { mismatch }) = &error else {
        panic!("not a configuration error: {error}");
    };
    assert_eq!(
        (mismatch.checkpoint.heads, mismatch.model.heads),
        (Some(2), Some(4))
    );
}

#[test]
fn a_naming_that_does_not_fit_the_model_is_refused() {
    // A SigLIP graph (MAP head, no class token) asked to read timm's ViT.
    let fixture = Fixture::open("transformers_siglip_vision");
    let config = fixture.config(ModelConfig::siglip_so400m());
    let graph = build_graph(
        &config,
        GraphKnobs {
            batch: 1,
            fuse_qkv: true,
        },
    );
    let error = fixture
        .load(&graph, Some(Naming::TimmVit))
        .expect_err("refused");
    assert!(
        matches!(
            &error,
            WeightError::Checkpoint(CheckpointError::MissingTensor {
                naming: Naming::TimmVit,
                ..
            })
        ),
        "{error}"
    );
}

/// The CLI shows a checkpoint that does not fit as an input error (exit 2)
/// naming the tensor.
#[test]
fn the_cli_refuses_a_checkpoint_that_does_not_fit_with_exit_2() {
    let folder = scratch("fidelity", "cli-checkpoint");
    let checkpoint = fixture("checkpoints/timm_vit/model.safetensors");
    let build_file = folder.join("vit-checkpoint.toml");
    let text = format!(
        "name = \"vit-checkpoint\"\n\
         [workload]\n\
         model = \"custom\"\n\
         width = 48\nmlp = 96\nheads = 2\nlayers = 3\npatches = 16\npatch = 4\n\
         class_token = true\ngelu = \"erf\"\npooling = \"class-token\"\n\
         weights = {{ safetensors = \"{}\", naming = \"timm-vit\" }}\n\
         [machine]\npreset = \"c600\"\ntiles = 16\n\
         [planning]\nreserved_bytes_per_tile = 65536\n",
        checkpoint.display()
    );
    std::fs::write(&build_file, text).expect("build file");
    let output = superstep(&["run", build_file.to_str().expect("path")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`blocks.2.norm1.weight`"), "{stderr}");
    assert!(stderr.contains("2 layers"), "{stderr}");
    std::fs::remove_dir_all(folder).ok();
}
