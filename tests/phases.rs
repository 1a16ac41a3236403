//! `superstep phases` and the suggestions: the profile's lines add up to the
//! estimate, sorting and filters hold, `--at-offset` finds the covering
//! step, and a suggested override, applied, changes that phase's cost by
//! exactly the predicted amount.

use crate::common;

use common::{query, scratch, superstep};
use superstep::session::{Session, StepKind};

const TINY: &str = "queries/vit-tiny.toml";

fn built(sets: &[&str]) -> Session {
    let mut session = Session::new(&query(TINY, sets));
    session.build().expect("builds");
    session
}

#[test]
fn the_lines_add_up_to_the_estimate_and_follow_the_phases() {
    for sets in [&[][..], &["workload.batch=2", "schedule.policy=B1024"][..]] {
        let session = built(sets);
        let profile = session.profile().expect("profile");
        let estimate = session.estimate().expect("estimate");
        // Nothing is excluded: exchanges carry their horizon, the sync above
        // it and their patching; compute steps their busiest tile.
        let total: u64 = profile.entries.iter().map(|entry| entry.total_cycles).sum();
        assert_eq!(total, estimate.total_cycles, "{sets:?}");
        assert_eq!(profile.total_cycles(), estimate.total_cycles, "{sets:?}");
        let exchange_keys: Vec<&str> = profile
            .entries
            .iter()
            .filter(|entry| entry.kind == StepKind::Exchange)
            .map(|entry| entry.key.as_str())
            .collect();
        let phases = session.phases();
        let phase_keys: Vec<&str> = phases.iter().map(|phase| phase.key()).collect();
        assert_eq!(exchange_keys, phase_keys, "{sets:?}");
        let compute = profile
            .entries
            .iter()
            .filter(|entry| entry.kind.is_compute())
            .count() as u64;
        let executed: u64 = profile
            .entries
            .iter()
            .filter(|entry| entry.kind.is_compute())
            .map(|entry| entry.executions)
            .sum();
        assert_eq!(executed, estimate.compute_steps, "{sets:?}");
        assert!(compute > 0);
        for entry in &profile.entries {
            if let Some(occupancy) = entry.occupancy(profile.tiles) {
                assert!(
                    occupancy > 0.0 && occupancy <= 1.0,
                    "{}: {occupancy}",
                    entry.key
                );
                assert!(entry.busy_tiles >= 1 && entry.busy_tiles <= profile.tiles);
            }
        }
    }
}

fn json(arguments: &[&str]) -> serde_json::Value {
    let output = superstep(arguments);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

#[test]
fn the_command_sorts_filters_and_finds_a_cycle() {
    let directory = scratch("phases", "command");
    let cache = directory.join("cache");
    let outputs = format!("outputs.directory={}", directory.display());
    let base = [
        "phases",
        TINY,
        "--cache",
        cache.to_str().expect("utf-8"),
        "--set",
        &outputs,
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter()
            .chain(extra)
            .map(|argument| argument.to_string())
            .collect()
    };
    let run = |extra: &[&str]| {
        let arguments = with(extra);
        let references: Vec<&str> = arguments.iter().map(String::as_str).collect();
        json(&references)
    };
    let all = run(&["--json"]);
    let lines = all.as_array().expect("an array");
    let total: u64 = lines
        .iter()
        .map(|line| line["total_cycles"].as_u64().expect("total"))
        .sum();
    let shares: f64 = lines
        .iter()
        .map(|line| line["share"].as_f64().expect("share"))
        .sum();
    assert!((shares - 1.0).abs() < 1e-9, "shares sum to {shares}");
    let top = run(&["--json", "--sort-by", "share", "--top", "10"]);
    let top = top.as_array().expect("an array");
    assert_eq!(top.len(), 10);
    let totals: Vec<u64> = top
        .iter()
        .map(|line| line["total_cycles"].as_u64().expect("total"))
        .collect();
    assert!(
        totals.windows(2).all(|pair| pair[0] >= pair[1]),
        "{totals:?}"
    );
    let mut every: Vec<u64> = lines
        .iter()
        .map(|line| line["total_cycles"].as_u64().expect("total"))
        .collect();
    every.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(totals, every[..10]);
    let exchanges = run(&["--json", "--kind", "exchange", "--max-cycles", "5000"]);
    for line in exchanges.as_array().expect("an array") {
        assert_eq!(line["kind"], "exchange");
        assert!(line["cycles"].as_u64().expect("cycles") <= 5000);
        let detail = &line["exchange"];
        assert!(
            detail["horizon"].as_u64().expect("horizon")
                >= detail["endpoint_bound"].as_u64().expect("bound")
        );
        // The width as the build file writes it, as every record writes it.
        let width = detail["width"].as_str().expect("width");
        assert!(["word32", "paired64"].contains(&width), "{detail}");
    }
    let sparse = run(&["--json", "--max-occupancy", "0.5", "--sort-by", "occupancy"]);
    let occupancies: Vec<f64> = sparse
        .as_array()
        .expect("an array")
        .iter()
        .map(|line| line["compute"]["occupancy"].as_f64().expect("compute only"))
        .collect();
    assert!(occupancies.iter().all(|&occupancy| occupancy <= 0.5));
    assert!(occupancies.windows(2).all(|pair| pair[0] <= pair[1]));
    // The cycle just past the first line's executions: the program order
    // is fills/kernels/exchanges back to back, so the line at that offset
    // is the first whose span covers it.
    let first = &lines[0];
    let first_end = first["cycles"].as_u64().expect("cycles")
        * first["executions"].as_u64().expect("executions");
    if first["executions"].as_u64() == Some(1) {
        let at = run(&["--json", "--at-offset", &first_end.to_string()]);
        assert_eq!(at.as_array().expect("one line").len(), 1);
        assert_eq!(at[0]["key"], lines[1]["key"]);
    }
    let at_start = run(&["--json", "--at-offset", "0"]);
    assert_eq!(at_start[0]["key"], first["key"]);
    // Past the end: an input error naming the program's length.
    let arguments = with(&["--at-offset", &total.to_string()]);
    let references: Vec<&str> = arguments.iter().map(String::as_str).collect();
    let output = superstep(&references);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--at-offset"));
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn a_suggested_override_saves_what_it_predicts() {
    let session = built(&[]);
    let suggestions =
        superstep::studies::suggestions::suggestions(&session, None).expect("suggestions");
    assert!(
        !suggestions.is_empty(),
        "vit-tiny under `latency` has phases a standard policy beats"
    );
    for suggestion in suggestions.iter().take(3) {
        assert!(suggestion.saving_cycles > 0);
        assert_eq!(
            suggestion.saving_cycles,
            (suggestion.current_cycles - suggestion.predicted_cycles) * suggestion.executions
        );
        let phase = session.phase(&suggestion.phase).expect("the phase");
        let cost = |phase: &superstep::session::Phase<'_>| {
            u64::from(phase.figures().expect("figures").horizon)
                + phase.patches().expect("patches").cycles()
        };
        assert_eq!(cost(&phase), suggestion.current_cycles);
        // Apply it with --set, rebuild, and read the phase again.
        let set = suggestion.set.as_str();
        assert!(set.starts_with("schedule.override."));
        let applied = built(&[set]);
        let phase = applied.phase(&suggestion.phase).expect("the phase");
        assert_eq!(phase.policy().policy, suggestion.policy);
        assert_eq!(cost(&phase), suggestion.predicted_cycles, "{set}");
    }
}

/// The step of `key` in `records` (objects with `key` and `field`).
fn step_of(records: &serde_json::Value, key: &str, field: &str) -> u64 {
    records
        .as_array()
        .expect("records")
        .iter()
        .find(|record| record["key"] == key)
        .unwrap_or_else(|| panic!("no record of {key}: {records}"))[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} has no {field}"))
}

fn succeeded(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One phase, named by its key, has the same step in `phases`, report.json,
/// report.html, `packing`, `sweep`, `capture` and `bench-snapshot`, and each
/// `--phase` takes that step as well as the key; anything else is exit 2
/// naming the valid steps.
#[test]
fn one_phase_has_one_step_in_every_command() {
    const KEY: &str = "layer.attn.split_q#0";
    let folder = scratch("phases", "one-step");
    let outputs = format!("outputs.directory={}", folder.display());
    let with_query = |command: &str, rest: &[&str]| {
        let mut arguments = vec![command, TINY, "--no-cache", "--set", &outputs];
        arguments.extend_from_slice(rest);
        superstep(&arguments)
    };
    let lines: serde_json::Value =
        serde_json::from_str(&succeeded(&with_query("phases", &["--json"]))).expect("json");
    let step = step_of(&lines, KEY, "step");
    let text = step.to_string();

    succeeded(&with_query("build", &["-q", "--suggestions", "0"]));
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(folder.join("vit-tiny").join("report.json")).expect("report.json"),
    )
    .expect("json");
    assert_eq!(step_of(&report["back"]["phases"], KEY, "step"), step);
    let html = std::fs::read_to_string(folder.join("vit-tiny").join("report.html")).expect("html");
    let row = &html[html.find(&format!("data-key=\"{KEY}\"")).expect("row")..];
    let tag = &row[..row.find('>').expect("tag end")];
    assert!(tag.contains(&format!("data-step=\"{step}\"")), "{tag}");

    for selector in [KEY, text.as_str()] {
        let packing: serde_json::Value = serde_json::from_str(&succeeded(&with_query(
            "packing",
            &["--phase", selector, "--json"],
        )))
        .expect("json");
        assert_eq!(step_of(&packing["phases"], KEY, "step"), step, "{selector}");
        assert_eq!(packing["phases"].as_array().map(Vec::len), Some(1));
    }

    succeeded(&with_query("sweep", &["--config", "latency/word32"]));
    let results =
        std::fs::read_to_string(folder.join("vit-tiny").join("sweep").join("results.csv"))
            .expect("results.csv");
    assert!(results.starts_with("step,phase,"), "{results}");
    assert!(
        results.contains(&format!("\n{step},{KEY},")),
        "{KEY} is step {step}: {results}"
    );

    let snapshot = folder.join("snapshot.json");
    let snapshot_path = snapshot.to_str().expect("utf-8");
    succeeded(&with_query("capture", &["-o", snapshot_path]));
    let captured: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&snapshot).expect("snapshot")).expect("json");
    assert_eq!(step_of(&captured["phases"], KEY, "phase"), step);
    for selector in [KEY, text.as_str()] {
        let records = folder.join("bench.json");
        let output = superstep(&[
            "bench-snapshot",
            snapshot_path,
            "--phase",
            selector,
            "--iterations",
            "1",
            "--json",
            records.to_str().expect("utf-8"),
        ]);
        let printed = succeeded(&output);
        assert!(printed.contains(KEY), "the key beside the step: {printed}");
        let records: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&records).expect("records")).expect("json");
        assert_eq!(step_of(&records, KEY, "phase"), step, "{selector}");
    }

    // Anything else is exit 2, naming the valid steps and the nearest keys.
    let exchange_steps: Vec<String> = lines
        .as_array()
        .expect("lines")
        .iter()
        .filter(|line| line["kind"] == "exchange")
        .map(|line| line["step"].to_string())
        .collect();
    let compute_step = lines
        .as_array()
        .expect("lines")
        .iter()
        .find(|line| line["kind"] != "exchange")
        .expect("a compute step")["step"]
        .to_string();
    for wrong in ["layer.attn.split_k#7", "99999", compute_step.as_str()] {
        let output = with_query("packing", &["--phase", wrong]);
        let error = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{wrong}: {error}");
        assert!(
            error.contains(&format!(
                "exchange phases are steps {}",
                exchange_steps[..3].join(", ")
            )),
            "{wrong}: {error}"
        );
        let output = superstep(&["bench-snapshot", snapshot_path, "--phase", wrong]);
        let error = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{wrong}: {error}");
        assert!(
            error.contains(&format!(
                "phases have ids {}",
                exchange_steps[..3].join(", ")
            )),
            "{wrong}: {error}"
        );
    }
    let output = with_query("packing", &["--phase", "layer.attn.split_k#7"]);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("nearest: layer.attn.split_q#0"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::remove_dir_all(&folder).ok();
}

/// An override to a concrete order at width `auto` is placed under the
/// pairings `auto` tries for that order and keeps the shortest: on the
/// tiny build widened to 512 (so that the layer norms' broadcasts move
/// pieces long enough to pair) with every phase overridden to `matching`,
/// each phase gets the horizon of the best `matching` candidate in
/// `auto`'s own table, paired when a paired candidate is the shortest,
/// and some phase is paired so.
#[test]
fn an_override_at_width_auto_keeps_the_pairing_auto_finds_for_its_order() {
    use superstep::schedule::pairing::Pairing;
    use superstep::schedule::{SchedulePolicy, TransferWidth};
    const WIDE: [&str; 3] = [
        "workload.width=512",
        "workload.mlp=2048",
        "schedule.policy=auto",
    ];
    let automatic = built(&WIDE);
    let keys: Vec<String> = automatic
        .phases()
        .iter()
        .map(|phase| phase.key().to_string())
        .collect();
    let mut sets: Vec<String> = WIDE.iter().map(ToString::to_string).collect();
    sets.extend(
        keys.iter()
            .map(|key| format!("schedule.override.{key}=matching")),
    );
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let overridden = built(&sets);
    let mut paired_phases = 0;
    for key in &keys {
        let figures = automatic
            .phase(key)
            .expect("phase")
            .figures()
            .expect("figures");
        // auto's table for the matching order: one line per pairing
        // (matching is in the first stage, never pruned).
        let matching: Vec<_> = figures
            .candidates
            .iter()
            .filter(|candidate| candidate.policy == SchedulePolicy::Matching)
            .collect();
        assert!(!matching.is_empty(), "{key}: auto tried matching");
        assert!(matching.iter().all(|candidate| !candidate.pruned), "{key}");
        let best = matching
            .iter()
            .min_by_key(|candidate| {
                (
                    candidate.horizon,
                    candidate.max_row_words,
                    candidate.total_row_words,
                )
            })
            .expect("a matching candidate");
        let phase = overridden.phase(key).expect("phase");
        assert_eq!(phase.policy().width.name(), "auto", "{key}: asked auto");
        let chosen = phase.figures().expect("figures");
        assert_eq!(chosen.policy, SchedulePolicy::Matching, "{key}");
        assert_eq!(
            chosen.horizon, best.horizon,
            "{key}: the override's horizon is auto's best for matching ({:?})",
            best.pairing
        );
        let unpaired = matching
            .iter()
            .find(|candidate| candidate.pairing == Pairing::None)
            .expect("matching unpaired");
        if best.horizon < unpaired.horizon {
            assert_eq!(
                chosen.width,
                TransferWidth::Paired64,
                "{key}: pairing is shorter"
            );
            paired_phases += 1;
        }
    }
    assert!(
        paired_phases > 0,
        "some phase of the tiny build is shorter paired under matching"
    );
}
