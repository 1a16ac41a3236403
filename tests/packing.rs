//! `superstep packing` on `queries/vit-tiny.toml` (at B1024) and on
//! hand-written snapshots: every alternative of every phase checked and
//! measured, the copy figures against a recount from the original problem,
//! the original against the build's own figures, `--top` against the
//! endpoint ranking, a warm second study that schedules nothing,
//! byte-identical outputs, the page against the JSON, a snapshot of the
//! build studied alike, a phase that forwards what it receives refused
//! its staging alternatives, and flag errors.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{counts, query, scratch, superstep};
use superstep::cache::PersistentCache;
use superstep::schedule::ExchangeProblem;
use superstep::session::Session;
use superstep::session::TrackedQuery;
use superstep::studies::packing::{Alternative, AlternativeOutcome, PackingRequest, packing};
use superstep::target::timing::MAX_LOGICAL_TRANSFER_WORDS;

const TINY: &str = "queries/vit-tiny.toml";
const POLICY: &str = "schedule.policy=B1024";

/// Per tile: bytes sent and bytes received.
fn bytes_per_tile(problem: &ExchangeProblem) -> (Vec<u64>, Vec<u64>) {
    let mut sent = vec![0u64; problem.tiles as usize];
    let mut received = vec![0u64; problem.tiles as usize];
    for piece in 0..problem.pieces() {
        let bytes = u64::from(problem.words[piece]) * 4;
        sent[problem.source_tile[piece] as usize] += bytes;
        for receive in problem.receives_of(piece) {
            received[problem.destination_tile[receive] as usize] += bytes;
        }
    }
    (sent, received)
}

fn ideal_cycles(bytes: &[u64]) -> u64 {
    bytes
        .iter()
        .map(|bytes| bytes.div_ceil(8))
        .max()
        .unwrap_or(0)
}

/// Words per route (source tile, recipient tiles in order).
fn routes(problem: &ExchangeProblem) -> BTreeMap<(u32, Vec<u32>), u64> {
    let mut routes = BTreeMap::new();
    for piece in 0..problem.pieces() {
        let recipients = problem.destination_tile[problem.receives_of(piece)].to_vec();
        *routes
            .entry((problem.source_tile[piece], recipients))
            .or_insert(0) += u64::from(problem.words[piece]);
    }
    routes
}

#[test]
fn every_alternative_is_checked_and_measured_and_its_copies_recount() {
    let mut session = Session::new(&query(TINY, &[POLICY]));
    session.build().expect("build");
    let packing = packing(&session, &PackingRequest::default()).expect("packing");
    let phases = session.phases();
    assert_eq!(packing.phases.len(), phases.len());
    assert!(packing.phases.len() > 10);
    let mut joined = 0;
    for (studied, phase) in packing.phases.iter().zip(&phases) {
        assert_eq!(studied.key, phase.key());
        let figures = phase.figures().expect("figures");
        let original = &studied.study.original;
        // The original is the phase as built (same problem, same policy).
        assert_eq!(original.horizon, figures.horizon, "{}", studied.key);
        assert_eq!(original.max_row_bytes, figures.max_row_bytes);
        assert_eq!(original.total_row_bytes, figures.total_row_bytes);
        assert_eq!(original.transfers, figures.transfers);
        let problem = phase.problem().expect("problem");
        assert!(
            studied.study.independence.is_independent(),
            "{}",
            studied.key
        );
        let (sent, received) = bytes_per_tile(problem);
        let combined = sent
            .iter()
            .zip(&received)
            .map(|(sent, received)| sent + received)
            .max()
            .unwrap_or(0);
        assert_eq!(studied.study.alternatives.len(), Alternative::ALL.len());
        for alternative in &studied.study.alternatives {
            let AlternativeOutcome::Measured { exchange, copies } = &alternative.outcome else {
                panic!("{}: {:?}", studied.key, alternative.outcome);
            };
            assert!(exchange.horizon >= exchange.endpoint_bound);
            // The payload is the same, so the endpoint bound is too.
            assert_eq!(exchange.endpoint_bound, original.endpoint_bound);
            assert!(exchange.receives >= exchange.transfers);
            let (source, destination) = match alternative.alternative {
                Alternative::SourcePacking => (ideal_cycles(&sent), 0),
                Alternative::ReceiverStaging => (0, ideal_cycles(&received)),
                Alternative::Both => (ideal_cycles(&sent), ideal_cycles(&received)),
                Alternative::CoalescedPrefix => (0, 0),
            };
            assert_eq!(copies.source_copy_cycles, source, "{}", studied.key);
            assert_eq!(copies.destination_copy_cycles, destination);
            assert_eq!(copies.added_copy_cycles, source + destination);
            match alternative.alternative {
                Alternative::Both => {
                    // One run per route, split only at the transfer limit.
                    let routes = routes(problem);
                    let least: u64 = routes
                        .values()
                        .map(|words| words.div_ceil(u64::from(MAX_LOGICAL_TRANSFER_WORDS)))
                        .sum();
                    assert!(exchange.transfers >= least);
                    assert!(exchange.transfers <= 2 * least);
                    assert_eq!(copies.staging_bytes_max, combined);
                    if exchange.transfers < original.transfers {
                        joined += 1;
                    }
                }
                Alternative::CoalescedPrefix => {
                    assert!(exchange.transfers <= original.transfers);
                    assert_eq!(copies.staging_bytes_max, 0);
                    assert_eq!(copies.copy_runs, 0);
                }
                _ => assert!(exchange.transfers <= original.transfers),
            }
        }
    }
    assert!(
        joined > 3,
        "staging both ends joins pieces somewhere ({joined})"
    );
}

/// Runs `superstep packing` with `extra` arguments; returns stdout.
fn packing_command(arguments: &[&str]) -> String {
    let output = superstep(arguments);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json")).expect("parses")
}

#[test]
fn top_writes_the_most_fragmented_phases_deterministically_and_the_page_agrees() {
    let directory = scratch("packing", "top");
    let output = directory.join("out");
    let output = output.to_str().expect("path");
    let cache = directory.join("cache");
    let cache = cache.to_str().expect("path");
    let arguments = [
        "packing", TINY, "--top", "2", "--policy", "B1024", "--output", output, "--cache", cache,
    ];
    let first = packing_command(&arguments);
    let phase_count = {
        let mut session = Session::new(&query(TINY, &[POLICY]));
        session.build_low_program().expect("front");
        session.phases().len()
    };
    assert!(
        first.contains(&format!(
            "2 of the build's {phase_count} exchange phases (the top 2 by endpoint fragmentation)"
        )),
        "{first}"
    );
    let json_path = Path::new(output).join("packing.json");
    let html_path = Path::new(output).join("packing.html");
    let json = std::fs::read_to_string(&json_path).expect("json");
    let html = std::fs::read_to_string(&html_path).expect("html");
    // The two phases are the two with the most endpoints on one tile.
    let mut session = Session::new(&query(TINY, &[POLICY]));
    session.build_low_program().expect("front");
    let mut ranked: Vec<(u64, usize, String)> = session
        .phases()
        .iter()
        .map(|phase| {
            let problem = phase.problem().expect("problem");
            let mut endpoints = vec![0u64; problem.tiles as usize];
            for piece in 0..problem.pieces() {
                endpoints[problem.source_tile[piece] as usize] += 1;
                for receive in problem.receives_of(piece) {
                    endpoints[problem.destination_tile[receive] as usize] += 1;
                }
            }
            (
                endpoints.into_iter().max().unwrap_or(0),
                phase.step(),
                phase.key().to_string(),
            )
        })
        .collect();
    ranked.sort_by_key(|(count, index, _)| (std::cmp::Reverse(*count), *index));
    let mut expected: Vec<(usize, String)> = ranked
        .into_iter()
        .take(2)
        .map(|(_, index, key)| (index, key))
        .collect();
    expected.sort();
    let document = read_json(&json_path);
    assert_eq!(document["name"], "vit-tiny");
    assert_eq!(document["config"], "B1024/word32");
    let phases = document["phases"].as_array().expect("phases");
    let found: Vec<(usize, String)> = phases
        .iter()
        .map(|phase| {
            (
                phase["step"].as_u64().expect("step") as usize,
                phase["key"].as_str().expect("key").to_string(),
            )
        })
        .collect();
    assert_eq!(found, expected);
    // Every measured row of the page carries the JSON's figures.
    for phase in phases {
        let key = phase["key"].as_str().expect("key");
        let original = &phase["study"]["original"];
        let row = format!(
            "data-alternative=\"original\" data-transfers=\"{}\" data-horizon=\"{}\" data-max-row-bytes=\"{}\"",
            original["transfers"], original["horizon"], original["max_row_bytes"]
        );
        assert!(html.contains(&row), "{key}: {row}");
        for alternative in phase["study"]["alternatives"]
            .as_array()
            .expect("alternatives")
        {
            let measured = &alternative["outcome"]["Measured"];
            let name = match alternative["alternative"].as_str().expect("name") {
                "SourcePacking" => "source-packing",
                "ReceiverStaging" => "receiver-staging",
                "Both" => "both",
                _ => "coalesced-prefix",
            };
            let row = format!(
                "data-alternative=\"{name}\" data-transfers=\"{}\" data-horizon=\"{}\" \
                 data-max-row-bytes=\"{}\" data-added-copy-cycles=\"{}\"",
                measured["exchange"]["transfers"],
                measured["exchange"]["horizon"],
                measured["exchange"]["max_row_bytes"],
                measured["copies"]["added_copy_cycles"]
            );
            assert!(html.contains(&row), "{key}: {row}");
        }
    }
    // A second run (warm cache) writes the same bytes and prints the same tables.
    let second = packing_command(&arguments);
    assert_eq!(first, second);
    assert_eq!(std::fs::read_to_string(&json_path).expect("json"), json);
    assert_eq!(std::fs::read_to_string(&html_path).expect("html"), html);
}

#[test]
fn a_second_study_in_a_new_session_schedules_nothing() {
    let directory = scratch("packing", "warm");
    let cache = Arc::new(PersistentCache::open(&directory.join("cache"), 1 << 30).expect("cache"));
    let request = PackingRequest {
        top: Some(3),
        ..PackingRequest::default()
    };
    let mut cold = Session::with_cache(&query(TINY, &[POLICY]), Some(cache.clone()));
    cold.build_low_program().expect("front");
    let first = packing(&cold, &request).expect("packing");
    let ran = counts(&cold.take_executions());
    assert!(
        ran.get(&TrackedQuery::Scheduled).copied().unwrap_or(0) >= 3 * 5,
        "{ran:?}"
    );
    let mut warm = Session::with_cache(&query(TINY, &[POLICY]), Some(cache));
    warm.build_low_program().expect("front");
    warm.take_executions();
    let second = packing(&warm, &request).expect("packing");
    assert_eq!(first, second);
    let ran = counts(&warm.take_executions());
    assert_eq!(ran.get(&TrackedQuery::Scheduled), None, "{ran:?}");
    assert_eq!(ran.get(&TrackedQuery::EncodedRows), None, "{ran:?}");
}

#[test]
fn a_snapshot_of_the_build_is_studied_alike() {
    let directory = scratch("packing", "snapshot");
    let file = directory.join("tiny.json");
    let file = file.to_str().expect("path");
    let captured = superstep(&["capture", TINY, "--set", POLICY, "-o", file]);
    assert!(
        captured.status.success(),
        "{}",
        String::from_utf8_lossy(&captured.stderr)
    );
    let output = directory.join("snapshot-out");
    let output = output.to_str().expect("path");
    packing_command(&[
        "packing",
        "--snapshot",
        file,
        "--policy",
        "B1024",
        "--top",
        "3",
        "--output",
        output,
        "--json",
    ]);
    let from_snapshot = read_json(&Path::new(output).join("packing.json"));
    let mut session = Session::new(&query(TINY, &[POLICY]));
    session.build_low_program().expect("front");
    let from_build = packing(
        &session,
        &PackingRequest {
            top: Some(3),
            ..PackingRequest::default()
        },
    )
    .expect("packing");
    let phases = from_snapshot["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 3);
    for (snapshot_phase, build_phase) in phases.iter().zip(&from_build.phases) {
        assert_eq!(snapshot_phase["key"], build_phase.key.as_str());
        let study = serde_json::to_value(&build_phase.study).expect("value");
        assert_eq!(snapshot_phase["study"], study, "{}", build_phase.key);
    }
    // An --output that cannot be a folder is the flag's error: a snapshot
    // has no build file, so the advice names no build-file key.
    let blocker = directory.join("a-file");
    std::fs::write(&blocker, b"x").expect("write");
    let refused = superstep(&[
        "packing",
        "--snapshot",
        file,
        "--output",
        blocker.join("out").to_str().expect("path"),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--output: cannot write outputs"),
        "{stderr}"
    );
    assert!(
        stderr.contains("help: give --output a writable folder"),
        "{stderr}"
    );
    assert!(!stderr.contains("--set"), "{stderr}");
    assert!(!stderr.contains("build file"), "{stderr}");
}

/// Tile 0 sends to tiles 1 and 2; tile 1 forwards what it received to
/// tile 3. A second phase scatters four words 16 bytes apart.
const FORWARDING: &str = r#"{"schema_version": 4, "tile_count": 4, "phases": [
 {"phase": 0, "key": "forward#0", "executions": 3, "transfers": [
   {"source": 0, "source_addresses": [311296], "destinations": [[1, 327680]], "words": 64, "width": "Word32"},
   {"source": 0, "source_addresses": [311552], "destinations": [[2, 327680]], "words": 64, "width": "Word32"},
   {"source": 1, "source_addresses": [327680], "destinations": [[3, 327680]], "words": 64, "width": "Word32"}]},
 {"phase": 1, "key": "scatter#0", "transfers": [
   {"source": 0, "source_addresses": [311296], "destinations": [[1, 327680]], "words": 1, "width": "Word32"},
   {"source": 0, "source_addresses": [311300], "destinations": [[1, 327696]], "words": 1, "width": "Word32"},
   {"source": 0, "source_addresses": [311304], "destinations": [[1, 327712]], "words": 1, "width": "Word32"},
   {"source": 0, "source_addresses": [311308], "destinations": [[1, 327728]], "words": 1, "width": "Word32"}]}]}"#;

#[test]
fn a_phase_that_forwards_what_it_receives_is_refused_staging() {
    let directory = scratch("packing", "forwarding");
    let file = directory.join("forwarding.json");
    std::fs::write(&file, FORWARDING).expect("write");
    let file = file.to_str().expect("path");
    let output = directory.join("out");
    let output = output.to_str().expect("path");
    let text = packing_command(&["packing", "--snapshot", file, "--output", output]);
    assert!(
        text.contains(
            "receiver-staging  refused: 1 of 3 pieces depend on an earlier piece of the phase \
             (1 read what an earlier one writes); the first, piece 2, reads what piece 0 on tile 1"
        ),
        "{text}"
    );
    let document = read_json(&Path::new(output).join("packing.json"));
    let forward = &document["phases"][0]["study"];
    assert_eq!(forward["independence"]["dependent"], 1);
    assert_eq!(forward["independence"]["forwarding"], 1);
    assert_eq!(forward["independence"]["prefix"], 2);
    let outcomes: Vec<&serde_json::Value> = forward["alternatives"]
        .as_array()
        .expect("alternatives")
        .iter()
        .map(|alternative| &alternative["outcome"])
        .collect();
    for refused in &outcomes[..3] {
        assert_eq!(
            refused["Refused"]["Dependent"]["first"]["kind"],
            "ReadAfterWrite"
        );
        assert!(refused.get("Measured").is_none());
    }
    let prefix = &outcomes[3]["Measured"]["exchange"];
    assert_eq!(prefix["transfers"], 3);
    // The scatter phase is independent: receiving contiguously joins its
    // four pieces into one.
    let scatter = &document["phases"][1]["study"]["alternatives"][1]["outcome"]["Measured"];
    assert_eq!(scatter["exchange"]["transfers"], 1);
    assert_eq!(scatter["copies"]["destination_copy_cycles"], 2);
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["packing", TINY, "--phase", "layer.mlp.dwn#0"],
            "--phase layer.mlp.dwn#0: the build has no exchange phase with key or step `layer.mlp.dwn#0`",
        ),
        (&["packing", TINY, "--top", "0"], "--top 0 studies no phase"),
        (&["packing", TINY, "--policy", "S0"], "--policy"),
        (
            &["packing", TINY, "--snapshot", "/tmp/none.json"],
            "drop the build query",
        ),
        (
            &["packing", "--snapshot", "/nonexistent/capture.json"],
            "/nonexistent/capture.json",
        ),
    ];
    for (arguments, expected) in cases {
        let output = superstep(arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{arguments:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let help = superstep(&["packing", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "source-packing",
        "receiver-staging",
        "coalesced-prefix",
        "--snapshot",
        "refused",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}
