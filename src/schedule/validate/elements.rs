//! The validator's memory element check, with its own code (it uses nothing
//! of `crate::schedule::elements`): on every tile, no send and no receive
//! payload of two different pieces overlap in events while they may touch
//! one memory element of one allocation root, that is while the gap between
//! their byte ranges (over every Repeat binding) is less than the largest
//! element (IPU21.md, "Chip": 16 KiB elements, 32 KiB interleaved). Elements
//! shared by different roots depend on placement and are checked on the
//! real placement (`crate::place::conflicts`). A piece received by its own
//! sender tile into the root it reads is the documented exception.

use super::ValidationError;
use crate::schedule::{ExchangeProblem, Schedule, SymbolicAddress};
use crate::target::memory::{INTERLEAVED_ELEMENT_BYTES, MEMORY_ELEMENT_BYTES};

/// (first event, end event, piece, root, lowest byte, byte past the highest).
type Access = (i64, i64, usize, u32, u64, u64);

/// The largest element a root can be placed in (an interleaved element).
const REACH: u64 = if INTERLEAVED_ELEMENT_BYTES > MEMORY_ELEMENT_BYTES {
    INTERLEAVED_ELEMENT_BYTES as u64
} else {
    MEMORY_ELEMENT_BYTES as u64
};

fn access(
    problem: &ExchangeProblem,
    address: SymbolicAddress,
    piece: usize,
    start: i64,
    events: i64,
) -> Access {
    let bytes = 4 * u64::from(problem.words[piece]);
    let root = problem.allocations[address.allocation as usize].alias_root;
    let offsets = (0..problem.bindings(address.allocation))
        .map(|binding| problem.bound_offset(address, binding));
    let (low, high) = offsets.fold((u64::MAX, 0), |(low, high), offset| {
        (low.min(offset), high.max(offset + bytes))
    });
    (start, start + events, piece, root, low, high)
}

/// Whether two accesses of one tile could touch one element: same root, and
/// some byte of one lies within `REACH - 1` bytes of some byte of the other.
fn near(first: &Access, second: &Access) -> bool {
    first.3 == second.3 && second.4 + 1 < first.5 + REACH && first.4 + 1 < second.5 + REACH
}

/// Checks every tile's sends against its receive payloads.
pub fn check_elements(
    problem: &ExchangeProblem,
    schedule: &Schedule,
) -> Result<(), ValidationError> {
    let tiles = problem.tiles as usize;
    let mut sends: Vec<Vec<Access>> = vec![Vec::new(); tiles];
    let mut receives: Vec<Vec<Access>> = vec![Vec::new(); tiles];
    for piece in 0..problem.pieces() {
        let words = i64::from(problem.words[piece]);
        let events = if schedule.paired[piece] {
            words / 2
        } else {
            words
        };
        let start = i64::from(schedule.send_start[piece]);
        sends[problem.source_tile[piece] as usize].push(access(
            problem,
            problem.source[piece],
            piece,
            start,
            events,
        ));
        for receive in problem.receives_of(piece) {
            let payload = i64::from(schedule.payload_start[receive]);
            receives[problem.destination_tile[receive] as usize].push(access(
                problem,
                problem.destination[receive],
                piece,
                payload,
                events,
            ));
        }
    }
    for (tile, list) in sends.iter_mut().enumerate() {
        // A sweep over the tile's sends by start, each receive against the
        // sends that started before it ended and have not ended before it
        // started (sends may overlap here only if the sender check let them).
        list.sort_unstable();
        let mut latest_end = Vec::with_capacity(list.len());
        for send in list.iter() {
            latest_end.push(send.1.max(latest_end.last().copied().unwrap_or(i64::MIN)));
        }
        for received in &receives[tile] {
            let (start, end, piece, ..) = *received;
            let started = list.partition_point(|send| send.0 < end);
            for (index, send) in list[..started].iter().enumerate().rev() {
                if latest_end[index] <= start {
                    break;
                }
                if send.1 > start && send.2 != piece && near(send, received) {
                    return Err(ValidationError::ElementConflict {
                        piece,
                        send: send.2,
                        tile: tile as u32,
                        event: start.max(send.0),
                    });
                }
            }
        }
    }
    Ok(())
}
