//! Whether the pieces of a phase are independent of one another: no piece
//! reads bytes an earlier piece of the phase writes (receive-then-forward),
//! writes bytes an earlier one reads or writes, under any Repeat binding.
//! Read from the scheduler's memory-dependency DAG
//! ([`crate::schedule::dependencies`]); the first conflict is then
//! classified by comparing its two pieces' byte ranges directly.

use serde::{Deserialize, Serialize};

use crate::group::hazard::HazardKind;
use crate::schedule::dependencies::dependencies;
use crate::schedule::problem::{ExchangeProblem, SymbolicAddress, WORD_BYTES};

/// A piece that depends on an earlier piece of the same phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// The later piece.
    pub later: u32,
    /// The earlier piece it must follow.
    pub earlier: u32,
    pub kind: HazardKind,
    /// The tile whose bytes both touch.
    pub tile: u32,
}

impl Conflict {
    /// What the later piece does to the earlier one's bytes, in words.
    pub fn kind_text(&self) -> &'static str {
        match self.kind {
            HazardKind::ReadAfterWrite => "reads what",
            HazardKind::WriteAfterRead => "overwrites what is read by",
            HazardKind::WriteAfterWrite => "overwrites what is written by",
        }
    }
}

/// The dependency structure packing cares about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Independence {
    pub pieces: u32,
    /// Pieces before the first dependent one (all of them when independent).
    pub prefix: u32,
    /// Pieces that depend on some earlier piece.
    pub dependent: u32,
    /// Dependent pieces that read bytes an earlier piece writes.
    pub forwarding: u32,
    /// The first dependent piece and the earliest piece it depends on.
    pub first: Option<Conflict>,
}

impl Independence {
    pub fn is_independent(&self) -> bool {
        self.dependent == 0
    }
}

/// The independence of `problem`'s pieces.
pub fn independence(problem: &ExchangeProblem) -> Independence {
    let graph = dependencies(problem);
    let pieces = problem.pieces();
    let mut dependent = 0u32;
    let mut forwarding = 0u32;
    let mut first = None;
    for piece in 0..pieces {
        let predecessors = graph.of(piece);
        if predecessors.is_empty() {
            continue;
        }
        dependent += 1;
        if predecessors
            .iter()
            .any(|&earlier| reads_what_is_written(problem, earlier as usize, piece))
        {
            forwarding += 1;
        }
        if first.is_none() {
            first = predecessors
                .iter()
                .find_map(|&earlier| conflict(problem, earlier as usize, piece));
        }
    }
    Independence {
        pieces: pieces as u32,
        prefix: (0..pieces)
            .find(|&piece| !graph.of(piece).is_empty())
            .unwrap_or(pieces) as u32,
        dependent,
        forwarding,
        first,
    }
}

/// The bytes one piece touches on one tile: its source or one receive.
#[derive(Clone, Copy)]
struct Touch {
    tile: u32,
    address: SymbolicAddress,
}

/// Whether `later` reads bytes `earlier` writes (under some binding).
fn reads_what_is_written(problem: &ExchangeProblem, earlier: usize, later: usize) -> bool {
    let source = Touch {
        tile: problem.source_tile[later],
        address: problem.source[later],
    };
    problem.receives_of(earlier).any(|receive| {
        let written = Touch {
            tile: problem.destination_tile[receive],
            address: problem.destination[receive],
        };
        meets(
            problem,
            source,
            problem.words[later],
            written,
            problem.words[earlier],
        )
    })
}

/// The first hazard of `later` against `earlier` (read-after-write before
/// write-after-read before write-after-write), if their byte ranges meet
/// under some Repeat binding.
pub fn conflict(problem: &ExchangeProblem, earlier: usize, later: usize) -> Option<Conflict> {
    let source = |piece: usize| Touch {
        tile: problem.source_tile[piece],
        address: problem.source[piece],
    };
    let receives = |piece: usize| {
        problem.receives_of(piece).map(|receive| Touch {
            tile: problem.destination_tile[receive],
            address: problem.destination[receive],
        })
    };
    let found = |kind: HazardKind, tile: u32| Conflict {
        later: later as u32,
        earlier: earlier as u32,
        kind,
        tile,
    };
    let later_words = problem.words[later];
    let earlier_words = problem.words[earlier];
    for written in receives(earlier) {
        if meets(problem, source(later), later_words, written, earlier_words) {
            return Some(found(HazardKind::ReadAfterWrite, written.tile));
        }
    }
    for written in receives(later) {
        if meets(
            problem,
            written,
            later_words,
            source(earlier),
            earlier_words,
        ) {
            return Some(found(HazardKind::WriteAfterRead, written.tile));
        }
    }
    let mut earlier_writes: Vec<Touch> = receives(earlier).collect();
    earlier_writes.sort_unstable_by_key(|touch| touch.tile);
    for written in receives(later) {
        let from = earlier_writes.partition_point(|touch| touch.tile < written.tile);
        for &other in earlier_writes[from..]
            .iter()
            .take_while(|touch| touch.tile == written.tile)
        {
            if meets(problem, written, later_words, other, earlier_words) {
                return Some(found(HazardKind::WriteAfterWrite, written.tile));
            }
        }
    }
    None
}

/// Whether two touches share bytes of one storage under the same binding.
fn meets(
    problem: &ExchangeProblem,
    one: Touch,
    one_words: u32,
    other: Touch,
    other_words: u32,
) -> bool {
    let root =
        |address: SymbolicAddress| problem.allocations[address.allocation as usize].alias_root;
    if one.tile != other.tile || root(one.address) != root(other.address) {
        return false;
    }
    let bindings = problem
        .bindings(one.address.allocation)
        .max(problem.bindings(other.address.allocation));
    (0..bindings).any(|iteration| {
        let start = |address: SymbolicAddress| {
            problem.bound_offset(
                address,
                iteration.min(problem.bindings(address.allocation) - 1),
            )
        };
        let (one_start, other_start) = (start(one.address), start(other.address));
        let one_end = one_start + u64::from(one_words) * u64::from(WORD_BYTES);
        let other_end = other_start + u64::from(other_words) * u64::from(WORD_BYTES);
        one_start < other_end && other_start < one_end
    })
}
