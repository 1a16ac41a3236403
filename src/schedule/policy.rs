//! Piece orders of the schedule policies. The scheduler places pieces one by
//! one in the order given here, each at its earliest feasible event, so the
//! order is the policy:
//!
//! - `latency`: dependency depth, then endpoint pressure (the larger of the
//!   sender's total words and its busiest receiver's), heaviest first.
//! - `S(W)` compact streams: pieces are grouped by (source, destination set)
//!   and each group is cut into waves of `W` words; order by dependency depth
//!   before wave rank (seed 000: a ready forwarder must not jump ahead of the
//!   input traffic of other forwarders), then group first appearance.
//! - `B(W)`: the same waves, and within a (depth, rank) the groups with the
//!   heaviest endpoints go first, which balances endpoint load over the waves.
//!
//! - `matching`: waves in which no tile sends or receives twice
//!   (`matching`).
//!
//! `list` and `auto` are not fixed orders (`list` picks pieces in time
//! order as they are placed; `auto` compares candidates). Every order lists
//! predecessors before dependents (depth is strictly larger along every
//! edge). This module must not time anything.

use std::collections::HashMap;

use super::dependencies::Dependencies;
use super::matching::matching_order;
use super::problem::ExchangeProblem;
use super::vocabulary::SchedulePolicy;

/// Per tile: total words sent and received in the problem.
pub fn endpoint_words(problem: &ExchangeProblem) -> (Vec<u32>, Vec<u32>) {
    let tiles = problem.tiles as usize;
    let mut sent = vec![0u32; tiles];
    let mut received = vec![0u32; tiles];
    for piece in 0..problem.pieces() {
        let words = problem.words[piece];
        if let Some(total) = sent.get_mut(problem.source_tile[piece] as usize) {
            *total = total.saturating_add(words);
        }
        for receive in problem.receives_of(piece) {
            if let Some(total) = received.get_mut(problem.destination_tile[receive] as usize) {
                *total = total.saturating_add(words);
            }
        }
    }
    (sent, received)
}

/// The larger of the sender's and the busiest receiver's total words.
fn pressure(problem: &ExchangeProblem, piece: usize, sent: &[u32], received: &[u32]) -> u32 {
    let sender = sent
        .get(problem.source_tile[piece] as usize)
        .copied()
        .unwrap_or(0);
    problem
        .receives_of(piece)
        .map(|receive| {
            received
                .get(problem.destination_tile[receive] as usize)
                .copied()
                .unwrap_or(0)
        })
        .fold(sender, u32::max)
}

/// The order in which `policy` places the pieces of `problem`, or `None`
/// when the policy is not a fixed order (`list`, `auto`).
pub fn order(
    problem: &ExchangeProblem,
    dependencies: &Dependencies,
    policy: SchedulePolicy,
) -> Option<Vec<u32>> {
    let pieces = problem.pieces();
    let (sent, received) = endpoint_words(problem);
    let mut keys: Vec<(u32, u32, u32, u32, u32)> = Vec::with_capacity(pieces);
    match policy {
        SchedulePolicy::Latency => {
            for piece in 0..pieces {
                let load = pressure(problem, piece, &sent, &received);
                keys.push((
                    dependencies.depth[piece],
                    0,
                    u32::MAX - load,
                    0,
                    piece as u32,
                ));
            }
        }
        SchedulePolicy::Matching => return Some(matching_order(problem, dependencies)),
        SchedulePolicy::List | SchedulePolicy::Auto => return None,
        SchedulePolicy::Stream { words } | SchedulePolicy::Balanced { words } => {
            let wave = words.max(1);
            let balanced = matches!(policy, SchedulePolicy::Balanced { .. });
            let mut groups: HashMap<(u32, &[u32]), (u32, u64)> = HashMap::new();
            for piece in 0..pieces {
                let tiles = &problem.destination_tile[problem.receives_of(piece)];
                let next = groups.len() as u32;
                let entry = groups
                    .entry((problem.source_tile[piece], tiles))
                    .or_insert((next, 0));
                let rank = (entry.1 / u64::from(wave)).min(u64::from(u32::MAX)) as u32;
                entry.1 += u64::from(problem.words[piece]);
                let load = if balanced {
                    u32::MAX - pressure(problem, piece, &sent, &received)
                } else {
                    0
                };
                keys.push((dependencies.depth[piece], rank, load, entry.0, piece as u32));
            }
        }
    }
    keys.sort_unstable();
    Some(keys.into_iter().map(|key| key.4).collect())
}
