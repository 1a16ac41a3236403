//! Pure-core tests of the snapshot importer on hand-written snapshots in the
//! seed system's format: one test per rejection (each names the phase and
//! the transfer), older snapshots without provenance, dependencies over
//! every Repeat address, and the bench on an imported phase.

use super::format::{SCHEMA_VERSION, Snapshot, SnapshotPhase, SnapshotTransfer, SnapshotWidth};
use super::import::{ImportError, import_snapshot};
use super::{BenchOptions, bench_phase, snapshot_of};
use crate::build_file::{SchedulePolicy, TransferWidth};
use crate::schedule::dependencies;
use crate::target::memory::{TILE_BASE_ADDRESS, TILE_END_ADDRESS};

const A: u32 = TILE_BASE_ADDRESS + 0x1000;
const STRIDE: u32 = 0x400;

fn transfer(
    source: u32,
    addresses: &[u32],
    destinations: &[(u32, u32)],
    words: u32,
) -> SnapshotTransfer {
    SnapshotTransfer {
        source,
        source_addresses: addresses.to_vec(),
        destinations: destinations.to_vec(),
        words,
        width: SnapshotWidth::Word32,
        source_allocation: None,
        destination_allocations: None,
    }
}

/// Two phases on 8 tiles: phase 0 outside a Repeat, phase 1 inside one of 3
/// iterations with a per-layer (strided) source, a receive-then-forward and
/// a write into the third layer's source bytes.
fn sample() -> Snapshot {
    let phase0 = SnapshotPhase {
        phase: 0,
        key: None,
        operator: Some("embed".to_string()),
        reason: None,
        executions: None,
        allocations: None,
        transfers: vec![
            transfer(0, &[A], &[(1, A), (2, A)], 16),
            transfer(1, &[A + 64], &[(3, A)], 8),
        ],
        segment_starts: Vec::new(),
    };
    let layers = [A, A + STRIDE, A + 2 * STRIDE];
    let phase1 = SnapshotPhase {
        phase: 1,
        key: None,
        operator: None,
        reason: None,
        executions: None,
        allocations: None,
        transfers: vec![
            // 0: layer weights of tile 0 to tile 1.
            transfer(0, &layers, &[(1, A + 0x8000)], 32),
            // 1: tile 1 forwards what it received (read-after-write on 0).
            transfer(1, &[A + 0x8000; 3], &[(2, A)], 32),
            // 2: tile 4 writes the bytes transfer 0 reads in iteration 2 only
            //    (write-after-read through the Repeat binding).
            transfer(4, &[A; 3], &[(0, A + 2 * STRIDE + 64)], 4),
            // 3: independent.
            transfer(5, &[A; 3], &[(6, A), (7, A)], 8),
        ],
        segment_starts: Vec::new(),
    };
    Snapshot {
        schema_version: SCHEMA_VERSION,
        tile_count: 8,
        phases: vec![phase0, phase1],
    }
}

fn rejected(change: impl FnOnce(&mut Snapshot)) -> ImportError {
    let mut snapshot = sample();
    change(&mut snapshot);
    import_snapshot(&snapshot).expect_err("malformed snapshot is rejected")
}

#[test]
fn older_snapshots_without_provenance_import_and_keep_every_repeat_dependency() {
    let text = r#"{"schema_version":4,"tile_count":8,"phases":[{"phase":7,"transfers":[
        {"source":0,"source_addresses":[315392],"destinations":[[1,315392]],"words":4,"width":"Word32"}]}]}"#;
    let snapshot = Snapshot::from_slice(text.as_bytes(), "old").expect("parses");
    let phases = import_snapshot(&snapshot).expect("imports");
    assert_eq!(phases[0].phase, 7);
    assert_eq!(phases[0].problem.pieces(), 1);

    let phases = import_snapshot(&sample()).expect("imports");
    let repeated = &phases[1].problem;
    assert_eq!(repeated.iterations, 3);
    let found = dependencies(repeated);
    assert_eq!(found.of(0), &[] as &[u32]);
    assert_eq!(found.of(1), &[0], "receive-then-forward");
    assert_eq!(found.of(2), &[0], "write into iteration 2's source bytes");
    assert_eq!(found.of(3), &[] as &[u32]);
}

#[test]
fn sources_that_are_no_arithmetic_progression_keep_every_binding() {
    // Iteration 2 reads the lowest layer, iteration 0 the middle one: transfer
    // 2 writes bytes that only iteration 1 reads (at A + 2 * STRIDE + 64).
    let mut snapshot = sample();
    snapshot.phases[1].transfers[0].source_addresses = vec![A + STRIDE, A + 2 * STRIDE, A];
    let phases = import_snapshot(&snapshot).expect("imports");
    let problem = &phases[1].problem;
    assert_eq!(problem.explicit_bindings.len(), 1);
    assert_eq!(
        problem.explicit_bindings[0].deltas,
        vec![0, STRIDE as i64, -(STRIDE as i64)]
    );
    let found = dependencies(problem);
    assert_eq!(found.of(1), &[0]);
    assert_eq!(found.of(2), &[0], "write into iteration 1's source bytes");
    // Moving the write out of every binding removes the dependency.
    snapshot.phases[1].transfers[2].destinations[0].1 = A + 3 * STRIDE;
    let phases = import_snapshot(&snapshot).expect("imports");
    assert_eq!(dependencies(&phases[1].problem).of(2), &[] as &[u32]);
    // Bench and re-capture work through the explicit bindings too.
    let options = BenchOptions {
        policies: vec![SchedulePolicy::Latency],
        width: TransferWidth::Auto,
        iterations: 1,
        sample: None,
    };
    for record in bench_phase(&phases[1], &options) {
        assert!(record.passed(), "{}", record.line());
    }
    assert_eq!(
        snapshot_of(&phases).expect("snapshot").to_bytes(),
        snapshot.to_bytes()
    );
}

#[test]
fn reimporting_a_seed_snapshot_recaptures_it_byte_for_byte() {
    let snapshot = sample();
    let phases = import_snapshot(&snapshot).expect("imports");
    let again = snapshot_of(&phases).expect("snapshot");
    assert_eq!(again.to_bytes(), snapshot.to_bytes());
}

#[test]
fn long_transfers_are_split_and_recaptured_whole() {
    let mut snapshot = sample();
    snapshot.phases[0].transfers[0].words = 10_000;
    let phases = import_snapshot(&snapshot).expect("imports");
    let problem = &phases[0].problem;
    assert_eq!(problem.words, vec![4148, 4148, 1704, 8]);
    assert_eq!(phases[0].piece_transfers, vec![0, 0, 0, 1]);
    assert_eq!(
        snapshot_of(&phases).expect("snapshot").to_bytes(),
        snapshot.to_bytes()
    );
}

#[test]
fn rejects_a_wrong_schema_version() {
    let error = rejected(|snapshot| snapshot.schema_version = 3);
    assert_eq!(
        error,
        ImportError::SchemaVersion {
            found: 3,
            expected: 4
        }
    );
}

#[test]
fn rejects_a_tile_out_of_range() {
    let error = rejected(|snapshot| snapshot.phases[1].transfers[3].destinations[1].0 = 8);
    assert_eq!(
        error,
        ImportError::TileOutOfRange {
            phase: 1,
            transfer: 3,
            tile: 8,
            tiles: 8
        }
    );
    let error = rejected(|snapshot| snapshot.phases[0].transfers[1].source = 99);
    assert!(matches!(
        error,
        ImportError::TileOutOfRange {
            phase: 0,
            transfer: 1,
            tile: 99,
            ..
        }
    ));
}

#[test]
fn rejects_source_addresses_of_different_lengths_in_a_phase() {
    let error = rejected(|snapshot| {
        snapshot.phases[1].transfers[2].source_addresses.pop();
    });
    assert_eq!(
        error,
        ImportError::IterationCount {
            phase: 1,
            transfer: 2,
            found: 2,
            expected: 3
        }
    );
    assert!(error.to_string().starts_with("phase 1, transfer 2:"));
}

#[test]
fn rejects_zero_words() {
    let error = rejected(|snapshot| snapshot.phases[1].transfers[1].words = 0);
    assert_eq!(
        error,
        ImportError::ZeroWords {
            phase: 1,
            transfer: 1
        }
    );
}

#[test]
fn rejects_misaligned_addresses() {
    let error = rejected(|snapshot| snapshot.phases[1].transfers[0].source_addresses[2] += 2);
    assert_eq!(
        error,
        ImportError::MisalignedAddress {
            phase: 1,
            transfer: 0,
            tile: 0,
            address: A + 2 * STRIDE + 2
        }
    );
    let error = rejected(|snapshot| snapshot.phases[0].transfers[0].destinations[1].1 = A + 1);
    assert!(matches!(
        error,
        ImportError::MisalignedAddress {
            phase: 0,
            transfer: 0,
            tile: 2,
            ..
        }
    ));
}

#[test]
fn rejects_addresses_outside_the_tile_memory() {
    let error = rejected(|snapshot| snapshot.phases[0].transfers[1].destinations[0].1 = 0x1000);
    assert_eq!(
        error,
        ImportError::AddressOutOfRange {
            phase: 0,
            transfer: 1,
            tile: 3,
            address: 0x1000,
            end: 0x1000 + 32
        }
    );
    // The last bytes run past the end of the tile.
    let error = rejected(|snapshot| {
        snapshot.phases[1].transfers[3].source_addresses = vec![TILE_END_ADDRESS - 16; 3]
    });
    assert!(matches!(
        error,
        ImportError::AddressOutOfRange {
            phase: 1,
            transfer: 3,
            tile: 5,
            ..
        }
    ));
}

#[test]
fn rejects_other_malformations_by_phase_and_transfer() {
    let error = rejected(|snapshot| snapshot.phases[0].transfers[1].destinations.clear());
    assert_eq!(
        error,
        ImportError::NoDestination {
            phase: 0,
            transfer: 1
        }
    );
    let error = rejected(|snapshot| snapshot.phases[0].transfers[0].destinations[1].0 = 1);
    assert_eq!(
        error,
        ImportError::DuplicateDestination {
            phase: 0,
            transfer: 0,
            tile: 1
        }
    );
    let error = rejected(|snapshot| snapshot.tile_count = 0);
    assert_eq!(error, ImportError::NoTiles);
    let error = rejected(|snapshot| snapshot.tile_count = u32::MAX);
    assert_eq!(error, ImportError::TooManyTiles { found: u32::MAX });
    let mut snapshot = sample();
    let error = super::import_phases(&snapshot, &[5]).expect_err("no phase 5");
    assert_eq!(error, ImportError::UnknownPhase { phase: 5 });
    snapshot.phases[0].transfers[0].source_allocation = Some(0);
    snapshot.phases[0].allocations = Some(Vec::new());
    let error = import_snapshot(&snapshot).expect_err("names a missing allocation");
    assert!(matches!(
        error,
        ImportError::Provenance {
            phase: 0,
            transfer: 0,
            ..
        }
    ));
}

#[test]
fn imported_phases_schedule_validate_encode_and_replay() {
    let phases = import_snapshot(&sample()).expect("imports");
    let options = BenchOptions {
        policies: vec![
            SchedulePolicy::Latency,
            SchedulePolicy::Balanced { words: 16 },
        ],
        width: TransferWidth::Auto,
        iterations: 2,
        sample: None,
    };
    for phase in &phases {
        for record in bench_phase(phase, &options) {
            assert!(record.passed(), "{}", record.line());
            assert_eq!(record.transfers, phase.problem.pieces());
            assert!(record.horizon >= record.endpoint_bound);
            assert!(record.row_words_max > 0 && record.row_words_total >= record.row_words_max);
        }
    }
}

/// A merged phase's segment starts (transfer indices) import as the first
/// pieces of those transfers and are recaptured as written; ones that are
/// not after the first transfer, not ascending or past the last transfer
/// are refused.
#[test]
fn segment_starts_round_trip_and_bad_ones_are_refused() {
    let mut snapshot = sample();
    snapshot.phases[1].segment_starts = vec![2];
    let imported = import_snapshot(&snapshot).expect("imports");
    assert_eq!(imported[1].problem.segment_starts, vec![2]);
    let recaptured = super::capture::phase_record(&imported[1]).expect("captures");
    assert_eq!(recaptured.segment_starts, vec![2]);
    for bad in [vec![0], vec![3, 2], vec![4], vec![2, 2]] {
        let error = rejected(|snapshot| snapshot.phases[1].segment_starts = bad.clone());
        assert_eq!(
            error,
            ImportError::SegmentStarts {
                phase: 1,
                starts: bad,
                transfers: 4
            }
        );
    }
}
