//! Snapshots of per-op and per-exchange summaries of the small builds
//! (under `snapshots/`). A change in planning or expansion shows up here as a
//! reviewable diff.

use crate::common;

use std::sync::Arc;

use common::query;
use superstep::expand::expansion::OpExpansion;
use superstep::report::{exchange_summaries, op_summaries};
use superstep::session::Session;

fn snapshot(name: &str, file: &str, sets: &[&str]) {
    let mut session = Session::new(&query(file, sets));
    session.build().expect("build");
    let layouts = session.layouts().expect("layouts");
    let program = session.low_program().expect("program");
    let expansions: Vec<Arc<OpExpansion>> = session.op_expansions().expect("expansions");
    let references: Vec<&OpExpansion> = expansions
        .iter()
        .map(|expansion| expansion.as_ref())
        .collect();
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_yaml_snapshot!(format!("{name}_ops"), op_summaries(&layouts, &references));
        insta::assert_yaml_snapshot!(format!("{name}_exchanges"), exchange_summaries(&program));
    });
}

#[test]
fn vit_tiny() {
    snapshot("vit_tiny", "queries/vit-tiny.toml", &[]);
}

#[test]
fn vit_tiny_batch2_flash_f16() {
    snapshot(
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
fn pe_style_tiny() {
    snapshot(
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
fn key_split_attention() {
    snapshot(
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
