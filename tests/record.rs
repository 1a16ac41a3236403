//! Per-phase records (what `superstep snapshot` writes) of the tiny builds
//! and of two-layer builds of the shipped models, pinned stage by stage
//! under `snapshots/` (`cargo insta review` shows a change as a diff of
//! the stage it moved), and the promise that makes them reviewable: a
//! change of one phase's scheduling input changes that phase's file and the
//! program file, nothing else.

use crate::common;

use std::collections::BTreeSet;

use common::{query, scratch};
use superstep::build_file::BuildQuery;
use superstep::record::folder;
use superstep::record::{Detail, FileKind, Record, Stage, file_stem, record};
use superstep::session::{Session, StepKind};

fn built(query: &BuildQuery) -> Session {
    let mut session = Session::new(query);
    session.build().expect("build");
    session
}

/// The record of `session`, checked against the session's own lists: one
/// exchange file per phase and one compute file per compute step, in
/// program order, each named by its key.
fn checked_record(session: &Session, query: &BuildQuery) -> Record {
    let made = record(session, query, Detail::Summary).expect("record");
    let phases: Vec<String> = session
        .phases()
        .iter()
        .map(|phase| phase.key().to_string())
        .collect();
    let compute: Vec<String> = session
        .profile()
        .expect("profile")
        .entries
        .iter()
        .filter(|entry| entry.kind != StepKind::Exchange)
        .map(|entry| entry.key.clone())
        .collect();
    let of_kind = |kind: FileKind| -> Vec<String> {
        made.files
            .iter()
            .filter(|file| file.kind == kind)
            .map(|file| file.key.clone())
            .collect()
    };
    assert_eq!(of_kind(FileKind::Exchange), phases);
    assert_eq!(of_kind(FileKind::Compute), compute);
    assert_eq!(of_kind(FileKind::Program), vec!["program".to_string()]);
    for file in &made.files {
        let stem = file_stem(&file.key);
        assert!(file.path.ends_with(&format!("{stem}.txt")), "{}", file.path);
        assert!(file.text.starts_with(&made.identity.header()));
    }
    made
}

fn stage_snapshots(name: &str, file: &str, sets: &[&str]) {
    let query = query(file, sets);
    let session = built(&query);
    let made = checked_record(&session, &query);
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
        prepend_module_to_snapshot => false,
    }, {
        for stage in Stage::ALL {
            let view = made.stage_view(stage);
            assert!(!view.is_empty(), "{name}: no {} sections", stage.name());
            insta::assert_snapshot!(format!("{name}_stage_{}", stage.name()), view);
        }
    });
}

#[test]
fn vit_tiny_stages() {
    stage_snapshots("vit_tiny", "queries/vit-tiny.toml", &[]);
}

#[test]
fn pe_style_tiny_stages() {
    stage_snapshots(
        "pe_style_tiny",
        "queries/vit-tiny.toml",
        &[
            "workload.rotary=true",
            "workload.pooling=attention",
            "workload.pooling_heads=2",
            "workload.projection=32",
            "workload.pre_norm=true",
            "workload.gelu=erf",
            "workload.fuse_qkv=false",
        ],
    );
}

#[test]
fn key_split_attention_stages() {
    stage_snapshots(
        "key_split_attention",
        "queries/vit-tiny.toml",
        &[
            "workload.patches=256",
            "workload.heads=2",
            "workload.width=128",
            "workload.mlp=256",
            "machine.tiles=64",
        ],
    );
}

#[test]
fn vit_tiny_batch2_flash_f16_stages() {
    stage_snapshots(
        "vit_tiny_batch2_flash_f16",
        "queries/vit-tiny.toml",
        &[
            "workload.batch=2",
            "workload.attention=flash",
            "planning.accumulation=f16",
        ],
    );
}

#[test]
fn siglip_two_layers_stages() {
    stage_snapshots(
        "siglip_2_layers",
        "queries/siglip-so400m.toml",
        &["workload.layers=2"],
    );
}

#[test]
fn pe_core_two_layers_stages() {
    stage_snapshots(
        "pe_core_2_layers",
        "queries/pe-core-l14.toml",
        &["workload.layers=2"],
    );
}

#[test]
fn vit_b16_two_layers_stages() {
    stage_snapshots(
        "vit_b16_2_layers",
        "queries/vit-b16.toml",
        &["workload.layers=2"],
    );
}

/// The paths whose text differs between two records of one build.
fn differing(first: &Record, second: &Record) -> BTreeSet<String> {
    let paths: BTreeSet<&String> = first
        .files
        .iter()
        .chain(&second.files)
        .map(|file| &file.path)
        .collect();
    paths
        .into_iter()
        .filter(|path| {
            let text = |record: &Record| {
                record
                    .files
                    .iter()
                    .find(|file| &file.path == *path)
                    .map(|file| file.text.clone())
            };
            text(first) != text(second)
        })
        .cloned()
        .collect()
}

/// One phase's policy overridden: that phase's file and the program file
/// change, every other file keeps its bytes; the folder comparison says
/// the same, and names the override and the moved figures.
#[test]
fn one_phase_override_changes_that_phase_file_and_the_program_file() {
    const PHASE: &str = "layer.attn.split_q#0";
    let base = query("queries/vit-tiny.toml", &[]);
    let mut session = built(&base);
    let before = checked_record(&session, &base);
    let folder_path = scratch("record", "one-phase");
    let stored = folder::read(&folder_path).expect("empty folder");
    let comparison = folder::compare(&before, &stored);
    assert_eq!(comparison.added.len(), before.files.len());
    folder::apply(&folder_path, &before, &comparison).expect("writes");

    let set = format!("schedule.override.{PHASE}=B64");
    let edited = query("queries/vit-tiny.toml", &[set.as_str()]);
    session.update(&edited);
    session.build().expect("rebuild");
    let after = checked_record(&session, &edited);
    let expected: BTreeSet<String> = [
        "program.txt".to_string(),
        format!("exchange/{}.txt", file_stem(PHASE)),
    ]
    .into();
    assert_eq!(differing(&before, &after), expected);

    let comparison = folder::compare(&after, &folder::read(&folder_path).expect("reads"));
    let changed: BTreeSet<String> = comparison
        .changed
        .iter()
        .map(|change| change.path.clone())
        .collect();
    assert_eq!(changed, expected);
    assert!(comparison.added.is_empty() && comparison.removed.is_empty());
    assert_eq!(comparison.unchanged, before.files.len() - 2);
    let phase_change = comparison
        .changed
        .iter()
        .find(|change| change.kind == FileKind::Exchange)
        .expect("the phase's change");
    assert!(
        phase_change
            .items
            .iter()
            .any(|item| item.starts_with("schedule policy latency (default) -> B64 (override)")),
        "{:?}",
        phase_change.items
    );
    let program_change = comparison
        .changed
        .iter()
        .find(|change| change.kind == FileKind::Program)
        .expect("the program's change");
    assert!(
        program_change
            .items
            .iter()
            .any(|item| item == &format!("build schedule.override.{PHASE} added")),
        "{:?}",
        program_change.items
    );
    let _ = std::fs::remove_dir_all(&folder_path);
}

/// Full detail holds one line per scheduled piece and the row words.
#[test]
fn full_detail_lists_every_piece_and_the_row_words() {
    let tiny = query("queries/vit-tiny.toml", &["workload.layers=1"]);
    let session = built(&tiny);
    let full = record(&session, &tiny, Detail::Full).expect("full record");
    let phase = session.phases()[0];
    let problem = phase.problem().expect("problem");
    let file = full
        .files
        .iter()
        .find(|file| file.key == phase.key())
        .expect("first phase file");
    let pieces = file
        .text
        .lines()
        .filter(|line| line.starts_with("piece "))
        .count();
    assert_eq!(pieces, problem.pieces());
    assert!(file.text.contains("[row words]"));
}
