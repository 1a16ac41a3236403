//! The independent schedule validator. Written from IPU21.md alone, with
//! its own reading of the fabric formulas (`fabric`; it calls nothing of the
//! scheduler, its timing model, its policy or its dependency DAG), it re-derives every event of a
//! (problem, schedule) pair and checks every invariant: sender streams and
//! partner blocking, select and payload events, one source per receiver at a
//! time, pointer continuity and PIC windows, distinct receive controls away
//! from the first two events of own sends, deselects, paired eligibility,
//! memory hazards by byte range over every Repeat binding (checked on event
//! times, not on a DAG), sends and receives of one allocation apart in memory
//! elements (`elements`), no negative events, and the reported totals.
//! It must not repair anything; the first violation is returned, naming the
//! piece, tile and event.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

pub mod elements;
pub mod fabric;
pub mod paired;

use self::fabric::{
    FORMAT_TO_PAYLOAD, GUARD, POINT_TO_POINT_OFFSET, SEND_START_EVENTS, format_on, ordinary_payload,
};
use self::paired::{Part, pairing_refusal, route_and_part};
use super::problem::{ExchangeProblem, SymbolicAddress};
use super::{NO_EVENT, Schedule};
use crate::target::mapping::{partner, physical_tile};

/// The first invariant a schedule breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("schedule arrays do not match the problem: {what}")]
    Shape { what: &'static str },
    #[error("piece {piece}: paired on tile {tile} but not eligible ({reason})")]
    PairedIneligible {
        piece: usize,
        tile: u32,
        reason: &'static str,
    },
    #[error(
        "piece {piece}: tile {tile}'s outgoing stream is already busy at event {event} (piece {other})"
    )]
    SenderOverlap {
        piece: usize,
        other: usize,
        tile: u32,
        event: i64,
    },
    #[error("piece {piece}: receiver tile {tile} selects at event {event}, expected {expected}")]
    SelectEvent {
        piece: usize,
        tile: u32,
        event: i64,
        expected: i64,
    },
    #[error("piece {piece}: receiver tile {tile} payload starts at {event}, expected {expected}")]
    PayloadEvent {
        piece: usize,
        tile: u32,
        event: i64,
        expected: i64,
    },
    #[error("piece {piece}: tile {tile} still listens to piece {other} at event {event}")]
    ReceiveOverlap {
        piece: usize,
        other: usize,
        tile: u32,
        event: i64,
    },
    #[error(
        "piece {piece}: tile {tile} pointer write flag wrong at event {event} (continuing: {continuing})"
    )]
    PointerFlag {
        piece: usize,
        tile: u32,
        event: i64,
        continuing: bool,
    },
    #[error("piece {piece}: tile {tile} pointer write at event {event} outside {low}..={high}")]
    PointerWindow {
        piece: usize,
        tile: u32,
        event: i64,
        low: i64,
        high: i64,
    },
    #[error("piece {piece}: tile {tile} deselect at event {event}, expected {expected}")]
    Deselect {
        piece: usize,
        tile: u32,
        event: i64,
        expected: i64,
    },
    #[error(
        "piece {piece}: tile {tile} breaks the paired receive protocol at event {event}: {rule}"
    )]
    PairedProtocol {
        piece: usize,
        tile: u32,
        event: i64,
        rule: &'static str,
    },
    #[error("tile {tile}: two receive controls at event {event} (piece {piece})")]
    ControlCollision { piece: usize, tile: u32, event: i64 },
    #[error(
        "piece {piece}: tile {tile} receive control at event {event} hits the start of own send piece {send}"
    )]
    ControlOnSend {
        piece: usize,
        send: usize,
        tile: u32,
        event: i64,
    },
    #[error(
        "pieces {piece} and {other}: tile {tile} sends of equal shape start two events apart at {event}"
    )]
    AmbiguousSends {
        piece: usize,
        other: usize,
        tile: u32,
        event: i64,
    },
    #[error(
        "piece {piece}: tile {tile} accesses bytes {start}..{end} at event {event} before earlier access ends at {ready}"
    )]
    Hazard {
        piece: usize,
        tile: u32,
        start: u64,
        end: u64,
        event: i64,
        ready: i64,
    },
    #[error(
        "piece {piece}: tile {tile} receives at event {event} into the memory element its send piece \
         {send} reads (one allocation, less than an element apart)"
    )]
    ElementConflict {
        piece: usize,
        send: usize,
        tile: u32,
        event: i64,
    },
    #[error("tile {tile}: end event {event}, expected {expected}")]
    TileEnd {
        tile: u32,
        event: i64,
        expected: i64,
    },
    #[error("totals differ: {what}")]
    Totals { what: &'static str },
}

fn events_of(words: u32, paired: bool) -> i64 {
    i64::from(if paired { words / 2 } else { words })
}

/// Checks `schedule` against `problem`.
pub fn validate(problem: &ExchangeProblem, schedule: &Schedule) -> Result<(), ValidationError> {
    let pieces = problem.pieces();
    let receives = problem.receives();
    let tiles = problem.tiles as usize;
    let shape = |ok: bool, what| {
        if ok {
            Ok(())
        } else {
            Err(ValidationError::Shape { what })
        }
    };
    shape(
        schedule.send_start.len() == pieces && schedule.paired.len() == pieces,
        "per-piece arrays",
    )?;
    shape(
        schedule.select.len() == receives
            && schedule.payload_start.len() == receives
            && schedule.pointer_write.len() == receives
            && schedule.deselect.len() == receives,
        "per-receive arrays",
    )?;
    shape(
        schedule.tile_end.len() == tiles
            && schedule.send_words.len() == tiles
            && schedule.receive_words.len() == tiles,
        "per-tile arrays",
    )?;
    // Once per piece: which paired pieces break a rule, and the bound.
    let refusals: Vec<Option<&'static str>> = (0..pieces)
        .map(|piece| pairing_refusal(problem, piece))
        .collect();
    check_paired(problem, schedule, &refusals)?;
    let sends = check_senders(problem, schedule)?;
    let ends = check_receivers(problem, schedule, &sends)?;
    check_hazards(problem, schedule)?;
    elements::check_elements(problem, schedule)?;
    check_totals(problem, schedule, ends, &refusals)
}

fn check_paired(
    problem: &ExchangeProblem,
    schedule: &Schedule,
    refusals: &[Option<&'static str>],
) -> Result<(), ValidationError> {
    for (piece, refusal) in refusals.iter().enumerate() {
        if !schedule.paired[piece] {
            continue;
        }
        if let Some(reason) = *refusal {
            return Err(ValidationError::PairedIneligible {
                piece,
                tile: problem.source_tile[piece],
                reason,
            });
        }
    }
    Ok(())
}

/// Own sends per tile: (start, events, paired, piece), sorted by start.
type Sends = Vec<Vec<(i64, i64, bool, usize)>>;

fn check_senders(problem: &ExchangeProblem, schedule: &Schedule) -> Result<Sends, ValidationError> {
    let mut busy: Vec<Vec<(i64, i64, usize)>> = vec![Vec::new(); problem.tiles as usize];
    let mut sends: Sends = vec![Vec::new(); problem.tiles as usize];
    for piece in 0..problem.pieces() {
        let tile = problem.source_tile[piece];
        let paired = schedule.paired[piece];
        let start = i64::from(schedule.send_start[piece]);
        let events = events_of(problem.words[piece], paired);
        busy[tile as usize].push((start, start + events, piece));
        sends[tile as usize].push((start, events, paired, piece));
        if paired {
            busy[partner(tile) as usize].push((start, start + events, piece));
        }
    }
    for (tile, intervals) in busy.iter_mut().enumerate() {
        intervals.sort_unstable();
        for pair in intervals.windows(2) {
            if pair[1].0 < pair[0].1 {
                return Err(ValidationError::SenderOverlap {
                    piece: pair[1].2,
                    other: pair[0].2,
                    tile: tile as u32,
                    event: pair[1].0,
                });
            }
        }
    }
    for (tile, list) in sends.iter_mut().enumerate() {
        list.sort_unstable();
        for (index, &(start, events, paired, piece)) in list.iter().enumerate() {
            for &(other_start, other_events, other_paired, other) in
                list.iter().skip(index + 1).take(3)
            {
                if other_start - start == 2 && other_events == events && other_paired == paired {
                    return Err(ValidationError::AmbiguousSends {
                        piece,
                        other,
                        tile: tile as u32,
                        event: other_start,
                    });
                }
            }
        }
    }
    Ok(sends)
}

/// One receive as a receiving tile sees it: (select, receive, piece, part).
type Incoming = (i64, usize, usize, Part);

/// Checks receivers; returns each tile's recomputed end event.
fn check_receivers(
    problem: &ExchangeProblem,
    schedule: &Schedule,
    sends: &Sends,
) -> Result<Vec<i64>, ValidationError> {
    let tiles = problem.tiles as usize;
    let mut ends = vec![0i64; tiles];
    let mut incoming: Vec<Vec<Incoming>> = vec![Vec::new(); tiles];
    for piece in 0..problem.pieces() {
        let sender = problem.source_tile[piece];
        let paired = schedule.paired[piece];
        let start = i64::from(schedule.send_start[piece]);
        let events = events_of(problem.words[piece], paired);
        ends[sender as usize] = ends[sender as usize].max(start + events);
        let range = problem.receives_of(piece);
        let offset = if range.len() == 1 {
            POINT_TO_POINT_OFFSET
        } else {
            0
        };
        for receive in range {
            let tile = problem.destination_tile[receive];
            let receiver = physical_tile(tile);
            let (route, part) = route_and_part(physical_tile(sender), receiver, paired);
            let expected = start + route + offset;
            let select = i64::from(schedule.select[receive]);
            if select != expected || expected < 0 {
                return Err(ValidationError::SelectEvent {
                    piece,
                    tile,
                    event: select,
                    expected,
                });
            }
            let expected_payload = if paired {
                format_on(select, receiver) + FORMAT_TO_PAYLOAD
            } else {
                ordinary_payload(select, receiver)
            };
            let payload = i64::from(schedule.payload_start[receive]);
            if payload != expected_payload {
                return Err(ValidationError::PayloadEvent {
                    piece,
                    tile,
                    event: payload,
                    expected: expected_payload,
                });
            }
            incoming[tile as usize].push((select, receive, piece, part));
            let end = (select + events).max(payload + events) + GUARD;
            ends[tile as usize] = ends[tile as usize].max(end);
        }
    }
    for (tile, list) in incoming.iter_mut().enumerate() {
        list.sort_unstable_by_key(|&(select, receive, _, _)| (select, receive));
        check_tile_receives(problem, schedule, &sends[tile], tile as u32, list)?;
    }
    Ok(ends)
}

/// Checks one tile's receives, in select order: one source at a time,
/// pointers, deselects, the paired receive protocol, and its receive
/// controls each on an event of its own, away from its sends' starts.
fn check_tile_receives(
    problem: &ExchangeProblem,
    schedule: &Schedule,
    own: &[(i64, i64, bool, usize)],
    tile: u32,
    list: &[Incoming],
) -> Result<(), ValidationError> {
    let mut controls: HashMap<i64, usize> = HashMap::default();
    // Source end, payload end, receive, piece of the previous receive.
    let mut previous: Option<(i64, i64, usize, usize)> = None;
    let mut ordinary_end = i64::MIN;
    for (index, &(select, receive, piece, part)) in list.iter().enumerate() {
        let events = events_of(problem.words[piece], schedule.paired[piece]);
        let payload = i64::from(schedule.payload_start[receive]);
        let destination = problem.destination[receive];
        let mut continuing = false;
        let mut low = 0;
        if let Some((source_end, payload_end, previous_receive, previous_piece)) = previous {
            if select < source_end || payload < payload_end {
                return Err(ValidationError::ReceiveOverlap {
                    piece,
                    other: previous_piece,
                    tile,
                    event: select,
                });
            }
            let before = problem.destination[previous_receive];
            continuing = before.allocation == destination.allocation
                && u64::from(before.offset) + 4 * u64::from(problem.words[previous_piece])
                    == u64::from(destination.offset);
            low = payload_end;
        }
        let mut add = |event: i64| -> Result<(), ValidationError> {
            if controls.insert(event, piece).is_some() {
                return Err(ValidationError::ControlCollision { piece, tile, event });
            }
            let position = own.partition_point(|&(start, _, _, _)| start <= event);
            for &(start, _, _, send) in own[position.saturating_sub(2)..position].iter() {
                if (0..SEND_START_EVENTS).contains(&(event - start)) {
                    return Err(ValidationError::ControlOnSend {
                        piece,
                        send,
                        tile,
                        event,
                    });
                }
            }
            Ok(())
        };
        let refuse = |event: i64, rule: &'static str| ValidationError::PairedProtocol {
            piece,
            tile,
            event,
            rule,
        };
        if part != Part::Following {
            add(select)?;
        }
        let pointer = schedule.pointer_write[receive];
        if part == Part::Ordinary {
            ordinary_end = payload + events;
            if (pointer == NO_EVENT) != continuing {
                return Err(ValidationError::PointerFlag {
                    piece,
                    tile,
                    event: payload,
                    continuing,
                });
            }
            if pointer != NO_EVENT {
                let pointer = i64::from(pointer);
                if pointer < low || pointer > payload {
                    return Err(ValidationError::PointerWindow {
                        piece,
                        tile,
                        event: pointer,
                        low,
                        high: payload,
                    });
                }
                add(pointer)?;
            }
        } else {
            // Format on, pointer two events later, format off `events`
            // after the format on; the format on after the last ordinary
            // payload into this tile has drained.
            let format = payload - FORMAT_TO_PAYLOAD;
            if format < ordinary_end {
                return Err(refuse(
                    format,
                    "format change before an ordinary payload into the tile has drained",
                ));
            }
            if i64::from(pointer) != payload || pointer == NO_EVENT {
                return Err(refuse(
                    payload,
                    "a paired receive writes its pointer two events after its format-on",
                ));
            }
            add(format)?;
            add(payload)?;
            add(format + events)?;
        }
        let next = list.get(index + 1);
        let deselect = schedule.deselect[receive];
        let replaced = next.is_some_and(|&(next_select, _, _, next_part)| {
            next_select == select + events && next_part != Part::Following
        });
        if part == Part::Following || replaced {
            if deselect != NO_EVENT {
                return Err(ValidationError::Deselect {
                    piece,
                    tile,
                    event: i64::from(deselect),
                    expected: -1,
                });
            }
            // The next select (if any) is registered by the next receive.
        } else if i64::from(deselect) != select + events || deselect == NO_EVENT {
            return Err(ValidationError::Deselect {
                piece,
                tile,
                event: i64::from(deselect),
                expected: select + events,
            });
        } else {
            add(select + events)?;
        }
        previous = Some((select + events, payload + events, receive, piece));
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct Segment {
    end: u64,
    read_end: i64,
    write_end: i64,
}

/// A byte-range access: (piece, is write, address, first event, end event).
type Access = (usize, bool, SymbolicAddress, i64, i64);

fn check_hazards(problem: &ExchangeProblem, schedule: &Schedule) -> Result<(), ValidationError> {
    // (tile, root) -> accesses in piece order: (piece, write, address, start event, end event).
    let mut groups: BTreeMap<(u32, u32), Vec<Access>> = BTreeMap::new();
    let root =
        |address: SymbolicAddress| problem.allocations[address.allocation as usize].alias_root;
    for piece in 0..problem.pieces() {
        let events = events_of(problem.words[piece], schedule.paired[piece]);
        let start = i64::from(schedule.send_start[piece]);
        let source = problem.source[piece];
        groups
            .entry((problem.source_tile[piece], root(source)))
            .or_default()
            .push((piece, false, source, start, start + events));
        for receive in problem.receives_of(piece) {
            let destination = problem.destination[receive];
            let payload = i64::from(schedule.payload_start[receive]);
            groups
                .entry((problem.destination_tile[receive], root(destination)))
                .or_default()
                .push((piece, true, destination, payload, payload + events));
        }
    }
    for ((tile, _), accesses) in &groups {
        if !accesses.iter().any(|access| access.1) {
            continue;
        }
        let iterated = accesses
            .iter()
            .any(|access| problem.allocations[access.2.allocation as usize].iterations > 1);
        let bindings = if iterated {
            problem.iterations.max(1)
        } else {
            1
        };
        // An iteration whose accesses all lie at one distance from another
        // iteration's (every access's allocation moves by the same bytes)
        // overlaps exactly where that one does: it is checked once.
        let mut patterns_checked: HashSet<Vec<u64>> = HashSet::default();
        for iteration in 0..bindings {
            let lows: Vec<u64> = accesses
                .iter()
                .map(|&(_, _, address, _, _)| {
                    problem.bound_offset(
                        address,
                        iteration.min(problem.bindings(address.allocation) - 1),
                    )
                })
                .collect();
            if bindings > 1 {
                let first = lows.first().copied().unwrap_or(0);
                let pattern = lows.iter().map(|low| low.wrapping_sub(first)).collect();
                if !patterns_checked.insert(pattern) {
                    continue;
                }
            }
            check_accesses(problem, *tile, accesses, &lows)?;
        }
    }
    Ok(())
}

/// Checks one tile's accesses to one alias root (in piece order, the
/// `i`th at byte `lows[i]`): no access starts before the accesses it must
/// follow on the bytes it shares with them have ended. Only overlapping
/// accesses can conflict, so the accesses are cut into clusters of
/// overlapping byte ranges (most of them alone), and each cluster of two or
/// more is walked in piece order; the error is the first access in piece
/// order that conflicts, as one walk over them all would find.
fn check_accesses(
    problem: &ExchangeProblem,
    tile: u32,
    accesses: &[Access],
    lows: &[u64],
) -> Result<(), ValidationError> {
    let high_of = |index: usize| lows[index] + 4 * u64::from(problem.words[accesses[index].0]);
    let mut by_address: Vec<usize> = (0..accesses.len()).collect();
    by_address.sort_unstable_by_key(|&index| (lows[index], index));
    let mut first_conflict: Option<(usize, ValidationError)> = None;
    let mut start = 0;
    while start < by_address.len() {
        // The cluster: every next access that begins before the bytes of
        // the ones before it have ended.
        let mut cluster_end = high_of(by_address[start]);
        let mut next = start + 1;
        while next < by_address.len() && lows[by_address[next]] < cluster_end {
            cluster_end = cluster_end.max(high_of(by_address[next]));
            next += 1;
        }
        if next - start > 1 {
            let mut cluster = by_address[start..next].to_vec();
            cluster.sort_unstable();
            if let Err(conflict) = check_cluster(problem, tile, accesses, lows, &cluster)
                && first_conflict
                    .as_ref()
                    .is_none_or(|(first, _)| conflict.0 < *first)
            {
                first_conflict = Some(conflict);
            }
        }
        start = next;
    }
    match first_conflict {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// Walks one cluster of overlapping accesses (indices into `accesses`, in
/// piece order): `Err` with the first conflicting access's index.
fn check_cluster(
    problem: &ExchangeProblem,
    tile: u32,
    accesses: &[Access],
    lows: &[u64],
    cluster: &[usize],
) -> Result<(), (usize, ValidationError)> {
    let mut segments: BTreeMap<u64, Segment> = BTreeMap::new();
    for &index in cluster {
        let (piece, write, _, start, end) = accesses[index];
        let low = lows[index];
        let high = low + 4 * u64::from(problem.words[piece]);
        for (_, segment) in overlapping(&segments, low, high) {
            let ready = if write {
                segment.read_end.max(segment.write_end)
            } else {
                segment.write_end
            };
            if start < ready {
                return Err((
                    index,
                    ValidationError::Hazard {
                        piece,
                        tile,
                        start: low,
                        end: high,
                        event: start,
                        ready,
                    },
                ));
            }
        }
        insert(&mut segments, low, high, write, end);
    }
    Ok(())
}

/// Segments overlapping `[low, high)`, in address order.
fn overlapping(segments: &BTreeMap<u64, Segment>, low: u64, high: u64) -> Vec<(u64, Segment)> {
    let mut found = Vec::new();
    if let Some((&start, &segment)) = segments.range(..low).next_back()
        && segment.end > low
    {
        found.push((start, segment));
    }
    found.extend(
        segments
            .range(low..high)
            .map(|(&start, &segment)| (start, segment)),
    );
    found
}

/// Records an access over `[low, high)` ending at `end` into the segments.
fn insert(segments: &mut BTreeMap<u64, Segment>, low: u64, high: u64, write: bool, end: i64) {
    let overlapping = overlapping(segments, low, high);
    let mut cuts = vec![low, high];
    for &(start, segment) in &overlapping {
        cuts.push(start.max(low));
        cuts.push(segment.end.min(high));
    }
    cuts.sort_unstable();
    cuts.dedup();
    for &(start, _) in &overlapping {
        segments.remove(&start);
    }
    for &(start, segment) in &overlapping {
        if start < low {
            segments.insert(
                start,
                Segment {
                    end: low,
                    ..segment
                },
            );
        }
        if segment.end > high {
            segments.insert(
                high,
                Segment {
                    end: segment.end,
                    ..segment
                },
            );
        }
    }
    for pair in cuts.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        let mut merged = Segment {
            end: to,
            read_end: i64::MIN,
            write_end: i64::MIN,
        };
        for &(start, segment) in &overlapping {
            if start < to && segment.end > from {
                merged.read_end = merged.read_end.max(segment.read_end);
                merged.write_end = merged.write_end.max(segment.write_end);
            }
        }
        if write {
            merged.write_end = merged.write_end.max(end);
        } else {
            merged.read_end = merged.read_end.max(end);
        }
        segments.insert(from, merged);
    }
}

fn check_totals(
    problem: &ExchangeProblem,
    schedule: &Schedule,
    ends: Vec<i64>,
    refusals: &[Option<&'static str>],
) -> Result<(), ValidationError> {
    for (tile, &expected) in ends.iter().enumerate() {
        if i64::from(schedule.tile_end[tile]) != expected {
            return Err(ValidationError::TileEnd {
                tile: tile as u32,
                event: i64::from(schedule.tile_end[tile]),
                expected,
            });
        }
    }
    let horizon = ends.iter().copied().max().unwrap_or(0);
    if i64::from(schedule.horizon) != horizon {
        return Err(ValidationError::Totals { what: "horizon" });
    }
    let tiles = problem.tiles as usize;
    let mut sent = vec![0u64; tiles];
    let mut received = vec![0u64; tiles];
    let mut sent_events = vec![0u64; tiles];
    let mut received_events = vec![0u64; tiles];
    for (piece, refusal) in refusals.iter().enumerate() {
        let words = u64::from(problem.words[piece]);
        // The shortest a piece can take: half its words when it may pair.
        let events = if refusal.is_none() { words / 2 } else { words };
        let sender = problem.source_tile[piece] as usize;
        sent[sender] += words;
        sent_events[sender] += events;
        for receive in problem.receives_of(piece) {
            let receiver = problem.destination_tile[receive] as usize;
            received[receiver] += words;
            received_events[receiver] += events;
        }
    }
    for tile in 0..tiles {
        if u64::from(schedule.send_words[tile]) != sent[tile]
            || u64::from(schedule.receive_words[tile]) != received[tile]
        {
            return Err(ValidationError::Totals {
                what: "per-tile words",
            });
        }
    }
    let bound = sent_events
        .iter()
        .zip(&received_events)
        .map(|(&a, &b)| a.max(b))
        .max()
        .unwrap_or(0);
    if u64::from(schedule.endpoint_bound) != bound {
        return Err(ValidationError::Totals {
            what: "endpoint bound",
        });
    }
    Ok(())
}
