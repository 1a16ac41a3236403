//! The independent check of a packing counterfactual: composed with its
//! gather and scatter copies, the transformed exchange must deliver exactly
//! the original's bytes (every original source word to every original
//! destination word, from the same source tile), move the same words per
//! route (source tile and recipient set), keep each staging byte written
//! once, and keep the order that matters: a staging alternative only of a
//! phase with no dependency between its pieces, the coalesced prefix with
//! no dependency inside its reordered part and the dependent tail after it,
//! unchanged. Works on runs (never per word): deliveries are split at copy
//! boundaries, sorted by destination and merged into maximal contiguous
//! runs on both sides before comparing.

use crate::hashing::FastMap;
use crate::schedule::dependencies::dependencies;
use crate::schedule::problem::{ExchangeProblem, SymbolicAddress, WORD_BYTES};

use super::copies::CopyRun;
use super::{Alternative, Packed};

/// A counterfactual that does not do what the original phase does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PackingCheckError {
    #[error(
        "{alternative}: piece {piece} reads staging bytes {offset}.. of allocation \
         {allocation} on tile {tile} that no gather fills"
    )]
    UnfilledStaging {
        alternative: Alternative,
        piece: usize,
        tile: u32,
        allocation: u32,
        offset: u64,
    },
    #[error(
        "{alternative}: piece {piece} writes staging bytes {offset}.. of allocation \
         {allocation} on tile {tile} that no scatter empties"
    )]
    UnemptiedStaging {
        alternative: Alternative,
        piece: usize,
        tile: u32,
        allocation: u32,
        offset: u64,
    },
    #[error("{alternative}: a copy on tile {tile} touches allocation {allocation} of tile {owner}")]
    CopyOffTile {
        alternative: Alternative,
        tile: u32,
        allocation: u32,
        owner: u32,
    },
    #[error(
        "{alternative}: the deliveries differ from the original's ({packed} runs against \
         {original}); first difference at run {index}: {detail}"
    )]
    Deliveries {
        alternative: Alternative,
        packed: usize,
        original: usize,
        index: usize,
        detail: String,
    },
    #[error(
        "{alternative}: route from tile {source_tile} to {recipients} tiles moves {packed} \
         words instead of {original}"
    )]
    Route {
        alternative: Alternative,
        source_tile: u32,
        recipients: usize,
        packed: u64,
        original: u64,
    },
    #[error("{alternative}: the original phase has {edges} dependencies; it may not be staged")]
    StagedDependent {
        alternative: Alternative,
        edges: usize,
    },
    #[error("{alternative}: reordered piece {piece} depends on an earlier piece")]
    PrefixDependent {
        alternative: Alternative,
        piece: usize,
    },
    #[error("{alternative}: tail piece {piece} is not the original's piece {original}")]
    TailChanged {
        alternative: Alternative,
        piece: usize,
        original: usize,
    },
}

/// Bytes from one source place to one destination place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Delivery {
    destination_tile: u32,
    destination: SymbolicAddress,
    source_tile: u32,
    source: SymbolicAddress,
    bytes: u64,
}

/// Words per route (source tile, recipient tiles sorted).
type Routes = FastMap<(u32, Vec<u32>), u64>;

/// What every alternative of one original is checked against, computed
/// once: its canonical deliveries, its words per route and (when a
/// staging alternative asks) its dependency count.
pub struct PackingChecker<'a> {
    original: &'a ExchangeProblem,
    deliveries: Vec<Delivery>,
    routes: Routes,
    edges: std::cell::OnceCell<usize>,
}

/// Checks `packed` against `original` (one alternative; a study checks
/// its alternatives with one [`PackingChecker`]).
pub fn check_packed(original: &ExchangeProblem, packed: &Packed) -> Result<(), PackingCheckError> {
    PackingChecker::new(original).check(packed)
}

impl<'a> PackingChecker<'a> {
    pub fn new(original: &'a ExchangeProblem) -> PackingChecker<'a> {
        PackingChecker {
            original,
            deliveries: canonical(original_deliveries(original)),
            routes: routes(original),
            edges: std::cell::OnceCell::new(),
        }
    }

    /// Checks `packed` against the original.
    pub fn check(&self, packed: &Packed) -> Result<(), PackingCheckError> {
        let original = self.original;
        let alternative = packed.alternative;
        check_copies_on_tile(packed)?;
        check_routes(&self.routes, packed)?;
        let expected = &self.deliveries;
        let found = canonical(packed_deliveries(packed)?);
        if let Some(index) = (0..expected.len().max(found.len()))
            .find(|&index| expected.get(index) != found.get(index))
        {
            return Err(PackingCheckError::Deliveries {
                alternative,
                packed: found.len(),
                original: expected.len(),
                index,
                detail: format!(
                    "original {:?}, packed {:?}",
                    expected.get(index),
                    found.get(index)
                ),
            });
        }
        if alternative.stages() {
            let edges = *self.edges.get_or_init(|| dependencies(original).edges());
            if edges > 0 {
                return Err(PackingCheckError::StagedDependent { alternative, edges });
            }
            return Ok(());
        }
        check_prefix(original, packed)
    }
}

/// The coalesced prefix: no dependency inside its reordered part, and the
/// original's dependent tail after it, unchanged.
fn check_prefix(original: &ExchangeProblem, packed: &Packed) -> Result<(), PackingCheckError> {
    let alternative = packed.alternative;
    let graph = dependencies(&packed.problem);
    let prefix = packed.prefix_pieces as usize;
    if let Some(piece) = (0..prefix).find(|&piece| !graph.of(piece).is_empty()) {
        return Err(PackingCheckError::PrefixDependent { alternative, piece });
    }
    let tail = packed.problem.pieces() - prefix;
    let original_start =
        original
            .pieces()
            .checked_sub(tail)
            .ok_or(PackingCheckError::TailChanged {
                alternative,
                piece: prefix,
                original: 0,
            })?;
    for offset in 0..tail {
        let (piece, original_piece) = (prefix + offset, original_start + offset);
        if !same_piece(&packed.problem, piece, original, original_piece) {
            return Err(PackingCheckError::TailChanged {
                alternative,
                piece,
                original: original_piece,
            });
        }
    }
    Ok(())
}

fn same_piece(
    one: &ExchangeProblem,
    piece: usize,
    other: &ExchangeProblem,
    other_piece: usize,
) -> bool {
    one.source_tile[piece] == other.source_tile[other_piece]
        && one.source[piece] == other.source[other_piece]
        && one.words[piece] == other.words[other_piece]
        && one.destination_tile[one.receives_of(piece)]
            == other.destination_tile[other.receives_of(other_piece)]
        && one.destination[one.receives_of(piece)]
            == other.destination[other.receives_of(other_piece)]
}

fn check_copies_on_tile(packed: &Packed) -> Result<(), PackingCheckError> {
    let allocations = &packed.problem.allocations;
    for run in packed.gathers.iter().chain(&packed.scatters) {
        for address in [run.from, run.to] {
            let owner = allocations
                .get(address.allocation as usize)
                .map_or(u32::MAX, |allocation| allocation.tile);
            if owner != run.tile {
                return Err(PackingCheckError::CopyOffTile {
                    alternative: packed.alternative,
                    tile: run.tile,
                    allocation: address.allocation,
                    owner,
                });
            }
        }
    }
    Ok(())
}

/// Words per route of `problem`.
fn routes(problem: &ExchangeProblem) -> Routes {
    let mut words = Routes::default();
    for piece in 0..problem.pieces() {
        let mut recipients = problem.destination_tile[problem.receives_of(piece)].to_vec();
        recipients.sort_unstable();
        *words
            .entry((problem.source_tile[piece], recipients))
            .or_default() += u64::from(problem.words[piece]);
    }
    words
}

/// Words per route, the same on both sides.
fn check_routes(expected: &Routes, packed: &Packed) -> Result<(), PackingCheckError> {
    let found = routes(&packed.problem);
    let mut keys: Vec<&(u32, Vec<u32>)> = expected.keys().chain(found.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let (original_words, packed_words) = (
            expected.get(key).copied().unwrap_or(0),
            found.get(key).copied().unwrap_or(0),
        );
        if original_words != packed_words {
            return Err(PackingCheckError::Route {
                alternative: packed.alternative,
                source_tile: key.0,
                recipients: key.1.len(),
                packed: packed_words,
                original: original_words,
            });
        }
    }
    Ok(())
}

fn original_deliveries(problem: &ExchangeProblem) -> Vec<Delivery> {
    let mut deliveries = Vec::with_capacity(problem.receives());
    for piece in 0..problem.pieces() {
        for receive in problem.receives_of(piece) {
            deliveries.push(Delivery {
                destination_tile: problem.destination_tile[receive],
                destination: problem.destination[receive],
                source_tile: problem.source_tile[piece],
                source: problem.source[piece],
                bytes: u64::from(problem.words[piece]) * u64::from(WORD_BYTES),
            });
        }
    }
    deliveries
}

/// Copy runs keyed by the staging end, sorted for lookup.
struct StagingMap<'a> {
    runs: Vec<&'a CopyRun>,
    staging_end: fn(&CopyRun) -> SymbolicAddress,
}

impl<'a> StagingMap<'a> {
    fn new(runs: &'a [CopyRun], staging_end: fn(&CopyRun) -> SymbolicAddress) -> Self {
        let mut runs: Vec<&CopyRun> = runs.iter().collect();
        runs.sort_by_key(|run| staging_end(run));
        StagingMap { runs, staging_end }
    }

    /// The run covering `at`, with the offset of `at` inside it.
    fn covering(&self, at: SymbolicAddress) -> Option<(&'a CopyRun, u64)> {
        let index = self
            .runs
            .partition_point(|run| (self.staging_end)(run) <= at);
        let run = *self.runs.get(index.checked_sub(1)?)?;
        let start = (self.staging_end)(run);
        let inside = u64::from(at.offset) - u64::from(start.offset);
        (start.allocation == at.allocation && inside < u64::from(run.bytes))
            .then_some((run, inside))
    }
}

fn shifted(address: SymbolicAddress, bytes: u64) -> SymbolicAddress {
    SymbolicAddress {
        allocation: address.allocation,
        offset: address.offset + bytes as u32,
    }
}

/// The packed phase's deliveries, staging ends resolved through the copies.
fn packed_deliveries(packed: &Packed) -> Result<Vec<Delivery>, PackingCheckError> {
    let problem = &packed.problem;
    let staged = |address: SymbolicAddress| address.allocation >= packed.original_allocations;
    let gathers = StagingMap::new(&packed.gathers, |run| run.to);
    let scatters = StagingMap::new(&packed.scatters, |run| run.from);
    let mut deliveries = Vec::with_capacity(problem.receives());
    for piece in 0..problem.pieces() {
        let source_tile = problem.source_tile[piece];
        let total = u64::from(problem.words[piece]) * u64::from(WORD_BYTES);
        for receive in problem.receives_of(piece) {
            let destination_tile = problem.destination_tile[receive];
            let mut done = 0u64;
            while done < total {
                let mut length = total - done;
                let mut source = shifted(problem.source[piece], done);
                let mut destination = shifted(problem.destination[receive], done);
                if staged(source) {
                    let (run, inside) =
                        gathers
                            .covering(source)
                            .ok_or(PackingCheckError::UnfilledStaging {
                                alternative: packed.alternative,
                                piece,
                                tile: source_tile,
                                allocation: source.allocation,
                                offset: u64::from(source.offset),
                            })?;
                    length = length.min(u64::from(run.bytes) - inside);
                    source = shifted(run.from, inside);
                }
                if staged(destination) {
                    let (run, inside) = scatters.covering(destination).ok_or(
                        PackingCheckError::UnemptiedStaging {
                            alternative: packed.alternative,
                            piece,
                            tile: destination_tile,
                            allocation: destination.allocation,
                            offset: u64::from(destination.offset),
                        },
                    )?;
                    length = length.min(u64::from(run.bytes) - inside);
                    destination = shifted(run.to, inside);
                }
                deliveries.push(Delivery {
                    destination_tile,
                    destination,
                    source_tile,
                    source,
                    bytes: length,
                });
                done += length;
            }
        }
    }
    Ok(deliveries)
}

/// Sorted by destination and merged where both ends continue.
fn canonical(mut deliveries: Vec<Delivery>) -> Vec<Delivery> {
    deliveries.sort_unstable();
    let mut merged: Vec<Delivery> = Vec::with_capacity(deliveries.len());
    for delivery in deliveries {
        if let Some(last) = merged.last_mut()
            && last.destination_tile == delivery.destination_tile
            && last.source_tile == delivery.source_tile
            && last.destination.allocation == delivery.destination.allocation
            && last.source.allocation == delivery.source.allocation
            && u64::from(last.destination.offset) + last.bytes
                == u64::from(delivery.destination.offset)
            && u64::from(last.source.offset) + last.bytes == u64::from(delivery.source.offset)
        {
            last.bytes += delivery.bytes;
            continue;
        }
        merged.push(delivery);
    }
    merged
}
