//! The matching-wave order: pieces are cut into waves in which no tile
//! sends twice or receives twice, and placed wave by wave.
//!
//! When every piece is point-to-point the pieces are the edges of a
//! bipartite sender/receiver multigraph, and König's theorem says its edges
//! split into exactly Δ matchings (Δ = the largest number of pieces one tile
//! sends or receives). The colouring here is the classic alternating-path
//! one: an edge `(u, v)` takes a colour `a` free at `u`; when `a` is taken at
//! `v`, the path from `v` alternating between `a` and a colour `b` free at
//! `v` is flipped (it cannot reach `u` in a bipartite graph), which frees `a`
//! at `v`. Each edge costs O(Δ) plus its path.
//!
//! With multicast pieces the graph is a hypergraph; pieces then take the
//! first colour free at the sender and every receiver (first fit over
//! per-tile bitsets), which still gives conflict-free waves.
//!
//! Waves keep dependency order: the order is (merged exchange, dependency
//! depth, wave, piece). In a phase that merged several exchanges
//! (`ExchangeProblem::segment_starts`) each one's waves are placed before the
//! next one's, each piece still at its earliest feasible event, so a later
//! exchange fills in around the earlier one instead of interleaving waves
//! whose multicasts wait for each other (dependencies only point from
//! earlier transfers to later ones, so this keeps dependency order). This
//! module orders pieces only; the placer times them.

use super::dependencies::Dependencies;
use super::problem::ExchangeProblem;

const FREE: u32 = u32::MAX;

/// The matching-wave placement order of `problem`.
pub fn matching_order(problem: &ExchangeProblem, dependencies: &Dependencies) -> Vec<u32> {
    let pieces = problem.pieces();
    let point_to_point = (0..pieces).all(|piece| problem.receives_of(piece).len() == 1);
    let waves = if point_to_point {
        edge_colouring(problem)
    } else {
        first_fit_waves(problem)
    };
    let segments = problem.segment_of_pieces();
    let mut keys: Vec<(u32, u32, u32, u32)> = (0..pieces)
        .map(|piece| {
            (
                segments[piece],
                dependencies.depth[piece],
                waves[piece],
                piece as u32,
            )
        })
        .collect();
    keys.sort_unstable();
    keys.into_iter().map(|key| key.3).collect()
}

/// Colours of the point-to-point pieces: a proper edge colouring of the
/// bipartite sender/receiver multigraph with Δ colours.
fn edge_colouring(problem: &ExchangeProblem) -> Vec<u32> {
    let pieces = problem.pieces();
    let tiles = problem.tiles as usize;
    let receiver_of =
        |piece: usize| problem.destination_tile[problem.destination_start[piece] as usize];
    let mut send_degree = vec![0usize; tiles];
    let mut receive_degree = vec![0usize; tiles];
    for piece in 0..pieces {
        send_degree[problem.source_tile[piece] as usize] += 1;
        receive_degree[receiver_of(piece) as usize] += 1;
    }
    let colours = send_degree
        .iter()
        .chain(&receive_degree)
        .copied()
        .max()
        .unwrap_or(0);
    // at_sender[s * colours + c] / at_receiver[d * colours + c]: the piece of
    // colour c at that tile, or FREE.
    let mut at_sender = vec![FREE; tiles * colours];
    let mut at_receiver = vec![FREE; tiles * colours];
    let mut colour = vec![FREE; pieces];
    let mut path: Vec<u32> = Vec::new();
    for piece in 0..pieces {
        let sender = problem.source_tile[piece] as usize;
        let receiver = receiver_of(piece) as usize;
        let sender_slots = sender * colours..(sender + 1) * colours;
        let receiver_slots = receiver * colours..(receiver + 1) * colours;
        let Some(free_at_sender) = at_sender[sender_slots.clone()]
            .iter()
            .position(|&slot| slot == FREE)
        else {
            continue;
        };
        let Some(free_at_receiver) = at_receiver[receiver_slots.clone()]
            .iter()
            .position(|&slot| slot == FREE)
        else {
            continue;
        };
        let a = free_at_sender;
        if at_receiver[receiver * colours + a] != FREE {
            // Flip the a/b path that starts at the receiver with colour a.
            let b = free_at_receiver;
            path.clear();
            let mut on_receiver_side = true;
            let mut tile = receiver;
            let mut wanted = a;
            loop {
                let slot = if on_receiver_side {
                    at_receiver[tile * colours + wanted]
                } else {
                    at_sender[tile * colours + wanted]
                };
                if slot == FREE {
                    break;
                }
                path.push(slot);
                let edge = slot as usize;
                tile = if on_receiver_side {
                    problem.source_tile[edge] as usize
                } else {
                    receiver_of(edge) as usize
                };
                on_receiver_side = !on_receiver_side;
                wanted = if wanted == a { b } else { a };
            }
            for &edge in &path {
                let edge = edge as usize;
                let old = colour[edge] as usize;
                at_sender[problem.source_tile[edge] as usize * colours + old] = FREE;
                at_receiver[receiver_of(edge) as usize * colours + old] = FREE;
            }
            for &edge in &path {
                let edge = edge as usize;
                let new = if colour[edge] as usize == a { b } else { a };
                colour[edge] = new as u32;
                at_sender[problem.source_tile[edge] as usize * colours + new] = edge as u32;
                at_receiver[receiver_of(edge) as usize * colours + new] = edge as u32;
            }
        }
        colour[piece] = a as u32;
        at_sender[sender * colours + a] = piece as u32;
        at_receiver[receiver * colours + a] = piece as u32;
    }
    colour
}

/// Waves of a phase with multicast pieces: each piece takes the first wave
/// in which neither its sender nor any receiver is busy.
fn first_fit_waves(problem: &ExchangeProblem) -> Vec<u32> {
    let tiles = problem.tiles as usize;
    let mut sending: Vec<Vec<u64>> = vec![Vec::new(); tiles];
    let mut receiving: Vec<Vec<u64>> = vec![Vec::new(); tiles];
    let mut busy: Vec<u64> = Vec::new();
    let mut waves = Vec::with_capacity(problem.pieces());
    for piece in 0..problem.pieces() {
        busy.clear();
        let merge = |busy: &mut Vec<u64>, bits: &[u64]| {
            if busy.len() < bits.len() {
                busy.resize(bits.len(), 0);
            }
            for (word, &bit) in busy.iter_mut().zip(bits) {
                *word |= bit;
            }
        };
        let sender = problem.source_tile[piece] as usize;
        merge(&mut busy, &sending[sender]);
        for receive in problem.receives_of(piece) {
            merge(
                &mut busy,
                &receiving[problem.destination_tile[receive] as usize],
            );
        }
        let wave = busy
            .iter()
            .position(|&word| word != u64::MAX)
            .map(|word| word * 64 + busy[word].trailing_ones() as usize)
            .unwrap_or(busy.len() * 64);
        let mark = |bits: &mut Vec<u64>| {
            if bits.len() <= wave / 64 {
                bits.resize(wave / 64 + 1, 0);
            }
            bits[wave / 64] |= 1 << (wave % 64);
        };
        mark(&mut sending[sender]);
        for receive in problem.receives_of(piece) {
            mark(&mut receiving[problem.destination_tile[receive] as usize]);
        }
        waves.push(wave as u32);
    }
    waves
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::tests::random_problem;

    /// Every wave is a matching: no tile sends twice or receives twice in it.
    fn assert_conflict_free(problem: &ExchangeProblem, waves: &[u32]) {
        let mut seen = std::collections::HashSet::new();
        assert_eq!(waves.len(), problem.pieces());
        for (piece, &wave) in waves.iter().enumerate() {
            assert!(
                seen.insert((wave, 's', problem.source_tile[piece])),
                "piece {piece}: its sender already sends in wave {wave}"
            );
            for receive in problem.receives_of(piece) {
                assert!(
                    seen.insert((wave, 'r', problem.destination_tile[receive])),
                    "piece {piece}: a receiver already receives in wave {wave}"
                );
            }
        }
    }

    #[test]
    fn point_to_point_waves_are_matchings_and_use_the_maximum_degree() {
        for seed in 0..30 {
            let mut problem = random_problem(seed, 16, 80);
            // Keep the first receive of every piece: a point-to-point phase.
            let mut start = vec![0u32];
            let mut tiles = Vec::new();
            let mut destinations = Vec::new();
            for piece in 0..problem.pieces() {
                let first = problem.destination_start[piece] as usize;
                tiles.push(problem.destination_tile[first]);
                destinations.push(problem.destination[first]);
                start.push(tiles.len() as u32);
            }
            problem.destination_start = start;
            problem.destination_tile = tiles;
            problem.destination = destinations;
            let waves = edge_colouring(&problem);
            assert_conflict_free(&problem, &waves);
            let mut degree = std::collections::HashMap::new();
            for piece in 0..problem.pieces() {
                *degree
                    .entry(('s', problem.source_tile[piece]))
                    .or_insert(0u32) += 1;
                *degree
                    .entry(('r', problem.destination_tile[piece]))
                    .or_insert(0u32) += 1;
            }
            let maximum = degree.values().copied().max().unwrap_or(0);
            let used = waves.iter().copied().max().map_or(0, |wave| wave + 1);
            assert_eq!(used, maximum, "seed {seed}: König's bound is met exactly");
        }
    }

    #[test]
    fn multicast_waves_are_conflict_free() {
        for seed in 0..30 {
            let problem = random_problem(seed, 16, 80);
            assert_conflict_free(&problem, &first_fit_waves(&problem));
        }
    }
}
