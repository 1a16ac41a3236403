//! The row checker's memory element rule (IPU21.md, "Exchange rules
//! confirmed on hardware"), read from one tile's decoded row alone: the
//! bytes each send reads and each receive payload writes, event by event,
//! and no send and payload that overlap in events touching one allocation
//! less than an element apart (32 KiB, the largest element: the allocation
//! may be placed anywhere). Receive windows and addresses are rebuilt from
//! the row's own controls (selects, format changes, pointer writes and the
//! pointer's advance), and addresses are mapped back to allocations through
//! the check's [`ConsecutivePlacement`]; it uses nothing of the scheduler or
//! the encoder. The documented exception, a piece its own sender receives
//! into the allocation it reads, shows in the row as a payload selected from
//! the tile itself beside an own send of the same length: that pair is let
//! through.

use super::ADDRESS_UNIT_BYTES;
use super::consecutive::ConsecutivePlacement;
use super::decode::RowEvent;
use super::error::RowError;
use super::fabric::{
    EVENTS_PER_ROW, FORMAT_ON_DELAY, FORMAT_TO_POINTER, ITEMS_64_BIT, NEUTRAL_SOURCE,
    ORDINARY_PAYLOAD_DELAY, physical_row,
};
use crate::schedule::ExchangeProblem;
use crate::target::mapping::physical_tile;

/// Bytes within which two addresses of one allocation may share an element.
const REACH: u64 = 32 * 1024;

/// (first event, end event, first byte, end byte).
type Window = (u64, u64, u64, u64);

/// A receive window and whether the tile selected itself as its source.
type Receive = (Window, bool);

/// The allocation roots of one tile under the consecutive placement:
/// (first byte, end byte), ascending.
pub fn tile_roots(
    problem: &ExchangeProblem,
    placement: &ConsecutivePlacement,
) -> Vec<Vec<(u64, u64)>> {
    let mut roots: Vec<Vec<(u64, u64)>> = vec![Vec::new(); problem.tiles as usize];
    let mut size = vec![0u64; problem.allocations.len()];
    for allocation in &problem.allocations {
        let bytes = u64::from(allocation.bytes) * u64::from(allocation.iterations.max(1));
        let root = allocation.alias_root as usize;
        size[root] = size[root].max(bytes);
    }
    for (index, allocation) in problem.allocations.iter().enumerate() {
        if allocation.alias_root as usize == index
            && let Some(list) = roots.get_mut(allocation.tile as usize)
        {
            let base = u64::from(placement.base[index]);
            list.push((base, base + size[index].max(1)));
        }
    }
    for list in &mut roots {
        list.sort_unstable();
    }
    roots
}

/// The root (its first byte) holding byte `address`, if any.
fn root_of(roots: &[(u64, u64)], address: u64) -> Option<u64> {
    let index = roots.partition_point(|&(start, _)| start <= address);
    (index > 0 && address < roots[index - 1].1).then(|| roots[index - 1].0)
}

/// Receive payload windows of a decoded row with the bytes they write.
fn receive_windows(tile: u32, decoded: &[RowEvent]) -> Vec<Receive> {
    let own = physical_tile(tile);
    let row = physical_row(own);
    let payload_delay = (ORDINARY_PAYLOAD_DELAY + EVENTS_PER_ROW * row) as u64;
    let format_delay = (FORMAT_ON_DELAY + EVENTS_PER_ROW * row) as u64;
    let mut selects: Vec<(u64, u32)> = Vec::new();
    let mut formats: Vec<(u64, bool)> = Vec::new();
    let mut pointers: Vec<(u64, u32)> = Vec::new();
    for event in decoded {
        match *event {
            RowEvent::Select { event, source, .. } => selects.push((event, source)),
            RowEvent::Format { event, on } => formats.push((event, on)),
            RowEvent::Pointer { event, address } => pointers.push((event, address)),
            _ => {}
        }
    }
    // (payload start, events, bytes per event, selected from the tile itself).
    let mut payloads: Vec<(u64, u64, u64, bool)> = Vec::new();
    for (index, &(event, on)) in formats.iter().enumerate() {
        if let (true, Some(&(off, false))) = (on, formats.get(index + 1)) {
            payloads.push((event + FORMAT_TO_POINTER as u64, off - event, 8, false));
        }
    }
    let format_ons: Vec<u64> = formats
        .iter()
        .filter(|&&(_, on)| on)
        .map(|&(event, _)| event)
        .collect();
    for (index, &(select, source)) in selects.iter().enumerate() {
        let pair_select = format_ons.binary_search(&(select + format_delay)).is_ok();
        if source == NEUTRAL_SOURCE || pair_select {
            continue;
        }
        let length = selects.get(index + 1).map_or(0, |&(next, _)| next - select);
        payloads.push((
            select + payload_delay,
            length,
            u64::from(ADDRESS_UNIT_BYTES),
            source == own,
        ));
    }
    payloads.sort_unstable();
    let mut windows = Vec::with_capacity(payloads.len());
    let mut previous: Option<(u64, u64)> = None; // (payload start, next byte)
    for (start, events, unit, from_itself) in payloads {
        // The pointer written since the previous payload began, else the
        // pointer continues where the previous payload ended.
        let written = pointers.partition_point(|&(event, _)| event <= start);
        let fresh = written
            .checked_sub(1)
            .map(|index| pointers[index])
            .filter(|&(event, _)| previous.is_none_or(|(begun, _)| event > begun));
        let first = match (fresh, previous) {
            (Some((_, address)), _) => u64::from(address) * u64::from(ADDRESS_UNIT_BYTES),
            (None, Some((_, next))) => next,
            (None, None) => continue,
        };
        let end = first + events * unit;
        windows.push(((start, start + events, first, end), from_itself));
        previous = Some((start, end));
    }
    windows
}

/// Checks one tile's decoded row: no send and receive payload overlapping
/// in events within one element's reach in one allocation.
pub fn check_row_elements(
    tile: u32,
    decoded: &[RowEvent],
    roots: &[(u64, u64)],
) -> Result<(), RowError> {
    let mut sends: Vec<Window> = decoded
        .iter()
        .filter_map(|event| match *event {
            RowEvent::Send {
                event,
                events,
                address,
                control,
            } => {
                let unit = if control & ITEMS_64_BIT != 0 { 8 } else { 4 };
                let first = u64::from(address) * u64::from(ADDRESS_UNIT_BYTES);
                Some((event, event + events, first, first + events * unit))
            }
            _ => None,
        })
        .collect();
    sends.sort_unstable();
    for ((start, end, low, high), from_itself) in receive_windows(tile, decoded) {
        let started = sends.partition_point(|send| send.0 < end);
        for &(send_start, send_end, send_low, send_high) in &sends[..started] {
            if send_end <= start {
                continue;
            }
            let own_piece = from_itself && send_end - send_start == end - start;
            let one_root =
                root_of(roots, low).is_some_and(|root| Some(root) == root_of(roots, send_low));
            let near = send_low < high + REACH - 1 && low < send_high + REACH - 1;
            if one_root && near && !own_piece {
                return Err(RowError::ElementConflict {
                    tile,
                    event: start.max(send_start),
                });
            }
        }
    }
    Ok(())
}
