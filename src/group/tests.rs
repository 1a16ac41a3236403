//! Copy-motion tests: each hazard kind with strided affine copies, aliases,
//! forwarding, operator provenance, and the interpreter agreeing bit for bit
//! on a real program before and after motion.

/// Hand-built programs these tests and the copy-boundary audit's share.
pub(crate) mod programs;

use super::*;
use crate::expand::program::{AllocationId, KernelRun, LowProgram, Step, TransferList, ZeroFill};
use programs::*;

fn only_decision(steps: Vec<Step>, count: u32) -> (PhaseGroups, MotionOutcome) {
    let groups = group_phases(&program(count, steps), true);
    assert_eq!(groups.decisions.len(), 1, "{:?}", groups.decisions);
    let outcome = groups.decisions[0].outcome;
    (groups, outcome)
}

#[test]
fn strided_copy_interleaving_with_a_destination_moves_before_it() {
    // E1 writes bytes 512..3072 of allocation 1; the copy writes rows
    // 0..512, 3072..3584, ... of it: interleaved, never overlapping. E2 reads
    // what the copy writes, so the copy cannot stay after the merge.
    let steps = vec![
        exchange(0, at(0, 0), at(1, 512), 640),
        strided_copy(at(0, 0), at(1, 0)),
        exchange(0, at(1, 0), at(2, 0), 128),
    ];
    let (groups, outcome) = only_decision(steps, 3);
    assert_eq!(outcome, MotionOutcome::Moved);
    assert_eq!(groups.phases.len(), 1);
    assert_eq!(groups.phases[0].merged_from, vec!["op0#0", "op0#1"]);
    assert_eq!(groups.phases[0].transfer_count, 2);
    assert!(matches!(groups.steps[0], Step::Copies { .. }));
    assert!(matches!(groups.steps[1], Step::Exchange { .. }));
}

#[test]
fn read_after_write_blocks_both_ways_and_names_the_hazard() {
    // The copy reads E1's destination and writes E2's source.
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 128),
        strided_copy(at(1, 0), at(2, 0)),
        exchange(0, at(2, 3072), at(3, 0), 16),
    ];
    let (groups, outcome) = only_decision(steps, 4);
    let MotionOutcome::Blocked(Blocker::Copies { before, after }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(before.kind, HazardKind::ReadAfterWrite);
    assert_eq!(
        before.earlier.accessor,
        Accessor::Transfer {
            exchange: Side::Preceding,
            index: 0
        }
    );
    assert_eq!(before.later.accessor, Accessor::Copy { index: 0 });
    assert_eq!(before.later.allocation, AllocationId(1));
    assert_eq!((before.later.start, before.later.end), (0, 512));
    assert_eq!(after.kind, HazardKind::ReadAfterWrite);
    assert_eq!(after.earlier.accessor, Accessor::Copy { index: 0 });
    assert_eq!(
        (after.earlier.start, after.earlier.end),
        (3072, 3584),
        "the conflicting row"
    );
    assert_eq!(groups.phases.len(), 2);
}

#[test]
fn write_after_read_blocks_both_ways() {
    // The copy writes what E1 reads and reads what E2 writes.
    let steps = vec![
        exchange(0, at(1, 3072), at(0, 0), 128),
        strided_copy(at(2, 0), at(1, 0)),
        exchange(0, at(3, 0), at(2, 1024), 4),
    ];
    let (_, outcome) = only_decision(steps, 4);
    let MotionOutcome::Blocked(Blocker::Copies { before, after }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(before.kind, HazardKind::WriteAfterRead);
    assert_eq!(after.kind, HazardKind::WriteAfterRead);
}

#[test]
fn write_after_write_blocks_both_ways() {
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 4),
        strided_copy(at(0, 0), at(1, 0)),
        exchange(0, at(0, 0), at(1, 6 * 3072), 4),
    ];
    let (_, outcome) = only_decision(steps, 2);
    let MotionOutcome::Blocked(Blocker::Copies { before, after }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(before.kind, HazardKind::WriteAfterWrite);
    assert_eq!(after.kind, HazardKind::WriteAfterWrite);
    assert_eq!(
        (after.earlier.start, after.earlier.end),
        (6 * 3072, 6 * 3072 + 512)
    );
}

#[test]
fn copies_that_only_feed_later_work_stay_after_the_merge() {
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 16),
        strided_copy(at(1, 0), at(2, 0)),
        exchange(0, at(3, 0), at(0, 2048), 16),
    ];
    let (groups, outcome) = only_decision(steps, 4);
    assert_eq!(outcome, MotionOutcome::StayedAfterMerge);
    assert!(matches!(groups.steps[0], Step::Exchange { .. }));
    assert!(matches!(groups.steps[1], Step::Copies { .. }));
}

#[test]
fn aliases_are_resolved() {
    // Allocation 2 aliases allocation 1: the copy writes allocation 2 where
    // E1 reads allocation 1 (WAR) and E2 reads allocation 1 (RAW).
    let steps = vec![
        exchange(0, at(1, 0), at(0, 0), 16),
        strided_copy(at(3, 0), at(2, 0)),
        exchange(0, at(1, 0), at(0, 0), 16),
    ];
    let mut program = program(4, steps);
    program.allocations[2].alias_group = 1;
    let groups = group_phases(&program, true);
    let MotionOutcome::Blocked(Blocker::Copies { before, after }) = groups.decisions[0].outcome
    else {
        panic!("{:?}", groups.decisions)
    };
    assert_eq!(before.kind, HazardKind::WriteAfterRead);
    assert_eq!(before.earlier.allocation, AllocationId(1));
    assert_eq!(before.later.allocation, AllocationId(2));
    assert_eq!(after.kind, HazardKind::ReadAfterWrite);
    // Without the alias the same program merges.
    program.allocations[2].alias_group = 2;
    let groups = group_phases(&program, true);
    assert_eq!(groups.decisions[0].outcome, MotionOutcome::Moved);
}

#[test]
fn fills_are_writes() {
    let fill = Step::Fills {
        provenance: provenance(0),
        fills: vec![ZeroFill {
            tile: 0,
            destination: at(1, 0),
            row_bytes: 64,
            rows: 4,
            stride: 1024,
        }],
    };
    // E1 reads row 2 of the fill's rows; E2 reads row 3.
    let steps = vec![
        exchange(0, at(1, 2048), at(0, 0), 4),
        fill,
        exchange(0, at(1, 3072), at(2, 0), 4),
    ];
    let (_, outcome) = only_decision(steps, 3);
    let MotionOutcome::Blocked(Blocker::Copies { before, after }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(before.kind, HazardKind::WriteAfterRead);
    assert_eq!(before.later.accessor, Accessor::Fill { index: 0 });
    assert_eq!((before.later.start, before.later.end), (2048, 2112));
    assert_eq!(after.kind, HazardKind::ReadAfterWrite);
}

#[test]
fn forwarding_between_exchanges_blocks_the_merge() {
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 16),
        exchange(0, at(1, 32), at(2, 0), 4),
    ];
    let (_, outcome) = only_decision(steps, 3);
    let MotionOutcome::Blocked(Blocker::Forwarding(hazard)) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(hazard.kind, HazardKind::ReadAfterWrite);
    assert_eq!(
        hazard.later.accessor,
        Accessor::Transfer {
            exchange: Side::Following,
            index: 0
        }
    );
    // Independent adjacent exchanges merge, keeping the transfer order.
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 16),
        exchange(0, at(1, 64), at(2, 0), 4),
    ];
    let (groups, outcome) = only_decision(steps, 3);
    assert_eq!(outcome, MotionOutcome::Adjacent);
    let Step::Exchange { transfers, .. } = &groups.steps[0] else {
        panic!()
    };
    assert_eq!(transfers.words, vec![16, 4]);
    assert_eq!(transfers.destination_start, vec![0, 1]);
}

#[test]
fn operators_and_barriers() {
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 4),
        exchange(1, at(2, 0), at(3, 0), 4),
    ];
    let (_, outcome) = only_decision(steps.clone(), 4);
    assert_eq!(outcome, MotionOutcome::Blocked(Blocker::DifferentOperators));
    let across = group_phases_with(
        &program(4, steps),
        MotionOptions {
            copy_motion: true,
            fusion: Fusion::AcrossOperators,
        },
    );
    assert_eq!(across.phases.len(), 1);
    assert_eq!(across.phases[0].merged_from, vec!["op0#0", "op1#0"]);
    // A kernel step, a checkpoint or a Repeat boundary separates: no decision.
    let kernels = Step::Kernels {
        provenance: provenance(0),
        runs: Vec::<KernelRun>::new(),
    };
    let repeat = Step::Repeat {
        iterations: 3,
        body: vec![exchange(0, at(0, 0), at(3, 0), 4)],
    };
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 4),
        kernels,
        exchange(0, at(0, 0), at(2, 0), 4),
        Step::Checkpoint { name: 0 },
        exchange(0, at(0, 0), at(2, 0), 4),
        repeat,
        exchange(0, at(0, 0), at(3, 0), 4),
    ];
    let groups = group_phases(&program(4, steps), true);
    assert!(groups.decisions.is_empty());
    let keys: Vec<_> = groups
        .phases
        .iter()
        .map(|phase| phase.key.as_str())
        .collect();
    assert_eq!(keys, ["op0#0", "op0#1", "op0#2", "op0#3", "op0#4"]);
    assert_eq!(groups.phases[3].step_path, vec![5, 0]);
    assert_eq!(groups.phases[3].executions, 3);
    assert!(groups.phases[3].in_repeat);
}

fn summary(groups: &PhaseGroups) -> String {
    let moved = groups
        .decisions
        .iter()
        .filter(|d| d.outcome == MotionOutcome::Moved)
        .count();
    let stayed = groups
        .decisions
        .iter()
        .filter(|d| d.outcome == MotionOutcome::StayedAfterMerge)
        .count();
    let blocked = groups.decisions.len() - moved - stayed;
    format!(
        "phases {} -> {}, decisions {} (moved {moved}, stayed {stayed}, other {blocked})",
        groups.original_phase_count(),
        groups.phases.len(),
        groups.decisions.len()
    )
}

#[test]
fn tiny_vit_computes_the_same_output_after_motion() {
    let (layouts, program, weights) = tiny();
    let original =
        crate::sim::interpreter::interpret(&program, &layouts, &weights).expect("original");
    for fusion in [Fusion::SameOperator, Fusion::AcrossOperators] {
        let groups = group_phases_with(
            &program,
            MotionOptions {
                copy_motion: true,
                fusion,
            },
        );
        println!("{fusion:?}: {}", summary(&groups));
        for decision in &groups.decisions {
            println!(
                "  {} -> {}: {:?}",
                decision.preceding, decision.following, decision.outcome
            );
        }
        let transformed = LowProgram {
            steps: groups.steps.clone(),
            ..program.clone()
        };
        let result = crate::sim::interpreter::interpret(&transformed, &layouts, &weights)
            .expect("transformed");
        let bits = |values: &[f32]| {
            values
                .iter()
                .map(|value| value.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&result.output), bits(&original.output), "{fusion:?}");
        assert_eq!(result.counts.transfers, original.counts.transfers);
        assert_eq!(result.counts.copy_rows, original.counts.copy_rows);
        if fusion == Fusion::AcrossOperators {
            assert!(
                groups.phases.len() < groups.original_phase_count(),
                "{}",
                summary(&groups)
            );
        }
    }
    let unchanged = group_phases(&program, false);
    assert_eq!(unchanged.steps, program.steps);
    assert!(unchanged.decisions.is_empty());
}

/// A pricer that charges each transfer list its total words.
fn priced_by_words(
    sync: u64,
) -> impl FnMut(&TransferList, &TransferList, &TransferList, u32) -> Option<FusionCost> {
    move |first, second, merged, _iterations| {
        let words = |list: &TransferList| list.words.iter().map(|&words| u64::from(words)).sum();
        Some(FusionCost {
            merged_horizon: Some(words(merged)),
            merged_bound: 0,
            separate_sum: words(first) + words(second),
            separate_scheduled: true,
            sync_saved: sync,
        })
    }
}

#[test]
fn auto_fusion_merges_across_operators_only_when_priced_cheaper() {
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 4),
        exchange(1, at(2, 0), at(3, 0), 4),
        exchange(1, at(0, 64), at(1, 64), 4),
    ];
    let options = MotionOptions {
        copy_motion: true,
        fusion: Fusion::Auto,
    };
    // Without a pricer auto keeps the operator rule (op1#0 and op1#1 merge).
    let unpriced = group_phases_with(&program(4, steps.clone()), options);
    assert_eq!(unpriced.phases.len(), 2);
    // Merging costs the words of both lists; a positive barrier makes it
    // cheaper, and the merge chains through the third exchange.
    let mut cheaper = priced_by_words(1);
    let merged = group_phases_priced(&program(4, steps.clone()), options, Some(&mut cheaper));
    assert_eq!(merged.phases.len(), 1);
    assert_eq!(
        merged.phases[0].merged_from,
        vec!["op0#0", "op1#0", "op1#1"]
    );
    let chained = merged.decisions[1].cost.expect("priced");
    assert_eq!(
        (chained.merged_horizon, chained.separate_sum),
        (Some(12), 12)
    );
    // No barrier saved: equal cost is not cheaper, and both numbers are
    // logged; the same-operator boundary after it merges unpriced.
    let mut even = priced_by_words(0);
    let kept = group_phases_priced(&program(4, steps), options, Some(&mut even));
    assert_eq!(kept.phases.len(), 2);
    let first = &kept.decisions[0];
    assert_eq!(first.outcome, MotionOutcome::Blocked(Blocker::NotCheaper));
    assert_eq!(first.cost.and_then(|cost| cost.merged_horizon), Some(8));
    assert_eq!(kept.decisions[1].outcome, MotionOutcome::Adjacent);
    assert_eq!(kept.decisions[1].cost, None);
}
