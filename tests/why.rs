//! `superstep build --why`: the record of the last successful build, and the
//! explanation of a rebuild against it (changed settings, re-ran queries by
//! stage, op names of re-expanded ops).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("superstep-why-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).expect("scratch directory");
    directory
}

fn build(file: &Path, directory: &Path, sets: &[&str]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_superstep"));
    command
        .arg("build")
        .arg(file)
        .arg("--why")
        .arg("--set")
        .arg(format!("outputs.directory={}", directory.display()));
    for set in sets {
        command.args(["--set", set]);
    }
    let output: Output = command.output().expect("superstep runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn why_explains_a_rebuild_against_the_recorded_build() {
    let directory = scratch("edits");
    let file = directory.join("vit-tiny.toml");
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("queries/vit-tiny.toml"),
    )
    .expect("read query");
    std::fs::write(&file, &original).expect("write query");

    // No record yet: says so, builds once, and records this build.
    let materialized = "workload.attention=materialized";
    let first = build(&file, &directory, &[materialized]);
    assert!(first.contains("no previous build of vit-tiny"), "{first}");
    let record = directory.join("vit-tiny").join("last-build.json");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).expect("record written")).expect("JSON");
    assert_eq!(json["settings"]["workload.attention"], "Materialized");
    assert_eq!(json["sets"][1], materialized);

    // The same query again: nothing changed and nothing re-ran.
    let same = build(&file, &directory, &[materialized]);
    assert!(same.contains("changed inputs: none"), "{same}");
    assert!(same.contains("re-ran queries: none"), "{same}");

    // Another attention method: only attention is re-costed and re-expanded.
    let flash = build(&file, &directory, &["workload.attention=flash"]);
    assert!(flash.contains("changed inputs: attention"), "{flash}");
    assert!(flash.contains("Materialized -> Flash"), "{flash}");
    assert!(flash.contains("op_expansion: layer.attn.core\n"), "{flash}");
    assert!(flash.contains("attention_costing 1"), "{flash}");
    assert!(!flash.contains("matmul_costing"), "{flash}");

    // An edit of the file itself: of the compiler, only the activation
    // calibration reads the weights' scale, and its scales come out the
    // same (the product recipe stops the change there); the searched
    // plan's lookup is of another configuration, and finds none again.
    let scaled = original.replace("fp8_scale = -4", "fp8_scale = -3");
    std::fs::write(&file, scaled).expect("write query");
    let fp8 = build(&file, &directory, &["workload.attention=flash"]);
    assert!(fp8.contains("changed inputs: fp8_scale"), "{fp8}");
    assert!(fp8.contains("-4 -> -3"), "{fp8}");
    assert!(fp8.contains("re-ran queries: 4\n"), "{fp8}");
    assert!(
        fp8.contains(
            "(activation_calibration 1, product_recipe 1, search_configuration 1, searched_plan 1)"
        ),
        "{fp8}"
    );
    assert!(!fp8.contains("op_expansion"), "{fp8}");
    let _ = std::fs::remove_dir_all(&directory);
}
