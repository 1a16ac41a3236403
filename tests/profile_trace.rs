//! `superstep profile`: the program trace parses, every slice is a
//! complete event, slices on one track never overlap and run in order, the
//! program's slices add up to the estimate, and tiles outside the machine
//! are an input error.

use crate::common;

use std::collections::BTreeMap;

use common::{scratch, superstep};

const TINY: &str = "queries/vit-tiny.toml";

#[test]
fn the_trace_is_valid_ordered_and_adds_up() {
    let directory = scratch("profile", "trace");
    let trace = directory.join("program.trace.json");
    let report = directory.join("outputs");
    let outputs = format!("outputs.directory={}", report.display());
    let output = superstep(&[
        "profile",
        TINY,
        "--set",
        &outputs,
        "--no-cache",
        "--tiles",
        "0,3,5-6",
        "-o",
        trace.to_str().expect("utf-8"),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&trace).expect("written");
    let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = value["traceEvents"].as_array().expect("events");
    let total_cycles = value["otherData"]["total_cycles"].as_u64().expect("total");
    let mut tracks: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut program_microseconds = 0.0;
    let mut exchanges = 0;
    let mut begins = 0i64;
    for event in events {
        match event["ph"].as_str().expect("phase") {
            "M" => continue,
            "B" => begins += 1,
            "E" => begins -= 1,
            "X" => {}
            other => panic!("unexpected event phase {other}"),
        }
        let ts = event["ts"].as_f64().expect("ts");
        let dur = event["dur"].as_f64().expect("dur");
        assert!(ts >= 0.0 && dur >= 0.0);
        assert!(!event["name"].as_str().expect("name").is_empty());
        assert!(
            !event["name"].as_str().unwrap_or("").starts_with('/'),
            "no paths as names"
        );
        let pid = event["pid"].as_u64().expect("pid");
        let tid = event["tid"].as_u64().expect("tid");
        tracks.entry((pid, tid)).or_default().push((ts, dur));
        if pid == 1 {
            program_microseconds += dur;
            if event["cat"] == "exchange" {
                exchanges += 1;
                assert!(event["args"]["horizon"].as_u64().is_some());
                assert!(event["args"]["policy"].as_str().is_some());
            }
        }
    }
    assert_eq!(begins, 0, "balanced");
    // Monotonic, non-overlapping per track (in trace order).
    for (track, slices) in &tracks {
        for pair in slices.windows(2) {
            assert!(
                pair[1].0 + 1e-6 >= pair[0].0 + pair[0].1,
                "track {track:?} overlaps: {pair:?}"
            );
        }
    }
    // Every exchange execution has a slice (one barrier each), and the
    // timeline is the estimate's.
    let mut session = superstep::session::Session::new(&common::query(TINY, &[]));
    session.build().expect("builds");
    let estimate = session.estimate().expect("estimate");
    assert_eq!(exchanges, estimate.barriers);
    assert_eq!(total_cycles, estimate.total_cycles);
    let expected_total = (total_cycles as f64) / 1500.0;
    assert!((program_microseconds - expected_total).abs() < 1e-3 * expected_total.max(1.0));
    assert!(exchanges > 0);
    // Four program tracks with work, and send/receive tracks for the tiles.
    assert!(tracks.keys().filter(|(pid, _)| *pid == 1).count() >= 3);
    assert!(tracks.keys().any(|(pid, _)| *pid == 2));
    // A tile outside the machine: exit code 2 naming the flag.
    let output = superstep(&[
        "profile",
        TINY,
        "--set",
        &outputs,
        "--no-cache",
        "--tiles",
        "16",
        "-o",
        trace.to_str().expect("utf-8"),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--tiles"));
    std::fs::remove_dir_all(&directory).ok();
}

/// The compiler's own trace (`--trace`): spans carry their arguments and
/// no event is named by a source path; `bench-snapshot --trace` has spans.
#[test]
fn compiler_traces_carry_arguments_and_no_paths() {
    let directory = scratch("profile", "compiler-trace");
    let outputs = format!("outputs.directory={}", directory.join("outputs").display());
    let read = |path: &std::path::Path| -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(path).expect("trace written");
        serde_json::from_str::<Vec<serde_json::Value>>(&text).expect("a JSON array of events")
    };
    let build_trace = directory.join("build.json");
    let output = superstep(&[
        "--trace",
        build_trace.to_str().expect("utf-8"),
        "build",
        TINY,
        "--no-cache",
        "--set",
        &outputs,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = read(&build_trace);
    let named = |name: &str| {
        events
            .iter()
            .filter(|event| event["name"] == name && event["ph"] == "B")
            .collect::<Vec<_>>()
    };
    let phases = named("phase");
    assert!(!phases.is_empty());
    assert!(phases.iter().all(|event| {
        event["args"]["key"]
            .as_str()
            .is_some_and(|key| key.contains('#'))
    }));
    let expansions = named("op_expansion");
    assert!(
        expansions
            .iter()
            .all(|event| event["args"]["op"].as_str().is_some())
    );
    assert!(!expansions.is_empty());
    let schedules = named("schedule");
    assert!(
        schedules
            .iter()
            .all(|event| event["args"]["policy"].as_str().is_some())
    );
    for event in &events {
        let name = event["name"].as_str().unwrap_or("");
        assert!(
            !name.contains('/') && !name.contains(".rs"),
            "path as a name: {name}"
        );
    }
    let snapshot = directory.join("snapshot.json");
    let output = superstep(&[
        "capture",
        TINY,
        "--no-cache",
        "--set",
        &outputs,
        "-o",
        snapshot.to_str().expect("utf-8"),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The first phase, by its id (a capture writes each phase's step).
    let captured: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&snapshot).expect("snapshot")).expect("json");
    let first = captured["phases"][0]["phase"].to_string();
    let bench_trace = directory.join("bench.json");
    let output = superstep(&[
        "--trace",
        bench_trace.to_str().expect("utf-8"),
        "bench-snapshot",
        snapshot.to_str().expect("utf-8"),
        "--iterations",
        "1",
        "--phase",
        &first,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = read(&bench_trace);
    let benches: Vec<_> = events
        .iter()
        .filter(|event| event["name"] == "bench phase" && event["ph"] == "B")
        .collect();
    assert!(!benches.is_empty(), "bench-snapshot --trace is not empty");
    assert!(benches.iter().all(
        |event| event["args"]["phase"].as_str() == Some(first.as_str())
            && event["args"]["policy"].as_str().is_some()
    ));
    std::fs::remove_dir_all(&directory).ok();
}
