//! The tiny ViT on 16 tiles: the low-program interpreter reproduces the
//! FP32 reference.

use crate::common;

use std::path::Path;

use common::{TINY_VARIANTS, query, write_superstep_checkpoint};
use superstep::build_file::load_query;
use superstep::direct::{compile, load_weights};
use superstep::sim::compare::compare;
use superstep::sim::interpreter::interpret;
use superstep::sim::memory::SimError;
use superstep::sim::reference::evaluate_reference;

fn agreement(sets: &[&str]) -> superstep::sim::compare::Agreement {
    let query = query("queries/vit-tiny.toml", sets);
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
    for &sets in TINY_VARIANTS {
        let agreement = agreement(sets);
        assert_eq!(agreement.non_finite, 0, "{sets:?}");
        assert!(
            agreement.cosine >= 0.99,
            "{sets:?}: cosine {}",
            agreement.cosine
        );
    }
}

/// Real weights come from SafeTensors: the same values written to a file
/// and read back give the same program output, bit for bit.
#[test]
fn safetensors_weights_reproduce_seeded_weights() {
    let query = load_query(Path::new("queries/vit-tiny.toml"), &[]).expect("query");
    let (graph, layouts, program) = compile(&query).expect("compile");
    let seeded = load_weights(&query, &graph).expect("weights");
    let path = std::env::temp_dir().join(format!(
        "superstep-weights-{}.safetensors",
        std::process::id()
    ));
    write_superstep_checkpoint(&graph, &seeded, &path, |_, _, _| {});
    let set = format!("workload.weights.safetensors={}", path.display());
    let from_file =
        load_query(Path::new("queries/vit-tiny.toml"), &[set]).expect("query with file");
    let loaded = load_weights(&from_file, &graph).expect("weights from file");
    assert_eq!(loaded.tensors, seeded.tensors);
    let a = interpret(&program, &layouts, &seeded).expect("seeded run");
    let b = interpret(&program, &layouts, &loaded).expect("file run");
    assert_eq!(a.output, b.output);
    // A file missing a tensor is an error naming it.
    let mut partial = superstep::model::safetensors::SafeTensorsWriter::new();
    partial.add_f32("unrelated", &[1, 1], &[0.0]).expect("add");
    partial.write(&path).expect("write");
    let error = load_weights(&from_file, &graph).expect_err("missing tensors");
    assert!(error.to_string().contains("embed.patch.weight"), "{error}");
    std::fs::remove_file(&path).ok();
}

/// The comparison can fail: corrupting one transfer changes the output.
/// The first transfer of the Repeat body's exchanges that moves more than
/// one word from past the start of its source: its exchange and index.
fn corruptible_transfer(
    program: &mut superstep::expand::program::LowProgram,
) -> (&mut superstep::expand::program::TransferList, usize) {
    use superstep::expand::program::Step;
    let body = program
        .steps
        .iter_mut()
        .find_map(|step| match step {
            Step::Repeat { body, .. } => Some(body),
            _ => None,
        })
        .expect("a Repeat");
    body.iter_mut()
        .find_map(|step| match step {
            Step::Exchange { transfers, .. } => (0..transfers.len())
                .find(|&index| {
                    transfers.words[index] > 1 && transfers.source_location[index].offset >= 4
                })
                .map(|index| (transfers, index)),
            _ => None,
        })
        .expect("an exchange")
}

#[test]
fn corrupting_one_transfer_changes_the_output() {
    // The FP16 recipe: at FP16's error a one-word shift stands out
    // against the reference (FP8 inputs' rounding may hide it there,
    // though the output still changes).
    let query = load_query(
        Path::new("queries/vit-tiny.toml"),
        &["planning.matrix_inputs=fp16".to_string()],
    )
    .expect("query");
    let (graph, layouts, mut program) = compile(&query).expect("compile");
    let weights = load_weights(&query, &graph).expect("weights");
    let clean = interpret(&program, &layouts, &weights)
        .expect("clean run")
        .output;
    let reference = evaluate_reference(&graph, &weights).expect("reference");
    // Redirect one transfer of the Repeat body to read one word later and
    // move one word fewer.
    let mut shifted = program.clone();
    let (transfers, index) = corruptible_transfer(&mut program);
    transfers.words[index] -= 1;
    transfers.source_location[index].offset += 4;
    // The word the shortened transfer no longer delivers is read by a
    // kernel: the interpreter refuses the run, naming the kernel and the
    // value. Moving all its words from one word earlier instead (every
    // destination byte still written), the shift changes the output.
    let error = interpret(&program, &layouts, &weights).expect_err("an undelivered word");
    assert!(
        matches!(&error, SimError::Undefined(message) if message.contains("never wrote")),
        "{error}"
    );
    let (transfers, index) = corruptible_transfer(&mut shifted);
    transfers.source_location[index].offset -= 4;
    let corrupted = interpret(&shifted, &layouts, &weights)
        .expect("corrupted run")
        .output;
    assert_ne!(clean, corrupted);
    assert!(compare(&corrupted, &reference).cosine < compare(&clean, &reference).cosine);
}

/// SigLIP so400m at full width, 2 layers, on the C600's 1,472 tiles.
/// Run with `cargo test --release --test suite numerics:: -- --ignored`.
#[test]
#[ignore = "full-width SigLIP: about a minute in release"]
fn siglip_two_layers_full_width_matches_the_fp32_reference() {
    let query = load_query(
        Path::new("queries/siglip-so400m.toml"),
        &["workload.layers=2".to_string()],
    )
    .expect("query");
    let (graph, layouts, program) = compile(&query).expect("compile");
    let weights = load_weights(&query, &graph).expect("weights");
    let result = interpret(&program, &layouts, &weights).expect("interpret");
    let reference = evaluate_reference(&graph, &weights).expect("reference");
    let agreement = compare(&result.output, &reference);
    println!("SigLIP 2 layers: {agreement:?}");
    assert_eq!(agreement.non_finite, 0);
    assert!(agreement.cosine >= 0.99, "cosine {}", agreement.cosine);
}

/// PE-Core-L14 at full width, 2 layers.
#[test]
#[ignore = "full-width PE-Core: about a minute in release"]
fn pe_core_two_layers_full_width_matches_the_fp32_reference() {
    let query = load_query(
        Path::new("queries/pe-core-l14.toml"),
        &["workload.layers=2".to_string()],
    )
    .expect("query");
    let (graph, layouts, program) = compile(&query).expect("compile");
    let weights = load_weights(&query, &graph).expect("weights");
    let result = interpret(&program, &layouts, &weights).expect("interpret");
    let reference = evaluate_reference(&graph, &weights).expect("reference");
    let agreement = compare(&result.output, &reference);
    println!("PE-Core 2 layers: {agreement:?}");
    assert_eq!(agreement.non_finite, 0);
    assert!(agreement.cosine >= 0.99, "cosine {}", agreement.cosine);
}

/// A checkpoint with NaN or infinite weights is refused naming the tensor
/// (issue 26), and a non-finite output never counts as agreement.
#[test]
fn non_finite_weights_are_refused_by_name_and_never_agree() {
    let query = load_query(Path::new("queries/vit-tiny.toml"), &[]).expect("query");
    let (graph, _, _) = compile(&query).expect("compile");
    let seeded = load_weights(&query, &graph).expect("weights");
    let path = std::env::temp_dir().join(format!(
        "superstep-non-finite-{}.safetensors",
        std::process::id()
    ));
    for poison in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut poisoned_name = None;
        write_superstep_checkpoint(&graph, &seeded, &path, |name, _, values| {
            if poisoned_name.is_none() && name == "layer.mlp.up.weight" {
                values.iter_mut().for_each(|number| *number = poison);
                poisoned_name = Some(name.to_string());
            }
        });
        assert!(
            poisoned_name.is_some(),
            "the tiny ViT has layer.mlp.up.weight"
        );
        let set = format!("workload.weights.safetensors={}", path.display());
        let from_file =
            load_query(Path::new("queries/vit-tiny.toml"), &[set]).expect("query with file");
        let error = load_weights(&from_file, &graph).expect_err("non-finite weights");
        let message = error.to_string();
        assert!(message.contains("`layer.mlp.up.weight`"), "{message}");
        assert!(message.contains("non-finite"), "{message}");
    }
    std::fs::remove_file(&path).ok();
    let agreement = compare(&[1.0, f32::NAN, 3.0], &[1.0, 2.0, 3.0]);
    assert_eq!(agreement.non_finite, 1);
    let agreement = compare(&[65504.0, 1.0], &[f32::INFINITY, 1.0]);
    assert_eq!(agreement.non_finite, 1, "a non-finite reference counts too");
}
