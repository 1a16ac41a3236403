//! Packing counterfactuals on hand-built phases, with the expected pieces,
//! copies and refusals worked out by hand.

use super::*;
use crate::group::hazard::HazardKind;
use crate::schedule::problem::{LocalAllocation, SymbolicAddress};

fn allocation(tile: u32, bytes: u32) -> LocalAllocation {
    LocalAllocation {
        tile,
        bytes,
        iterations: 1,
        alignment: 4,
        alias_root: u32::MAX,
    }
}

type Receive = (u32, (u32, u32));

/// A hand-written piece: source tile, (allocation, offset), words, receives.
type Piece<'a> = (u32, (u32, u32), u32, &'a [Receive]);

/// A problem from allocations (alias roots unset mean their own) and
/// pieces `(source tile, (allocation, offset), words, receives)`.
fn problem(tiles: u32, allocations: &[LocalAllocation], pieces: &[Piece]) -> ExchangeProblem {
    let mut problem = ExchangeProblem {
        tiles,
        iterations: 1,
        allocations: allocations
            .iter()
            .enumerate()
            .map(|(index, allocation)| LocalAllocation {
                alias_root: if allocation.alias_root == u32::MAX {
                    index as u32
                } else {
                    allocation.alias_root
                },
                ..*allocation
            })
            .collect(),
        destination_start: vec![0],
        ..ExchangeProblem::default()
    };
    let address = |(allocation, offset): (u32, u32)| SymbolicAddress { allocation, offset };
    for &(tile, source, words, receives) in pieces {
        let receivers: Vec<(u32, SymbolicAddress)> = receives
            .iter()
            .map(|&(tile, place)| (tile, address(place)))
            .collect();
        problem.push_piece(tile, address(source), words, &receivers);
    }
    problem
}

/// Packs and checks.
fn packed(problem: &ExchangeProblem, alternative: Alternative) -> Packed {
    let independence = independence(problem);
    let packed = pack(problem, alternative, &independence).expect("packs");
    check_packed(problem, &packed).expect("the check passes");
    packed
}

/// Tile 0 sends four one-word pieces from contiguous bytes 0..16 of
/// allocation 0 to tile 1, landing 16 bytes apart in allocation 1.
fn fragmented_destinations() -> ExchangeProblem {
    problem(
        2,
        &[allocation(0, 64), allocation(1, 64)],
        &[
            (0, (0, 0), 1, &[(1, (1, 0))]),
            (0, (0, 4), 1, &[(1, (1, 16))]),
            (0, (0, 8), 1, &[(1, (1, 32))]),
            (0, (0, 12), 1, &[(1, (1, 48))]),
        ],
    )
}

/// The same four words read 16 bytes apart and landing contiguously.
fn fragmented_sources() -> ExchangeProblem {
    problem(
        2,
        &[allocation(0, 64), allocation(1, 64)],
        &[
            (0, (0, 48), 1, &[(1, (1, 12))]),
            (0, (0, 0), 1, &[(1, (1, 0))]),
            (0, (0, 16), 1, &[(1, (1, 4))]),
            (0, (0, 32), 1, &[(1, (1, 8))]),
        ],
    )
}

#[test]
fn receiver_staging_joins_what_only_the_destination_fragments() {
    let original = fragmented_destinations();
    assert_eq!(original.pieces(), 4);
    let staged = packed(&original, Alternative::ReceiverStaging);
    assert_eq!(staged.problem.pieces(), 1);
    assert_eq!(staged.problem.words, vec![4]);
    let figures = copy_figures(2, &staged.gathers, &staged.scatters);
    // 16 bytes scattered on tile 1: 2 ideal cycles, 4 runs (the final
    // places are 16 bytes apart) in one affine group (4 bytes, strides 4
    // and 16); nothing gathered.
    assert_eq!(figures.source_copy_cycles, 0);
    assert_eq!(figures.destination_copy_cycles, 2);
    assert_eq!(figures.added_copy_cycles, 2);
    assert_eq!(figures.copy_runs, 4);
    assert_eq!(figures.affine_groups, 1);
    assert_eq!(figures.affine_groups_max_per_tile, 1);
    assert_eq!(
        (figures.staging_bytes_max, figures.staging_tile),
        (16, Some(1))
    );
    // Source packing cannot help: the destinations stay 16 bytes apart.
    let source_packed = packed(&original, Alternative::SourcePacking);
    assert_eq!(source_packed.problem.pieces(), 4);
}

#[test]
fn source_packing_joins_what_only_the_source_fragments() {
    let original = fragmented_sources();
    let source_packed = packed(&original, Alternative::SourcePacking);
    assert_eq!(source_packed.problem.pieces(), 1);
    let figures = copy_figures(2, &source_packed.gathers, &source_packed.scatters);
    assert_eq!(figures.source_copy_cycles, 2);
    assert_eq!(figures.destination_copy_cycles, 0);
    // Gathered in destination order: sources 0, 16, 32, 48 into 0..16.
    assert_eq!(figures.copy_runs, 4);
    assert_eq!(figures.affine_groups, 1);
    assert_eq!(
        packed(&original, Alternative::ReceiverStaging)
            .problem
            .pieces(),
        4
    );
    // Reordering alone joins nothing: no two pieces continue each other
    // at both ends.
    assert_eq!(
        packed(&original, Alternative::CoalescedPrefix)
            .problem
            .pieces(),
        4
    );
}

#[test]
fn both_ends_staged_make_one_run_per_route_and_staging_is_combined_per_tile() {
    // Tile 0 sends four scattered words to tile 1 (strided both ends) and
    // tile 1 sends two words to tile 2.
    let original = problem(
        3,
        &[
            allocation(0, 64),
            allocation(1, 64),
            allocation(1, 64),
            allocation(2, 64),
        ],
        &[
            (0, (0, 0), 1, &[(1, (1, 0))]),
            (0, (0, 16), 1, &[(1, (1, 16))]),
            (0, (0, 32), 1, &[(1, (1, 32))]),
            (0, (0, 48), 1, &[(1, (1, 48))]),
            (1, (2, 0), 1, &[(2, (3, 8))]),
            (1, (2, 8), 1, &[(2, (3, 0))]),
        ],
    );
    let both = packed(&original, Alternative::Both);
    assert_eq!(both.problem.pieces(), 2);
    let figures = copy_figures(3, &both.gathers, &both.scatters);
    // Tile 0 gathers 16 bytes, tile 1 gathers 8 and receives 16 (24 in
    // all, the fullest tile: not 16 + 16, the sum of the two maxima), tile
    // 2 receives 8.
    assert_eq!(
        (figures.staging_bytes_max, figures.staging_tile),
        (24, Some(1))
    );
    assert_eq!(figures.source_copy_cycles, 2);
    assert_eq!(figures.destination_copy_cycles, 2);
    assert_eq!(figures.added_copy_cycles, 4);
}

#[test]
fn multicast_routes_keep_their_recipients() {
    // Two pieces to tiles {1, 2} and one to tile 1 alone, interleaved.
    let original = problem(
        3,
        &[allocation(0, 64), allocation(1, 64), allocation(2, 64)],
        &[
            (0, (0, 0), 1, &[(1, (1, 0)), (2, (2, 32))]),
            (0, (0, 8), 1, &[(1, (1, 40))]),
            (0, (0, 4), 1, &[(1, (1, 4)), (2, (2, 36))]),
        ],
    );
    let prefix = packed(&original, Alternative::CoalescedPrefix);
    assert_eq!(prefix.problem.pieces(), 2);
    let multicast = (0..2)
        .find(|&piece| prefix.problem.receives_of(piece).len() == 2)
        .expect("one multicast piece");
    assert_eq!(prefix.problem.words[multicast], 2);
    for alternative in Alternative::ALL {
        packed(&original, alternative);
    }
}

/// Tile 0 sends to tile 1, which forwards what it received to tile 2;
/// two independent pieces come first.
fn forwarding() -> ExchangeProblem {
    problem(
        3,
        &[allocation(0, 64), allocation(1, 64), allocation(2, 64)],
        &[
            (0, (0, 0), 1, &[(1, (1, 0))]),
            (0, (0, 8), 1, &[(2, (2, 8))]),
            (0, (0, 4), 1, &[(1, (1, 4))]),
            (1, (1, 0), 2, &[(2, (2, 0))]),
        ],
    )
}

#[test]
fn a_phase_that_forwards_what_it_receives_is_refused_staging() {
    let original = forwarding();
    let found = independence(&original);
    assert_eq!(found.prefix, 3);
    assert_eq!((found.dependent, found.forwarding), (1, 1));
    let first = found.first.expect("a conflict");
    assert_eq!((first.later, first.earlier, first.tile), (3, 0, 1));
    assert_eq!(first.kind, HazardKind::ReadAfterWrite);
    for alternative in [
        Alternative::SourcePacking,
        Alternative::ReceiverStaging,
        Alternative::Both,
    ] {
        let refusal = pack(&original, alternative, &found).expect_err("refused");
        let text = refusal.to_string();
        assert!(text.contains("1 of 4 pieces"), "{text}");
        assert!(
            text.contains("piece 3, reads what piece 0 on tile 1"),
            "{text}"
        );
    }
    // The prefix is reordered (the two pieces to tile 1 join), the
    // forwarding piece stays last and unchanged.
    let prefix = packed(&original, Alternative::CoalescedPrefix);
    assert_eq!(prefix.prefix_pieces, 2);
    assert_eq!(prefix.problem.pieces(), 3);
    assert_eq!(prefix.problem.source_tile[2], 1);
    assert_eq!(prefix.problem.words[2], 2);
}

#[test]
fn a_dependency_through_a_repeat_binding_is_found() {
    // Allocation 1 (64 bytes, 2 iterations) aliases allocation 2's root
    // (128 bytes) on tile 1: iteration 1 writes bytes 64..68, which the
    // second piece reads through allocation 2. Iteration 0 alone meets
    // nothing.
    let mut allocations = vec![
        allocation(0, 64),
        allocation(1, 64),
        allocation(1, 128),
        allocation(2, 64),
    ];
    allocations[1].iterations = 2;
    allocations[1].alias_root = 2;
    let mut original = problem(
        3,
        &allocations,
        &[
            (0, (0, 0), 1, &[(1, (1, 0))]),
            (1, (2, 64), 1, &[(2, (3, 0))]),
        ],
    );
    original.iterations = 2;
    let found = independence(&original);
    assert_eq!(found.dependent, 1);
    assert_eq!(
        found.first.map(|conflict| conflict.kind),
        Some(HazardKind::ReadAfterWrite)
    );
    // Reading bytes 68..72 instead meets no binding.
    original.source[1].offset = 68;
    assert!(independence(&original).is_independent());
}

#[test]
fn the_check_rejects_a_scatter_to_the_wrong_place() {
    let original = fragmented_destinations();
    let mut staged = packed(&original, Alternative::ReceiverStaging);
    staged.scatters.swap(0, 1);
    let (first, second) = (staged.scatters[0].from, staged.scatters[1].from);
    staged.scatters[0].from = second;
    staged.scatters[1].from = first;
    staged.scatters[1].to.offset += 4;
    let error = check_packed(&original, &staged).expect_err("rejected");
    assert!(
        matches!(error, PackingCheckError::Deliveries { .. }),
        "{error}"
    );
}

#[test]
fn the_check_rejects_a_missing_gather_and_a_moved_tail() {
    let original = fragmented_sources();
    let mut source_packed = packed(&original, Alternative::SourcePacking);
    source_packed.gathers.pop();
    assert!(matches!(
        check_packed(&original, &source_packed),
        Err(PackingCheckError::UnfilledStaging { .. })
    ));
    let original = forwarding();
    let mut prefix = packed(&original, Alternative::CoalescedPrefix);
    // Claiming the forwarding piece is part of the reordered prefix.
    prefix.prefix_pieces = 3;
    assert!(matches!(
        check_packed(&original, &prefix),
        Err(PackingCheckError::PrefixDependent { piece: 2, .. })
    ));
}

#[test]
fn a_strided_run_is_one_affine_group_and_a_break_starts_another() {
    let run = |tile: u32, from: u32, to: u32| CopyRun {
        tile,
        from: SymbolicAddress {
            allocation: 0,
            offset: from,
        },
        to: SymbolicAddress {
            allocation: 1,
            offset: to,
        },
        bytes: 512,
    };
    // Seed 000's MLP-up copy: seven 512-byte rows spaced 3,072 bytes.
    let rows: Vec<CopyRun> = (0..7).map(|row| run(0, row * 512, row * 3072)).collect();
    assert_eq!(copies::merge_runs(&rows).len(), 7);
    assert_eq!(copies::affine_groups(&rows), vec![(0, 1)]);
    let mut broken = rows.clone();
    broken[4].to.offset += 4;
    // Rows 0-3 stride 3,072; row 4 breaks it; rows 5-6 start anew.
    assert_eq!(copies::affine_groups(&broken), vec![(0, 3)]);
    let contiguous: Vec<CopyRun> = (0..3).map(|row| run(0, row * 512, row * 512)).collect();
    assert_eq!(copies::merge_runs(&contiguous).len(), 1);
}
