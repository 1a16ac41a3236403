//! Memory classes and capacity: weight storage that only a broadcast reads
//! is ordinary (Standard) memory, matrix-unit operands stay interleaved, and
//! SigLIP so400m at batch 2 places and passes the placement checker.

mod common;

use common::query;
use superstep::driver::Session;
use superstep::layout::format::MemoryClass;
use superstep::model::graph::ValueKind;
use superstep::place::check_placement;
use superstep::queries::backend::placement;
use superstep::queries::phases::phase_groups;
use superstep::target::memory::{LOADABLE_LIMIT, TILE_BASE_ADDRESS};

/// Broadcast weights' storage is Standard; the operands their broadcasts
/// make (what the matrix kernels read) are Interleaved.
#[test]
fn broadcast_weight_storage_is_ordinary_memory() {
    let session = Session::new(&query(
        "queries/siglip-so400m.toml",
        &["workload.layers=1", "workload.batch=2"],
    ));
    let layouts = session.layouts().expect("layouts");
    let mut broadcast_storage = 0;
    for op in &layouts.ops {
        if !op.name.ends_with(".weight.broadcast") {
            continue;
        }
        let storage = layouts.value(op.inputs[0]);
        let operand = layouts.value(op.output);
        assert!(
            matches!(storage.kind, ValueKind::Weight { .. }),
            "{}",
            op.name
        );
        assert_eq!(storage.format.class, MemoryClass::Standard, "{}", op.name);
        assert_eq!(
            operand.format.class,
            MemoryClass::Interleaved,
            "{}",
            op.name
        );
        broadcast_storage += 1;
    }
    assert!(broadcast_storage > 0);
}

#[test]
#[ignore = "SigLIP so400m at batch 2 on 1,472 tiles: run with --release -- --ignored"]
fn siglip_batch_two_places_and_passes_the_placement_checker() {
    let mut session = Session::new(&query(
        "queries/siglip-so400m.toml",
        &["workload.batch=2", "outputs.package=false"],
    ));
    let outcome = session.build().expect("SigLIP batch 2 builds and places");
    let back = outcome.back.expect("back half");
    let program = session.low_program().expect("program");
    let placed = placement(&session.db, session.inputs)
        .clone()
        .expect("placement");
    let groups = phase_groups(&session.db, session.inputs)
        .clone()
        .expect("phase groups");
    let violations = check_placement(&program, &groups.steps, &placed);
    assert!(
        violations.is_empty(),
        "{:?}",
        &violations[..violations.len().min(10)]
    );
    let loadable = LOADABLE_LIMIT - TILE_BASE_ADDRESS;
    let fullest = placed
        .high_water_per_tile
        .iter()
        .max()
        .copied()
        .unwrap_or(0);
    println!(
        "SigLIP batch 2: {} cycles; fullest tile's high water {fullest} B of {loadable} loadable; peak {} B on tile {}",
        back.cycles, placed.max_peak.1, placed.max_peak.0
    );
    assert!(fullest <= loadable);
}
