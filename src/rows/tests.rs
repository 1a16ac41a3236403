//! Tests of row encoding, decoding, checking, sharing and replay: random
//! phases from `schedule::tests`, a corrupted-word negative test, and every
//! exchange phase of `queries/vit-tiny.toml` under latency, S256 and B1024.

use std::path::Path;

use super::*;
use crate::build_file::{SchedulePolicy, TransferWidth};
use crate::expand::program::AllocationId;
use crate::expand::program::Step;
use crate::schedule::tests::{POLICIES, WIDTHS, random_problem};
use crate::schedule::{ExchangeProblem, schedule, validate};
use crate::sim::replay::replay_phase;
use crate::target::encoding::{Instruction, decode};

fn round_trip(
    problem: &ExchangeProblem,
    policy: SchedulePolicy,
    width: TransferWidth,
) -> PhaseRows {
    let schedule = schedule(problem, policy, width).expect("schedules");
    validate(problem, &schedule).unwrap_or_else(|error| panic!("{policy} {width:?}: {error}"));
    let rows = encode_phase(problem, &schedule).expect("encodes");
    check_phase(problem, &schedule, &rows)
        .unwrap_or_else(|error| panic!("{policy} {width:?}: {error}"));
    let placement = ConsecutivePlacement::new(problem).expect("places");
    let words = rows
        .finalize(|allocation, offset| placement.resolve(allocation, offset))
        .expect("finalizes");
    let report = replay_phase(problem, &words, &placement, None)
        .unwrap_or_else(|error| panic!("{policy} {width:?}: {error}"));
    let expected: u64 = (0..problem.pieces())
        .map(|piece| u64::from(problem.words[piece]) * problem.receives_of(piece).len() as u64)
        .sum();
    assert_eq!(report.checked_words, expected);
    rows
}

#[test]
fn random_phases_encode_check_and_replay() {
    for seed in 0..30 {
        let problem = random_problem(seed, 16, 20 + (seed as usize % 30));
        for policy in POLICIES {
            for width in WIDTHS {
                round_trip(&problem, policy, width);
            }
        }
    }
}

#[test]
fn corrupted_row_word_fails_the_checker() {
    let problem = random_problem(11, 16, 40);
    let schedule = schedule(&problem, SchedulePolicy::Latency, TransferWidth::Auto).unwrap();
    let rows = encode_phase(&problem, &schedule).unwrap();
    check_phase(&problem, &schedule, &rows).unwrap();
    let mut corrupted = rows.clone();
    let (tile, word) = corrupted
        .rows
        .iter()
        .enumerate()
        .find_map(|(tile, row)| {
            row.words
                .iter()
                .position(|&word| matches!(decode(&[word]), Ok((Instruction::Delay { .. }, _))))
                .map(|word| (tile, word))
        })
        .expect("some row has a delay");
    corrupted.rows[tile].words[word] += 1;
    let error = check_phase(&problem, &schedule, &corrupted).unwrap_err();
    assert!(matches!(error, RowError::Mismatch { .. }), "{error}");
    let mut corrupted = rows.clone();
    let (tile, slot) = corrupted
        .rows
        .iter()
        .enumerate()
        .find_map(|(tile, row)| row.slots.first().map(|slot| (tile, *slot)))
        .unwrap();
    corrupted.rows[tile].slots[0].address.offset = slot.address.offset + 4;
    assert!(check_phase(&problem, &schedule, &corrupted).is_err());
}

/// A slot renamed to another tile's allocation whose consecutive address
/// is the same (tiles' placements start at one base) decodes to the same
/// words, so only the slot check can refuse it; so must one moved to the
/// end of its own allocation.
#[test]
fn a_slot_naming_another_tiles_allocation_fails_the_checker() {
    let problem = random_problem(11, 16, 40);
    let schedule = schedule(&problem, SchedulePolicy::Latency, TransferWidth::Auto).unwrap();
    let rows = encode_phase(&problem, &schedule).unwrap();
    check_phase(&problem, &schedule, &rows).unwrap();
    let placement = ConsecutivePlacement::new(&problem).unwrap();
    let (tile, index, twin) = rows
        .rows
        .iter()
        .enumerate()
        .find_map(|(tile, row)| {
            row.slots.iter().enumerate().find_map(|(index, slot)| {
                let address = placement.resolve(slot.address.allocation, slot.address.offset);
                let twin = (0..problem.allocations.len() as u32).find(|&other| {
                    problem.allocations[other as usize].tile != tile as u32
                        && placement.resolve(other, slot.address.offset) == address
                })?;
                Some((tile, index, twin))
            })
        })
        .expect("some slot has a twin on another tile");
    let mut renamed = rows.clone();
    renamed.rows[tile].slots[index].address.allocation = twin;
    let error = check_phase(&problem, &schedule, &renamed).unwrap_err();
    assert!(matches!(error, RowError::ForeignSlot { .. }), "{error}");
    let mut past_end = rows.clone();
    let slot = &mut past_end.rows[tile].slots[index];
    // The end of the allocation's storage: its alias root's largest member.
    let root = problem.allocations[slot.address.allocation as usize].alias_root;
    slot.address.offset = problem
        .allocations
        .iter()
        .filter(|allocation| allocation.alias_root == root)
        .map(|allocation| allocation.bytes * allocation.iterations.max(1))
        .max()
        .expect("the root itself");
    let error = check_phase(&problem, &schedule, &past_end).unwrap_err();
    assert!(matches!(error, RowError::ForeignSlot { .. }), "{error}");
}

#[test]
fn row_table_shares_identical_and_address_only_rows() {
    let (list, allocations) = crate::schedule::tests::random_phase(5, 16, 30);
    let (problem, origin) =
        ExchangeProblem::with_origin(&list, &allocations, crate::schedule::tests::ITERATIONS, 16)
            .unwrap();
    let schedule = schedule(&problem, SchedulePolicy::Latency, TransferWidth::Word32).unwrap();
    let rows = encode_phase(&problem, &schedule).unwrap();
    let mut moved = origin.allocations.clone();
    moved[0] = crate::expand::program::AllocationId(999_999);
    let single = RowTable::build(&[(&rows, origin.allocations.as_slice())], 16);
    let table = RowTable::build(
        &[
            (&rows, origin.allocations.as_slice()),
            (&rows, origin.allocations.as_slice()),
            (&rows, moved.as_slice()),
        ],
        16,
    );
    assert_eq!(table.bytes_per_tile, single.bytes_per_tile);
    assert!(table.identical_rows > 0);
    let patched_words = rows
        .rows
        .iter()
        .map(|row| {
            row.slots
                .iter()
                .filter(|slot| slot.address.allocation == 0)
                .count()
        })
        .sum::<usize>();
    // Every phase running from the shared rows rewrites the varying words.
    assert_eq!(table.sharing_patches.len(), 3 * patched_words);
    for phase in 0..3 {
        let words = table
            .sharing_patches
            .iter()
            .filter(|patch| patch.phase == phase)
            .count();
        assert_eq!(words, patched_words);
    }
    assert_eq!(table.max_bytes(), rows.max_bytes());
}

fn collect_problems(
    steps: &[Step],
    iterations: u32,
    program: &crate::expand::program::LowProgram,
    out: &mut Vec<(ExchangeProblem, Vec<AllocationId>)>,
) {
    for step in steps {
        match step {
            Step::Exchange { transfers, .. } if !transfers.is_empty() => {
                let (problem, origin) = ExchangeProblem::with_origin(
                    transfers,
                    &program.allocations,
                    iterations,
                    program.tiles,
                )
                .expect("real phases are well formed");
                out.push((problem, origin.allocations));
            }
            Step::Repeat { iterations, body } => collect_problems(body, *iterations, program, out),
            _ => {}
        }
    }
}

#[test]
fn vit_tiny_phases_schedule_encode_check_and_replay() {
    let query =
        crate::build_file::load_query(Path::new("queries/vit-tiny.toml"), &[]).expect("loads");
    let (_, _, program) = crate::direct::compile(&query).expect("compiles");
    let mut problems = Vec::new();
    collect_problems(&program.steps, 1, &program, &mut problems);
    assert!(problems.len() >= 10, "{} phases", problems.len());
    for policy in [
        SchedulePolicy::Latency,
        SchedulePolicy::Stream { words: 256 },
        SchedulePolicy::Balanced { words: 1024 },
    ] {
        let mut phases = Vec::new();
        let mut horizon = 0u64;
        for (problem, _) in &problems {
            let rows = round_trip(problem, policy, TransferWidth::Auto);
            horizon += u64::from(
                schedule(problem, policy, TransferWidth::Auto)
                    .unwrap()
                    .horizon,
            );
            phases.push(rows);
        }
        let references: Vec<(&PhaseRows, &[AllocationId])> = phases
            .iter()
            .zip(&problems)
            .map(|(rows, (_, allocations))| (rows, allocations.as_slice()))
            .collect();
        let table = RowTable::build(&references, program.tiles);
        println!(
            "vit-tiny {policy}: {} phases, summed horizon {horizon}, exchange table max {} B/tile, total {} B, {} identical rows, {} sharing patches",
            problems.len(),
            table.max_bytes(),
            table.total_bytes(),
            table.identical_rows,
            table.sharing_patches.len()
        );
    }
}

/// Every exchange phase of the default SigLIP so400m build: schedule (latency
/// and B1024), validate, encode and check. Slow: run with
/// `cargo test --release --lib siglip -- --ignored` (the scheduler's speed
/// is `cargo bench --bench scheduler`'s business).
#[test]
#[ignore]
fn siglip_phases_schedule_encode_and_check() {
    let query =
        crate::build_file::load_query(Path::new("queries/siglip-so400m.toml"), &[]).expect("loads");
    let (_, _, program) = crate::direct::compile(&query).expect("compiles");
    let mut problems = Vec::new();
    collect_problems(&program.steps, 1, &program, &mut problems);
    assert!(!problems.is_empty());
    for policy in [
        SchedulePolicy::Latency,
        SchedulePolicy::Balanced { words: 1024 },
    ] {
        for (index, (problem, _)) in problems.iter().enumerate() {
            let schedule = schedule(problem, policy, TransferWidth::Auto).expect("schedules");
            validate(problem, &schedule).unwrap_or_else(|error| panic!("phase {index}: {error}"));
            let rows = encode_phase(problem, &schedule).expect("encodes");
            check_phase(problem, &schedule, &rows)
                .unwrap_or_else(|error| panic!("phase {index}: {error}"));
        }
    }
}
