//! Tests of Repeat patch lists: hand-built rows whose slots read iterated
//! and stationary allocations (the zero base, the moving base taken only
//! when it makes patching strictly cheaper, the most common stride with ties
//! to the smaller, receive pointers always patched, no patches outside a
//! Repeat), the phase totals and their cycle costs (54 cycles a word in the
//! supervisor loop, the six-worker bulk patcher from 24 words), and one
//! scheduled and encoded phase whose patched iteration-0 row must equal the
//! row finalized for later iterations.

use super::*;
use crate::build_file::{SchedulePolicy, TransferWidth};
use crate::expand::program::{
    Allocation, AllocationId, Destination, Location, Provenance, Reason, TransferList,
};
use crate::layout::format::MemoryClass;
use crate::rows::{RelocationSlot, Row, encode_phase};
use crate::schedule::{LocalAllocation, SymbolicAddress, schedule, validate};

/// A local allocation on tile 0 of `bytes` per instance.
fn local(bytes: u32, iterations: u32) -> LocalAllocation {
    LocalAllocation {
        tile: 0,
        bytes,
        iterations,
        alignment: 8,
        alias_root: 0,
    }
}

/// A problem of `iterations` Repeat iterations that only declares its
/// allocations (`repeat_patches` reads nothing else of it).
fn problem(iterations: u32, allocations: Vec<LocalAllocation>) -> ExchangeProblem {
    ExchangeProblem {
        tiles: 4,
        iterations,
        allocations,
        ..ExchangeProblem::default()
    }
}

fn slot(word: u32, field: SlotField, allocation: u32) -> RelocationSlot {
    RelocationSlot {
        word,
        field,
        address: SymbolicAddress {
            allocation,
            offset: 0,
        },
    }
}

/// A row of `words` zero words with `slots`.
fn row(words: usize, slots: Vec<RelocationSlot>) -> Row {
    Row {
        words: vec![0; words],
        slots,
    }
}

fn patch(word: u32, step_words: i64) -> PatchWord {
    PatchWord { word, step_words }
}

/// Allocation 0 is iterated with 256-byte instances (a 64-word stride),
/// allocation 1 is stationary, allocation 2 is iterated with 128-byte
/// instances (a 32-word stride), allocation 3 iterated with 64-byte
/// instances (16 words).
fn four_allocations(iterations: u32) -> ExchangeProblem {
    problem(
        iterations,
        vec![
            local(256, iterations),
            local(512, 1),
            local(128, iterations),
            local(64, iterations),
        ],
    )
}

#[test]
fn a_zero_base_patches_every_moving_send_address_by_its_stride() {
    // One moving send (word 1, allocation 0) and one stationary (word 3):
    // zero base 1 word, moving base 1 word (the stationary one): not
    // strictly fewer, so the zero base stays and word 1 moves +64.
    let rows = PhaseRows {
        rows: vec![row(
            4,
            vec![
                slot(1, SlotField::SendAddress, 0),
                slot(3, SlotField::SendAddress, 1),
            ],
        )],
    };
    let patches = repeat_patches(&four_allocations(3), &rows, true);
    assert_eq!(
        patches.tiles,
        vec![TilePatches {
            tile: 0,
            base: BaseChoice::Zero,
            zero_base_words: 1,
            words: vec![patch(1, 64)],
        }]
    );
}

#[test]
fn the_moving_base_is_taken_when_it_patches_strictly_fewer_words() {
    // Two moving sends (words 0 and 4, stride 64) and one stationary
    // (word 2): zero base 2 words, moving base 1 word (the stationary
    // one, moved back by -64).
    let rows = PhaseRows {
        rows: vec![row(
            6,
            vec![
                slot(0, SlotField::SendAddress, 0),
                slot(2, SlotField::SendAddress, 1),
                slot(4, SlotField::SendAddress, 0),
            ],
        )],
    };
    let patches = repeat_patches(&four_allocations(3), &rows, true);
    assert_eq!(
        patches.tiles,
        vec![TilePatches {
            tile: 0,
            base: BaseChoice::Moving { stride_words: 64 },
            zero_base_words: 2,
            words: vec![patch(2, -64)],
        }]
    );
    // With base selection off the same row keeps its zero base.
    let without = repeat_patches(&four_allocations(3), &rows, false);
    assert_eq!(
        without.tiles,
        vec![TilePatches {
            tile: 0,
            base: BaseChoice::Zero,
            zero_base_words: 2,
            words: vec![patch(0, 64), patch(4, 64)],
        }]
    );
}

#[test]
fn a_moving_base_that_removes_every_patch_still_lists_the_tile() {
    // Every send moves by 64: the moving base leaves no patch, but the
    // tile must be listed so that its base register moves.
    let rows = PhaseRows {
        rows: vec![
            row(0, Vec::new()),
            row(
                4,
                vec![
                    slot(0, SlotField::SendAddress, 0),
                    slot(2, SlotField::SendAddress, 0),
                ],
            ),
        ],
    };
    let patches = repeat_patches(&four_allocations(2), &rows, true);
    assert_eq!(
        patches.tiles,
        vec![TilePatches {
            tile: 1,
            base: BaseChoice::Moving { stride_words: 64 },
            zero_base_words: 2,
            words: Vec::new(),
        }]
    );
    assert_eq!(patches.words(), 0);
    assert_eq!(patches.calls(), 0);
    assert_eq!(patches.cycles(), 0);
}

#[test]
fn the_base_follows_the_most_common_stride_and_ties_go_to_the_smaller() {
    // Strides 64, 64, 32, 32, 16 (words 0..5): 64 and 32 both appear
    // twice, so the base moves by 32; the others are patched by their
    // difference from it: +32, +32, -16.
    let rows = PhaseRows {
        rows: vec![row(
            5,
            vec![
                slot(0, SlotField::SendAddress, 0),
                slot(1, SlotField::SendAddress, 0),
                slot(2, SlotField::SendAddress, 2),
                slot(3, SlotField::SendAddress, 2),
                slot(4, SlotField::SendAddress, 3),
            ],
        )],
    };
    let patches = repeat_patches(&four_allocations(3), &rows, true);
    assert_eq!(
        patches.tiles,
        vec![TilePatches {
            tile: 0,
            base: BaseChoice::Moving { stride_words: 32 },
            zero_base_words: 5,
            words: vec![patch(0, 32), patch(1, 32), patch(4, -16)],
        }]
    );
}

#[test]
fn receive_pointers_into_iterated_allocations_are_always_patched() {
    // A PIC value (word 1) and a sendpicp inline PIC (word 3) into
    // iterated allocations are patched by their strides whatever the
    // send base; a pointer into the stationary allocation is not.
    let rows = PhaseRows {
        rows: vec![row(
            6,
            vec![
                slot(0, SlotField::SendAddress, 0),
                slot(1, SlotField::PicValue, 2),
                slot(2, SlotField::SendAddress, 0),
                slot(3, SlotField::InlinePic, 3),
                slot(5, SlotField::PicValue, 1),
            ],
        )],
    };
    let patches = repeat_patches(&four_allocations(3), &rows, true);
    assert_eq!(
        patches.tiles,
        vec![TilePatches {
            tile: 0,
            base: BaseChoice::Moving { stride_words: 64 },
            zero_base_words: 2,
            words: vec![patch(1, 32), patch(3, 16)],
        }]
    );
}

#[test]
fn nothing_is_patched_outside_a_repeat_or_for_stationary_rows() {
    let moving = PhaseRows {
        rows: vec![row(
            4,
            vec![
                slot(0, SlotField::SendAddress, 0),
                slot(1, SlotField::PicValue, 2),
            ],
        )],
    };
    // A phase that runs once: its iterated allocations do not move.
    assert_eq!(
        repeat_patches(&four_allocations(1), &moving, true),
        PhasePatches::default()
    );
    // An allocation with one instance does not move inside a Repeat.
    let stationary = problem(3, vec![local(256, 1)]);
    assert_eq!(
        repeat_patches(&stationary, &moving_on(0), true),
        PhasePatches::default()
    );
}

fn moving_on(allocation: u32) -> PhaseRows {
    PhaseRows {
        rows: vec![row(
            2,
            vec![
                slot(0, SlotField::SendAddress, allocation),
                slot(1, SlotField::PicValue, allocation),
            ],
        )],
    }
}

fn tile_with(tile: u32, words: usize) -> TilePatches {
    TilePatches {
        tile,
        base: BaseChoice::Zero,
        zero_base_words: words as u32,
        words: (0..words as u32).map(|word| patch(word, 1)).collect(),
    }
}

#[test]
fn phase_totals_count_words_calls_and_the_longest_list() {
    let phase = PhasePatches {
        tiles: vec![
            TilePatches {
                tile: 0,
                base: BaseChoice::Moving { stride_words: 8 },
                zero_base_words: 4,
                words: Vec::new(),
            },
            tile_with(1, 3),
            tile_with(2, 30),
        ],
    };
    assert_eq!(phase.words(), 33);
    assert_eq!(phase.calls(), 2);
    assert_eq!(phase.max_words(), 30);
    // 3 words: 3 x 54 = 162 cycles; 30 words: the bulk patcher, its call
    // (233.5) plus 30 x 9.01 (CALIBRATION.md's fit), so 504: the slowest tile.
    assert_eq!(phase.cycles(), 504);
    assert_eq!(PhasePatches::default().max_words(), 0);
    assert_eq!(PhasePatches::default().cycles(), 0);
}

#[test]
fn patch_cycles_switch_to_the_bulk_patcher_at_twenty_four_words() {
    // 23 words in the supervisor loop: 23 x 54 = 1,242 cycles.
    let below = PhasePatches {
        tiles: vec![tile_with(0, 23)],
    };
    assert_eq!(below.cycles(), 1_242);
    // 24 words on six workers: 233.5 + 24 x 9.01 = 450 cycles (the
    // measured 450 of CALIBRATION.md).
    let at = PhasePatches {
        tiles: vec![tile_with(0, 24)],
    };
    assert_eq!(at.cycles(), 450);
    // The phase waits for its slowest tile, which is the 23-word list.
    let both = PhasePatches {
        tiles: vec![tile_with(0, 24), tile_with(1, 23)],
    };
    assert_eq!(both.cycles(), 1_242);
    // One word: 54 cycles.
    assert_eq!(
        PhasePatches {
            tiles: vec![tile_with(0, 1)]
        }
        .cycles(),
        54
    );
}

fn allocation(tile: u32, bytes: u32, iterations: u32, alias_group: u32) -> Allocation {
    Allocation {
        tile,
        bytes,
        alignment: 8,
        class: MemoryClass::Standard,
        alias_group,
        iterations,
        provenance: Provenance {
            op: 0,
            value: None,
            reason: Reason::Rearrange,
        },
    }
}

fn at(allocation: u32, offset: u32) -> Location {
    Location {
        allocation: AllocationId(allocation),
        offset,
    }
}

/// Byte address of `(local allocation, offset)` in `iteration`: every
/// allocation 4 KiB apart, an iterated one's instances `bytes` apart.
fn resolve(problem: &ExchangeProblem, allocation: u32, offset: u32, iteration: u32) -> u32 {
    let record = problem.allocations[allocation as usize];
    let instance = if record.iterations > 1 {
        iteration * record.bytes
    } else {
        0
    };
    0x4c000 + allocation * 0x1000 + offset + instance
}

/// The iteration-0 row with the base register and the patch list applied
/// `iteration` times, as the supervisor runs it.
fn patched_row(
    row: &Row,
    words: &[u32],
    patches: Option<&TilePatches>,
    iteration: u32,
) -> Vec<u32> {
    let mut words = words.to_vec();
    let Some(patches) = patches else {
        return words;
    };
    let field_of = |word: u32| {
        row.slots
            .iter()
            .find(|slot| slot.word == word)
            .map(|slot| slot.field)
            .expect("a patch names a slot word")
    };
    let mut add = |word: u32, field: SlotField, step: i64| {
        let field = field.field();
        let value = field.extract(words[word as usize]) as i64 + step * iteration as i64;
        words[word as usize] = (words[word as usize] & !field.mask) | field.place(value as u32);
    };
    if let BaseChoice::Moving { stride_words } = patches.base {
        for slot in &row.slots {
            if slot.field == SlotField::SendAddress {
                add(slot.word, slot.field, stride_words as i64);
            }
        }
    }
    for patch in &patches.words {
        add(patch.word, field_of(patch.word), patch.step_words);
    }
    words
}

/// A scheduled and encoded phase of three Repeat iterations: tile 0 sends
/// twice from an iterated block (256-byte instances, a 64-word stride) and
/// once from a stationary one; tile 1 receives into an iterated block
/// (128-byte instances, 32 words) and a stationary one; tile 2 sends and
/// tile 3 receives only stationary data.
#[test]
fn patched_rows_of_an_encoded_phase_equal_the_rows_of_later_iterations() {
    let allocations = vec![
        allocation(0, 256, 3, 0),  // 0: tile 0, iterated source
        allocation(0, 256, 1, 1),  // 1: tile 0, stationary source
        allocation(1, 1024, 1, 2), // 2: tile 1, stationary destination
        allocation(1, 128, 3, 3),  // 3: tile 1, iterated destination
        allocation(2, 256, 1, 4),  // 4: tile 2, stationary source and destination
        allocation(3, 256, 1, 5),  // 5: tile 3, stationary destination
    ];
    let to = |tile: u32, allocation: u32, offset: u32| Destination {
        tile,
        location: at(allocation, offset),
    };
    let mut transfers = TransferList::default();
    transfers.push(0, at(0, 0), 16, &[to(1, 2, 0)]);
    transfers.push(0, at(1, 0), 8, &[to(2, 4, 0)]);
    transfers.push(0, at(0, 128), 8, &[to(3, 5, 0)]);
    transfers.push(2, at(4, 64), 4, &[to(1, 3, 0)]);
    let problem = ExchangeProblem::from_transfers(&transfers, &allocations, 3, 4)
        .expect("a well-formed phase");
    let schedule =
        schedule(&problem, SchedulePolicy::Latency, TransferWidth::Word32).expect("schedules");
    validate(&problem, &schedule).expect("a valid schedule");
    let rows = encode_phase(&problem, &schedule).expect("encodes");

    // Tile 0: three sends (two moving by 64), so the moving base patches
    // only the stationary one, by -64; tile 1: its pointer into the
    // iterated block moves by +32; tiles 2 and 3 touch nothing iterated.
    let patches = repeat_patches(&problem, &rows, true);
    let listed: Vec<(u32, BaseChoice, u32, Vec<i64>)> = patches
        .tiles
        .iter()
        .map(|tile| {
            (
                tile.tile,
                tile.base,
                tile.zero_base_words,
                tile.words.iter().map(|word| word.step_words).collect(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (0, BaseChoice::Moving { stride_words: 64 }, 2, vec![-64]),
            (1, BaseChoice::Zero, 0, vec![32]),
        ]
    );
    assert_eq!(patches.words(), 2);
    assert_eq!(patches.cycles(), 54);
    let zero = repeat_patches(&problem, &rows, false);
    assert_eq!(zero.words(), 3);
    assert_eq!(zero.max_words(), 2);
    assert_eq!(zero.cycles(), 2 * 54);

    // Either way, the patched iteration-0 rows are the later iterations' rows.
    for phase in [&patches, &zero] {
        for (tile, row) in rows.rows.iter().enumerate() {
            let first = row
                .finalize(|allocation, offset| resolve(&problem, allocation, offset, 0))
                .expect("finalizes");
            let tile_patches = phase.tiles.iter().find(|entry| entry.tile == tile as u32);
            for iteration in 1..3 {
                let expected = row
                    .finalize(|allocation, offset| resolve(&problem, allocation, offset, iteration))
                    .expect("finalizes");
                assert_eq!(
                    patched_row(row, &first, tile_patches, iteration),
                    expected,
                    "tile {tile}, iteration {iteration}"
                );
            }
        }
    }
}

#[test]
fn the_moving_base_is_refused_when_fewer_words_cost_more_cycles() {
    // 24 moving sends and 23 stationary ones: the zero base patches 24
    // words (bulk patcher: 450 cycles); the moving base
    // 23 (supervisor loop: 23 x 54 = 1,242 cycles). Fewer words, slower:
    // the zero base stays.
    let mut slots = Vec::new();
    for index in 0..24 {
        slots.push(slot(index * 2, SlotField::SendAddress, 0));
    }
    for index in 0..23 {
        slots.push(slot(index * 2 + 1, SlotField::SendAddress, 1));
    }
    let rows = PhaseRows {
        rows: vec![row(48, slots)],
    };
    let patches = repeat_patches(&four_allocations(3), &rows, true);
    assert_eq!(patches.tiles.len(), 1);
    assert_eq!(patches.tiles[0].base, BaseChoice::Zero);
    assert_eq!(patches.tiles[0].words.len(), 24);
    assert_eq!(patches.cycles(), 450);
    // With 24 moving sends and 2 stationary ones the moving base patches 2
    // words (108 cycles) against the zero base's 24 (450): taken.
    let mut slots = Vec::new();
    for index in 0..24 {
        slots.push(slot(index * 2, SlotField::SendAddress, 0));
    }
    slots.push(slot(49, SlotField::SendAddress, 1));
    slots.push(slot(51, SlotField::SendAddress, 1));
    let rows = PhaseRows {
        rows: vec![row(52, slots)],
    };
    let patches = repeat_patches(&four_allocations(3), &rows, true);
    assert_eq!(
        patches.tiles[0].base,
        BaseChoice::Moving { stride_words: 64 }
    );
    assert_eq!(patches.tiles[0].words.len(), 2);
    assert_eq!(patches.cycles(), 108);
}
