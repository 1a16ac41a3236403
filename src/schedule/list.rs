//! Time-ordered list scheduling: the next piece placed is the ready piece
//! (every predecessor placed) with the earliest start its endpoints'
//! frontiers allow, so pieces are placed in (nearly) the order they will
//! run. A fixed order that is not time order makes a multicast wait for the
//! latest of its 15-24 endpoints while the others idle, unrecoverably,
//! because frontiers only move forward; this order avoids that.
//!
//! Ties on the start go to the piece that needs the fewest PIC writes (its
//! destinations continue where the receivers' last receives ended, so a
//! tile receiving many one-word pieces pays about one event each), then to
//! the piece whose busiest endpoint has the most words still to send or
//! receive, then the larger fan-out, then the longer piece, then the lower
//! index (deterministic).
//!
//! The ready set is a lazy min-heap keyed by earliest start. Frontiers only
//! grow, so a key is a lower bound of the piece's true earliest start: pop,
//! recompute, and re-push if it moved. To keep a tile that many waiting
//! pieces share from re-evaluating all of them after each placement, a
//! popped piece whose start moved is parked behind its bottleneck tile (the
//! endpoint that set its start) and only that tile's best parked piece
//! stays in the heap; when it leaves, the next one is released. This module
//! chooses pieces only; the placer times them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::ScheduleError;
use super::dependencies::Dependencies;
use super::placer::Placer;
use super::problem::ExchangeProblem;

/// Tie-breaks after the start: (PIC writes needed, inverted pressure,
/// inverted fan-out, inverted words, piece). Smaller goes first.
type Rank = (u32, u32, u32, u32, u32);

/// A global heap entry: (start, rank, tile). `tile` is [`FREE`] for a piece
/// entry, else the entry stands for that resource's best parked piece
/// (resources as in `Placer::frontier`).
type Entry = (i64, Rank, u32);

/// A parked piece: (start minus its bottleneck's frontier, rank).
type ParkedEntry = (i64, Rank);

/// Marks a global heap entry that is a piece, not a tile's parked best.
const FREE: u32 = u32::MAX;

struct TimeOrder<'p, 'a> {
    problem: &'a ExchangeProblem,
    placer: &'p mut Placer<'a>,
    remaining_send: Vec<u32>,
    remaining_receive: Vec<u32>,
    heap: BinaryHeap<Reverse<Entry>>,
    parked: Vec<BinaryHeap<Reverse<ParkedEntry>>>,
}

impl TimeOrder<'_, '_> {
    /// The piece's exact earliest start, bottleneck and rank.
    fn evaluate(&mut self, piece: usize) -> (i64, Option<usize>, Rank) {
        let problem = self.problem;
        let (start, bottleneck) = self.placer.earliest_with_bottleneck(piece);
        let receives = problem.receives_of(piece);
        let pressure = problem.destination_tile[receives.clone()]
            .iter()
            .map(|&tile| self.remaining_receive[tile as usize])
            .fold(
                self.remaining_send[problem.source_tile[piece] as usize],
                u32::max,
            );
        let rank = (
            self.placer.pointer_writes(),
            u32::MAX - pressure,
            u32::MAX - receives.len() as u32,
            u32::MAX - problem.words[piece],
            piece as u32,
        );
        (start, bottleneck, rank)
    }

    fn push_free(&mut self, piece: usize) {
        let (start, _, rank) = self.evaluate(piece);
        self.heap.push(Reverse((start, rank, FREE)));
    }

    /// Parks `piece` behind `tile` and makes sure the tile's best parked
    /// piece is represented in the global heap.
    fn park(&mut self, piece_start: i64, rank: Rank, tile: usize) {
        let relative = piece_start - self.placer.frontier(tile);
        let parked = &mut self.parked[tile];
        let becomes_best = parked
            .peek()
            .is_none_or(|Reverse(best)| (relative, rank) < *best);
        parked.push(Reverse((relative, rank)));
        if becomes_best {
            self.heap.push(Reverse((piece_start, rank, tile as u32)));
        }
    }

    /// Re-announces `tile`'s best parked piece, if any.
    fn announce(&mut self, tile: usize) {
        if let Some(&Reverse((relative, rank))) = self.parked[tile].peek() {
            let start = self.placer.frontier(tile) + relative;
            self.heap.push(Reverse((start, rank, tile as u32)));
        }
    }
}

/// Places every piece of `problem` with `placer` in time order.
pub fn place_in_time_order<'a>(
    problem: &'a ExchangeProblem,
    dependencies: &Dependencies,
    placer: &mut Placer<'a>,
) -> Result<(), ScheduleError> {
    let pieces = problem.pieces();
    let tiles = problem.tiles as usize;
    let mut remaining_send = vec![0u32; tiles];
    let mut remaining_receive = vec![0u32; tiles];
    for piece in 0..pieces {
        let words = problem.words[piece];
        let sender = problem.source_tile[piece] as usize;
        remaining_send[sender] = remaining_send[sender].saturating_add(words);
        for receive in problem.receives_of(piece) {
            let tile = problem.destination_tile[receive] as usize;
            remaining_receive[tile] = remaining_receive[tile].saturating_add(words);
        }
    }
    let (successor_start, successor_list) = successors(dependencies, pieces);
    let mut waiting: Vec<u32> = (0..pieces)
        .map(|piece| dependencies.of(piece).len() as u32)
        .collect();
    let mut order = TimeOrder {
        problem,
        placer,
        remaining_send,
        remaining_receive,
        heap: BinaryHeap::with_capacity(pieces),
        parked: vec![BinaryHeap::new(); 2 * tiles],
    };
    for (piece, &predecessors) in waiting.iter().enumerate() {
        if predecessors == 0 {
            order.push_free(piece);
        }
    }
    while let Some(Reverse((key, rank, tile))) = order.heap.pop() {
        let piece = if tile == FREE {
            rank.4 as usize
        } else {
            let tile = tile as usize;
            let Some(&Reverse((relative, best))) = order.parked[tile].peek() else {
                continue;
            };
            if best != rank {
                // An older announcement: the tile's best changed since.
                continue;
            }
            let estimate = order.placer.frontier(tile) + relative;
            if estimate > key {
                order.heap.push(Reverse((estimate, rank, tile as u32)));
                continue;
            }
            order.parked[tile].pop();
            order.announce(tile);
            rank.4 as usize
        };
        let (start, bottleneck, fresh_rank) = order.evaluate(piece);
        let earliest_waiting = order.heap.peek().map_or(i64::MAX, |Reverse(entry)| entry.0);
        if start > key && start > earliest_waiting {
            match bottleneck {
                Some(tile) => order.park(start, fresh_rank, tile),
                None => order.heap.push(Reverse((start, fresh_rank, FREE))),
            }
            continue;
        }
        order.placer.place_evaluated(piece, start)?;
        let words = problem.words[piece];
        order.remaining_send[problem.source_tile[piece] as usize] -= words;
        for receive in problem.receives_of(piece) {
            order.remaining_receive[problem.destination_tile[receive] as usize] -= words;
        }
        for &next in
            &successor_list[successor_start[piece] as usize..successor_start[piece + 1] as usize]
        {
            let next = next as usize;
            waiting[next] -= 1;
            if waiting[next] == 0 {
                order.push_free(next);
            }
        }
    }
    Ok(())
}

/// Successors of every piece as compressed rows: (start, pieces).
fn successors(dependencies: &Dependencies, pieces: usize) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; pieces + 1];
    for piece in 0..pieces {
        for &before in dependencies.of(piece) {
            start[before as usize + 1] += 1;
        }
    }
    for index in 0..pieces {
        start[index + 1] += start[index];
    }
    let mut fill = start.clone();
    let mut list = vec![0u32; start[pieces] as usize];
    for piece in 0..pieces {
        for &before in dependencies.of(piece) {
            list[fill[before as usize] as usize] = piece as u32;
            fill[before as usize] += 1;
        }
    }
    (start, list)
}
