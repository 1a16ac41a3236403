//! The profile of a small hand-built program: keys, costs, occupancy, the
//! timeline's total and the step at a given cycle, with every expected
//! figure written down.

use std::collections::HashMap;

use super::*;
use crate::expand::program::{
    AllocationId, LocalCopy, Location, Provenance, Reason, TransferList, ZeroFill,
};

const TILES: u32 = 4;

fn provenance(op: u32) -> Provenance {
    Provenance {
        op,
        value: None,
        reason: Reason::Compute,
    }
}

fn at(allocation: u32) -> Location {
    Location {
        allocation: AllocationId(allocation),
        offset: 0,
    }
}

/// A copy of `bytes` bytes on `tile`: 378 + bytes / 8 cycles.
fn copy(tile: u32, bytes: u32) -> LocalCopy {
    LocalCopy {
        tile,
        source: at(0),
        destination: at(1),
        row_bytes: bytes,
        rows: 1,
        source_stride: bytes,
        destination_stride: bytes,
    }
}

/// fills (op 0) ; Repeat 3 [ exchange (op 1) ; copies (op 1) ] ; copies (op 0)
fn program() -> Vec<Step> {
    vec![
        Step::Fills {
            provenance: provenance(0),
            fills: vec![ZeroFill {
                tile: 2,
                destination: at(0),
                row_bytes: 800,
                rows: 1,
                stride: 800,
            }],
        },
        Step::Repeat {
            iterations: 3,
            body: vec![
                Step::Exchange {
                    provenance: provenance(1),
                    transfers: TransferList::default(),
                },
                Step::Checkpoint { name: 0 },
                Step::Copies {
                    provenance: provenance(1),
                    copies: vec![copy(0, 80), copy(0, 80), copy(1, 160)],
                },
            ],
        },
        Step::Copies {
            provenance: provenance(0),
            copies: vec![copy(3, 8)],
        },
    ]
}

fn built() -> ProgramProfile {
    let steps = program();
    let names = vec!["embed".to_string(), "layer.mlp".to_string()];
    let mut phases = HashMap::new();
    phases.insert(
        vec![1, 0],
        PhaseEntry {
            index: 0,
            key: "layer.mlp#0",
            cost: PhaseCost {
                horizon: 1000,
                patch_cycles: 12,
            },
        },
    );
    let loads = crate::estimate::compute_step_loads(
        &steps,
        TILES,
        &crate::target::kernel_cost::CostTable::shipped(),
    );
    profile(&steps, &names, &phases, &loads, TILES)
}

#[test]
fn entries_carry_keys_costs_and_executions() {
    let profile = built();
    let summary: Vec<(&str, StepKind, usize, u64, u64, u64)> = profile
        .entries
        .iter()
        .map(|entry| {
            (
                entry.key.as_str(),
                entry.kind,
                entry.index,
                entry.executions,
                entry.cycles,
                entry.total_cycles,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            // 378 + 800 / 8
            ("embed:fills#0", StepKind::Fills, 0, 1, 478, 478),
            // 1000 + 255 sync + 12 patching
            ("layer.mlp#0", StepKind::Exchange, 0, 3, 1267, 3801),
            // tile 0: 2 × (378 + 10) = 776; tile 1: 378 + 20 = 398
            ("layer.mlp:copies#0", StepKind::Copies, 1, 3, 776, 2328),
            ("embed:copies#0", StepKind::Copies, 2, 1, 379, 379),
        ]
    );
    let copies = &profile.entries[2];
    assert_eq!(copies.busy_tiles, 2);
    assert_eq!(copies.busy_tile_cycles, 776 + 398);
    let occupancy = copies.occupancy(TILES).expect("compute");
    assert!((occupancy - 1174.0 / (4.0 * 776.0)).abs() < 1e-12);
    assert_eq!(profile.entries[1].occupancy(TILES), None);
    assert_eq!(profile.entries[1].horizon, 1000);
    assert_eq!(profile.entries[1].patch_cycles, 12);
}

#[test]
fn the_timeline_adds_up_and_finds_the_step_at_a_cycle() {
    let profile = built();
    let total: u64 = profile.entries.iter().map(|entry| entry.total_cycles).sum();
    assert_eq!(total, 478 + 3801 + 2328 + 379);
    assert_eq!(profile.total_cycles(), total);
    // Cycle 0: the fill.
    assert_eq!(
        profile.at_offset(0),
        Some(Placed {
            entry: 0,
            start: 0,
            iterations: vec![]
        })
    );
    // The second iteration starts at 478 + 2043; its copies at + 1267.
    let second = 478 + 2043;
    assert_eq!(
        profile.at_offset(second + 1267 + 5),
        Some(Placed {
            entry: 2,
            start: second + 1267,
            iterations: vec![1]
        })
    );
    // The last cycle belongs to the final copy; one past it to nothing.
    assert_eq!(
        profile.at_offset(total - 1).map(|placed| placed.entry),
        Some(3)
    );
    assert_eq!(profile.at_offset(total), None);
    // Unrolled executions: 1 + 3 × 2 + 1, back to back.
    let mut executions = Vec::new();
    profile.for_each_execution(&mut |entry, start, cycles| executions.push((entry, start, cycles)));
    assert_eq!(executions.len(), 8);
    let mut next = 0;
    for &(_, start, cycles) in &executions {
        assert_eq!(start, next);
        next += cycles;
    }
    assert_eq!(next, total);
}

#[test]
fn exchange_steps_number_as_the_profile_does() {
    let steps = program();
    let numbers = exchange_steps(&steps);
    assert_eq!(numbers, HashMap::from([(vec![1, 0], 1)]));
    let profile = built();
    for entry in &profile.entries {
        if entry.kind == StepKind::Exchange {
            assert_eq!(numbers.get(&vec![1, 0]), Some(&entry.step), "{}", entry.key);
        }
    }
}
