//! Exchange replay: executes one phase from its decoded, finalized rows on
//! simulated tile memories and checks that every destination receives the
//! right bytes. Sources hold a known pattern; the expected contents come
//! from applying the problem's pieces in their semantic order to a second
//! copy of the memories. The machine side uses only the rows and the fabric
//! model of IPU21.md: a receiver that selects source `s` at event `x` takes
//! the send of `s` that starts at `x - time_to_mux - c` (`c` = 0 or 2) with
//! the window's length, and writes it through its incoming pointer from
//! `x + 52 + 2 row`; a paired receive is found by its format-on `F` (the
//! pair selected at `F - 51 - 2 row`, on either member's row, with the value
//! `sender XOR (member AND 2)`), takes the paired send that started the
//! pair's later `time_to_mux` before, and writes from `F + 2` for as many
//! events as the format stays on. Reads happen at
//! send start and writes at payload start (a valid schedule keeps every
//! hazard further apart than a window). Repeat iteration 0 is replayed.
//! Owns simulation only; it must not consult the schedule.

use crate::rows::{ConsecutivePlacement, RowError, RowEvent, decode_row};
use crate::schedule::{ExchangeProblem, SymbolicAddress};
use crate::target::mapping::{PARTNER_PHYSICAL_BIT, logical_tile, physical_tile};
use crate::target::memory::TILE_BASE_ADDRESS;
use crate::target::timing::{
    NEUTRAL_INCOMING_SOURCE, PAIRED_PAYLOAD_AFTER_FORMAT, POINT_TO_POINT_SELECT_OFFSET,
    paired_format_select, paired_payload_start, payload_start, time_to_mux,
};

/// What a replay checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReplayReport {
    pub deliveries: u64,
    pub checked_words: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Row(#[from] RowError),
    #[error(
        "tile {tile}: select of source {source_tile} at event {event} matches {candidates} sends"
    )]
    UnmatchedSelect {
        tile: u32,
        event: u64,
        source_tile: u32,
        candidates: usize,
    },
    #[error("tile {tile}: pointer write at event {event} lands inside a payload")]
    PointerInsidePayload { tile: u32, event: u64 },
    #[error("tile {tile}: event {event} touches address {address:#x} outside the simulated memory")]
    OutOfMemory { tile: u32, event: u64, address: u64 },
    #[error("tile {tile}: receive without a pointer at event {event}")]
    NoPointer { tile: u32, event: u64 },
    #[error(
        "tile {tile}: word at {address:#x} (written at event {event:?}) is {found:#010x}, expected {expected:#010x}"
    )]
    Mismatch {
        tile: u32,
        address: u32,
        event: Option<u64>,
        found: u32,
        expected: u32,
    },
    #[error("{tiles} rows for {expected} tiles")]
    RowCount { tiles: usize, expected: usize },
}

/// Deterministic initial byte of `tile` at `address`.
fn pattern(tile: u32, address: u32) -> u8 {
    let mut state = u64::from(tile) << 32 | u64::from(address) | 1;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    (state >> 24) as u8
}

struct Memories {
    bytes: Vec<Vec<u8>>,
}

impl Memories {
    fn new(placement: &ConsecutivePlacement) -> Memories {
        let bytes = placement
            .used
            .iter()
            .enumerate()
            .map(|(tile, &used)| {
                (0..used)
                    .map(|offset| pattern(tile as u32, TILE_BASE_ADDRESS + offset))
                    .collect()
            })
            .collect();
        Memories { bytes }
    }

    fn range(
        &self,
        tile: u32,
        address: u64,
        length: u64,
        event: u64,
    ) -> Result<std::ops::Range<usize>, ReplayError> {
        let memory = self.bytes.get(tile as usize).map_or(0, Vec::len) as u64;
        let start = address.checked_sub(u64::from(TILE_BASE_ADDRESS));
        match start {
            Some(start) if start + length <= memory => {
                Ok(start as usize..(start + length) as usize)
            }
            _ => Err(ReplayError::OutOfMemory {
                tile,
                event,
                address,
            }),
        }
    }

    fn read(
        &self,
        tile: u32,
        address: u64,
        length: u64,
        event: u64,
    ) -> Result<Vec<u8>, ReplayError> {
        let range = self.range(tile, address, length, event)?;
        Ok(self.bytes[tile as usize][range].to_vec())
    }

    fn write(
        &mut self,
        tile: u32,
        address: u64,
        data: &[u8],
        event: u64,
    ) -> Result<(), ReplayError> {
        let range = self.range(tile, address, data.len() as u64, event)?;
        self.bytes[tile as usize][range].copy_from_slice(data);
        Ok(())
    }
}

/// One receive as the machine performs it (byte addresses).
pub(crate) struct Delivery {
    pub read_event: u64,
    pub write_event: u64,
    pub source_tile: u32,
    pub source_address: u64,
    pub tile: u32,
    pub address: u64,
    pub bytes: u64,
}

/// Replays `problem` from finalized `rows` under `placement`; checks every
/// destination word, or about `sample` words spread evenly when given.
pub fn replay_phase(
    problem: &ExchangeProblem,
    rows: &[Vec<u32>],
    placement: &ConsecutivePlacement,
    sample: Option<u64>,
) -> Result<ReplayReport, ReplayError> {
    let tiles = problem.tiles as usize;
    if rows.len() != tiles {
        return Err(ReplayError::RowCount {
            tiles: rows.len(),
            expected: tiles,
        });
    }
    let decoded: Vec<Vec<RowEvent>> = rows
        .iter()
        .map(|row| decode_row(row))
        .collect::<Result<_, _>>()?;
    let deliveries = deliveries(&decoded)?;
    let mut machine = Memories::new(placement);
    let mut actions: Vec<(u64, u8, usize)> = Vec::with_capacity(deliveries.len() * 2);
    for (index, delivery) in deliveries.iter().enumerate() {
        actions.push((delivery.read_event, 1, index));
        actions.push((delivery.write_event, 0, index));
    }
    actions.sort_unstable();
    let mut buffers: Vec<Vec<u8>> = vec![Vec::new(); deliveries.len()];
    for (event, kind, index) in actions {
        let delivery = &deliveries[index];
        if kind == 1 {
            buffers[index] = machine.read(
                delivery.source_tile,
                delivery.source_address,
                delivery.bytes,
                event,
            )?;
        } else {
            let data = std::mem::take(&mut buffers[index]);
            machine.write(delivery.tile, delivery.address, &data, event)?;
        }
    }
    let mut reference = Memories::new(placement);
    let resolve =
        |address: SymbolicAddress| u64::from(placement.resolve(address.allocation, address.offset));
    for piece in 0..problem.pieces() {
        let bytes = u64::from(problem.words[piece]) * 4;
        let data = reference.read(
            problem.source_tile[piece],
            resolve(problem.source[piece]),
            bytes,
            0,
        )?;
        for receive in problem.receives_of(piece) {
            reference.write(
                problem.destination_tile[receive],
                resolve(problem.destination[receive]),
                &data,
                0,
            )?;
        }
    }
    let total: u64 = (0..problem.pieces())
        .map(|piece| u64::from(problem.words[piece]) * problem.receives_of(piece).len() as u64)
        .sum();
    let stride = sample.map_or(1, |count| total.div_ceil(count.max(1)).max(1));
    let mut report = ReplayReport {
        deliveries: deliveries.len() as u64,
        checked_words: 0,
    };
    let mut index: u64 = 0;
    for piece in 0..problem.pieces() {
        let words = u64::from(problem.words[piece]);
        for receive in problem.receives_of(piece) {
            let tile = problem.destination_tile[receive];
            let base = resolve(problem.destination[receive]);
            let mut word = (stride - index % stride) % stride;
            while word < words {
                let address = base + word * 4;
                let range = reference.range(tile, address, 4, 0)?;
                let expected = &reference.bytes[tile as usize][range.clone()];
                let found = &machine.bytes[tile as usize][range];
                if expected != found {
                    let as_word = |bytes: &[u8]| {
                        bytes
                            .iter()
                            .rev()
                            .fold(0u32, |value, &byte| value << 8 | u32::from(byte))
                    };
                    let event = deliveries
                        .iter()
                        .filter(|delivery| {
                            delivery.tile == tile
                                && delivery.address <= address
                                && address < delivery.address + delivery.bytes
                        })
                        .map(|delivery| delivery.write_event)
                        .max();
                    return Err(ReplayError::Mismatch {
                        tile,
                        address: address as u32,
                        event,
                        found: as_word(found),
                        expected: as_word(expected),
                    });
                }
                report.checked_words += 1;
                word += stride;
            }
            index += words;
        }
    }
    Ok(report)
}

/// The first paired receive whose two members write their pointers to
/// different addresses (IPU21.md requires one address): (lane tile, event,
/// its pointer, its partner's). Lanes whose physical partner bit is clear
/// are scanned in tile order, each of their format-ons once.
pub(crate) type PairedSplit = (u32, u64, u32, u32);

/// How many paired receives (per receiving pair and format-on) have their
/// members' pointers at different addresses, and the first of them.
pub(crate) fn paired_splits(decoded: &[Vec<RowEvent>]) -> (u64, Option<PairedSplit>) {
    let pointer_at = |events: &[RowEvent], event: u64| {
        let position = events.partition_point(|found| found.event() < event);
        events[position..]
            .iter()
            .take_while(|found| found.event() == event)
            .find_map(|found| match *found {
                RowEvent::Pointer { address, .. } => Some(address),
                _ => None,
            })
    };
    let mut split = 0;
    let mut first = None;
    for (tile, events) in decoded.iter().enumerate() {
        let physical = physical_tile(tile as u32);
        if physical & PARTNER_PHYSICAL_BIT != 0 {
            continue;
        }
        let Some(partner_events) = logical_tile(physical ^ PARTNER_PHYSICAL_BIT)
            .and_then(|partner| decoded.get(partner as usize))
        else {
            continue;
        };
        for event in events {
            if let RowEvent::Format { event, on: true } = *event {
                let pointer = event + PAIRED_PAYLOAD_AFTER_FORMAT as u64;
                if let (Some(own), Some(theirs)) = (
                    pointer_at(events, pointer),
                    pointer_at(partner_events, pointer),
                ) && own != theirs
                {
                    split += 1;
                    first.get_or_insert((tile as u32, pointer, own, theirs));
                }
            }
        }
    }
    (split, first)
}

/// One receive window of a tile, before its pointer is known.
struct Window {
    payload: u64,
    /// Events the payload lasts (words, or 64-bit items when paired).
    events: u64,
    read_event: u64,
    source_tile: u32,
    source_address: u64,
    bytes: u64,
}

/// The non-neutral source `tile`'s row selects at exactly `event`, if any.
fn select_at(events: &[RowEvent], event: u64) -> Option<u32> {
    let position = events.partition_point(|found| found.event() < event);
    events[position..]
        .iter()
        .take_while(|found| found.event() == event)
        .find_map(|found| match *found {
            RowEvent::Select { source, .. } if source != NEUTRAL_INCOMING_SOURCE => Some(source),
            _ => None,
        })
}

/// Matches every receive of every row with the send it receives: ordinary
/// selects (`x = t + time_to_mux + c`), and paired receives by their
/// format-on `F` (the pair selected at `x = F - 51 - 2 row`, by whichever
/// member's row selects there, with `sender XOR (member AND 2)`; the send
/// started at `x` minus the pair's later `time_to_mux`).
pub(crate) fn deliveries(decoded: &[Vec<RowEvent>]) -> Result<Vec<Delivery>, ReplayError> {
    let mut sends: Vec<Vec<(u64, u64, u32, u8)>> = vec![Vec::new(); decoded.len()];
    for (tile, events) in decoded.iter().enumerate() {
        for event in events {
            if let RowEvent::Send {
                event,
                events,
                address,
                control,
            } = *event
            {
                sends[tile].push((event, events, address, control));
            }
        }
    }
    let mut result = Vec::new();
    for (tile, events) in decoded.iter().enumerate() {
        let tile_id = tile as u32;
        let receiver = physical_tile(tile_id);
        let unmatched =
            |event: u64, source_tile: u32, candidates: usize| ReplayError::UnmatchedSelect {
                tile: tile_id,
                event,
                source_tile,
                candidates,
            };
        let format_delay = (paired_format_select(0, receiver)) as u64;
        let formats: Vec<(u64, bool)> = events
            .iter()
            .filter_map(|event| match *event {
                RowEvent::Format { event, on } => Some((event, on)),
                _ => None,
            })
            .collect();
        let is_pair_select = |select: u64| {
            formats
                .binary_search(&(select + format_delay, true))
                .is_ok()
        };
        let selects: Vec<(u64, u32)> = events
            .iter()
            .filter_map(|event| match *event {
                RowEvent::Select { event, source, .. } => Some((event, source)),
                _ => None,
            })
            .collect();
        let mut windows: Vec<Window> = Vec::new();
        for (index, &(select, source)) in selects.iter().enumerate() {
            if source == NEUTRAL_INCOMING_SOURCE || is_pair_select(select) {
                continue;
            }
            let window_end = selects.get(index + 1).map_or(u64::MAX, |next| next.0);
            let length = window_end.saturating_sub(select);
            let sender = logical_tile(source).ok_or(unmatched(select, source, 0))?;
            let mux = i64::from(time_to_mux(source, receiver));
            let list = sends
                .get(sender as usize)
                .ok_or(unmatched(select, source, 0))?;
            let candidates: Vec<&(u64, u64, u32, u8)> = [0, POINT_TO_POINT_SELECT_OFFSET]
                .iter()
                .filter_map(|&offset| {
                    let start = select as i64 - mux - offset;
                    let position = list.partition_point(|send| (send.0 as i64) < start);
                    list.get(position).filter(|send| {
                        send.0 as i64 == start && send.1 == length && send.3 & 4 == 0
                    })
                })
                .collect();
            let &[&(start, send_events, address, _)] = candidates.as_slice() else {
                return Err(unmatched(select, source, candidates.len()));
            };
            windows.push(Window {
                payload: payload_start(select as i64, receiver) as u64,
                events: send_events,
                read_event: start,
                source_tile: sender,
                source_address: u64::from(address) * 4,
                bytes: send_events * 4,
            });
        }
        for (index, &(format, on)) in formats.iter().enumerate() {
            if !on {
                continue;
            }
            let off = formats[index + 1..]
                .iter()
                .find(|&&(_, on)| !on)
                .map(|&(event, _)| event)
                .ok_or(unmatched(format, NEUTRAL_INCOMING_SOURCE, 0))?;
            let count = off - format;
            let select = format.checked_sub(format_delay).ok_or(unmatched(
                format,
                NEUTRAL_INCOMING_SOURCE,
                0,
            ))?;
            let other = receiver ^ PARTNER_PHYSICAL_BIT;
            let member_rows = [(receiver, Some(tile_id)), (other, logical_tile(other))];
            let (member, value) = member_rows
                .iter()
                .find_map(|&(member, logical)| {
                    let row = decoded.get(logical? as usize)?;
                    select_at(row, select).map(|value| (member, value))
                })
                .ok_or(unmatched(select, NEUTRAL_INCOMING_SOURCE, 0))?;
            let source = value ^ (member & PARTNER_PHYSICAL_BIT);
            let sender = logical_tile(source).ok_or(unmatched(select, source, 0))?;
            let route = time_to_mux(source, receiver).max(time_to_mux(source, other));
            let start = select as i64 - i64::from(route);
            let list = sends
                .get(sender as usize)
                .ok_or(unmatched(select, source, 0))?;
            let position = list.partition_point(|send| (send.0 as i64) < start);
            let &(start, send_events, address, _) = list
                .get(position)
                .filter(|send| send.0 as i64 == start && send.1 == count && send.3 & 4 != 0)
                .ok_or(unmatched(select, source, 0))?;
            windows.push(Window {
                payload: paired_payload_start(select as i64, receiver) as u64,
                events: send_events,
                read_event: start,
                source_tile: sender,
                source_address: u64::from(address) * 4,
                bytes: send_events * 8,
            });
        }
        windows.sort_unstable_by_key(|window| window.payload);
        let pointers: Vec<(u64, u32)> = events
            .iter()
            .filter_map(|event| match *event {
                RowEvent::Pointer { event, address } => Some((event, address)),
                _ => None,
            })
            .collect();
        let mut next_pointer = 0;
        let mut pointer: Option<u64> = None;
        for window in windows {
            let payload = window.payload;
            let length = window.events;
            while next_pointer < pointers.len() && pointers[next_pointer].0 <= payload {
                pointer = Some(u64::from(pointers[next_pointer].1) * 4);
                next_pointer += 1;
            }
            if pointers
                .get(next_pointer)
                .is_some_and(|&(event, _)| event < payload + length)
            {
                return Err(ReplayError::PointerInsidePayload {
                    tile: tile_id,
                    event: pointers[next_pointer].0,
                });
            }
            let destination = pointer.ok_or(ReplayError::NoPointer {
                tile: tile_id,
                event: payload,
            })?;
            result.push(Delivery {
                read_event: window.read_event,
                write_event: payload,
                source_tile: window.source_tile,
                source_address: window.source_address,
                tile: tile_id,
                address: destination,
                bytes: window.bytes,
            });
            pointer = Some(destination + window.bytes);
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiving pair member's row: format on at 100, pointer at 102.
    fn member(pointer: u32) -> Vec<RowEvent> {
        vec![
            RowEvent::Format {
                event: 100,
                on: true,
            },
            RowEvent::Pointer {
                event: 102,
                address: pointer,
            },
            RowEvent::Format {
                event: 164,
                on: false,
            },
            RowEvent::End { event: 300 },
        ]
    }

    #[test]
    fn paired_members_at_different_addresses_are_counted_once_per_pair() {
        // Logical tiles 0 and 1 are partners (physical 0 and 2).
        assert_eq!(paired_splits(&[member(0x4000), member(0x4000)]), (0, None));
        let (split, first) = paired_splits(&[member(0x4000), member(0x4100)]);
        assert_eq!(split, 1);
        assert!(matches!(
            first,
            Some((_, _, 0x4000, 0x4100)) | Some((_, _, 0x4100, 0x4000))
        ));
        assert_eq!(paired_splits(&[member(0x4000), Vec::new()]).0, 0);
    }
}
