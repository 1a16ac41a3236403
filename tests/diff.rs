//! `superstep diff A B` as a user runs it: two report.json files from two
//! builds of vit-tiny (latency against B1024) compared as JSON, the same
//! comparison from the build queries themselves, and bad inputs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{scratch, superstep};
use serde_json::Value;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Builds vit-tiny under `policy` into `directory` and returns its report.json.
fn build_report(directory: &Path, policy: &str) -> PathBuf {
    let outputs = format!("outputs.directory={}", directory.display());
    let policy = format!("schedule.policy={policy}");
    let output = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--set",
        &outputs,
        "--set",
        &policy,
        "--suggestions",
        "0",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    directory.join("vit-tiny").join("report.json")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("report written");
    serde_json::from_str(&text).expect("valid JSON")
}

fn diff_json(arguments: &[&str]) -> Value {
    let output = superstep(arguments);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("diff --json prints JSON")
}

/// The phase of `key` in a report's back half.
fn report_phase<'report>(report: &'report Value, key: &str) -> Option<&'report Value> {
    report["back"]["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .find(|phase| phase["key"] == key)
}

const COUNT_TOTALS: [&str; 10] = [
    "total_cycles",
    "compute_cycles",
    "exchange_cycles",
    "sync_cycles",
    "patch_cycles",
    "barriers",
    "exchange_table_bytes_per_tile_max",
    "peak_sram_bytes_per_tile",
    "repeat_patch_words",
    "sharing_patch_words",
];

/// Every total of `diff` is B - A of the two reports, and every listed
/// phase's horizons are the reports' (absent where a report lacks it).
fn assert_matches_reports(diff: &Value, report_a: &Value, report_b: &Value) {
    for field in COUNT_TOTALS {
        let a = report_a["back"][field].as_i64().expect("count in A");
        let b = report_b["back"][field].as_i64().expect("count in B");
        let total = &diff["totals"][field];
        assert_eq!(total["a"].as_i64(), Some(a), "{field}");
        assert_eq!(total["b"].as_i64(), Some(b), "{field}");
        assert_eq!(total["delta"].as_i64(), Some(b - a), "{field}");
    }
    let milliseconds = |report: &Value| report["back"]["milliseconds"].as_f64().expect("ms");
    let delta = diff["totals"]["milliseconds"]["delta"]
        .as_f64()
        .expect("ms delta");
    assert!((delta - (milliseconds(report_b) - milliseconds(report_a))).abs() < 1e-12);
    let phases = diff["phases"].as_array().expect("phase lines");
    for line in phases {
        let key = line["key"].as_str().expect("key");
        for (side, report) in [("a", report_a), ("b", report_b)] {
            match report_phase(report, key) {
                Some(phase) => assert_eq!(line[side]["horizon"], phase["horizon"], "{key}"),
                None => assert!(line[side].is_null(), "{key} is not in {side}"),
            }
        }
        let cycles = |side: &str| line[side]["cycles"].as_i64().unwrap_or(0);
        assert_eq!(
            line["cycle_delta"].as_i64(),
            Some(cycles("b") - cycles("a"))
        );
    }
    let deltas: Vec<u64> = phases
        .iter()
        .map(|line| line["cycle_delta"].as_i64().expect("delta").unsigned_abs())
        .collect();
    assert!(
        deltas.windows(2).all(|pair| pair[0] >= pair[1]),
        "sorted by absolute cycle delta: {deltas:?}"
    );
}

#[test]
fn two_reports_compare_to_their_differences() {
    let directory = scratch("diff", "reports");
    let path_a = build_report(&directory.join("latency"), "latency");
    let path_b = build_report(&directory.join("b1024"), "B1024");
    let (report_a, report_b) = (read_json(&path_a), read_json(&path_b));
    let (text_a, text_b) = (path_a.display().to_string(), path_b.display().to_string());
    let diff = diff_json(&["diff", &text_a, &text_b, "--json"]);
    assert_matches_reports(&diff, &report_a, &report_b);
    assert_eq!(diff["sources"]["a"]["kind"], "report");
    // Every phase changed policy, so every phase is listed, with its policies.
    let phases = diff["phases"].as_array().expect("phase lines");
    let count = report_a["back"]["phases"].as_array().expect("phases").len();
    assert_eq!(phases.len(), count);
    assert_eq!(diff["changed_phases"].as_u64(), Some(count as u64));
    for line in phases {
        assert_eq!(line["presence"], "both");
        assert!(
            line["changes"]
                .as_array()
                .expect("changes")
                .contains(&"policy".into())
        );
        assert_eq!(line["a"]["policy"], "latency");
        assert_eq!(line["b"]["policy"], "B1024");
    }
    // --top keeps the largest lines and still counts every change.
    let top = diff_json(&["diff", &text_a, &text_b, "--json", "--top", "2"]);
    assert_eq!(top["phases"].as_array().map(Vec::len), Some(2));
    assert_eq!(top["phases"][0], diff["phases"][0]);
    assert_eq!(top["changed_phases"], diff["changed_phases"]);
    // The text names the totals and the largest phase.
    let output = superstep(&["diff", &text_a, &text_b, "--top", "1"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let first = diff["phases"][0]["key"].as_str().expect("key");
    for expected in ["estimate cycles", "exchange cycles", "peak SRAM", first] {
        assert!(text.contains(expected), "missing {expected}: {text}");
    }
    // A report against itself: zero deltas, no phase lines.
    let same = diff_json(&["diff", &text_a, &text_a, "--json"]);
    assert_eq!(same["totals"]["total_cycles"]["delta"].as_i64(), Some(0));
    assert_eq!(same["phases"].as_array().map(Vec::len), Some(0));
}

#[test]
fn two_queries_compare_like_their_reports() {
    let directory = scratch("diff", "queries");
    let path_a = build_report(&directory.join("latency"), "latency");
    let path_b = build_report(&directory.join("b1024"), "B1024");
    let outputs = format!("outputs.directory={}", directory.join("built").display());
    let diff = diff_json(&[
        "diff",
        "queries/vit-tiny.toml",
        "queries/vit-tiny.toml",
        "--set",
        &outputs,
        "--set-a",
        "schedule.policy=latency",
        "--set-b",
        "schedule.policy=B1024",
        "--json",
    ]);
    assert_matches_reports(&diff, &read_json(&path_a), &read_json(&path_b));
    assert_eq!(diff["sources"]["b"]["kind"], "query");
    assert_eq!(
        diff["sources"]["b"]["sets"],
        serde_json::json!([outputs, "schedule.policy=B1024"])
    );
}

#[test]
fn a_file_that_is_not_a_report_is_exit_2_naming_it() {
    let directory = scratch("diff", "bad");
    let foreign = directory.join("foreign.json");
    std::fs::write(&foreign, r#"{"schema": 4, "phases": []}"#).expect("write");
    let foreign = foreign.display().to_string();
    let missing = directory.join("missing.json").display().to_string();
    for (arguments, expected) in [
        (
            vec!["diff", foreign.as_str(), foreign.as_str()],
            vec![foreign.as_str(), "not a superstep build report"],
        ),
        (
            vec!["diff", "queries/vit-tiny.toml", missing.as_str()],
            vec![missing.as_str(), "cannot read"],
        ),
        (
            vec![
                "diff",
                foreign.as_str(),
                "queries/vit-tiny.toml",
                "--set-a",
                "workload.layers=1",
            ],
            vec!["--set-a", foreign.as_str()],
        ),
    ] {
        let output = superstep(&arguments);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(!message.contains("panicked"), "{message}");
        for text in expected {
            assert!(message.contains(text), "missing `{text}` in: {message}");
        }
    }
}

/// Issue 26, item 6: a bad `--set-b` is reported by its own flag, before
/// A is built (nothing is compiled, nothing printed on standard output).
#[test]
fn a_bad_side_override_names_its_flag_before_anything_is_built() {
    for (flag, side) in [("--set-a", "A"), ("--set-b", "B")] {
        let output = superstep(&[
            "diff",
            "queries/vit-tiny.toml",
            "queries/vit-tiny.toml",
            "--no-cache",
            flag,
            "workload.mlp=3",
        ]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(
            message.contains(&format!("{flag} workload.mlp=3")),
            "{message}"
        );
        assert!(message.starts_with(&format!("{side}: ")), "{message}");
        assert!(output.stdout.is_empty(), "nothing was built or compared");
        assert!(!message.contains("cache"), "no cache was opened: {message}");
    }
}
