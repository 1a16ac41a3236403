//! `workload.fp8_scale = "auto"`: per tensor and per layer the least
//! power-of-two scale under which nothing saturates. A checkpoint whose
//! layers differ in magnitude gets a scale per layer, computes what the
//! FP32 reference computes in the interpreter and in the package
//! simulator (bit for bit the same), and the build reports each tensor
//! kind's scales, error and saturation; a fixed scale that saturates is a
//! warning naming the tensor and its layers.

use crate::common;

use std::path::{Path, PathBuf};

use common::{scratch, superstep, write_superstep_checkpoint};
use superstep::build_file::load_query;
use superstep::direct::load_weights;
use superstep::model::quantisation::Fp8Scale;
use superstep::session::Session;
use superstep::sim::compare::compare;
use superstep::sim::interpreter::interpret;
use superstep::sim::package::{PackageFault, simulate};
use superstep::sim::reference::evaluate_reference;

const TINY: &str = "queries/vit-tiny.toml";
/// The tensor kind the checkpoint makes uneven across layers.
const UNEVEN: &str = "layer.mlp.up.weight";

/// The tiny ViT's seeded weights written as a checkpoint, with layer 1 of
/// `UNEVEN` eight times larger (three binades) and one of its elements
/// 100, beyond the default fixed scale's largest value (15).
fn uneven_checkpoint(directory: &Path) -> PathBuf {
    let query = load_query(Path::new(TINY), &[]).expect("query");
    let mut session = Session::new(&query);
    let graph = session.graph().clone();
    session.build_low_program().expect("front");
    let seeded = load_weights(&query, &graph).expect("seeded weights");
    let path = directory.join("uneven.safetensors");
    let mut found = false;
    write_superstep_checkpoint(&graph, &seeded, &path, |name, instance, values| {
        if name == UNEVEN && instance == 1 {
            found = true;
            values.iter_mut().for_each(|element| *element *= 8.0);
            values[0] = 100.0;
        }
    });
    assert!(found, "the tiny ViT has two layers of {UNEVEN}");
    path
}

fn checkpoint_sets(path: &Path, scale: &str) -> Vec<String> {
    vec![
        format!("workload.weights.safetensors={}", path.display()),
        format!("workload.fp8_scale={scale}"),
    ]
}

#[test]
fn auto_scales_each_layer_and_the_package_computes_the_reference() {
    let directory = scratch("fp8-scale", "auto");
    let path = uneven_checkpoint(&directory);
    let query = load_query(Path::new(TINY), &checkpoint_sets(&path, "auto")).expect("query");
    assert_eq!(query.workload.fp8_scale, Fp8Scale::Auto);
    let mut session = Session::new(&query);
    session.build().expect("build");
    let weights = load_weights(&query, session.graph()).expect("weights");
    assert_eq!(weights.fp8_scale, Fp8Scale::Auto);
    assert!(
        weights.quantisation.iter().all(|cost| cost.saturated == 0),
        "auto never saturates"
    );
    let scales: Vec<i32> = weights
        .quantisation
        .iter()
        .filter(|cost| cost.tensor == UNEVEN)
        .map(|cost| cost.scale)
        .collect();
    assert_eq!(scales.len(), 2);
    // Layer 1's largest element is 100: the least scale with 100 <= 240 x 2^s.
    assert_eq!(scales[1], -1, "{scales:?}");
    assert!(
        scales[0] < scales[1] - 2,
        "layer 0 is far smaller: {scales:?}"
    );
    let layouts = session.layouts().expect("layouts");
    let program = session.low_program().expect("program");
    let interpreted = interpret(&program, &layouts, &weights).expect("interpret");
    let reference = evaluate_reference(session.graph(), &weights).expect("reference");
    let agreement = compare(&interpreted.output, &reference);
    assert_eq!(agreement.non_finite, 0);
    assert!(agreement.cosine >= 0.99, "{agreement:?}");
    let package = session.package().expect("package");
    assert_eq!(package.fp8_scale, Fp8Scale::Auto);
    let run = simulate(&package, &program, &layouts, &weights).expect("package simulation");
    assert_eq!(
        run.output, interpreted.output,
        "the package computes what the low program computes"
    );
    // The same checkpoint under a fixed scale saturates layer 1's 100 (and
    // the 8x values beyond 15): the stored weights differ, so does the output.
    let fixed = load_query(Path::new(TINY), &checkpoint_sets(&path, "-4")).expect("query");
    let fixed_weights = load_weights(&fixed, session.graph()).expect("weights");
    let saturated: u64 = fixed_weights
        .quantisation
        .iter()
        .filter(|cost| cost.tensor == UNEVEN)
        .map(|cost| cost.saturated)
        .sum();
    assert!(saturated >= 1, "fixed -4 saturates the 100");
    // A package built for one policy refuses weights quantised under another.
    let refused = simulate(&package, &program, &layouts, &fixed_weights);
    let fault: PackageFault = match refused {
        Err(fault) => fault,
        Ok(_) => panic!("a package built under auto ran weights quantised under -4"),
    };
    assert_eq!(fault.tile, None, "a setup fault: {}", fault.message);
    assert!(
        fault.message.contains("fp8_scale = auto"),
        "{}",
        fault.message
    );
    assert!(
        fault.message.contains("fp8_scale = -4"),
        "{}",
        fault.message
    );
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn build_reports_quantisation_and_warns_of_saturation() {
    let directory = scratch("fp8-scale", "report");
    let path = uneven_checkpoint(&directory);
    let outputs = format!("outputs.directory={}", directory.join("out").display());
    let build = |scale: &str| {
        let sets = checkpoint_sets(&path, scale);
        superstep(&[
            "build", TINY, "--set", &sets[0], "--set", &sets[1], "--set", &outputs,
        ])
    };
    let auto = build("auto");
    let stdout = String::from_utf8_lossy(&auto.stdout);
    let stderr = String::from_utf8_lossy(&auto.stderr);
    assert!(auto.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("quantisation (fp8_scale = \"auto\")"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|line| line.trim_start().starts_with(UNEVEN))
        .unwrap_or_else(|| panic!("a line for {UNEVEN}: {stdout}"));
    assert!(line.contains("2 x"), "{line}");
    assert!(line.contains("..2^-1"), "a scale range up to 2^-1: {line}");
    assert!(line.contains("saturated 0"), "{line}");
    assert!(!stderr.contains("warning: `"), "{stderr}");

    let fixed = build("-4");
    let stdout = String::from_utf8_lossy(&fixed.stdout);
    let stderr = String::from_utf8_lossy(&fixed.stderr);
    assert!(fixed.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("quantisation (fp8_scale = -4)"), "{stdout}");
    let warning = stderr
        .lines()
        .find(|line| line.starts_with(&format!("warning: `{UNEVEN}`")))
        .unwrap_or_else(|| panic!("a saturation warning for {UNEVEN}: {stderr}"));
    assert!(warning.contains("in 1 of 2 layers (layer 1)"), "{warning}");
    assert!(warning.contains("fp8_scale = \"auto\""), "{warning}");
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn a_scale_that_is_neither_an_exponent_nor_auto_is_refused() {
    let refused = superstep(&["build", TINY, "--set", "workload.fp8_scale=automatic"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("workload.fp8_scale"), "{stderr}");
    assert!(stderr.contains("\"auto\""), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let directory = scratch("fp8-scale", "file");
    let file = directory.join("bad.toml");
    let text = std::fs::read_to_string(TINY).expect("read query");
    assert!(
        text.contains("\nfp8_scale = -4 "),
        "the tiny build file sets fp8_scale"
    );
    let text = text.replacen("\nfp8_scale = -4 ", "\nfp8_scale = \"per-tensor\" ", 1);
    std::fs::write(&file, text).expect("write query");
    let error = load_query(&file, &[]).expect_err("refused");
    let message = error.to_string();
    assert!(message.contains("workload.fp8_scale"), "{message}");
    assert!(message.contains("per-tensor"), "{message}");
    let fine = std::fs::read_to_string(TINY).expect("read query").replacen(
        "\nfp8_scale = -4 ",
        "\nfp8_scale = \"auto\" ",
        1,
    );
    std::fs::write(&file, fine).expect("write query");
    let query = load_query(&file, &[]).expect("auto in a build file");
    assert_eq!(query.workload.fp8_scale, Fp8Scale::Auto);
    std::fs::remove_dir_all(&directory).ok();
}
