//! Tests of the scheduling core: random phases (seeded xorshift) with
//! multicast, paired-eligible pieces, Repeat-bound sources and
//! receive-then-forward chains; negative tests of the validator; a
//! SigLIP-sized synthetic phase scheduled and validated. `auto`'s candidates,
//! pruning and row allowance are in `tests/auto.rs`.

use super::*;
use crate::expand::program::{
    Allocation, AllocationId, Destination, Location, Provenance, Reason, TransferList,
};
use crate::target::mapping::physical_tile;
use crate::target::memory::MemoryClass;
use crate::target::timing::{paired_payload_start, payload_start, time_to_mux};

mod auto;
pub(crate) mod elements;
pub(crate) mod paired_protocol;

/// Seeded xorshift64*.
pub(crate) struct Random(u64);

impl Random {
    pub(crate) fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

const SOURCE_BYTES: u32 = 4096;
const DESTINATION_BYTES: u32 = 16384;
const ITERATED_BYTES: u32 = 1024;
pub(crate) const ITERATIONS: u32 = 3;

pub(crate) fn allocation(tile: u32, bytes: u32, iterations: u32, alias_group: u32) -> Allocation {
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

/// A random phase on `tiles` tiles: per tile a source block, two destination
/// blocks and a Repeat-bound block.
pub(crate) fn random_phase(
    seed: u64,
    tiles: u32,
    transfers: usize,
) -> (TransferList, Vec<Allocation>) {
    let mut random = Random::new(seed);
    let mut allocations = Vec::new();
    for tile in 0..tiles {
        let base = allocations.len() as u32;
        allocations.push(allocation(tile, SOURCE_BYTES, 1, base));
        allocations.push(allocation(tile, DESTINATION_BYTES, 1, base + 1));
        allocations.push(allocation(tile, DESTINATION_BYTES, 1, base + 2));
        allocations.push(allocation(tile, ITERATED_BYTES, ITERATIONS, base + 3));
    }
    let id = |tile: u32, kind: u32| AllocationId(tile * 4 + kind);
    let mut next_destination = vec![0u32; tiles as usize];
    let mut received: Vec<(u32, Location, u32)> = Vec::new();
    let mut list = TransferList::default();
    for _ in 0..transfers {
        let choice = random.below(10);
        let paired = choice < 2;
        let words = if paired {
            128 + 2 * random.below(64) as u32
        } else {
            1 + random.below(200) as u32
        };
        let (source_tile, source, words) = if choice >= 8 && !received.is_empty() {
            // Receive-then-forward: resend (part of) something received earlier.
            let (tile, location, length) = received[random.below(received.len() as u64) as usize];
            (tile, location, length.min(words))
        } else if choice == 7 {
            let tile = random.below(u64::from(tiles)) as u32;
            let offset =
                8 * random.below(u64::from((ITERATED_BYTES - 4 * words.min(200)) / 8)) as u32;
            (
                tile,
                Location {
                    allocation: id(tile, 3),
                    offset,
                },
                words.min(200),
            )
        } else {
            let tile = random.below(u64::from(tiles)) as u32;
            let offset = 8 * random.below(u64::from((SOURCE_BYTES - 4 * words) / 8)) as u32;
            (
                tile,
                Location {
                    allocation: id(tile, 0),
                    offset,
                },
                words,
            )
        };
        let mut targets: Vec<u32> = Vec::new();
        if paired {
            for _ in 0..1 + random.below(3) {
                let pair = 2 * random.below(u64::from(tiles / 2)) as u32;
                for tile in [pair, pair + 1] {
                    if !targets.contains(&tile) {
                        targets.push(tile);
                    }
                }
            }
        } else {
            for _ in 0..1 + random.below(if choice < 5 { 1 } else { 6 }) {
                let tile = random.below(u64::from(tiles)) as u32;
                if !targets.contains(&tile) && tile != source_tile {
                    targets.push(tile);
                }
            }
        }
        if targets.is_empty() {
            targets.push((source_tile + 1) % tiles);
        }
        let mut destinations = Vec::new();
        let bytes = 4 * words;
        if paired {
            // The two members of a receiving pair receive at one offset
            // (IPU21.md), so paired pieces land at the same offset on every
            // receiver.
            let shared = targets
                .iter()
                .map(|&tile| next_destination[tile as usize])
                .max()
                .unwrap_or(0);
            let shared = if shared + bytes > DESTINATION_BYTES {
                0
            } else {
                shared
            };
            for &tile in &targets {
                next_destination[tile as usize] = shared;
            }
        }
        for &tile in &targets {
            let slot = &mut next_destination[tile as usize];
            if *slot + bytes > DESTINATION_BYTES {
                *slot = 0;
            }
            let kind = if random.below(4) == 0 { 2 } else { 1 };
            let offset = *slot;
            *slot += bytes.div_ceil(8) * 8;
            let location = Location {
                allocation: id(tile, kind),
                offset,
            };
            destinations.push(Destination { tile, location });
            received.push((tile, location, words));
        }
        list.push(source_tile, source, words, &destinations);
    }
    (list, allocations)
}

pub(crate) fn random_problem(seed: u64, tiles: u32, transfers: usize) -> ExchangeProblem {
    let (list, allocations) = random_phase(seed, tiles, transfers);
    ExchangeProblem::from_transfers(&list, &allocations, ITERATIONS, tiles)
        .expect("random phases are well formed")
}

pub(crate) const POLICIES: [SchedulePolicy; 7] = [
    SchedulePolicy::Latency,
    SchedulePolicy::Stream { words: 64 },
    SchedulePolicy::Stream { words: 256 },
    SchedulePolicy::Balanced { words: 1024 },
    SchedulePolicy::List,
    SchedulePolicy::Matching,
    SchedulePolicy::Auto,
];

pub(crate) const WIDTHS: [TransferWidth; 3] = [
    TransferWidth::Auto,
    TransferWidth::Word32,
    TransferWidth::Paired64,
];

#[test]
fn random_phases_schedule_and_validate() {
    let mut paired = 0;
    let mut chains = 0;
    let mut tight_chains = 0;
    let mut below_words = 0;
    for seed in 0..40 {
        let problem = random_problem(seed, 16, 20 + (seed as usize % 30));
        chains += dependencies(&problem).edges();
        for policy in POLICIES {
            for width in WIDTHS {
                let schedule = schedule(&problem, policy, width).expect("schedules");
                validate(&problem, &schedule)
                    .unwrap_or_else(|error| panic!("seed {seed} {policy} {width:?}: {error}"));
                assert!(
                    schedule.horizon >= schedule.endpoint_bound,
                    "seed {seed} {policy} {width:?}: horizon {} below the endpoint bound {}",
                    schedule.horizon,
                    schedule.endpoint_bound
                );
                // Counting words, not events, the bound would not hold once
                // pieces pair.
                let busiest_words = schedule
                    .send_words
                    .iter()
                    .zip(&schedule.receive_words)
                    .map(|(&sent, &received)| sent.max(received))
                    .max()
                    .unwrap_or(0);
                assert!(schedule.endpoint_bound <= busiest_words);
                below_words += usize::from(schedule.horizon < busiest_words);
                assert!(
                    schedule.horizon >= schedule.latency_bound,
                    "seed {seed} {policy} {width:?}: horizon {} below the latency-aware bound {}",
                    schedule.horizon,
                    schedule.latency_bound
                );
                let chain = dependency_bound(&problem, &dependencies(&problem));
                assert!(
                    schedule.horizon >= chain,
                    "seed {seed} {policy} {width:?}: horizon {} below the dependency bound {chain}",
                    schedule.horizon,
                );
                tight_chains += usize::from(chain > schedule.latency_bound);
                paired += schedule.paired.iter().filter(|&&paired| paired).count();
            }
        }
    }
    assert!(paired > 0, "some pieces move paired");
    assert!(
        below_words > 0,
        "some paired schedule is shorter than its busiest tile's words"
    );
    assert!(chains > 0, "some receive-then-forward chains exist");
    assert!(
        tight_chains > 0,
        "on some phase the dependency bound is the stronger one"
    );
}

#[test]
fn identical_phases_intern_equal() {
    let (list, allocations) = random_phase(7, 16, 30);
    let (first, first_origin) = ExchangeProblem::with_origin(&list, &allocations, 3, 16).unwrap();
    // The same pattern on renumbered global allocations: prepend unrelated allocations.
    let mut shifted = allocations.clone();
    let extra = 5u32;
    let mut prefix: Vec<Allocation> = (0..extra)
        .map(|index| allocation(0, 64, 1, index))
        .collect();
    for item in &mut shifted {
        item.alias_group += extra;
    }
    prefix.extend(shifted);
    let mut moved = list.clone();
    for location in &mut moved.source_location {
        location.allocation.0 += extra;
    }
    for destination in &mut moved.destinations {
        destination.location.allocation.0 += extra;
    }
    let (second, second_origin) = ExchangeProblem::with_origin(&moved, &prefix, 3, 16).unwrap();
    assert_eq!(first, second);
    assert_ne!(first_origin.allocations, second_origin.allocations);
    assert_eq!(
        second_origin.allocations[0].0,
        first_origin.allocations[0].0 + extra
    );
}

#[test]
fn long_transfers_split_and_contiguous_ones_coalesce() {
    let allocations = vec![allocation(0, 65536, 1, 0), allocation(1, 65536, 1, 1)];
    let mut list = TransferList::default();
    let at = |allocation, offset| Location {
        allocation: AllocationId(allocation),
        offset,
    };
    list.push(
        0,
        at(0, 0),
        10_000,
        &[Destination {
            tile: 1,
            location: at(1, 0),
        }],
    );
    list.push(
        0,
        at(0, 50_000),
        10,
        &[Destination {
            tile: 1,
            location: at(1, 50_000),
        }],
    );
    list.push(
        0,
        at(0, 50_040),
        10,
        &[Destination {
            tile: 1,
            location: at(1, 50_040),
        }],
    );
    let (problem, origin) = ExchangeProblem::with_origin(&list, &allocations, 1, 2).unwrap();
    assert_eq!(problem.words, vec![4148, 4148, 1704, 20]);
    assert_eq!(origin.transfers, vec![0, 0, 0, 1]);
}

#[test]
fn forwarding_creates_dependencies_and_aliases_resolve() {
    let allocations = vec![
        allocation(0, 1024, 1, 0),
        allocation(1, 1024, 1, 1),
        allocation(1, 1024, 1, 1), // alias of allocation 1
        allocation(2, 1024, 1, 3),
    ];
    let at = |allocation, offset| Location {
        allocation: AllocationId(allocation),
        offset,
    };
    let mut list = TransferList::default();
    list.push(
        0,
        at(0, 0),
        16,
        &[Destination {
            tile: 1,
            location: at(1, 64),
        }],
    );
    // Reads through the alias what transfer 0 wrote: read-after-write.
    list.push(
        1,
        at(2, 96),
        8,
        &[Destination {
            tile: 2,
            location: at(3, 0),
        }],
    );
    // Unrelated bytes of the same storage: no dependency.
    list.push(
        1,
        at(2, 512),
        8,
        &[Destination {
            tile: 2,
            location: at(3, 512),
        }],
    );
    // Overwrites what transfer 1 read: write-after-read.
    list.push(
        0,
        at(0, 256),
        4,
        &[Destination {
            tile: 1,
            location: at(1, 100),
        }],
    );
    let problem = ExchangeProblem::from_transfers(&list, &allocations, 1, 3).unwrap();
    let graph = dependencies(&problem);
    assert_eq!(graph.of(1), &[0]);
    assert!(graph.of(2).is_empty());
    assert_eq!(graph.of(3), &[0, 1]);
    assert_eq!(graph.depth, vec![0, 1, 0, 2]);
    for policy in POLICIES {
        let schedule = schedule(&problem, policy, TransferWidth::Auto).unwrap();
        validate(&problem, &schedule).unwrap();
        assert!(schedule.send_start[1] > schedule.payload_start[0]);
    }
}

/// Moves `piece` to start at `start`, recomputing its receives' events.
pub(crate) fn retime(problem: &ExchangeProblem, schedule: &mut Schedule, piece: usize, start: u32) {
    schedule.send_start[piece] = start;
    let sender = physical_tile(problem.source_tile[piece]);
    let receives = problem.receives_of(piece);
    let offset = if receives.len() == 1 { 2 } else { 0 };
    let events = if schedule.paired[piece] {
        problem.words[piece] / 2
    } else {
        problem.words[piece]
    };
    for receive in receives {
        let receiver = physical_tile(problem.destination_tile[receive]);
        let select = i64::from(start) + i64::from(time_to_mux(sender, receiver)) + offset;
        let payload = if schedule.paired[piece] {
            paired_payload_start(select, receiver)
        } else {
            payload_start(select, receiver)
        };
        schedule.select[receive] = select as u32;
        schedule.payload_start[receive] = payload as u32;
        schedule.deselect[receive] = (select as u32) + events;
    }
}

#[test]
fn overlapping_receives_fail_validation() {
    let allocations = vec![
        allocation(0, 1024, 1, 0),
        allocation(5, 1024, 1, 1),
        allocation(9, 1024, 1, 2),
    ];
    let at = |allocation, offset| Location {
        allocation: AllocationId(allocation),
        offset,
    };
    let mut list = TransferList::default();
    list.push(
        0,
        at(0, 0),
        40,
        &[Destination {
            tile: 9,
            location: at(2, 0),
        }],
    );
    list.push(
        5,
        at(1, 0),
        40,
        &[Destination {
            tile: 9,
            location: at(2, 512),
        }],
    );
    let problem = ExchangeProblem::from_transfers(&list, &allocations, 1, 16).unwrap();
    let good = schedule(&problem, SchedulePolicy::Latency, TransferWidth::Word32).unwrap();
    validate(&problem, &good).unwrap();
    let mut bad = good.clone();
    // Make the second receive select one event after the first: both listen at once.
    let first_select = i64::from(bad.select[0]) + 200;
    let later = (i64::from(bad.send_start[0]) + 200) as u32;
    retime(&problem, &mut bad, 0, later);
    let mux = i64::from(time_to_mux(physical_tile(5), physical_tile(9)));
    retime(&problem, &mut bad, 1, (first_select + 1 - mux - 2) as u32);
    let error = validate(&problem, &bad).unwrap_err();
    assert!(
        matches!(error, ValidationError::ReceiveOverlap { tile: 9, .. }),
        "unexpected error {error}"
    );
}

/// Tile 9 sends from bytes 256..416 of a block while a Repeat-bound alias
/// of it (256 bytes per iteration) receives 160 bytes at its offset 0: the
/// same bytes only in iteration 1. A schedule that overlaps the two in time
/// is refused for that iteration alone, and the same timing passes the
/// hazard check when the alias is not Repeat-bound.
#[test]
fn a_hazard_only_one_iteration_has_fails_validation() {
    let case = |iterations: u32| {
        let allocations = vec![
            allocation(0, 1024, 1, 0),
            allocation(9, 1024, 1, 1),
            allocation(9, 256, iterations, 1),
            allocation(5, 1024, 1, 3),
        ];
        let at = |allocation, offset| Location {
            allocation: AllocationId(allocation),
            offset,
        };
        let mut list = TransferList::default();
        list.push(
            9,
            at(1, 256),
            40,
            &[Destination {
                tile: 0,
                location: at(0, 0),
            }],
        );
        list.push(
            5,
            at(3, 0),
            40,
            &[Destination {
                tile: 9,
                location: at(2, 0),
            }],
        );
        let problem = ExchangeProblem::from_transfers(&list, &allocations, ITERATIONS, 16).unwrap();
        let good = schedule(&problem, SchedulePolicy::Latency, TransferWidth::Word32).unwrap();
        validate(&problem, &good).unwrap();
        // Both at once: the receive's payload lands while the send reads.
        let mut overlapped = good.clone();
        for piece in 0..2 {
            let before: Vec<i64> = problem
                .receives_of(piece)
                .map(|receive| i64::from(overlapped.select[receive]))
                .collect();
            retime(&problem, &mut overlapped, piece, 100);
            // Pointer writes move with their receive's select.
            for (receive, before) in problem.receives_of(piece).zip(before) {
                if overlapped.pointer_write[receive] != NO_EVENT {
                    let moved = i64::from(overlapped.pointer_write[receive])
                        + i64::from(overlapped.select[receive])
                        - before;
                    overlapped.pointer_write[receive] = moved as u32;
                }
            }
        }
        validate(&problem, &overlapped)
    };
    // Retiming leaves the tile ends stale; the validator compares them
    // only after the hazard check has passed. Without the iterations the
    // bytes differ but lie within one memory element of one allocation,
    // which the element check (after the hazard check) refuses.
    let unaliased = case(1);
    assert!(
        matches!(
            unaliased,
            Err(ValidationError::ElementConflict { tile: 9, .. })
        ),
        "no alias of the same bytes: {unaliased:?}"
    );
    let error = case(ITERATIONS).unwrap_err();
    assert!(
        matches!(error, ValidationError::Hazard { tile: 9, .. }),
        "unexpected error {error}"
    );
}

#[test]
fn corrupted_schedules_fail_validation() {
    let problem = random_problem(3, 16, 40);
    let good = schedule(
        &problem,
        SchedulePolicy::Stream { words: 256 },
        TransferWidth::Auto,
    )
    .unwrap();
    validate(&problem, &good).unwrap();
    let mut shifted = good.clone();
    shifted.select[0] += 1;
    assert!(matches!(
        validate(&problem, &shifted),
        Err(ValidationError::SelectEvent { .. })
    ));
    let mut horizon = good.clone();
    horizon.horizon += 1;
    assert!(validate(&problem, &horizon).is_err());
    let mut pointer = good.clone();
    let continuing = pointer
        .pointer_write
        .iter()
        .position(|&event| event != NO_EVENT)
        .unwrap();
    pointer.pointer_write[continuing] = NO_EVENT;
    assert!(validate(&problem, &pointer).is_err());
}

/// A SigLIP-sized synthetic phase: 1,472 tiles, 30,000 transfers, a third of
/// them multicast to ~90 tiles. Both orders give valid schedules at or above
/// the lower bound, and the dependency graph is acyclic enough to schedule
/// (its timing is `cargo bench --bench scheduler`'s business).
#[test]
fn large_synthetic_phase_schedules_validly() {
    let tiles = 1472u32;
    let mut random = Random::new(99);
    let mut allocations = Vec::new();
    for tile in 0..tiles {
        allocations.push(allocation(tile, 1 << 16, 1, 2 * tile));
        allocations.push(allocation(tile, 1 << 18, 1, 2 * tile + 1));
    }
    let mut next = vec![0u32; tiles as usize];
    let mut list = TransferList::default();
    for index in 0..30_000u32 {
        let source_tile = random.below(u64::from(tiles)) as u32;
        let words = 8 + random.below(120) as u32;
        let count = if index % 3 == 0 {
            80 + random.below(20) as u32
        } else {
            1
        };
        let first = (source_tile + 1 + random.below(u64::from(tiles) - 2) as u32) % tiles;
        let mut destinations = Vec::new();
        for step in 0..count {
            let tile = (first + step * 7) % tiles;
            if tile == source_tile {
                continue;
            }
            let offset = next[tile as usize];
            next[tile as usize] = (offset + 4 * words) % ((1 << 18) - 4096);
            destinations.push(Destination {
                tile,
                location: Location {
                    allocation: AllocationId(2 * tile + 1),
                    offset,
                },
            });
        }
        let source = Location {
            allocation: AllocationId(2 * source_tile),
            offset: 4 * random.below(8192) as u32,
        };
        list.push(source_tile, source, words, &destinations);
    }
    let problem = ExchangeProblem::from_transfers(&list, &allocations, 1, tiles).unwrap();
    assert!(problem.pieces() >= 30_000, "{} pieces", problem.pieces());
    for policy in [
        SchedulePolicy::Latency,
        SchedulePolicy::Balanced { words: 1024 },
    ] {
        let schedule = schedule(&problem, policy, TransferWidth::Auto).unwrap();
        validate(&problem, &schedule).unwrap();
        assert!(schedule.horizon >= schedule.endpoint_bound, "{policy}");
    }
}

/// Head-pool style: one tile receives hundreds of one-word pieces from many
/// senders. The pipelined receive frontier keeps each at about one event
/// under matching waves and so under `auto`. (The list order keys pieces by
/// their senders' start, which differs with each sender's mux delay, so it
/// cannot keep such receives contiguous and pays a PIC write each: `auto`
/// does not choose it here.)
#[test]
fn tiny_receives_stay_about_one_event_each() {
    let tiles = 64u32;
    let mut allocations = Vec::new();
    for tile in 0..tiles {
        allocations.push(allocation(tile, 4096, 1, 2 * tile));
        allocations.push(allocation(tile, 4096, 1, 2 * tile + 1));
    }
    let mut list = TransferList::default();
    let mut offset = 0;
    for round in 0..4u32 {
        for sender in 1..tiles {
            let destination = Destination {
                tile: 0,
                location: Location {
                    allocation: AllocationId(1),
                    offset,
                },
            };
            offset += 4;
            let source = Location {
                allocation: AllocationId(2 * sender),
                offset: 4 * round,
            };
            list.push(sender, source, 1, &[destination]);
        }
    }
    let problem = ExchangeProblem::from_transfers(&list, &allocations, 1, tiles).unwrap();
    let pieces = problem.pieces() as u32;
    assert_eq!(pieces, 4 * (tiles - 1));
    for policy in [SchedulePolicy::Auto, SchedulePolicy::Matching] {
        let result = schedule(&problem, policy, TransferWidth::Auto).unwrap();
        validate(&problem, &result).unwrap();
        assert!(
            result.horizon <= result.latency_bound + pieces / 2,
            "{policy}: horizon {} for {pieces} one-word receives (latency-aware bound {})",
            result.horizon,
            result.latency_bound
        );
    }
}

/// Two exchanges merged by `group::merged_transfers`: the second's first
/// transfer continues the first's last one contiguously, yet the problem
/// keeps them apart (a segment starts at a piece), and matching waves place
/// the first exchange's pieces before the second's.
#[test]
fn merged_exchanges_keep_their_segments_and_matching_places_them_in_turn() {
    let allocations = vec![allocation(0, 4096, 1, 0), allocation(1, 4096, 1, 1)];
    let at = |allocation, offset| Location {
        allocation: AllocationId(allocation),
        offset,
    };
    let to_tile_one = |offset| {
        [Destination {
            tile: 1,
            location: at(1, offset),
        }]
    };
    let mut first = TransferList::default();
    first.push(0, at(0, 0), 8, &to_tile_one(0));
    first.push(0, at(0, 512), 8, &to_tile_one(512));
    let mut second = TransferList::default();
    // Continues the first exchange's last transfer exactly.
    second.push(0, at(0, 544), 8, &to_tile_one(544));
    second.push(0, at(0, 1024), 8, &to_tile_one(1024));
    let merged = crate::group::merged_transfers(&first, &second);
    assert_eq!(merged.segment_starts, vec![2]);
    let (problem, origin) = ExchangeProblem::with_origin(&merged, &allocations, 1, 2).unwrap();
    assert_eq!(problem.segment_starts, vec![2]);
    assert_eq!(
        origin.transfers,
        vec![0, 1, 2, 3],
        "no piece spans the merge"
    );
    assert_eq!(problem.segment_of_pieces(), vec![0, 0, 1, 1]);
    // Unmerged, the same transfers coalesce (the hint is what stops it).
    let mut plain = merged.clone();
    plain.segment_starts.clear();
    let (unmerged, _) = ExchangeProblem::with_origin(&plain, &allocations, 1, 2).unwrap();
    assert_eq!(unmerged.pieces(), 3);
    assert_ne!(problem, unmerged);

    // A merge of merges: segment starts shift with the list they join.
    let again = crate::group::merged_transfers(&merged, &first);
    assert_eq!(again.segment_starts, vec![2, 4]);

    // Matching: every piece of an earlier segment first, whatever its wave.
    // Two random phases over the same allocations (so the second may
    // depend on the first), merged.
    let (list, allocations) = random_phase(7, 16, 60);
    let (other, _) = random_phase(8, 16, 60);
    let joined = crate::group::merged_transfers(&list, &other);
    let problem = ExchangeProblem::from_transfers(&joined, &allocations, ITERATIONS, 16).unwrap();
    assert_eq!(problem.segment_starts.len(), 1);
    let segments = problem.segment_of_pieces();
    let dependencies = super::dependencies::dependencies(&problem);
    let order = super::matching::matching_order(&problem, &dependencies);
    let in_order: Vec<u32> = order
        .iter()
        .map(|&piece| segments[piece as usize])
        .collect();
    assert!(in_order.contains(&1));
    assert!(
        in_order.windows(2).all(|pair| pair[0] <= pair[1]),
        "{in_order:?}"
    );
    for width in WIDTHS {
        let schedule = schedule(&problem, SchedulePolicy::Matching, width).expect("schedules");
        validate(&problem, &schedule).expect("a segment-major schedule is valid");
    }
}
