//! The tiny ViT on 16 tiles: the low-program interpreter reproduces the
//! FP32 reference.

use std::path::Path;

use superstep::pipeline::{compile, load_weights};
use superstep::query::load_query;
use superstep::sim::compare::compare;
use superstep::sim::interpreter::interpret;
use superstep::sim::reference::evaluate_reference;

fn agreement(sets: &[&str]) -> superstep::sim::compare::Agreement {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let query = load_query(Path::new("queries/vit-tiny.toml"), &sets).expect("query");
    let (graph, layouts, program) = compile(&query).expect("compile");
    let weights = load_weights(&query, &graph).expect("weights");
    let result = interpret(&program, &layouts, &weights).expect("interpret");
    let reference = evaluate_reference(&graph, &weights).expect("reference");
    let agreement = compare(&result.output, &reference);
    println!("{sets:?}: {agreement:?}");
    agreement
}

#[test]
fn tiny_vit_matches_the_fp32_reference() {
    let agreement = agreement(&[]);
    assert_eq!(agreement.non_finite, 0);
    assert!(agreement.cosine >= 0.99, "cosine {}", agreement.cosine);
}

#[test]
fn tiny_variants_match_the_fp32_reference() {
    for sets in [
        &["workload.attention=flash"][..],
        &["planning.accumulation=f16"],
        &["workload.batch=2"],
        &["workload.fuse_qkv=false"],
        &["machine.tiles=7"],
        &["workload.gelu=erf", "workload.pooling=map", "workload.class_token=false"],
        &["workload.rotary=true", "workload.pooling=attention", "workload.pooling_heads=2", "workload.projection=32", "workload.pre_norm=true"],
    ] {
        let agreement = agreement(sets);
        assert_eq!(agreement.non_finite, 0, "{sets:?}");
        assert!(agreement.cosine >= 0.99, "{sets:?}: cosine {}", agreement.cosine);
    }
}
