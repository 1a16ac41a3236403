//! The row checker: proves that the decoded rows of a phase produce exactly
//! the scheduled events on every tile. Expected events are derived here from
//! (problem, schedule) directly, not through the encoder, with the rows'
//! own reading of the fabric formulas (`super::fabric`, not
//! `crate::target::timing`), and that no row sends from and receives into
//! one memory element at once (`super::elements`); rows are finalized
//! with a [`ConsecutivePlacement`] and decoded by `decode_row`. It must not
//! accept a row that differs from the schedule in any event, count, address,
//! width, send control or end event.

use super::consecutive::ConsecutivePlacement;
use super::consecutive::root_storage_bytes;
use super::decode::{RowEvent, decode_row, rank};
use super::elements::{check_row_elements, tile_roots};
use super::error::RowError;
use super::fabric::{
    BOTH_DIRECTIONS, EVENTS_PER_ROW, FORMAT_ON_DELAY, FORMAT_TO_POINTER, ITEMS_64_BIT,
    NEUTRAL_SOURCE, ORDINARY_PAYLOAD_DELAY, direction, physical_row, time_to_mux,
};
use super::{ADDRESS_UNIT_BYTES, PhaseRows, Row};
use crate::schedule::{ExchangeProblem, NO_EVENT, Schedule};
use crate::target::mapping::physical_tile;

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
        let receives = problem.receives_of(piece);
        // Point-to-point sends take their route's direction; multicasts
        // both directions, as validated on the chip (IPU21.md).
        let mut control = if paired { ITEMS_64_BIT } else { 0 };
        control |= if receives.len() == 1 {
            direction(
                physical_tile(sender),
                physical_tile(problem.destination_tile[receives.start]),
            )
        } else {
            BOTH_DIRECTIONS
        };
        let sender_physical = physical_tile(sender);
        for receive in receives {
            let tile = problem.destination_tile[receive];
            let receiver = physical_tile(tile);
            let list = &mut events[tile as usize];
            let select = u64::from(schedule.select[receive]);
            if paired {
                // The paired receive protocol (IPU21.md): only the member
                // with the smaller `time_to_mux` selects, with the value
                // `sender XOR (receiver AND 2)`; both switch the format on
                // at `x + 51 + 2 row`, write the pointer two events later
                // and switch the format off `count` events after on.
                let own = time_to_mux(sender_physical, receiver);
                let theirs = time_to_mux(sender_physical, receiver ^ 2);
                if own < theirs || (own == theirs && receiver & 2 == 0) {
                    list.push(RowEvent::Select {
                        event: select,
                        source: sender_physical ^ (receiver & 2),
                        paired: false,
                    });
                    if schedule.deselect[receive] != NO_EVENT {
                        list.push(RowEvent::Select {
                            event: u64::from(schedule.deselect[receive]),
                            source: NEUTRAL_SOURCE,
                            paired: false,
                        });
                    }
                }
                let count = u64::from(problem.words[piece] / 2);
                let format = (select as i64
                    + FORMAT_ON_DELAY
                    + EVENTS_PER_ROW * physical_row(receiver)) as u64;
                list.push(RowEvent::Format {
                    event: format,
                    on: true,
                });
                list.push(RowEvent::Pointer {
                    event: format + FORMAT_TO_POINTER as u64,
                    address: word(problem.destination[receive]),
                });
                list.push(RowEvent::Format {
                    event: format + count,
                    on: false,
                });
                continue;
            }
            list.push(RowEvent::Select {
                event: select,
                source: sender_physical,
                paired: false,
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
                    source: NEUTRAL_SOURCE,
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
    let roots = tile_roots(problem, &placement);
    let storage = root_storage_bytes(problem);
    for (tile, row) in rows.rows.iter().enumerate() {
        check_slots_are_local(problem, &storage, tile as u32, row)?;
        let words = row.finalize(|allocation, offset| placement.resolve(allocation, offset))?;
        let decoded = decode_row(&words)?;
        check_receive_rules(tile as u32, &decoded)?;
        check_row_elements(tile as u32, &decoded, &roots[tile])?;
        compare(tile as u32, &decoded, &expected[tile])?;
    }
    Ok(())
}

/// Every relocation slot of `tile`'s row must name an allocation of that
/// tile at an offset inside its alias root's storage (`storage`, per root). The comparison below resolves
/// addresses with a consecutive placement, where another tile's
/// allocation or the end of the previous one can share an address that
/// the real placement separates: without this, a row naming the wrong
/// allocation could pass.
fn check_slots_are_local(
    problem: &ExchangeProblem,
    storage: &[u64],
    tile: u32,
    row: &Row,
) -> Result<(), RowError> {
    for slot in &row.slots {
        let address = slot.address;
        let index = address.allocation as usize;
        let inside = problem.allocations.get(index).is_some_and(|allocation| {
            let root = allocation.alias_root as usize;
            allocation.tile == tile
                && storage
                    .get(root)
                    .is_some_and(|&bytes| u64::from(address.offset) < bytes)
        });
        if !inside {
            return Err(RowError::ForeignSlot {
                tile,
                word: slot.word,
                allocation: address.allocation,
                offset: address.offset,
            });
        }
    }
    Ok(())
}

/// The receive rules one decoded row must keep by itself (IPU21.md,
/// "Exchange rules confirmed on hardware"): no two receive controls on one
/// event (so no format change on a select or teardown), and a format-on only
/// after every ordinary payload before it has drained (an ordinary select at
/// `x` lasting `n` events writes until `x + 52 + 2 row + n`).
fn check_receive_rules(tile: u32, decoded: &[RowEvent]) -> Result<(), RowError> {
    let row = physical_row(physical_tile(tile));
    let refuse = |event: u64, rule: &'static str| RowError::ReceiveRule { tile, event, rule };
    let controls: Vec<&RowEvent> = decoded
        .iter()
        .filter(|event| {
            matches!(
                event,
                RowEvent::Select { .. } | RowEvent::Format { .. } | RowEvent::Pointer { .. }
            )
        })
        .collect();
    for pair in controls.windows(2) {
        if pair[0].event() == pair[1].event() {
            return Err(refuse(pair[0].event(), "two receive controls on one event"));
        }
    }
    let format_ons: Vec<u64> = controls
        .iter()
        .filter_map(|event| match **event {
            RowEvent::Format { event, on: true } => Some(event),
            _ => None,
        })
        .collect();
    let selects: Vec<(u64, u32)> = controls
        .iter()
        .filter_map(|event| match **event {
            RowEvent::Select { event, source, .. } => Some((event, source)),
            _ => None,
        })
        .collect();
    // Ordinary payload windows (start, end), by start; pair selects (a
    // format-on `51 + 2 row` after them) and returns to neutral excluded.
    let payload_delay = (ORDINARY_PAYLOAD_DELAY + EVENTS_PER_ROW * row) as u64;
    let format_delay = (FORMAT_ON_DELAY + EVENTS_PER_ROW * row) as u64;
    let mut windows: Vec<(u64, u64)> = Vec::new();
    for (index, &(select, source)) in selects.iter().enumerate() {
        let pair_select = format_ons.binary_search(&(select + format_delay)).is_ok();
        if source == NEUTRAL_SOURCE || pair_select {
            continue;
        }
        let length = selects.get(index + 1).map_or(0, |&(next, _)| next - select);
        windows.push((select + payload_delay, select + payload_delay + length));
    }
    let mut latest_end = Vec::with_capacity(windows.len());
    for &(_, end) in &windows {
        let before = latest_end.last().copied().unwrap_or(0);
        latest_end.push(end.max(before));
    }
    for &format in &format_ons {
        let started = windows.partition_point(|&(start, _)| start <= format);
        if started > 0 && latest_end[started - 1] > format {
            return Err(refuse(
                format,
                "format change before an ordinary payload has drained",
            ));
        }
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
