//! The row checker: proves that the decoded rows of a phase produce exactly
//! the scheduled events on every tile. Expected events are derived here from
//! (problem, schedule) directly, not through the encoder; rows are finalized
//! with a [`ConsecutivePlacement`] and decoded by `decode_row`. It must not
//! accept a row that differs from the schedule in any event, count, address,
//! width, send control or end event.

use super::decode::{RowEvent, decode_row, rank};
use super::{ADDRESS_UNIT_BYTES, ConsecutivePlacement, PhaseRows, RowError};
use crate::schedule::{ExchangeProblem, NO_EVENT, Schedule};
use crate::target::mapping::physical_tile;
use crate::target::timing::{NEUTRAL_INCOMING_SOURCE, direction};

/// Bit 2 of the send control: 64-bit items (IPU21.md).
const PAIRED_BIT: u8 = 4;

/// Events the schedule implies for every tile, sorted like decoded rows.
pub fn expected_events(
    problem: &ExchangeProblem,
    schedule: &Schedule,
    placement: &ConsecutivePlacement,
) -> Vec<Vec<RowEvent>> {
    let tiles = problem.tiles as usize;
    let mut events: Vec<Vec<RowEvent>> = vec![Vec::new(); tiles];
    let word = |address: crate::schedule::SymbolicAddress| {
        placement.resolve(address.allocation, address.offset) / ADDRESS_UNIT_BYTES
    };
    for piece in 0..problem.pieces() {
        let sender = problem.source_tile[piece];
        let paired = schedule.paired[piece];
        let mut control = if paired { PAIRED_BIT } else { 0 };
        for receive in problem.receives_of(piece) {
            let tile = problem.destination_tile[receive];
            control |= direction(physical_tile(sender), physical_tile(tile));
            let list = &mut events[tile as usize];
            list.push(RowEvent::Select {
                event: u64::from(schedule.select[receive]),
                source: physical_tile(sender),
                paired,
            });
            if schedule.pointer_write[receive] != NO_EVENT {
                list.push(RowEvent::Pointer {
                    event: u64::from(schedule.pointer_write[receive]),
                    address: word(problem.destination[receive]),
                });
            }
            if schedule.deselect[receive] != NO_EVENT {
                list.push(RowEvent::Select {
                    event: u64::from(schedule.deselect[receive]),
                    source: NEUTRAL_INCOMING_SOURCE,
                    paired: false,
                });
            }
        }
        let words = problem.words[piece];
        events[sender as usize].push(RowEvent::Send {
            event: u64::from(schedule.send_start[piece]),
            events: u64::from(if paired { words / 2 } else { words }),
            address: word(problem.source[piece]),
            control,
        });
    }
    for (tile, list) in events.iter_mut().enumerate() {
        let end = u64::from(schedule.tile_end.get(tile).copied().unwrap_or(0));
        if !list.is_empty() || end > 0 {
            list.push(RowEvent::End { event: end });
        }
        list.sort_unstable_by_key(|event| (event.event(), rank(event)));
    }
    events
}

/// Checks every tile's decoded row against the schedule.
pub fn check_phase(
    problem: &ExchangeProblem,
    schedule: &Schedule,
    rows: &PhaseRows,
) -> Result<(), RowError> {
    if rows.rows.len() != problem.tiles as usize {
        return Err(RowError::Shape {
            what: "one row per tile",
        });
    }
    let placement = ConsecutivePlacement::new(problem)?;
    let expected = expected_events(problem, schedule, &placement);
    for (tile, row) in rows.rows.iter().enumerate() {
        let words = row.finalize(|allocation, offset| placement.resolve(allocation, offset))?;
        let decoded = decode_row(&words)?;
        compare(tile as u32, &decoded, &expected[tile])?;
    }
    Ok(())
}

fn compare(tile: u32, decoded: &[RowEvent], expected: &[RowEvent]) -> Result<(), RowError> {
    let describe = |event: Option<&RowEvent>| {
        event.map_or_else(|| "nothing".to_string(), |event| format!("{event:?}"))
    };
    for index in 0..decoded.len().max(expected.len()) {
        let found = decoded.get(index);
        let wanted = expected.get(index);
        if found != wanted {
            let event = found.or(wanted).map_or(0, RowEvent::event);
            return Err(RowError::Mismatch {
                tile,
                event,
                found: format!("has {}", describe(found)),
                expected: format!("has {}", describe(wanted)),
            });
        }
    }
    Ok(())
}
