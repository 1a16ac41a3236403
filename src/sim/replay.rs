//! Exchange replay: executes one phase from its decoded, finalized rows on
//! simulated tile memories and checks that every destination receives the
//! right bytes. Sources hold a known pattern; the expected contents come
//! from applying the problem's pieces in their semantic order to a second
//! copy of the memories. The machine side uses only the rows and the fabric
//! model of IPU21.md: a receiver that selects source `s` at event `x` takes
//! the send of `s` that starts at `x - time_to_mux - c` (`c` = 0 or 2) with
//! the window's length and width, and writes it through its incoming
//! pointer from `x + 52 + 2 row` (paired: `x + 53 + 2 row`). Reads happen at
//! send start and writes at payload start (a valid schedule keeps every
//! hazard further apart than a window). Repeat iteration 0 is replayed.
//! Owns simulation only; it must not consult the schedule.

use rayon::prelude::*;

use crate::rows::{ConsecutivePlacement, RowError, RowEvent, decode_row};
use crate::schedule::{ExchangeProblem, SymbolicAddress};
use crate::target::mapping::{logical_tile, physical_tile};
use crate::target::memory::TILE_BASE_ADDRESS;
use crate::target::timing::{
    NEUTRAL_INCOMING_SOURCE, POINT_TO_POINT_SELECT_OFFSET, paired_payload_start, payload_start,
    time_to_mux,
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

/// Matches every select of every row with the send it receives.
pub(crate) fn deliveries(decoded: &[Vec<RowEvent>]) -> Result<Vec<Delivery>, ReplayError> {
    let sends: Vec<Vec<(u64, u64, u32, u8)>> = decoded
        .par_iter()
        .map(|events| {
            events
                .iter()
                .filter_map(|event| match *event {
                    RowEvent::Send {
                        event,
                        events,
                        address,
                        control,
                    } => Some((event, events, address, control)),
                    _ => None,
                })
                .collect()
        })
        .collect();
    // Receivers are independent: matched in parallel, the first failure
    // in tile order reported (deterministic).
    let per_tile: Vec<Result<Vec<Delivery>, ReplayError>> = decoded
        .par_iter()
        .enumerate()
        .map(|(tile, events)| receives_of(tile as u32, events, &sends))
        .collect();
    let mut result = Vec::with_capacity(
        per_tile
            .iter()
            .map(|list| list.as_ref().map_or(0, Vec::len))
            .sum(),
    );
    for list in per_tile {
        result.extend(list?);
    }
    Ok(result)
}

/// The receives of tile `tile_id` (its decoded `events`), each matched to
/// its send among `sends` (per tile: event, events, address, control).
fn receives_of(
    tile_id: u32,
    events: &[RowEvent],
    sends: &[Vec<(u64, u64, u32, u8)>],
) -> Result<Vec<Delivery>, ReplayError> {
    let mut result = Vec::new();
    let receiver = physical_tile(tile_id);
    let selects: Vec<(u64, u32, bool)> = events
        .iter()
        .filter_map(|event| match *event {
            RowEvent::Select {
                event,
                source,
                paired,
            } => Some((event, source, paired)),
            _ => None,
        })
        .collect();
    let pointers: Vec<(u64, u32)> = events
        .iter()
        .filter_map(|event| match *event {
            RowEvent::Pointer { event, address } => Some((event, address)),
            _ => None,
        })
        .collect();
    let mut next_pointer = 0;
    let mut pointer: Option<u64> = None;
    for (index, &(select, source, paired)) in selects.iter().enumerate() {
        if source == NEUTRAL_INCOMING_SOURCE {
            continue;
        }
        let window_end = selects.get(index + 1).map_or(u64::MAX, |next| next.0);
        let length = window_end.saturating_sub(select);
        let sender = logical_tile(source).ok_or(ReplayError::UnmatchedSelect {
            tile: tile_id,
            event: select,
            source_tile: source,
            candidates: 0,
        })?;
        let mux = i64::from(time_to_mux(source, receiver));
        let list = sends
            .get(sender as usize)
            .ok_or(ReplayError::UnmatchedSelect {
                tile: tile_id,
                event: select,
                source_tile: source,
                candidates: 0,
            })?;
        let candidate = |offset: i64| {
            let start = select as i64 - mux - offset;
            let position = list.partition_point(|send| (send.0 as i64) < start);
            list.get(position).copied().filter(|send| {
                send.0 as i64 == start && send.1 == length && (send.3 & 4 != 0) == paired
            })
        };
        let (start, send_events, address, _) =
            match (candidate(0), candidate(POINT_TO_POINT_SELECT_OFFSET)) {
                (Some(send), None) | (None, Some(send)) => send,
                (first, second) => {
                    return Err(ReplayError::UnmatchedSelect {
                        tile: tile_id,
                        event: select,
                        source_tile: source,
                        candidates: usize::from(first.is_some()) + usize::from(second.is_some()),
                    });
                }
            };
        let payload = if paired {
            paired_payload_start(select as i64, receiver)
        } else {
            payload_start(select as i64, receiver)
        } as u64;
        let unit = if paired { 8 } else { 4 };
        let bytes = send_events * unit;
        while next_pointer < pointers.len() && pointers[next_pointer].0 <= payload {
            pointer = Some(u64::from(pointers[next_pointer].1) * 4);
            next_pointer += 1;
        }
        if pointers
            .get(next_pointer)
            .is_some_and(|&(event, _)| event < payload + send_events)
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
            read_event: start,
            write_event: payload,
            source_tile: sender,
            source_address: u64::from(address) * 4,
            tile: tile_id,
            address: destination,
            bytes,
        });
        pointer = Some(destination + bytes);
    }
    Ok(result)
}
