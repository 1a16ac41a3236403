//! Tests of the exchange rules confirmed on hardware (IPU21.md) against the
//! row encoder and the row checker: for each rule, the encoder's rows pass
//! the checker, and a row breaking the rule (as the encoder used to write
//! it, or corrupted by hand) is refused.

use super::*;
use crate::expand::program::{AllocationId, Destination, Location, TransferList};
use crate::schedule::tests::allocation;
use crate::schedule::vocabulary::{SchedulePolicy, TransferWidth};
use crate::schedule::{ExchangeProblem, Schedule, schedule, validate};
use crate::target::encoding::{Instruction, decode};
use crate::target::mapping::physical_tile;

/// Tiles of the small phases here (from logical tile 46 on, some receiving
/// pairs select from their partner-bit member).
const TILES: u32 = 48;

/// One transfer of `words` words from tile `sender` to `receivers`, each
/// tile holding one 4 KiB block (allocation `tile`).
fn one_transfer(sender: u32, words: u32, receivers: &[u32]) -> ExchangeProblem {
    let allocations: Vec<_> = (0..TILES)
        .map(|tile| allocation(tile, 4096, 1, tile))
        .collect();
    let at = |tile: u32, offset| Location {
        allocation: AllocationId(tile),
        offset,
    };
    let destinations: Vec<Destination> = receivers
        .iter()
        .map(|&tile| Destination {
            tile,
            location: at(tile, 1024),
        })
        .collect();
    let mut list = TransferList::default();
    list.push(sender, at(sender, 0), words, &destinations);
    ExchangeProblem::from_transfers(&list, &allocations, 1, TILES).expect("well formed")
}

fn scheduled(problem: &ExchangeProblem, width: TransferWidth) -> (Schedule, PhaseRows) {
    let schedule = schedule(problem, SchedulePolicy::Latency, width).expect("schedules");
    validate(problem, &schedule).expect("valid");
    let rows = encode_phase(problem, &schedule).expect("encodes");
    check_phase(problem, &schedule, &rows).expect("the encoder's rows pass");
    (schedule, rows)
}

/// A receiver-only row written under the model the encoder used before:
/// each delayed control took effect at its *first* event and lasted until
/// the next control (the last one until `end`).
fn first_event_row(controls: &[(u64, Instruction, Option<RelocationSlot>)], end: u64) -> Row {
    let mut row = Row::default();
    let mut cursor = 0;
    for (index, (event, instruction, slot)) in controls.iter().enumerate() {
        if *event > cursor {
            let delay = Instruction::Delay {
                events: (*event - cursor) as u32,
            };
            row.words.extend(delay.encode().unwrap().as_slice());
        }
        let until = controls.get(index + 1).map_or(end, |next| next.0);
        let events = (until - event) as u32;
        let instruction = match *instruction {
            Instruction::DelayXpic {
                selector, value, ..
            } => Instruction::DelayXpic {
                events,
                selector,
                value,
            },
            Instruction::DelayPic {
                selector, value, ..
            } => Instruction::DelayPic {
                events,
                selector,
                value,
            },
            other => other,
        };
        if let Some(slot) = slot {
            row.slots.push(RelocationSlot {
                word: row.words.len() as u32,
                ..*slot
            });
        }
        row.words.extend(instruction.encode().unwrap().as_slice());
        cursor = until;
    }
    row
}

/// Delayed controls apply at their terminal event: the encoder's rows say
/// so, and a row that relies on the first event (the encoder's old form)
/// is refused because its controls would fire `count - 1` events late.
#[test]
fn delayed_controls_take_effect_at_their_terminal_event() {
    let problem = one_transfer(0, 100, &[5]);
    let (schedule, rows) = scheduled(&problem, TransferWidth::Word32);
    let select = u64::from(schedule.select[0]);
    let deselect = u64::from(schedule.deselect[0]);
    let pointer = u64::from(schedule.pointer_write[0]);
    assert!(schedule.pointer_write[0] != crate::schedule::NO_EVENT);
    // The encoder's receiver row: each control is the last event of its instruction.
    let mut cursor = 0u64;
    let mut applied = Vec::new();
    let mut position = 0;
    let words = &rows.rows[5].words;
    while position < words.len() {
        let (instruction, consumed) = decode(&words[position..]).unwrap();
        let events = match instruction {
            Instruction::Delay { events } => events,
            Instruction::DelayXpic { events, .. } | Instruction::DelayPic { events, .. } => {
                applied.push(cursor + u64::from(events) - 1);
                events
            }
            other => panic!("a receiver-only row holds {other:?}"),
        };
        cursor += u64::from(events);
        position += consumed;
    }
    assert_eq!(applied, vec![select, pointer, deselect]);
    // The same controls, each at the first event of its instruction.
    let slot = rows.rows[5].slots[0];
    let controls = [
        (
            select,
            Instruction::DelayXpic {
                events: 1,
                selector: 0,
                value: physical_tile(0),
            },
            None,
        ),
        (
            pointer,
            Instruction::DelayPic {
                events: 1,
                selector: 0,
                value: 0,
            },
            Some(slot),
        ),
        (
            deselect,
            Instruction::DelayXpic {
                events: 1,
                selector: 0,
                value: fabric::NEUTRAL_SOURCE,
            },
            None,
        ),
    ];
    let mut broken = rows.clone();
    broken.rows[5] = first_event_row(&controls, u64::from(schedule.tile_end[5]));
    let error = check_phase(&problem, &schedule, &broken).unwrap_err();
    assert!(
        matches!(error, RowError::Mismatch { tile: 5, .. }),
        "{error}"
    );
}

/// Rewrites the send control of every send word of `tile`'s row.
fn with_send_control(rows: &PhaseRows, tile: usize, control: u8) -> PhaseRows {
    let mut changed = rows.clone();
    let words = &mut changed.rows[tile].words;
    let mut position = 0;
    while position < words.len() {
        let (instruction, consumed) = decode(&words[position..]).unwrap();
        let replaced = match instruction {
            Instruction::Send { words, address, .. } => Some(Instruction::Send {
                words,
                address,
                control,
            }),
            Instruction::SendOff { words, delta, .. } => Some(Instruction::SendOff {
                words,
                delta,
                control,
            }),
            _ => None,
        };
        if let Some(instruction) = replaced {
            let encoded = instruction.encode().unwrap();
            words[position..position + consumed].copy_from_slice(encoded.as_slice());
        }
        position += consumed;
    }
    changed
}

/// The send control of `tile`'s first send.
fn first_send_control(rows: &PhaseRows, tile: usize) -> u8 {
    let events = decode_row(&rows.rows[tile].words).unwrap();
    events
        .iter()
        .find_map(|event| match *event {
            RowEvent::Send { control, .. } => Some(control),
            _ => None,
        })
        .expect("a send")
}

/// Multicasts set both direction bits (`sctl` 3, 7 for 64-bit items), even
/// when every receiver lies one way; one-direction multicasts (5, 6, 1, 2)
/// are refused. Point-to-point sends keep their route's direction.
#[test]
fn multicasts_use_both_directions() {
    use crate::target::timing::direction;
    // A receiver pair lying one way from tile 0.
    let pair = (2..TILES)
        .step_by(2)
        .find(|&tile| {
            direction(physical_tile(0), physical_tile(tile))
                == direction(physical_tile(0), physical_tile(tile + 1))
        })
        .expect("some pair lies one way");
    let one_way = direction(physical_tile(0), physical_tile(pair));
    for (width, words, expected) in [
        (TransferWidth::Paired64, 256, 7u8),
        (TransferWidth::Word32, 100, 3u8),
    ] {
        let problem = one_transfer(0, words, &[pair, pair + 1]);
        let (schedule, rows) = scheduled(&problem, width);
        assert_eq!(schedule.paired[0], width == TransferWidth::Paired64);
        assert_eq!(first_send_control(&rows, 0), expected, "{width:?}");
        let broken = with_send_control(&rows, 0, (expected & 4) | one_way);
        let error = check_phase(&problem, &schedule, &broken).unwrap_err();
        assert!(
            matches!(error, RowError::Mismatch { tile: 0, .. }),
            "{error}"
        );
    }
    let problem = one_transfer(0, 100, &[pair]);
    let (_, rows) = scheduled(&problem, TransferWidth::Word32);
    assert_eq!(first_send_control(&rows, 0), one_way);
}

/// A receiver-only row applying each control exactly at its event (a
/// one-event `delaypic`/`delayxpic` after a `delay`), lasting until `end`.
fn exact_row(controls: &[(u64, Instruction, Option<RelocationSlot>)], end: u64) -> Row {
    let mut controls = controls.to_vec();
    controls.sort_by_key(|control| control.0);
    let mut row = Row::default();
    let mut cursor = 0;
    for (event, instruction, slot) in &controls {
        if *event > cursor {
            let delay = Instruction::Delay {
                events: (*event - cursor) as u32,
            };
            row.words.extend(delay.encode().unwrap().as_slice());
        }
        if let Some(slot) = slot {
            row.slots.push(RelocationSlot {
                word: row.words.len() as u32,
                ..*slot
            });
        }
        row.words.extend(instruction.encode().unwrap().as_slice());
        cursor = event + 1;
    }
    if end > cursor {
        let delay = Instruction::Delay {
            events: (end - cursor) as u32,
        };
        row.words.extend(delay.encode().unwrap().as_slice());
    }
    row
}

fn xpic(value: u32) -> Instruction {
    Instruction::DelayXpic {
        events: 1,
        selector: 0,
        value,
    }
}

fn format(on: bool) -> Instruction {
    Instruction::DelayPic {
        events: 1,
        selector: fabric::FORMAT_SELECTOR,
        value: u32::from(on),
    }
}

/// A paired piece from tile `sender` to a receiving pair whose selecting
/// member has the partner bit set (so `sender XOR (receiver AND 2)` differs
/// from the sender), and the pair's (selecting, following) tiles.
fn paired_to_uneven_pair(sender: u32) -> (ExchangeProblem, u32, u32) {
    use crate::schedule::timing::issues_pair_select;
    for tile in (2..TILES).step_by(2) {
        for (leader, follower) in [(tile, tile + 1), (tile + 1, tile)] {
            if issues_pair_select(physical_tile(sender), physical_tile(leader))
                && physical_tile(leader) & 2 != 0
                && tile != sender & !1
            {
                return (
                    one_transfer(sender, 256, &[tile, tile + 1]),
                    leader,
                    follower,
                );
            }
        }
    }
    panic!("no receiving pair selects from its partner-bit member");
}

/// The paired receive protocol in rows: the selecting member selects
/// `sender XOR (receiver AND 2)` at the pair's select event and returns to
/// neutral `count` later; both members switch the format on at
/// `x + 51 + 2 row`, write the pointer two events later and switch the
/// format off `count` after on. Rows in the old form (both members
/// selecting, the plain sender as the value, the format-on a event late)
/// are refused.
#[test]
fn paired_receives_follow_the_protocol_the_chip_runs() {
    let (problem, leader, follower) = paired_to_uneven_pair(0);
    let (schedule, rows) = scheduled(&problem, TransferWidth::Paired64);
    assert!(schedule.paired[0]);
    let receive_of = |tile: u32| {
        problem
            .receives_of(0)
            .find(|&receive| problem.destination_tile[receive] == tile)
            .unwrap()
    };
    let select = u64::from(schedule.select[receive_of(leader)]);
    assert_eq!(u64::from(schedule.select[receive_of(follower)]), select);
    let row = fabric::physical_row(physical_tile(leader)) as u64;
    let format_on = select + 51 + 2 * row;
    let placement = ConsecutivePlacement::new(&problem).unwrap();
    let address = |tile: u32| {
        let destination = problem.destination[receive_of(tile)];
        placement.resolve(destination.allocation, destination.offset) / 4
    };
    let decoded = |tile: u32| {
        let words = rows.rows[tile as usize]
            .finalize(|allocation, offset| placement.resolve(allocation, offset))
            .unwrap();
        decode_row(&words).unwrap()
    };
    let value = physical_tile(0) ^ 2;
    let protocol = |tile: u32| {
        vec![
            RowEvent::Format {
                event: format_on,
                on: true,
            },
            RowEvent::Pointer {
                event: format_on + 2,
                address: address(tile),
            },
            RowEvent::Format {
                event: format_on + 128,
                on: false,
            },
        ]
    };
    let mut expected_leader = vec![
        RowEvent::Select {
            event: select,
            source: value,
            paired: false,
        },
        RowEvent::Select {
            event: select + 128,
            source: fabric::NEUTRAL_SOURCE,
            paired: false,
        },
    ];
    expected_leader.extend(protocol(leader));
    expected_leader.sort_by_key(|event| event.event());
    let leader_events = decoded(leader);
    assert_eq!(
        leader_events[..leader_events.len() - 1],
        expected_leader[..]
    );
    let follower_events = decoded(follower);
    assert_eq!(
        follower_events[..follower_events.len() - 1],
        protocol(follower)[..]
    );
    // Hand-written rows: the encoder's form passes, each old form fails.
    let slot = *rows.rows[leader as usize]
        .slots
        .first()
        .expect("the pointer's slot");
    let end = u64::from(schedule.tile_end[leader as usize]);
    let leader_row = |value: u32, format_on: u64| {
        exact_row(
            &[
                (select, xpic(value), None),
                (select + 128, xpic(fabric::NEUTRAL_SOURCE), None),
                (format_on, format(true), None),
                (
                    format_on + 2,
                    Instruction::DelayPic {
                        events: 1,
                        selector: 0,
                        value: 0,
                    },
                    Some(slot),
                ),
                (format_on + 128, format(false), None),
            ],
            end,
        )
    };
    let mut hand = rows.clone();
    hand.rows[leader as usize] = leader_row(value, format_on);
    check_phase(&problem, &schedule, &hand).expect("the protocol as written by hand");
    for (broken, what) in [
        (
            leader_row(physical_tile(0), format_on),
            "the plain sender as the value",
        ),
        (
            leader_row(value, format_on + 1),
            "the format-on an event late",
        ),
    ] {
        let mut old = rows.clone();
        old.rows[leader as usize] = broken;
        // Refused as a mismatch, or (the late format-on no longer marking
        // the select as the pair's) as an undrained format change.
        assert!(
            matches!(
                check_phase(&problem, &schedule, &old),
                Err(RowError::Mismatch { .. } | RowError::ReceiveRule { .. })
            ),
            "{what}"
        );
    }
    // The following member selecting too (the old form) is refused.
    let follower_slot = rows.rows[follower as usize].slots[0];
    let mut both = rows.clone();
    both.rows[follower as usize] = exact_row(
        &[
            (select, xpic(value), None),
            (format_on, format(true), None),
            (
                format_on + 2,
                Instruction::DelayPic {
                    events: 1,
                    selector: 0,
                    value: 0,
                },
                Some(follower_slot),
            ),
            (format_on + 128, format(false), None),
        ],
        u64::from(schedule.tile_end[follower as usize]),
    );
    let error = check_phase(&problem, &schedule, &both).unwrap_err();
    assert!(
        matches!(error, RowError::Mismatch { tile, .. } if tile == follower),
        "{error}"
    );
}

/// A paired format-on before an ordinary payload into the same tile has
/// drained is refused by the row checker on the rows alone (the schedule
/// is the validator's refused one, encoded anyway).
#[test]
fn the_row_checker_refuses_an_undrained_format_on() {
    let (problem, schedule) = crate::schedule::tests::paired_protocol::undrained();
    assert!(validate(&problem, &schedule).is_err());
    let rows = encode_phase(&problem, &schedule).expect("the encoder does not check");
    let error = check_phase(&problem, &schedule, &rows).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("before an ordinary payload has drained"),
        "{error}"
    );
}

/// Paired sends address 8-byte units: the encoder's finalized send word
/// holds the source's byte address / 8, and a row holding its word address
/// (the old form) is refused.
#[test]
fn paired_send_addresses_are_in_8_byte_units() {
    use crate::target::encoding::layout::SEND_ADDRESS;
    let problem = one_transfer(0, 256, &[4, 5]);
    let (schedule, rows) = scheduled(&problem, TransferWidth::Paired64);
    assert!(schedule.paired[0]);
    let placement = ConsecutivePlacement::new(&problem).unwrap();
    let source = problem.source[0];
    let byte_address = placement.resolve(source.allocation, source.offset);
    let slot = rows.rows[0]
        .slots
        .iter()
        .find(|slot| slot.field == SlotField::PairedSendAddress)
        .copied()
        .expect("the paired send's slot");
    let words = rows.rows[0]
        .finalize(|allocation, offset| placement.resolve(allocation, offset))
        .unwrap();
    let field = SEND_ADDRESS.extract(words[slot.word as usize]);
    assert_eq!(field * 8, byte_address);
    // The same row with the send's word address in the field.
    let mut old = rows.clone();
    let word = &mut old.rows[0].words[slot.word as usize];
    *word = (*word & !SEND_ADDRESS.mask) | SEND_ADDRESS.place(byte_address / 4);
    old.rows[0].slots.retain(|other| other.word != slot.word);
    let error = check_phase(&problem, &schedule, &old).unwrap_err();
    assert!(
        matches!(error, RowError::Mismatch { tile: 0, .. }),
        "{error}"
    );
}

/// Memory elements: a row that sends from an allocation while a payload
/// lands less than an element away in it (what the scheduler made before
/// the element rule) is refused; the scheduler's serialised rows pass, and
/// so do concurrent ones in different allocations.
#[test]
fn the_row_checker_refuses_a_send_and_receive_in_one_element() {
    use crate::schedule::tests::elements::crossing;
    use crate::schedule::tests::retime;
    let problem = crossing(8192, 65536, false);
    let (good, _) = scheduled(&problem, TransferWidth::Word32);
    let mut both = good.clone();
    for piece in 0..2 {
        retime(&problem, &mut both, piece, 100);
        let receive = problem.receives_of(piece).start;
        both.pointer_write[receive] = both.payload_start[receive];
    }
    for (tile, end) in both.tile_end.iter_mut().enumerate() {
        *end = (*end).max(if tile < 2 { 700 } else { 0 });
    }
    let rows = encode_phase(&problem, &both).expect("encodes");
    let error = check_phase(&problem, &both, &rows).expect_err("refused");
    assert!(
        matches!(error, RowError::ElementConflict { tile: 0, .. }),
        "{error}"
    );
    // The same timing into a second allocation passes.
    let other = crossing(0, 65536, true);
    let (separate, _) = scheduled(&other, TransferWidth::Word32);
    let mut concurrent = separate.clone();
    for piece in 0..2 {
        retime(&other, &mut concurrent, piece, 100);
        let receive = other.receives_of(piece).start;
        concurrent.pointer_write[receive] = concurrent.payload_start[receive];
    }
    concurrent.tile_end = both.tile_end.clone();
    let rows = encode_phase(&other, &concurrent).expect("encodes");
    check_phase(&other, &concurrent, &rows).expect("different allocations pass");
}
