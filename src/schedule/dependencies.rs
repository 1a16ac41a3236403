//! The memory-dependency DAG of one phase: which pieces must wait for which.
//!
//! Transfer order is semantic. A later piece depends on an earlier one when,
//! on the same tile and the same storage (alias roots resolved), it reads
//! bytes the earlier one writes (read-after-write: receive-then-forward),
//! writes bytes it reads (write-after-read) or writes bytes it writes
//! (write-after-write), under any Repeat binding of either address.
//!
//! Built with one interval sweep per (tile, alias root) that some piece
//! writes, keeping for each disjoint byte segment its last writer and the
//! readers since then: O((accesses + edges) log accesses), never all pairs.
//! This module owns hazards only; it must not time or order pieces.

use std::collections::BTreeMap;

use super::problem::{ExchangeProblem, WORD_BYTES};
use crate::hashing::FastMap;

/// Predecessors of every piece (compressed rows) and each piece's depth.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Dependencies {
    /// `pieces + 1` entries into `predecessors`.
    pub start: Vec<u32>,
    /// Earlier pieces each piece must wait for, ascending, deduplicated.
    pub predecessors: Vec<u32>,
    /// Longest predecessor chain ending at each piece (0 = independent).
    pub depth: Vec<u32>,
}

impl Dependencies {
    pub fn of(&self, piece: usize) -> &[u32] {
        &self.predecessors[self.start[piece] as usize..self.start[piece + 1] as usize]
    }

    pub fn edges(&self) -> usize {
        self.predecessors.len()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

#[derive(Clone, Copy)]
struct Access {
    piece: u32,
    kind: Kind,
    allocation: u32,
    offset: u32,
    words: u32,
}

#[derive(Clone, Default)]
struct Segment {
    end: u64,
    writer: Option<u32>,
    readers: Vec<u32>,
}

/// Builds the dependency DAG of `problem`.
pub fn dependencies(problem: &ExchangeProblem) -> Dependencies {
    let mut groups: FastMap<(u32, u32), (bool, bool, Vec<Access>)> = FastMap::default();
    let mut add = |tile: u32, piece: usize, kind: Kind, allocation: u32, offset: u32| {
        let local = problem.allocations[allocation as usize];
        let entry = groups.entry((tile, local.alias_root)).or_default();
        entry.0 |= kind == Kind::Write;
        entry.1 |= local.iterations > 1;
        entry.2.push(Access {
            piece: piece as u32,
            kind,
            allocation,
            offset,
            words: problem.words[piece],
        });
    };
    for piece in 0..problem.pieces() {
        let source = problem.source[piece];
        add(
            problem.source_tile[piece],
            piece,
            Kind::Read,
            source.allocation,
            source.offset,
        );
        for receive in problem.receives_of(piece) {
            let destination = problem.destination[receive];
            add(
                problem.destination_tile[receive],
                piece,
                Kind::Write,
                destination.allocation,
                destination.offset,
            );
        }
    }
    let mut keys: Vec<(u32, u32)> = groups.keys().copied().collect();
    keys.sort_unstable();
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for key in keys {
        let Some((written, iterated, accesses)) = groups.get(&key) else {
            continue;
        };
        if !written {
            continue;
        }
        let bindings = if *iterated {
            problem.iterations.max(1)
        } else {
            1
        };
        for iteration in 0..bindings {
            sweep(problem, accesses, iteration, &mut edges);
        }
    }
    edges.sort_unstable_by_key(|&(from, to)| (to, from));
    edges.dedup();
    let pieces = problem.pieces();
    let mut start = Vec::with_capacity(pieces + 1);
    let mut predecessors = Vec::with_capacity(edges.len());
    let mut depth = vec![0u32; pieces];
    let mut next = 0;
    start.push(0);
    for piece in 0..pieces {
        while next < edges.len() && edges[next].1 as usize == piece {
            predecessors.push(edges[next].0);
            next += 1;
        }
        start.push(predecessors.len() as u32);
    }
    for piece in 0..pieces {
        let mut deepest = 0;
        for &before in &predecessors[start[piece] as usize..start[piece + 1] as usize] {
            deepest = deepest.max(depth[before as usize] + 1);
        }
        depth[piece] = deepest;
    }
    Dependencies {
        start,
        predecessors,
        depth,
    }
}

/// One pass over the accesses of one storage under one Repeat binding.
fn sweep(
    problem: &ExchangeProblem,
    accesses: &[Access],
    iteration: u32,
    edges: &mut Vec<(u32, u32)>,
) {
    let range = |access: &Access| {
        let binding = iteration.min(problem.bindings(access.allocation) - 1);
        let low = problem.bound_offset(
            super::problem::SymbolicAddress {
                allocation: access.allocation,
                offset: access.offset,
            },
            binding,
        );
        (low, low + u64::from(access.words) * u64::from(WORD_BYTES))
    };
    // Edges only ever join accesses whose byte ranges overlap. Most storages
    // of a phase have none (each piece lands in bytes of its own): one sort
    // shows it, and the segment sweep below is skipped.
    let mut ranges: Vec<(u64, u64)> = accesses
        .iter()
        .map(range)
        .filter(|(low, high)| low < high)
        .collect();
    ranges.sort_unstable();
    let mut reach = 0;
    let overlapping = ranges.iter().any(|&(low, high)| {
        let overlaps = low < reach;
        reach = reach.max(high);
        overlaps
    });
    if !overlapping {
        return;
    }
    let mut segments: BTreeMap<u64, Segment> = BTreeMap::new();
    for access in accesses {
        let (low, high) = range(access);
        split(&mut segments, low);
        split(&mut segments, high);
        let mut link = |from: u32| {
            if from != access.piece {
                edges.push((from, access.piece));
            }
        };
        let mut cursor = low;
        let mut gaps = Vec::new();
        for (&start, segment) in segments.range_mut(low..high) {
            if start > cursor {
                gaps.push((cursor, start));
            }
            cursor = segment.end;
            if let Some(writer) = segment.writer {
                link(writer);
            }
            match access.kind {
                Kind::Read => segment.readers.push(access.piece),
                Kind::Write => segment.readers.iter().for_each(|&reader| link(reader)),
            }
        }
        if cursor < high {
            gaps.push((cursor, high));
        }
        match access.kind {
            Kind::Read => {
                for (start, end) in gaps {
                    segments.insert(
                        start,
                        Segment {
                            end,
                            writer: None,
                            readers: vec![access.piece],
                        },
                    );
                }
            }
            Kind::Write => {
                let covered: Vec<u64> =
                    segments.range(low..high).map(|(&start, _)| start).collect();
                for start in covered {
                    segments.remove(&start);
                }
                segments.insert(
                    low,
                    Segment {
                        end: high,
                        writer: Some(access.piece),
                        readers: Vec::new(),
                    },
                );
            }
        }
    }
}

/// Splits the segment containing `at` (if any) so that a segment starts at `at`.
fn split(segments: &mut BTreeMap<u64, Segment>, at: u64) {
    let Some((&start, segment)) = segments.range_mut(..at).next_back() else {
        return;
    };
    if start < at && segment.end > at {
        let right = Segment {
            end: segment.end,
            writer: segment.writer,
            readers: segment.readers.clone(),
        };
        segment.end = at;
        segments.insert(at, right);
    }
}
