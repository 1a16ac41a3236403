//! The conversions on small hand-checked tensors, naming names and
//! detection, and what a shape says about the preset it is.

use super::naming::Naming;
use super::observed::{Mismatch, ShapeSummary};
use super::recipe::{Part, Recipe};
use crate::model::config::ModelConfig;
use crate::model::safetensors::{SafeTensors, SafeTensorsWriter};

/// A file of F32 tensors `(name, shape)` holding `0, 1, 2, …` each.
fn file(tensors: &[(&str, &[usize])]) -> SafeTensors {
    let mut writer = SafeTensorsWriter::new();
    for (name, shape) in tensors {
        let count: usize = shape.iter().product();
        let values: Vec<f32> = (0..count).map(|index| index as f32).collect();
        writer.add_f32(name, shape, &values).expect("add");
    }
    SafeTensors::parse(writer.to_bytes()).expect("parse")
}

#[test]
fn a_linear_weight_is_transposed_and_a_block_taken() {
    // torch [outputs 6, inputs 2] = rows (0 1) (2 3) (4 5) (6 7) (8 9) (10 11).
    let file = file(&[("qkv.weight", &[6, 2])]);
    let whole = Recipe::linear_weight("qkv.weight", Part::WHOLE);
    assert_eq!(
        whole.read(&file, 2, 6).unwrap(),
        vec![0., 2., 4., 6., 8., 10., 1., 3., 5., 7., 9., 11.]
    );
    let key = Recipe::linear_weight("qkv.weight", Part::of_three(1));
    assert_eq!(key.read(&file, 2, 2).unwrap(), vec![4., 6., 5., 7.]);
    assert_eq!(key.value_shape(&file), Some([2, 2]));
}

#[test]
fn separate_weights_fuse_side_by_side() {
    let file = file(&[("q.weight", &[1, 2]), ("k.weight", &[1, 2])]);
    let fused = Recipe::FusedLinearWeights(vec!["q.weight".into(), "k.weight".into()]);
    // q = (0 1), k = (0 1) as [1 output, 2 inputs]: columns q | k.
    assert_eq!(fused.read(&file, 2, 2).unwrap(), vec![0., 0., 1., 1.]);
    let biases = file_with_biases();
    let fused = Recipe::FusedVectors(vec!["q.bias".into(), "k.bias".into()]);
    assert_eq!(fused.read(&biases, 1, 4).unwrap(), vec![0., 1., 0., 1.]);
}

fn file_with_biases() -> SafeTensors {
    file(&[("q.bias", &[2]), ("k.bias", &[2])])
}

#[test]
fn a_patch_kernel_becomes_the_patch_matrix_channel_then_row_then_column() {
    // [width 2, channels 3, 2, 2]: output o's kernel is 12 o .. 12 o + 11.
    let file = file(&[("proj.weight", &[2, 3, 2, 2])]);
    let matrix = Recipe::PatchKernel("proj.weight".into())
        .read(&file, 12, 2)
        .unwrap();
    // Row (channel c, pixel row i, pixel column j) = c * 4 + i * 2 + j.
    for row in 0..12 {
        assert_eq!(matrix[row * 2], row as f32);
        assert_eq!(matrix[row * 2 + 1], (12 + row) as f32);
    }
}

#[test]
fn vectors_and_tables_accept_leading_unit_extents_only() {
    let file = file(&[
        ("cls_token", &[1, 1, 4]),
        ("pos_embed", &[1, 3, 2]),
        ("odd", &[2, 2]),
    ]);
    assert_eq!(
        Recipe::vector("cls_token").read(&file, 1, 4).unwrap(),
        vec![0., 1., 2., 3.]
    );
    assert_eq!(
        Recipe::Table("pos_embed".into())
            .read(&file, 3, 2)
            .unwrap()
            .len(),
        6
    );
    assert!(Recipe::vector("odd").read(&file, 1, 4).is_err());
    assert!(Recipe::vector("absent").read(&file, 1, 4).is_err());
    assert_eq!(Recipe::Zeros.read(&file, 1, 3).unwrap(), vec![0.; 3]);
}

#[test]
fn namings_round_trip_their_names_and_are_detected_by_signature() {
    for naming in Naming::ALL {
        assert_eq!(Naming::from_name(naming.name()), Some(naming));
    }
    let pe = file(&[
        ("patch_embed.proj.weight", &[1]),
        ("cls_token", &[1]),
        ("norm_pre.weight", &[1]),
        ("attn_pool.latent", &[1]),
    ]);
    assert_eq!(Naming::detect(&pe), Some((Naming::TimmPeCore, "")));
    let vit = file(&[("patch_embed.proj.weight", &[1]), ("cls_token", &[1])]);
    assert_eq!(Naming::detect(&vit), Some((Naming::TimmVit, "")));
    let siglip = file(&[("vision_model.embeddings.patch_embedding.weight", &[1])]);
    assert_eq!(
        Naming::detect(&siglip),
        Some((Naming::TransformersSiglip, "vision_model."))
    );
    let perception = [
        ("conv1.weight", &[1][..]),
        ("ln_pre.weight", &[1]),
        ("attn_pool.probe", &[1]),
    ];
    assert_eq!(
        Naming::detect(&file(&perception)),
        Some((Naming::PerceptionModelsPeCore, ""))
    );
    let clip = perception.map(|(name, shape)| (format!("visual.{name}"), shape));
    let clip: Vec<(&str, &[usize])> = clip
        .iter()
        .map(|(name, shape)| (name.as_str(), *shape))
        .collect();
    assert_eq!(
        Naming::detect(&file(&clip)),
        Some((Naming::PerceptionModelsPeCore, "visual."))
    );
    assert_eq!(Naming::detect(&file(&[("unrelated", &[1])])), None);
}

#[test]
fn a_preset_shape_is_recognised_and_another_is_not() {
    let graph = crate::model::builder::build_graph(
        &ModelConfig::vit_b16(),
        crate::model::builder::GraphKnobs {
            batch: 1,
            fuse_qkv: true,
        },
    );
    let summary = ShapeSummary::of_graph(&graph);
    assert_eq!(summary.width, Some(768));
    assert_eq!(summary.heads, Some(12));
    assert_eq!(summary.preset(), Some("vit-b16"));
    let unknown_heads = ShapeSummary {
        heads: None,
        ..summary.clone()
    };
    assert_eq!(unknown_heads.preset(), Some("vit-b16"));
    let shallower = ShapeSummary {
        layers: Some(2),
        ..summary.clone()
    };
    assert_eq!(shallower.preset(), Some("vit-b16"));
    let mismatch = Mismatch::between(shallower, summary.clone()).expect("differs");
    assert!(
        mismatch.to_string().contains(
            "(the `vit-b16` preset with 2 layers; set workload.model = \"vit-b16\" and workload.layers = 2)"
        ),
        "{mismatch}"
    );
    let narrower = ShapeSummary {
        width: Some(64),
        ..summary
    };
    assert_eq!(narrower.preset(), None);
}
