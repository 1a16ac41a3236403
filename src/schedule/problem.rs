//! The exchange problem of one phase: what must move, with symbolic addresses.
//!
//! Built from one `Step::Exchange` of the low program, before placement: every
//! address is `(local allocation, byte offset)`. Allocations are renumbered
//! locally in first-appearance order so that two phases moving the same data
//! pattern compare and hash equal (the problem is interned by content); the
//! mapping back to global ids and to the original transfer indices is a
//! separate [`ProblemOrigin`], returned beside the problem, never inside it.
//!
//! Problems imported from exchange snapshots (`crate::snapshot`) use the
//! same representation; only they may bind an iterated allocation at
//! explicit per-iteration offsets ([`ExplicitBinding`]) instead of a stride.
//!
//! This module owns piece preparation: splitting transfers longer than the
//! logical transfer limit and coalescing contiguous neighbours when that is
//! safe for every Repeat binding. It must not order, time or encode anything;
//! transfer order is semantic and is preserved exactly.

use std::hash::{Hash, Hasher};

use crate::expand::program::{Allocation, AllocationId, Location, TransferList};
use crate::target::timing::MAX_LOGICAL_TRANSFER_WORDS;

/// Bytes per exchanged word.
pub const WORD_BYTES: u32 = 4;

/// A byte position inside a local allocation (placement happens later).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct SymbolicAddress {
    /// Index into [`ExchangeProblem::allocations`].
    pub allocation: u32,
    /// Byte offset inside the allocation's first instance.
    pub offset: u32,
}

/// What the problem keeps of a referenced allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalAllocation {
    pub tile: u32,
    /// Bytes of one instance (the Repeat binding stride).
    pub bytes: u32,
    /// Instances stored consecutively; `> 1` means bound per Repeat iteration.
    pub iterations: u32,
    pub alignment: u32,
    /// Local index of the alias root (same root = same storage).
    pub alias_root: u32,
}

/// Provenance of a problem: local allocation -> global id, piece -> original
/// transfer. Kept apart from [`ExchangeProblem`], so that two phases moving
/// the same pattern on different allocations have equal problems (and
/// intern once) while their origins differ.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProblemOrigin {
    pub allocations: Vec<AllocationId>,
    pub transfers: Vec<u32>,
}

/// A transfer list that cannot become a problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProblemError {
    #[error("transfer {transfer}: allocation {allocation} is not in the program")]
    UnknownAllocation { transfer: usize, allocation: u32 },
    #[error("transfer {transfer}: moves zero words")]
    EmptyTransfer { transfer: usize },
    #[error("transfer {transfer}: has no destination")]
    NoDestination { transfer: usize },
    #[error(
        "transfer {transfer}: tile {tile} names allocation {allocation}, which lives on tile {owner}"
    )]
    WrongTile {
        transfer: usize,
        tile: u32,
        allocation: u32,
        owner: u32,
    },
    #[error(
        "transfer {transfer}: iteration {iteration} binds bytes {start}..{end} of allocation \
         {allocation}, which holds {capacity} bytes"
    )]
    BindingOutOfRange {
        transfer: usize,
        iteration: u32,
        allocation: u32,
        start: u64,
        end: u64,
        capacity: u64,
    },
    #[error("transfer {transfer}: tile {tile} is outside the {tiles} tiles of the machine")]
    TileOutOfRange {
        transfer: usize,
        tile: u32,
        tiles: u32,
    },
}

/// The pieces of one exchange phase as struct-of-arrays. Piece `p` sends
/// `words[p]` words from `source[p]` on `source_tile[p]` to every receive in
/// `destination_start[p]..destination_start[p + 1]`. Order is semantic.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ExchangeProblem {
    pub tiles: u32,
    /// Repeat iterations the phase runs (1 outside a Repeat).
    pub iterations: u32,
    pub allocations: Vec<LocalAllocation>,
    pub source_tile: Vec<u32>,
    pub source: Vec<SymbolicAddress>,
    pub words: Vec<u32>,
    /// `pieces + 1` entries.
    pub destination_start: Vec<u32>,
    pub destination_tile: Vec<u32>,
    pub destination: Vec<SymbolicAddress>,
    /// Iterated allocations whose instances are not a stride apart, sorted
    /// by allocation. Only imported snapshots have them (`crate::snapshot`):
    /// a build's bindings are always `offset + iteration * bytes`.
    pub explicit_bindings: Vec<ExplicitBinding>,
    /// The first piece of each merged exchange after the first (ascending;
    /// empty when the phase merged nothing): from
    /// `TransferList::segment_starts`. A scheduling hint, no constraint.
    pub segment_starts: Vec<u32>,
}

/// The bindings of an iterated allocation given one by one: iteration `i`
/// of an address at `offset` in `allocation` is at `offset + deltas[i]`
/// from the alias root's base (`deltas[0]` is 0; deltas may be negative).
/// Such an allocation has `bytes == 0` (it occupies nothing beyond its
/// alias root, which covers every binding). Repeat patch lists
/// (`crate::patch`) are arithmetic and cannot express them; imported phases
/// are scheduled, encoded, checked and replayed, never packaged.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ExplicitBinding {
    pub allocation: u32,
    /// One per Repeat iteration.
    pub deltas: Vec<i64>,
}

/// Hashes everything but the two address vectors: equal problems hash
/// equal, and element-wise hashing of the addresses (the bulk of a problem)
/// would dominate interning. Problems that differ only in addresses are
/// told apart by `Eq` after a hash match. Content addressing outside the
/// process uses [`ExchangeProblem::write_content`], which covers every field.
impl Hash for ExchangeProblem {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.tiles.hash(state);
        self.iterations.hash(state);
        self.allocations.hash(state);
        self.source_tile.hash(state);
        self.words.hash(state);
        self.destination_start.hash(state);
        self.destination_tile.hash(state);
        self.explicit_bindings.hash(state);
        self.segment_starts.hash(state);
    }
}

/// Feeds `addresses` to `state` as little-endian bytes, in blocks.
fn write_addresses<H: Hasher>(addresses: &[SymbolicAddress], state: &mut H) {
    const BLOCK: usize = 4096;
    state.write_usize(addresses.len());
    let mut bytes = Vec::with_capacity(BLOCK * 8);
    for block in addresses.chunks(BLOCK) {
        bytes.clear();
        for address in block {
            bytes.extend_from_slice(&address.allocation.to_le_bytes());
            bytes.extend_from_slice(&address.offset.to_le_bytes());
        }
        state.write(&bytes);
    }
}

impl ExchangeProblem {
    /// Writes every field that takes part in equality to `state`: two problems write the same bytes exactly when
    /// they are equal. This is what content addresses (the persistent
    /// cache's keys) are computed from.
    pub fn write_content<H: Hasher>(&self, state: &mut H) {
        self.hash(state);
        write_addresses(&self.source, state);
        write_addresses(&self.destination, state);
    }

    /// Drops the spare capacity its vectors grew while pieces were pushed
    /// (up to half of each: a problem lives as long as its memo).
    fn shrink_to_fit(&mut self) {
        self.allocations.shrink_to_fit();
        self.source_tile.shrink_to_fit();
        self.source.shrink_to_fit();
        self.words.shrink_to_fit();
        self.destination_start.shrink_to_fit();
        self.destination_tile.shrink_to_fit();
        self.destination.shrink_to_fit();
        self.segment_starts.shrink_to_fit();
    }

    pub fn pieces(&self) -> usize {
        self.words.len()
    }

    pub fn receives(&self) -> usize {
        self.destination_tile.len()
    }

    /// Receive indices of piece `piece`.
    pub fn receives_of(&self, piece: usize) -> std::ops::Range<usize> {
        self.destination_start[piece] as usize..self.destination_start[piece + 1] as usize
    }

    /// Number of Repeat bindings of an address in `allocation`: every
    /// iteration for an iterated allocation, one otherwise.
    pub fn bindings(&self, allocation: u32) -> u32 {
        if self.allocations[allocation as usize].iterations > 1 {
            self.iterations.max(1)
        } else {
            1
        }
    }

    /// The explicit bindings of `allocation`, if it has them.
    pub fn explicit_deltas(&self, allocation: u32) -> Option<&[i64]> {
        if self.explicit_bindings.is_empty() {
            return None;
        }
        self.explicit_bindings
            .binary_search_by_key(&allocation, |binding| binding.allocation)
            .ok()
            .map(|index| self.explicit_bindings[index].deltas.as_slice())
    }

    /// Whether every binding of an address in `allocation` keeps its
    /// alignment modulo `alignment` (the stride, or every explicit delta, is
    /// a multiple of it).
    pub fn bindings_keep_alignment(&self, allocation: u32, alignment: u32) -> bool {
        let local = self.allocations[allocation as usize];
        if local.iterations <= 1 {
            return true;
        }
        match self.explicit_deltas(allocation) {
            Some(deltas) => deltas
                .iter()
                .all(|delta| delta.rem_euclid(i64::from(alignment)) == 0),
            None => local.bytes.is_multiple_of(alignment),
        }
    }

    /// Byte offset from the alias root's base of binding `iteration` of `address`.
    pub fn bound_offset(&self, address: SymbolicAddress, iteration: u32) -> u64 {
        let allocation = self.allocations[address.allocation as usize];
        if allocation.iterations > 1
            && let Some(deltas) = self.explicit_deltas(address.allocation)
        {
            let delta = deltas.get(iteration as usize).copied().unwrap_or(0);
            return (i64::from(address.offset) + delta).max(0) as u64;
        }
        let stride = if allocation.iterations > 1 {
            u64::from(allocation.bytes)
        } else {
            0
        };
        u64::from(address.offset) + u64::from(iteration) * stride
    }

    /// Builds the problem of one exchange step. `iterations` is the enclosing
    /// Repeat's count (1 outside), `tiles` the machine's tile count.
    pub fn from_transfers(
        transfers: &TransferList,
        allocations: &[Allocation],
        iterations: u32,
        tiles: u32,
    ) -> Result<ExchangeProblem, ProblemError> {
        Self::with_origin(transfers, allocations, iterations, tiles).map(|(problem, _)| problem)
    }

    /// [`ExchangeProblem::from_transfers`], with the problem's origin: the
    /// global allocation of each local one and the transfer of each piece.
    pub fn with_origin(
        transfers: &TransferList,
        allocations: &[Allocation],
        iterations: u32,
        tiles: u32,
    ) -> Result<(ExchangeProblem, ProblemOrigin), ProblemError> {
        let mut builder = Builder {
            problem: ExchangeProblem {
                tiles,
                iterations: iterations.max(1),
                destination_start: vec![0],
                ..ExchangeProblem::default()
            },
            origin: ProblemOrigin::default(),
            allocations,
            local: vec![NOT_LOCAL; allocations.len()],
        };
        let mut segment_starts = transfers.segment_starts.iter().peekable();
        for transfer in 0..transfers.len() {
            let mut starts_segment = false;
            while let Some(&&start) = segment_starts.peek()
                && start <= transfer as u32
            {
                starts_segment |= start == transfer as u32;
                segment_starts.next();
            }
            if starts_segment {
                let first_piece = builder.problem.pieces() as u32;
                builder.problem.segment_starts.push(first_piece);
            }
            builder.add_transfer(transfers, transfer, starts_segment)?;
        }
        builder.problem.shrink_to_fit();
        Ok((builder.problem, builder.origin))
    }
}

/// A global allocation not (yet) given a local index.
const NOT_LOCAL: u32 = u32::MAX;

struct Builder<'a> {
    problem: ExchangeProblem,
    origin: ProblemOrigin,
    allocations: &'a [Allocation],
    /// Local index of every global allocation, or [`NOT_LOCAL`].
    local: Vec<u32>,
}

impl Builder<'_> {
    fn local_allocation(&mut self, transfer: usize, id: u32) -> Result<u32, ProblemError> {
        if let Some(&local) = self.local.get(id as usize)
            && local != NOT_LOCAL
        {
            return Ok(local);
        }
        let allocation =
            self.allocations
                .get(id as usize)
                .ok_or(ProblemError::UnknownAllocation {
                    transfer,
                    allocation: id,
                })?;
        let root = if allocation.alias_group != id {
            self.local_allocation(transfer, allocation.alias_group)?
        } else {
            self.problem.allocations.len() as u32
        };
        let local = self.problem.allocations.len() as u32;
        self.problem.allocations.push(LocalAllocation {
            tile: allocation.tile,
            bytes: allocation.bytes,
            iterations: allocation.iterations.max(1),
            alignment: allocation.alignment.max(1),
            alias_root: root,
        });
        self.origin.allocations.push(AllocationId(id));
        self.local[id as usize] = local;
        Ok(local)
    }

    fn address(
        &mut self,
        transfer: usize,
        tile: u32,
        location: Location,
        words: u32,
    ) -> Result<SymbolicAddress, ProblemError> {
        if tile >= self.problem.tiles {
            return Err(ProblemError::TileOutOfRange {
                transfer,
                tile,
                tiles: self.problem.tiles,
            });
        }
        let allocation = self.local_allocation(transfer, location.allocation.0)?;
        let local = self.problem.allocations[allocation as usize];
        if local.tile != tile {
            return Err(ProblemError::WrongTile {
                transfer,
                tile,
                allocation: location.allocation.0,
                owner: local.tile,
            });
        }
        let address = SymbolicAddress {
            allocation,
            offset: location.offset,
        };
        let capacity = u64::from(local.bytes) * u64::from(local.iterations);
        let length = u64::from(words) * u64::from(WORD_BYTES);
        // A program's bindings move forward by the allocation's stride, so
        // the last one is the furthest; only when it overflows is the first
        // overflowing one looked for. (Explicit bindings, which imports
        // alone make, need not be monotonic: all of them are checked.)
        let last = self.problem.bindings(allocation) - 1;
        if self.problem.explicit_bindings.is_empty()
            && self.problem.bound_offset(address, last) + length <= capacity
        {
            return Ok(address);
        }
        for iteration in 0..=last {
            let start = self.problem.bound_offset(address, iteration);
            if start + length > capacity {
                return Err(ProblemError::BindingOutOfRange {
                    transfer,
                    iteration,
                    allocation: location.allocation.0,
                    start,
                    end: start + length,
                    capacity,
                });
            }
        }
        Ok(address)
    }

    /// Adds one transfer's pieces; the first does not join the previous
    /// piece when the transfer `starts_segment` (a merged exchange's
    /// first), so segments begin at a piece.
    fn add_transfer(
        &mut self,
        transfers: &TransferList,
        transfer: usize,
        starts_segment: bool,
    ) -> Result<(), ProblemError> {
        let words = transfers.words[transfer];
        if words == 0 {
            return Err(ProblemError::EmptyTransfer { transfer });
        }
        let destinations = transfers.destinations_of(transfer);
        if destinations.is_empty() {
            return Err(ProblemError::NoDestination { transfer });
        }
        let source_tile = transfers.source_tile[transfer];
        let source = self.address(
            transfer,
            source_tile,
            transfers.source_location[transfer],
            words,
        )?;
        let mut receivers = Vec::with_capacity(destinations.len());
        for destination in destinations {
            let address = self.address(transfer, destination.tile, destination.location, words)?;
            receivers.push((destination.tile, address));
        }
        let mut done = 0;
        while done < words {
            let chunk = (words - done).min(MAX_LOGICAL_TRANSFER_WORDS);
            let shift = done * WORD_BYTES;
            let moved = |address: SymbolicAddress| SymbolicAddress {
                allocation: address.allocation,
                offset: address.offset + shift,
            };
            let piece_receivers: Vec<(u32, SymbolicAddress)> = receivers
                .iter()
                .map(|&(tile, address)| (tile, moved(address)))
                .collect();
            let joinable = done > 0 || !starts_segment;
            if !(joinable && self.coalesce(source_tile, moved(source), chunk, &piece_receivers)) {
                self.push(
                    transfer,
                    source_tile,
                    moved(source),
                    chunk,
                    &piece_receivers,
                );
            }
            done += chunk;
        }
        Ok(())
    }

    fn push(
        &mut self,
        transfer: usize,
        source_tile: u32,
        source: SymbolicAddress,
        words: u32,
        receivers: &[(u32, SymbolicAddress)],
    ) {
        self.problem
            .push_piece(source_tile, source, words, receivers);
        self.origin.transfers.push(transfer as u32);
    }

    fn coalesce(
        &mut self,
        source_tile: u32,
        source: SymbolicAddress,
        words: u32,
        receivers: &[(u32, SymbolicAddress)],
    ) -> bool {
        self.problem
            .extend_last_piece(source_tile, source, words, receivers)
    }
}

impl ExchangeProblem {
    /// The merged exchange (segment) of every piece: 0 for the first
    /// exchange's pieces, `i` for those at or after `segment_starts[i - 1]`.
    pub fn segment_of_pieces(&self) -> Vec<u32> {
        let mut segments = Vec::with_capacity(self.pieces());
        let mut segment = 0u32;
        for piece in 0..self.pieces() as u32 {
            while self
                .segment_starts
                .get(segment as usize)
                .is_some_and(|&start| start <= piece)
            {
                segment += 1;
            }
            segments.push(segment);
        }
        segments
    }

    /// Appends a piece: joined onto the last one when
    /// [`ExchangeProblem::extend_last_piece`] allows it, otherwise pushed
    /// as a new piece. Returns whether it was joined.
    pub fn append_piece(
        &mut self,
        source_tile: u32,
        source: SymbolicAddress,
        words: u32,
        receivers: &[(u32, SymbolicAddress)],
    ) -> bool {
        if self.extend_last_piece(source_tile, source, words, receivers) {
            return true;
        }
        self.push_piece(source_tile, source, words, receivers);
        false
    }

    /// Pushes a new piece (no coalescing).
    pub fn push_piece(
        &mut self,
        source_tile: u32,
        source: SymbolicAddress,
        words: u32,
        receivers: &[(u32, SymbolicAddress)],
    ) {
        if self.destination_start.is_empty() {
            self.destination_start.push(0);
        }
        self.source_tile.push(source_tile);
        self.source.push(source);
        self.words.push(words);
        for &(tile, address) in receivers {
            self.destination_tile.push(tile);
            self.destination.push(address);
        }
        self.destination_start
            .push(self.destination_tile.len() as u32);
    }

    /// Joins a new piece onto the last one when the source and every
    /// destination continue contiguously, the result stays within the
    /// logical transfer limit, and no binding of the joined source overlaps a
    /// joined destination on the same storage (that would erase a
    /// receive-then-forward dependency inside the piece). Returns whether
    /// it joined.
    pub fn extend_last_piece(
        &mut self,
        source_tile: u32,
        source: SymbolicAddress,
        words: u32,
        receivers: &[(u32, SymbolicAddress)],
    ) -> bool {
        let problem = &*self;
        let Some(last) = problem.pieces().checked_sub(1) else {
            return false;
        };
        let last_words = problem.words[last];
        if problem.source_tile[last] != source_tile
            || last_words + words > MAX_LOGICAL_TRANSFER_WORDS
            || !continues(problem.source[last], last_words, source)
        {
            return false;
        }
        let range = problem.receives_of(last);
        if range.len() != receivers.len() {
            return false;
        }
        let contiguous = range
            .clone()
            .zip(receivers)
            .all(|(receive, &(tile, address))| {
                problem.destination_tile[receive] == tile
                    && continues(problem.destination[receive], last_words, address)
            });
        if !contiguous {
            return false;
        }
        let total = u64::from(last_words + words) * u64::from(WORD_BYTES);
        let first_source = problem.source[last];
        let source_root = problem.allocations[first_source.allocation as usize].alias_root;
        for receive in range.clone() {
            let tile = problem.destination_tile[receive];
            let destination = problem.destination[receive];
            let root = problem.allocations[destination.allocation as usize].alias_root;
            if tile != source_tile || root != source_root {
                continue;
            }
            for iteration in 0..problem.iterations.max(1) {
                let source_start = problem.bound_offset(
                    first_source,
                    iteration.min(problem.bindings(first_source.allocation) - 1),
                );
                let destination_start = problem.bound_offset(
                    destination,
                    iteration.min(problem.bindings(destination.allocation) - 1),
                );
                if source_start < destination_start + total
                    && destination_start < source_start + total
                {
                    return false;
                }
            }
        }
        self.words[last] += words;
        true
    }
}

/// Whether `next` starts exactly where `words` words from `previous` end,
/// in the same allocation (so every Repeat binding stays contiguous too).
fn continues(previous: SymbolicAddress, words: u32, next: SymbolicAddress) -> bool {
    previous.allocation == next.allocation
        && u64::from(previous.offset) + u64::from(words) * u64::from(WORD_BYTES)
            == u64::from(next.offset)
}
