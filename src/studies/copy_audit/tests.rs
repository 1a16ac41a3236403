//! Copy-boundary audit tests on hand-built programs: a copy whose bytes the
//! following exchange reads, the seed's strided MLP-up copy interleaving
//! with what the preceding exchange writes (and one row moved onto it), a
//! hazard through an alias, group order, and boundaries that kernels,
//! checkpoints and the Repeat end; the audit beside motion's decision. On
//! the tiny ViT every move the audit allows leaves the interpreter's output
//! bit for bit unchanged (and moving copies far does not).

use super::{Movable, Other, audit_copies};
use crate::expand::program::{
    Destination, KernelRun, LocalCopy, Location, LowProgram, Step, TransferList, ZeroFill,
};
use crate::group::tests::programs::*;
use crate::group::*;

/// An exchange of op 0 with one transfer per `(source, destination, words)`.
fn exchange_of(transfers: &[(Location, Location, u32)]) -> Step {
    let mut list = TransferList::default();
    for &(source, destination, words) in transfers {
        list.push(
            1,
            source,
            words,
            &[Destination {
                tile: 0,
                location: destination,
            }],
        );
    }
    Step::Exchange {
        provenance: provenance(0),
        transfers: list,
    }
}

fn copy(source: Location, destination: Location, bytes: u32) -> Step {
    Step::Copies {
        provenance: provenance(1),
        copies: vec![LocalCopy {
            tile: 0,
            source,
            destination,
            row_bytes: bytes,
            rows: 1,
            source_stride: 0,
            destination_stride: 0,
        }],
    }
}

fn transfer_other(other: &Other) -> (&'static str, u32, bool, u32, u32, u32) {
    match other {
        Other::Transfer {
            exchange,
            index,
            writes,
            allocation,
            start,
            end,
            ..
        } => (*exchange, *index, *writes, *allocation, *start, *end),
        Other::Group { .. } => panic!("{other:?}"),
    }
}

#[test]
fn a_copy_whose_bytes_the_following_exchange_reads_cannot_move_after() {
    // E2's transfer 1 reads bytes 3,072..3,136 of allocation 1; the copy
    // writes 3,072..3,584 there (E2's transfer 0 reads elsewhere).
    let steps = vec![
        exchange(0, at(0, 0), at(3, 0), 16),
        copy(at(2, 0), at(1, 3072), 512),
        exchange_of(&[(at(0, 64), at(3, 64), 4), (at(1, 3072), at(3, 128), 16)]),
    ];
    let audit = audit_copies(&program(4, steps), &[]);
    assert_eq!(audit.summary.boundaries, 1);
    let boundary = &audit.boundaries[0];
    assert_eq!(
        (
            boundary.preceding.key.as_str(),
            boundary.following.key.as_str()
        ),
        ("op0#0", "op0#1")
    );
    assert_eq!((boundary.copies, boundary.fills), (1, 0));
    assert_eq!((boundary.movable_before, boundary.movable_after), (1, 0));
    let group = &boundary.groups[0];
    assert_eq!(group.movable, Movable::Before);
    assert!(group.before.is_none());
    let blocked = group.after.as_ref().expect("blocked after");
    assert_eq!(blocked.kind, "write/read");
    assert_eq!(
        (blocked.item.item, blocked.item.index, blocked.item.tile),
        ("copy", 0, 0)
    );
    assert!(blocked.item.writes);
    assert_eq!(
        (
            blocked.item.allocation,
            blocked.item.start,
            blocked.item.end
        ),
        (1, 3072, 3584)
    );
    assert_eq!(
        transfer_other(&blocked.other),
        ("following", 1, false, 1, 3072, 3136)
    );
    assert_eq!(blocked.alias_root, 1);
    assert_eq!((blocked.overlap_start, blocked.overlap_end), (3072, 3136));
    assert!(boundary.motion.is_none(), "no decision log given");
}

/// The preceding exchange writes the six 2,560-byte gaps between seven
/// 512-byte rows every 3,072 bytes of allocation 1, and the 512 bytes past
/// the last row; the copy writes the rows (`shift` bytes later); the
/// following exchange reads the whole materialized block.
fn mlp_up(shift: u32) -> LowProgram {
    let mut gaps: Vec<(Location, Location, u32)> = (0..6)
        .map(|gap| (at(0, 0), at(1, 512 + gap * 3072), 640))
        .collect();
    gaps.push((at(0, 0), at(1, 6 * 3072 + 512), 128));
    let steps = vec![
        exchange_of(&gaps),
        strided_copy(at(2, 0), at(1, shift)),
        exchange(0, at(1, 0), at(3, 0), 128),
    ];
    let mut program = program(4, steps);
    program.allocations[1].bytes = 7 * 3072;
    program
}

#[test]
fn strided_rows_between_exchange_written_gaps_move_before_until_one_row_overlaps() {
    let program = mlp_up(0);
    let groups = group_phases(&program, true);
    let audit = audit_copies(&program, &groups.decisions);
    let boundary = &audit.boundaries[0];
    let group = &boundary.groups[0];
    // The same allocation, disjoint bytes: movable before.
    assert_eq!(group.movable, Movable::Before, "{group:?}");
    assert!(group.before.is_none());
    assert!(boundary.all_before && !boundary.all_after);
    let after = group
        .after
        .as_ref()
        .expect("the following exchange reads the rows");
    assert_eq!(after.kind, "write/read");
    assert_eq!((after.item.start, after.item.end), (0, 512));
    assert_eq!(
        transfer_other(&after.other),
        ("following", 0, false, 1, 0, 512)
    );
    // Motion agrees: it moved the copy before and merged the exchanges.
    let motion = boundary.motion.as_ref().expect("decision");
    assert_eq!((motion.outcome, motion.merged), ("moved", true));
    assert_eq!(audit.summary.merged, 1);

    // Row 0 now covers bytes 4..516: its last 4 bytes are the first gap's.
    let program = mlp_up(4);
    let groups = group_phases(&program, true);
    let audit = audit_copies(&program, &groups.decisions);
    let group = &audit.boundaries[0].groups[0];
    assert_eq!(group.movable, Movable::Neither);
    let before = group.before.as_ref().expect("blocked before");
    assert_eq!(before.kind, "write/write");
    assert_eq!((before.item.start, before.item.end), (4, 516));
    assert_eq!(
        transfer_other(&before.other),
        ("preceding", 0, true, 1, 512, 3072)
    );
    assert_eq!((before.overlap_start, before.overlap_end), (512, 516));
    let motion = audit.boundaries[0].motion.as_ref().expect("decision");
    assert_eq!((motion.outcome, motion.merged), ("copies", false));
}

#[test]
fn a_hazard_through_an_alias_is_found() {
    // The copy writes allocation 2, an alias of allocation 1, which the
    // preceding exchange reads (bytes 1,024..1,088) and the following does not touch.
    let steps = vec![
        exchange(0, at(1, 1024), at(0, 0), 16),
        copy(at(3, 0), at(2, 1000), 100),
        exchange(0, at(0, 512), at(3, 512), 4),
    ];
    let mut aliased = program(4, steps);
    aliased.allocations[2].alias_group = 1;
    let audit = audit_copies(&aliased, &[]);
    let group = &audit.boundaries[0].groups[0];
    assert_eq!(group.movable, Movable::After);
    let before = group.before.as_ref().expect("blocked before");
    assert_eq!(before.kind, "read/write");
    assert_eq!(
        (before.item.allocation, before.item.start, before.item.end),
        (2, 1000, 1100)
    );
    assert_eq!(
        transfer_other(&before.other),
        ("preceding", 0, false, 1, 1024, 1088)
    );
    assert_eq!(before.alias_root, 1);
    assert_eq!((before.overlap_start, before.overlap_end), (1024, 1088));
    // Without the alias nothing blocks.
    aliased.allocations[2].alias_group = 2;
    let audit = audit_copies(&aliased, &[]);
    assert_eq!(audit.boundaries[0].groups[0].movable, Movable::Both);
}

#[test]
fn a_group_may_not_overtake_a_group_it_depends_on() {
    // Group 0 reads what E1 writes (stuck after E1); group 1 reads what
    // group 0 writes, so it cannot move before E1 either, though it has no
    // hazard with E1 itself. Both may move after E2.
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 16),
        copy(at(1, 0), at(2, 0), 64),
        copy(at(2, 32), at(3, 0), 16),
        exchange(0, at(0, 256), at(3, 256), 4),
    ];
    let audit = audit_copies(&program(4, steps), &[]);
    let boundary = &audit.boundaries[0];
    assert_eq!(boundary.groups.len(), 2);
    assert_eq!(boundary.groups[0].movable, Movable::After);
    assert_eq!(boundary.groups[1].movable, Movable::After);
    let blocked = boundary.groups[1]
        .before
        .as_ref()
        .expect("blocked by group 0");
    assert_eq!(blocked.kind, "write/read");
    let Other::Group {
        group,
        index,
        writes,
        allocation,
        start,
        end,
        ..
    } = blocked.other
    else {
        panic!("{blocked:?}")
    };
    assert_eq!((group, index, writes, allocation), (0, 0, true, 2));
    assert_eq!((start, end), (0, 64));
    assert_eq!((blocked.item.start, blocked.item.end), (32, 48));
    assert_eq!((blocked.overlap_start, blocked.overlap_end), (32, 48));
    assert_eq!(
        (
            boundary.movable_before,
            boundary.movable_after,
            boundary.movable_neither
        ),
        (0, 2, 0)
    );
}

#[test]
fn kernels_checkpoints_and_the_repeat_end_boundaries() {
    let kernels = Step::Kernels {
        provenance: provenance(0),
        runs: Vec::<KernelRun>::new(),
    };
    let steps = vec![
        exchange(0, at(0, 0), at(1, 0), 4),
        copy(at(2, 0), at(3, 0), 16),
        kernels,
        exchange(0, at(0, 0), at(1, 0), 4),
        copy(at(2, 0), at(3, 0), 16),
        Step::Checkpoint { name: 0 },
        copy(at(2, 0), at(3, 0), 16),
        exchange(0, at(0, 0), at(1, 0), 4),
        Step::Repeat {
            iterations: 2,
            body: vec![
                copy(at(2, 0), at(3, 0), 16),
                exchange(0, at(0, 0), at(1, 0), 4),
                copy(at(2, 0), at(3, 0), 16),
                copy(at(2, 64), at(3, 64), 16),
                exchange(0, at(0, 0), at(1, 0), 4),
            ],
        },
        copy(at(2, 0), at(3, 0), 16),
        exchange(0, at(0, 0), at(1, 0), 4),
    ];
    let audit = audit_copies(&program(4, steps), &[]);
    // Only the Repeat body's run stands between two exchanges.
    assert_eq!(audit.summary.boundaries, 1);
    let boundary = &audit.boundaries[0];
    assert!(boundary.in_repeat);
    assert_eq!(
        (
            boundary.preceding.key.as_str(),
            boundary.following.key.as_str()
        ),
        ("op0#3", "op0#4")
    );
    assert_eq!(boundary.following.step_path, vec![8, 4]);
    assert_eq!(boundary.groups[1].step_path, vec![8, 3]);
    assert_eq!((boundary.copies, audit.summary.groups), (2, 2));
}

/// The step sequence `path` (all but its last index) names.
fn sequence<'a>(steps: &'a mut Vec<Step>, path: &[u32]) -> &'a mut Vec<Step> {
    let Some((&first, rest)) = path.split_first() else {
        return steps;
    };
    match &mut steps[first as usize] {
        Step::Repeat { body, .. } => sequence(body, rest),
        other => panic!("{other:?} is not a Repeat"),
    }
}

#[test]
fn every_move_the_audit_allows_on_the_tiny_vit_computes_the_same_output() {
    // Each group the audit finds movable, moved alone before the preceding
    // (after the following) exchange, leaves the interpreter's output bit
    // for bit as it was.
    let (layouts, program, weights) = tiny();
    let run = |program: &LowProgram| {
        crate::sim::interpreter::interpret(program, &layouts, &weights).map(|interpretation| {
            interpretation
                .output
                .iter()
                .map(|value| value.to_bits())
                .collect::<Vec<_>>()
        })
    };
    let bits = |program: &LowProgram| run(program).expect("interprets");
    let original = bits(&program);
    let audit = audit_copies(&program, &[]);
    let mut moves = 0;
    for boundary in &audit.boundaries {
        for group in &boundary.groups {
            let (parent, at) = group.step_path.split_at(group.step_path.len() - 1);
            let at = at[0] as usize;
            let preceding = *boundary.preceding.step_path.last().expect("path") as usize;
            let following = *boundary.following.step_path.last().expect("path") as usize;
            for (allowed, target) in [
                (group.movable.before(), preceding),
                (group.movable.after(), following),
            ] {
                if !allowed {
                    continue;
                }
                let mut moved = program.clone();
                let steps = sequence(&mut moved.steps, parent);
                let step = steps.remove(at);
                steps.insert(target, step);
                assert_eq!(
                    bits(&moved),
                    original,
                    "boundary {} group {}",
                    boundary.index,
                    group.index
                );
                moves += 1;
            }
        }
    }
    assert_eq!(
        moves,
        audit.summary.movable_before + audit.summary.movable_after
    );
    assert!(moves > 0);
    // The check sees misplaced copies: moved to the start of their step
    // sequence (before the kernels that produce what they read), some
    // groups change the output, or make a kernel read bytes nothing wrote
    // (which the interpreter refuses).
    let changed = audit
        .boundaries
        .iter()
        .flat_map(|boundary| &boundary.groups)
        .filter(|group| {
            let (parent, at) = group.step_path.split_at(group.step_path.len() - 1);
            let mut moved = program.clone();
            let steps = sequence(&mut moved.steps, parent);
            let step = steps.remove(at[0] as usize);
            steps.insert(0, step);
            run(&moved).map_or(true, |bits| bits != original)
        })
        .count();
    assert!(
        changed > 0,
        "moving copies far changes nothing: the check is blind"
    );
}

#[test]
fn a_fill_is_a_write_the_following_exchange_may_read() {
    // Four 64-byte rows every 1,024 bytes zeroed in allocation 1; E2 reads
    // bytes 3,100..3,104 (row 3); E1 reads allocation 1 between the rows.
    let fill = Step::Fills {
        provenance: provenance(1),
        fills: vec![ZeroFill {
            tile: 0,
            destination: at(1, 0),
            row_bytes: 64,
            rows: 4,
            stride: 1024,
        }],
    };
    let steps = vec![
        exchange(0, at(1, 64), at(0, 0), 240),
        fill,
        exchange(0, at(1, 3100), at(2, 0), 1),
    ];
    let audit = audit_copies(&program(3, steps), &[]);
    let boundary = &audit.boundaries[0];
    assert_eq!((boundary.copies, boundary.fills), (0, 1));
    let group = &boundary.groups[0];
    assert_eq!((group.kind, group.movable), ("fills", Movable::Before));
    let after = group.after.as_ref().expect("blocked after");
    assert_eq!(after.kind, "write/read");
    assert_eq!(
        (after.item.item, after.item.start, after.item.end),
        ("fill", 3072, 3136)
    );
    assert_eq!(
        transfer_other(&after.other),
        ("following", 0, false, 1, 3100, 3104)
    );
    assert_eq!((after.overlap_start, after.overlap_end), (3100, 3104));
}
