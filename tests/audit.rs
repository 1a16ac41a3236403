//! `superstep audit copies`: on the tiny ViT the command runs, its boundary
//! count equals an independent count over the low program's steps (copy and
//! fill steps standing between two exchanges of one step sequence), the
//! session's records agree with the table and `--json` carries every
//! documented field; output is deterministic; bad flags exit 2 naming the
//! flag and `--help` explains each.

use crate::common;

use common::{query, superstep};
use superstep::expand::program::Step;
use superstep::session::Session;
use superstep::studies::copy_audit::{copy_audit, copy_audit_across_operators};

const TINY: &str = "queries/vit-tiny.toml";

/// (boundaries, copies, fills) counted straight from the steps.
fn count(steps: &[Step], totals: &mut (u32, u32, u32)) {
    let mut after_exchange = false;
    let mut pending: Option<(u32, u32)> = None;
    for step in steps {
        match step {
            Step::Exchange { .. } => {
                if let Some((copies, fills)) = pending.take() {
                    totals.0 += 1;
                    totals.1 += copies;
                    totals.2 += fills;
                }
                after_exchange = true;
            }
            Step::Copies { copies, .. } if after_exchange => {
                let entry = pending.get_or_insert((0, 0));
                entry.0 += copies.len() as u32;
            }
            Step::Fills { fills, .. } if after_exchange => {
                let entry = pending.get_or_insert((0, 0));
                entry.1 += fills.len() as u32;
            }
            Step::Copies { .. } | Step::Fills { .. } => {}
            Step::Repeat { body, .. } => {
                count(body, totals);
                after_exchange = false;
                pending = None;
            }
            Step::Kernels { .. } | Step::Checkpoint { .. } => {
                after_exchange = false;
                pending = None;
            }
        }
    }
}

fn run(arguments: &[&str]) -> (String, String) {
    let output = superstep(arguments);
    assert!(
        output.status.success(),
        "{arguments:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        String::from_utf8(output.stdout).expect("UTF-8"),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_tiny_vit_audit_counts_every_boundary_and_prints_its_records() {
    let mut session = Session::new(&query(TINY, &[]));
    session.build_low_program().expect("first half");
    let program = session.low_program().expect("low program");
    let mut expected = (0, 0, 0);
    count(&program.steps, &mut expected);
    assert!(expected.0 > 0, "the tiny ViT has copy boundaries");
    let audit = copy_audit(&session).expect("audit");
    let summary = &audit.summary;
    assert_eq!(
        (summary.boundaries, summary.copies, summary.fills),
        expected
    );
    assert_eq!(audit.boundaries.len() as u32, expected.0);
    let groups: u32 = audit.boundaries.iter().map(|b| b.groups.len() as u32).sum();
    assert_eq!(summary.groups, groups);
    assert_eq!(
        summary.movable_both + summary.movable_neither + summary.groups,
        summary.movable_before + summary.movable_after + summary.movable_neither * 2,
        "before + after counts both twice and neither never"
    );
    // Every boundary has motion's decision (copy motion is on) and the two
    // agree: motion merges only what the audit finds movable in one piece.
    for boundary in &audit.boundaries {
        let motion = boundary.motion.as_ref().expect("motion decided");
        if motion.outcome == "moved" {
            assert!(boundary.all_before, "{boundary:?}");
        }
        if motion.outcome == "copies" {
            assert!(!boundary.all_before && !boundary.all_after, "{boundary:?}");
        }
    }

    let directory = common::scratch("audit", "tiny");
    let cache = directory.join("cache");
    let cache = cache.to_str().expect("path");
    let (table, _) = run(&["audit", "copies", TINY, "--cache", cache]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "superstep audit copies vit-tiny: {} exchange boundaries",
            expected.0
        )),
        "{table}"
    );
    // Headline, column heads, one line per boundary (every group is movable
    // both ways on the tiny ViT, so no hazard lines follow).
    assert_eq!(lines.len(), 2 + expected.0 as usize, "{table}");
    for boundary in &audit.boundaries {
        let line = lines[2 + boundary.index as usize];
        assert!(line.contains(&boundary.preceding.key), "{line}");
        assert!(line.contains(&boundary.following.key), "{line}");
    }
    let (again, _) = run(&["audit", "copies", TINY, "--cache", cache]);
    assert_eq!(again, table, "deterministic");

    let (json, _) = run(&["audit", "copies", TINY, "--cache", cache, "--json"]);
    let document: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(document["name"], "vit-tiny");
    for field in [
        "boundaries",
        "groups",
        "copies",
        "fills",
        "movable_before",
        "movable_after",
        "movable_both",
        "movable_neither",
        "merged",
    ] {
        assert!(document["summary"][field].is_u64(), "summary.{field}");
    }
    assert_eq!(document["summary"]["boundaries"], expected.0);
    let records = document["boundaries"].as_array().expect("records");
    assert_eq!(records.len() as u32, expected.0);
    for (index, record) in records.iter().enumerate() {
        assert_eq!(record["record"], "COPY_BOUNDARY");
        assert_eq!(record["index"], index);
        for field in [
            "in_repeat",
            "copies",
            "fills",
            "movable_before",
            "movable_after",
            "movable_both",
            "movable_neither",
            "all_before",
            "all_after",
        ] {
            assert!(!record[field].is_null(), "{field}: {record}");
        }
        for side in ["preceding", "following"] {
            assert!(record[side]["key"].is_string());
            assert!(record[side]["step_path"].is_array());
            assert!(record[side]["transfers"].is_u64());
        }
        for group in record["groups"].as_array().expect("groups") {
            for field in [
                "index",
                "step_path",
                "kind",
                "op",
                "items",
                "tiles",
                "movable",
            ] {
                assert!(!group[field].is_null(), "{field}: {group}");
            }
            assert!(
                ["before", "after", "both", "neither"]
                    .contains(&group["movable"].as_str().expect("movable"))
            );
            assert!(group.get("before").is_some() && group.get("after").is_some());
        }
        let motion = &record["motion"];
        for field in [
            "outcome",
            "merged",
            "preceding",
            "copies",
            "fills",
            "decision",
        ] {
            assert!(!motion[field].is_null(), "motion.{field}: {record}");
        }
    }
    // One boundary: the same record alone.
    let (one, _) = run(&[
        "audit",
        "copies",
        TINY,
        "--cache",
        cache,
        "--json",
        "--boundary",
        "1",
    ]);
    let one: serde_json::Value = serde_json::from_str(&one).expect("JSON");
    assert_eq!(one["boundaries"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["boundaries"][0], records[1]);
    let (table, _) = run(&["audit", "copies", TINY, "--cache", cache, "--boundary", "1"]);
    assert!(table.contains("boundary 1 group 0"), "{table}");
    // Without copy motion there is no decision to show.
    let (off, _) = run(&[
        "audit",
        "copies",
        TINY,
        "--cache",
        cache,
        "--set",
        "planning.copy_motion=false",
    ]);
    assert!(off.contains("copy motion off"), "{off}");
    // Cross-operator motion, run for the audit: it merges where the audit
    // finds a boundary's groups movable in one piece (nothing else stops it
    // on the tiny ViT), and moves them before when they may go before.
    let across = copy_audit_across_operators(&session).expect("audit across operators");
    assert_eq!(across.summary.boundaries, expected.0);
    for boundary in &across.boundaries {
        let motion = boundary.motion.as_ref().expect("decided");
        assert_eq!(
            motion.merged,
            boundary.all_before || boundary.all_after,
            "{boundary:?}"
        );
        if boundary.all_before {
            assert_eq!(motion.outcome, "moved", "{boundary:?}");
        }
    }
    let (table, _) = run(&[
        "audit", "copies", TINY, "--cache", cache, "--motion", "across",
    ]);
    assert!(
        table.lines().next().expect("headline").ends_with(&format!(
            "copy motion merged {} of them",
            across.summary.merged
        )),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn bad_flags_exit_2_naming_the_flag_and_help_explains_every_flag() {
    for (arguments, flag) in [
        (
            &["audit", "copies", TINY, "--boundary", "999"][..],
            "--boundary",
        ),
        (
            &["audit", "copies", TINY, "--boundary=-1"][..],
            "--boundary",
        ),
        (
            &["audit", "copies", TINY, "--boundary", "many"][..],
            "--boundary",
        ),
        (&["audit", "copies", TINY, "--jsn"][..], "--jsn"),
        (
            &["audit", "copies", TINY, "--motion", "sideways"][..],
            "--motion",
        ),
        (
            &["audit", "copies", TINY, "--set", "workload.layers=x"][..],
            "workload.layers",
        ),
    ] {
        let output = superstep(arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(flag), "{arguments:?}: {stderr}");
    }
    let help = superstep(&["audit", "copies", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--json",
        "--boundary",
        "--motion",
        "--set",
        "--cache",
        "--no-cache",
        "QUERY",
    ] {
        assert!(text.contains(flag), "{flag}: {text}");
    }
    let help = superstep(&["audit", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("copies"));
}

/// The default SigLIP build on two layers (first half only; every phase of
/// the layer body, with a Repeat): the audit's boundaries and copies equal
/// the independent count.
#[test]
fn the_siglip_audit_counts_every_boundary() {
    let mut session = Session::new(&query("queries/siglip-so400m.toml", &["workload.layers=2"]));
    session.build_low_program().expect("first half");
    let program = session.low_program().expect("low program");
    let mut expected = (0, 0, 0);
    count(&program.steps, &mut expected);
    let audit = copy_audit(&session).expect("audit");
    let summary = &audit.summary;
    assert_eq!(
        (summary.boundaries, summary.copies, summary.fills),
        expected
    );
    assert!(expected.0 > 0);
}
