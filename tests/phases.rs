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
                >= detail["lower_bound"].as_u64().expect("bound")
        );
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
    let suggestions = session.suggestions(None).expect("suggestions");
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
        assert_eq!(phase.policy().policy.to_string(), suggestion.policy);
        assert_eq!(cost(&phase), suggestion.predicted_cycles, "{set}");
    }
}
