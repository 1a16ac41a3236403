//! Lower bounds of a phase's horizon.
//!
//! The endpoint bound (`Schedule::endpoint_bound`, computed by the placer and
//! re-checked by the validator) is the largest number of events one tile
//! sends or receives, a piece that may pair counted at half its words. It
//! agrees with the seed system's (words) where nothing may pair, but on tiny phases
//! (a few dozen words) it ignores the fabric's fixed latency, which then
//! dominates: a ratio of 60x against a 53-word bound says nothing.
//!
//! The latency-aware bound adds what no schedule can avoid to the busiest
//! endpoint, per tile, and takes the largest:
//!
//! - a receiver's payload windows are disjoint and the first starts no
//!   earlier than its earliest possible select (`max(0, min time_to_mux + c)`
//!   over its senders) plus its payload delay (`52 + 2 row`, or the paired
//!   delay when that is shorter); its row ends a guard after the last one;
//! - a sender's last piece starts no earlier than its other pieces' events,
//!   and lands after the smallest select-plus-payload delay of its
//!   receivers, then the guard.
//!
//! Events count paired-eligible pieces at half their words (the shortest
//! they can take), and dependencies are ignored, so it is a true lower
//! bound of every schedule the placer can make.
//!
//! The dependency bound is the other half: the longest chain of dependent
//! pieces. A piece starts no earlier than every predecessor is ready plus
//! the dependency slack (the placer's rule), and is ready only once its
//! send has ended and its payload has landed on every receiver (select
//! delay plus payload delay plus its events); its receivers' rows end a
//! guard later. Endpoints are ignored, so it is a lower bound too, and the
//! two together ([`phase_bound`]) bound a merged exchange whose second part
//! must wait for its first, which neither does alone.

use super::dependencies::Dependencies;
use super::problem::ExchangeProblem;
use super::timing::{
    DEPENDENCY_SLACK, paired_eligible, piece_events, receive_payload_start, select_offset,
};
use crate::target::mapping::physical_tile;
use crate::target::timing::{RECEIVE_GUARD_EVENTS, time_to_mux};

/// The latency-aware lower bound of `problem`'s horizon, in events.
pub fn latency_bound(problem: &ExchangeProblem) -> u32 {
    let tiles = problem.tiles as usize;
    let mut send_events = vec![0i64; tiles];
    let mut send_latency = vec![i64::MAX; tiles];
    let mut receive_events = vec![0i64; tiles];
    let mut receive_latency = vec![i64::MAX; tiles];
    for piece in 0..problem.pieces() {
        let eligible = paired_eligible(problem, piece);
        let events = i64::from(piece_events(problem.words[piece], eligible));
        let sender = problem.source_tile[piece];
        let Some(sent) = send_events.get_mut(sender as usize) else {
            continue;
        };
        *sent += events;
        let receives = problem.receives_of(piece);
        let offset = select_offset(receives.len());
        for receive in receives {
            let tile = problem.destination_tile[receive];
            let Some(received) = receive_events.get_mut(tile as usize) else {
                continue;
            };
            *received += events;
            let select =
                i64::from(time_to_mux(physical_tile(sender), physical_tile(tile))) + offset;
            let mut payload = receive_payload_start(0, tile, false);
            if eligible {
                payload = payload.min(receive_payload_start(0, tile, true));
            }
            let landing = &mut receive_latency[tile as usize];
            *landing = (*landing).min(select.max(0) + payload);
            let sending = &mut send_latency[sender as usize];
            *sending = (*sending).min(select + payload);
        }
    }
    let mut bound = 0i64;
    for tile in 0..tiles {
        if receive_events[tile] > 0 {
            bound = bound.max(receive_latency[tile] + receive_events[tile] + RECEIVE_GUARD_EVENTS);
        }
        if send_events[tile] > 0 {
            let landing = if send_latency[tile] == i64::MAX {
                0
            } else {
                (send_latency[tile] + RECEIVE_GUARD_EVENTS).max(0)
            };
            bound = bound.max(send_events[tile] + landing);
        }
    }
    u32::try_from(bound).unwrap_or(u32::MAX)
}

/// The dependency-aware lower bound of `problem`'s horizon, in events (see
/// the module notes), given its dependency DAG.
pub fn dependency_bound(problem: &ExchangeProblem, dependencies: &Dependencies) -> u32 {
    let mut ready = vec![0i64; problem.pieces()];
    let mut bound = 0i64;
    for piece in 0..problem.pieces() {
        let start = dependencies
            .of(piece)
            .iter()
            .map(|&before| ready[before as usize] + DEPENDENCY_SLACK)
            .max()
            .unwrap_or(0)
            .max(0);
        let eligible = paired_eligible(problem, piece);
        let events = i64::from(piece_events(problem.words[piece], eligible));
        let sender = physical_tile(problem.source_tile[piece]);
        let receives = problem.receives_of(piece);
        let offset = select_offset(receives.len());
        let mut landing: Option<i64> = None;
        for receive in receives {
            let tile = problem.destination_tile[receive];
            let select = i64::from(time_to_mux(sender, physical_tile(tile))) + offset;
            let mut payload = receive_payload_start(0, tile, false);
            if eligible {
                payload = payload.min(receive_payload_start(0, tile, true));
            }
            let lands = (start + select).max(0) + payload + events;
            landing = Some(landing.map_or(lands, |latest: i64| latest.max(lands)));
        }
        let sent = start + events;
        ready[piece] = landing.map_or(sent, |lands| lands.max(sent));
        bound = bound.max(sent);
        if let Some(lands) = landing {
            bound = bound.max(lands + RECEIVE_GUARD_EVENTS);
        }
    }
    u32::try_from(bound).unwrap_or(u32::MAX)
}

/// The larger of the latency-aware and the dependency bound.
pub fn phase_bound(problem: &ExchangeProblem, dependencies: &Dependencies) -> u32 {
    latency_bound(problem).max(dependency_bound(problem, dependencies))
}
