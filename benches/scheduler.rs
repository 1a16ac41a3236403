//! The exchange scheduler on the largest phases of a SigLIP so400m capture
//! (27 layers, 1,472 tiles): setup builds the default query, captures it as
//! a schema-4 snapshot, parses and imports the snapshot (the problems the
//! bench schedules are the imported ones, identical to the build's), then
//! measures `schedule` (automatic width) under every candidate order of the
//! `auto` policy, and under `auto` itself, on the phase with the most
//! transfers and on the phase with the most destinations.
//!
//! `cargo bench --bench scheduler`

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use superstep::build_file::TransferWidth;
use superstep::build_file::load_query;
use superstep::build_file::validate::DEFAULT_POLICY;
use superstep::schedule::candidates::{FIRST_STAGE, SECOND_STAGE, THIRD_STAGE};
use superstep::schedule::schedule;
use superstep::session::Session;
use superstep::snapshot::{PhaseSnapshot, Snapshot, capture_session, import_snapshot, snapshot_of};

fn imported_phases() -> Vec<PhaseSnapshot> {
    let query = load_query(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/queries/siglip-so400m.toml"
        )),
        &[],
    )
    .expect("query");
    let mut session = Session::new(&query);
    session.build().expect("build");
    let captured = capture_session(&session).expect("capture");
    let bytes = snapshot_of(&captured).expect("snapshot").to_bytes();
    drop(captured);
    let snapshot = Snapshot::from_slice(&bytes, "siglip capture").expect("parses");
    import_snapshot(&snapshot).expect("imports")
}

fn scheduler(criterion: &mut Criterion) {
    let phases = imported_phases();
    let by_transfers = phases
        .iter()
        .max_by_key(|phase| (phase.problem.pieces(), phase.problem.receives()))
        .expect("phases");
    let by_destinations = phases
        .iter()
        .max_by_key(|phase| (phase.problem.receives(), phase.problem.pieces()))
        .expect("phases");
    let mut group = criterion.benchmark_group("scheduler");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(6));
    for (label, phase) in [
        ("most-transfers", by_transfers),
        ("most-destinations", by_destinations),
    ] {
        let name = format!(
            "siglip-so400m-27/{label}/phase-{}/{}-transfers-{}-destinations",
            phase.phase,
            phase.problem.pieces(),
            phase.problem.receives()
        );
        let policies = FIRST_STAGE
            .iter()
            .chain(&SECOND_STAGE)
            .chain(&THIRD_STAGE)
            .chain(&[DEFAULT_POLICY]);
        for &policy in policies {
            group.bench_function(format!("{name}/{policy}"), |bencher| {
                bencher.iter(|| {
                    black_box(
                        schedule(&phase.problem, policy, TransferWidth::Auto)
                            .expect("schedules")
                            .horizon,
                    )
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, scheduler);
criterion_main!(benches);
