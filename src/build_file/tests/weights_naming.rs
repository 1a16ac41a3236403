//! `workload.weights.naming`: which library's tensor names a SafeTensors
//! file uses, in the file or by `--set`.

use super::*;
use crate::model::checkpoint::Naming;

/// A scratch folder holding an (empty) `weights.safetensors`.
fn folder_with_weights(name: &str) -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("query_naming_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("temp dir");
    std::fs::write(directory.join("weights.safetensors"), b"{}").expect("write");
    directory
}

fn with_weights(weights: &str) -> String {
    edit(SIGLIP, "weights = { seeded = 1 }", weights)
}

#[test]
fn a_named_naming_is_read_and_auto_means_none() {
    let directory = folder_with_weights("named");
    let source = |weights: &str| {
        parse_query("q.toml", &with_weights(weights), Some(&directory), &[])
            .expect("resolves")
            .workload
            .weights
    };
    let path = directory.join("weights.safetensors");
    assert_eq!(
        source("weights = { safetensors = \"weights.safetensors\", naming = \"timm-pe-core\" }"),
        WeightSource::SafeTensors {
            path: path.clone(),
            naming: Some(Naming::TimmPeCore),
        }
    );
    assert_eq!(
        source("weights = { safetensors = \"weights.safetensors\", naming = \"auto\" }"),
        WeightSource::SafeTensors { path, naming: None }
    );
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn a_misspelled_naming_gets_the_nearest() {
    let directory = folder_with_weights("misspelled");
    let text =
        with_weights("weights = { safetensors = \"weights.safetensors\", naming = \"tim-vit\" }");
    let error = parse_query("q.toml", &text, Some(&directory), &[]).expect_err("refused");
    assert_eq!(error.field(), Some("workload.weights.naming"));
    assert!(
        render(&error).contains("did you mean \"timm-vit\"?"),
        "{}",
        render(&error)
    );
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn a_naming_without_a_file_is_refused() {
    let text = with_weights("weights = { seeded = 1, naming = \"timm-vit\" }");
    expect_file_error(&text, "workload.weights.naming", "\"timm-vit\"");
}

#[test]
fn set_naming_applies_to_the_file_and_survives_a_new_path() {
    let directory = folder_with_weights("set");
    let path = directory.join("weights.safetensors");
    let arguments = sets(&[
        "workload.weights.naming=transformers-siglip",
        &format!("workload.weights.safetensors={}", path.display()),
    ]);
    let query = parse_query("q.toml", SIGLIP, None, &arguments).expect("resolves");
    assert_eq!(
        query.workload.weights,
        WeightSource::SafeTensors {
            path,
            naming: Some(Naming::TransformersSiglip),
        }
    );
    let seeded = sets(&[
        "workload.weights.naming=timm-vit",
        "workload.weights.seeded=3",
    ]);
    let query = parse_query("q.toml", SIGLIP, None, &seeded).expect("resolves");
    assert_eq!(query.workload.weights, WeightSource::Seeded { seed: 3 });
    std::fs::remove_dir_all(&directory).ok();
}
