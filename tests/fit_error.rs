//! A model that does not fit is an input error (exit code 2) pointed at the
//! batch (in the build file, or its `--set`), with what would fit: the
//! largest batch and layer count, each proved here by building it and the
//! next one up, and the other levers (tiles, attention, reservation).

use crate::common;

use std::path::Path;

/// Builds the tiny ViT with `sets`; returns the exit code and standard error.
fn tiny(query: &str, sets: &[String]) -> (Option<i32>, String) {
    let mut arguments = vec!["build", query, "--no-cache", "-q", "--suggestions", "0"];
    for set in sets {
        arguments.push("--set");
        arguments.push(set);
    }
    arguments.extend(["--set", "outputs.directory=target/fit-error-tests"]);
    let output = common::superstep(&arguments);
    let text = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!text.contains("panicked"), "{text}");
    (output.status.code(), text)
}

/// The number after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> u32 {
    let start = text
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix}: {text}"))
        + prefix.len();
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{prefix}: {text}"))
}

/// `largest` of `key` builds (exit 0) and one more does not (exit 2), with
/// `also` set as well.
fn fits_and_one_more_does_not(key: &str, largest: u32, also: &[String]) {
    for (value, expected) in [(largest, 0), (largest + 1, 2)] {
        let mut sets = also.to_vec();
        sets.push(format!("{key}={value}"));
        let (code, text) = tiny("queries/vit-tiny.toml", &sets);
        assert_eq!(code, Some(expected), "{key}={value}: {text}");
    }
}

#[test]
fn a_batch_that_does_not_fit_names_the_largest_batch_that_does_and_it_builds() {
    let (code, text) = tiny("queries/vit-tiny.toml", &["workload.batch=512".into()]);
    assert_eq!(code, Some(2), "{text}");
    for part in [
        "--set workload.batch=512",
        "the model does not fit",
        "no layer count fits at batch 512",
        "machine.tiles = 1472 fits at batch 512",
        "workload.attention = \"flash\"",
        "planning.reserved_bytes_per_tile = 32768",
        "each answer was found by building it through placement",
        "note: Memory per tile",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    let largest = number_after(&text, "the largest batch that fits: workload.batch = ");
    assert!((2..512).contains(&largest), "{text}");
    assert_eq!(
        number_after(&text, &format!("workload.batch = {largest} (batch ")),
        largest + 1
    );
    fits_and_one_more_does_not("workload.batch", largest, &[]);
    // All 1,472 tiles was said to fit the asked-for batch: it does.
    let (code, tiles) = tiny(
        "queries/vit-tiny.toml",
        &["workload.batch=512".into(), "machine.tiles=1472".into()],
    );
    assert_eq!(code, Some(0), "{tiles}");
}

#[test]
fn a_batch_written_in_the_file_is_pointed_at() {
    let folder = common::scratch("fit-error", "file-span");
    let text = std::fs::read_to_string("queries/vit-tiny.toml").expect("vit-tiny");
    let text = text.replace("\nbatch = 1\n", "\nbatch = 512\n");
    assert!(
        text.contains("\nbatch = 512\n"),
        "the file has a batch line"
    );
    let path = folder.join("tiny-512.toml");
    std::fs::write(&path, text).expect("write");
    let (code, error) = tiny(path.to_str().expect("path"), &[]);
    assert_eq!(code, Some(2), "{error}");
    assert!(error.contains("batch 512 does not fit"), "{error}");
    assert!(
        error.contains("batch = 512"),
        "the source line is shown: {error}"
    );
    assert!(
        error.contains(&format!("{}:", path.display())),
        "the file is named: {error}"
    );
    assert!(error.contains("the largest batch that fits"), "{error}");
    let _ = std::fs::remove_dir_all(Path::new(&folder));
}

#[test]
fn too_many_layers_names_the_largest_layer_count_that_fits_and_it_builds() {
    let (code, text) = tiny("queries/vit-tiny.toml", &["workload.layers=150".into()]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--set workload.layers=150"), "{text}");
    assert!(
        !text.contains("the largest batch that fits"),
        "batch 1 has no smaller batch: {text}"
    );
    let largest = number_after(
        &text,
        "the largest layer count that fits at batch 1: workload.layers = ",
    );
    assert!((2..150).contains(&largest), "{text}");
    // Only what was built is advised: no other layer count (the planner's
    // hint from bytes alone named one that does not fit).
    assert_eq!(text.matches("workload.layers = ").count(), 1, "{text}");
    assert!(!text.contains("what would make room"), "{text}");
    fits_and_one_more_does_not("workload.layers", largest, &[]);
}

/// A layout override that fits batch 1 but not the asked-for batch is a
/// fit error: the override is shown, and the planner's own layouts fit.
#[test]
fn an_override_that_fits_only_smaller_batches_is_a_fit_error() {
    let override_set = String::from("layout.override.layer.mlp.up=1x1x1");
    let (code, text) = tiny(
        "queries/vit-tiny.toml",
        &[override_set.clone(), "workload.batch=64".into()],
    );
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("layout override for `layer.mlp.up`"),
        "{text}"
    );
    assert!(
        text.contains("without the [[layout.override]] entries (the planner choosing every layout) batch 64 fits"),
        "{text}"
    );
    let largest = number_after(&text, "the largest batch that fits: workload.batch = ");
    fits_and_one_more_does_not(
        "workload.batch",
        largest,
        std::slice::from_ref(&override_set),
    );
    // At batch 1 the same override is simply valid; a partition that is
    // wrong at every batch keeps the override's own error.
    let (code, wrong) = tiny(
        "queries/vit-tiny.toml",
        &[
            "layout.override.layer.mlp.up=7x7x7".into(),
            "workload.batch=4".into(),
        ],
    );
    assert_eq!(code, Some(2), "{wrong}");
    assert!(!wrong.contains("the largest batch that fits"), "{wrong}");
    assert!(wrong.contains("layer.mlp.up"), "{wrong}");
}

/// A file that fails the build file's own capacity check (before anything
/// is compiled) is answered by `build` with what fits, each value built:
/// the largest layer count named builds and one more does not, and the
/// check's own help (what other commands print) names no value.
#[test]
fn a_file_over_the_capacity_check_is_answered_with_built_values() {
    let (code, text) = tiny("queries/vit-tiny.toml", &["workload.layers=200".into()]);
    assert_eq!(code, Some(2), "{text}");
    for part in [
        "workload.layers = 200 does not fit on 16 tiles: it needs about",
        "what fits, found by building it:",
        "the largest layer count that fits at batch 1: workload.layers = ",
        "each answer was found by building it through placement",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert!(!text.contains("use at least"), "{text}");
    assert!(!text.contains("use at most"), "{text}");
    let largest = number_after(
        &text,
        "the largest layer count that fits at batch 1: workload.layers = ",
    );
    assert!((2..200).contains(&largest), "{text}");
    fits_and_one_more_does_not("workload.layers", largest, &[]);
    // A lever said to fit at 200 layers builds.
    if text.contains("machine.tiles = 1472 fits at batch 1") {
        let (code, all) = tiny(
            "queries/vit-tiny.toml",
            &["workload.layers=200".into(), "machine.tiles=1472".into()],
        );
        assert_eq!(code, Some(0), "{all}");
    }
    // Another command gives the check's own error: levers, no values.
    let output = common::superstep(&[
        "phases",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        "workload.layers=200",
    ]);
    let check = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{check}");
    assert!(check.contains("what could make room: "), "{check}");
    assert!(check.contains("fewer layers (workload.layers)"), "{check}");
    assert!(!check.contains("at most"), "{check}");
    assert!(!check.contains("at least"), "{check}");
}
