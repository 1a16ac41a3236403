//! Every integration test in one binary, as rust-analyzer and ruff keep
//! theirs: one test crate compiled and linked once instead of one per file.
//! Each file under `tests/` is a module here, named as before:
//! `cargo test --test suite cli::` runs the tests of `tests/cli.rs`, and
//! `cargo test --release --test suite package_sim:: -- --ignored` the long
//! ones of `tests/package_sim.rs`.

mod common;
mod fidelity;
#[path = "import_graph.rs"]
mod import_graph;
#[path = "remote/servers.rs"]
#[allow(dead_code)]
mod servers;

#[path = "architecture.rs"]
mod architecture;
#[path = "audit.rs"]
mod audit;
#[path = "cache.rs"]
mod cache;
#[path = "calibration.rs"]
mod calibration;
#[path = "capacity.rs"]
mod capacity;
#[path = "checkpoint_ranges.rs"]
mod checkpoint_ranges;
#[path = "cli.rs"]
mod cli;
#[path = "compute.rs"]
mod compute;
#[path = "cost_model.rs"]
mod cost_model;
#[path = "diff.rs"]
mod diff;
#[path = "files.rs"]
mod files;
#[path = "fit_error.rs"]
mod fit_error;
#[path = "fp8_scale.rs"]
mod fp8_scale;
#[path = "fusion.rs"]
mod fusion;
#[path = "fuzz.rs"]
mod fuzz;
#[path = "fuzz_cache.rs"]
mod fuzz_cache;
#[path = "fuzz_package.rs"]
mod fuzz_package;
#[path = "hardening.rs"]
mod hardening;
#[path = "html_report.rs"]
mod html_report;
#[path = "incremental.rs"]
mod incremental;
#[path = "numerics.rs"]
mod numerics;
#[path = "outputs.rs"]
mod outputs;
#[path = "package.rs"]
mod package;
#[path = "package_sim.rs"]
mod package_sim;
#[path = "packing.rs"]
mod packing;
#[path = "padding.rs"]
mod padding;
#[path = "phases.rs"]
mod phases;
#[path = "placement_key.rs"]
mod placement_key;
#[path = "profile_trace.rs"]
mod profile_trace;
#[path = "pruning.rs"]
mod pruning;
#[path = "record.rs"]
mod record;
#[path = "record_cli.rs"]
mod record_cli;
#[path = "remote_cache.rs"]
mod remote_cache;
#[path = "remote_trust.rs"]
mod remote_trust;
#[path = "replay.rs"]
mod replay;
#[path = "searched_layouts.rs"]
mod searched_layouts;
#[path = "session_build.rs"]
mod session_build;
#[path = "sharded_search.rs"]
mod sharded_search;
#[path = "signed_cache.rs"]
mod signed_cache;
#[path = "snapshot.rs"]
mod snapshot;
#[path = "snapshots.rs"]
mod snapshots;
#[path = "sweep.rs"]
mod sweep;
#[path = "validators.rs"]
mod validators;
#[path = "watch.rs"]
mod watch;
#[path = "why.rs"]
mod why;
