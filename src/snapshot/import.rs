//! Import: a schema-4 snapshot back into exchange problems.
//!
//! Every transfer is checked first (tiles in range, one source address per
//! Repeat iteration and the same count across the phase, non-zero words,
//! word-aligned addresses inside the tile's SRAM, at least one and no
//! repeated destination tile); a failure names the phase and the transfer
//! index. Then the phase becomes a [`PhaseSnapshot`], through its symbolic
//! provenance when the snapshot has it, else by reconstructing allocations
//! from the address pattern (both described in `crate::snapshot`).
//! Transfers longer than the logical transfer limit are split into pieces
//! exactly as a build splits them; nothing is coalesced or reordered.
//! Phases are imported in parallel; the first error in phase order wins.
//! Linear in transfers and destinations, plus a sort of the touched ranges.

use std::collections::HashMap;

use rayon::prelude::*;

use super::format::{AllocationRecord, SCHEMA_VERSION, Snapshot, SnapshotPhase, SnapshotTransfer};
use super::{PhaseProvenance, PhaseSnapshot};
use crate::schedule::problem::{ExplicitBinding, WORD_BYTES};
use crate::schedule::{ExchangeProblem, LocalAllocation, SymbolicAddress};
use crate::target::memory::{TILE_BASE_ADDRESS, TILE_END_ADDRESS};
use crate::target::timing::MAX_LOGICAL_TRANSFER_WORDS;

/// Alignment of reconstructed allocations: keeps paired eligibility a
/// property of the absolute address (`0x4c000` is a multiple of it).
const RECONSTRUCTED_ALIGNMENT: u32 = 8;

/// The most tiles a snapshot may name (model: far above any IPU21-class
/// machine's 1,472; a guard against per-tile tables sized by a corrupt count).
pub const MAXIMUM_TILES: u32 = 1 << 16;

/// The most words one phase may deliver (words times destinations, summed
/// over its transfers): 2^26 words, 256 MiB. Replaying a phase holds its
/// delivered data and the touched bytes of two tile memories, so this bounds
/// the memory an import and its bench use to about a gigabyte. The largest
/// phase of the shipped builds delivers far less (docs/measurements.md).
pub const MAXIMUM_PHASE_DELIVERED_WORDS: u64 = 1 << 26;

/// The most destinations the selected phases of one snapshot may have in
/// all (2^26; SigLIP so400m's 51 phases have 2,976,088).
pub const MAXIMUM_DESTINATIONS: u64 = 1 << 26;

/// A snapshot that does not describe valid exchange phases.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("schema version {found} is not supported; this reader understands version {expected}")]
    SchemaVersion { found: u32, expected: u32 },
    #[error("the snapshot has no tiles (tile_count 0)")]
    NoTiles,
    #[error("tile_count {found} is above the {MAXIMUM_TILES} tiles this importer accepts")]
    TooManyTiles { found: u32 },
    #[error("phase {phase} is not in the snapshot")]
    UnknownPhase { phase: u32 },
    #[error(
        "phase {phase}, transfer {transfer}: the phase delivers more than \
         {MAXIMUM_PHASE_DELIVERED_WORDS} words (words x destinations summed over its transfers; \
         {delivered} by this transfer), more than this importer holds in memory; \
         split the phase or select fewer phases"
    )]
    PhaseTooLarge {
        phase: u32,
        transfer: usize,
        delivered: u64,
    },
    #[error(
        "phase {phase}, transfer {transfer}: the selected phases have more than \
         {MAXIMUM_DESTINATIONS} destinations in all, more than this importer holds in memory; \
         select fewer phases with --phase"
    )]
    TooManyDestinations { phase: u32, transfer: usize },
    #[error("phase {phase}, transfer {transfer}: tile {tile} is outside the {tiles} tiles")]
    TileOutOfRange {
        phase: u32,
        transfer: usize,
        tile: u32,
        tiles: u32,
    },
    #[error(
        "phase {phase}: segment_starts {starts:?} must name transfers after the first, \
         ascending, below the phase's {transfers} transfers"
    )]
    SegmentStarts {
        phase: u32,
        starts: Vec<u32>,
        transfers: usize,
    },
    #[error("phase {phase}, transfer {transfer}: no source addresses")]
    NoSourceAddress { phase: u32, transfer: usize },
    #[error(
        "phase {phase}, transfer {transfer}: {found} source addresses, but transfer 0 of the phase \
         has {expected} (one per Repeat iteration)"
    )]
    IterationCount {
        phase: u32,
        transfer: usize,
        found: usize,
        expected: usize,
    },
    #[error("phase {phase}, transfer {transfer}: moves zero words")]
    ZeroWords { phase: u32, transfer: usize },
    #[error("phase {phase}, transfer {transfer}: has no destination")]
    NoDestination { phase: u32, transfer: usize },
    #[error("phase {phase}, transfer {transfer}: tile {tile} is a destination twice")]
    DuplicateDestination {
        phase: u32,
        transfer: usize,
        tile: u32,
    },
    #[error(
        "phase {phase}, transfer {transfer}: address {address:#x} on tile {tile} is not a \
         multiple of {WORD_BYTES} bytes"
    )]
    MisalignedAddress {
        phase: u32,
        transfer: usize,
        tile: u32,
        address: u32,
    },
    #[error(
        "phase {phase}, transfer {transfer}: bytes {address:#x}..{end:#x} on tile {tile} are \
         outside the tile's memory {TILE_BASE_ADDRESS:#x}..{TILE_END_ADDRESS:#x}"
    )]
    AddressOutOfRange {
        phase: u32,
        transfer: usize,
        tile: u32,
        address: u32,
        end: u64,
    },
    #[error("phase {phase}, allocation {allocation}: {what}")]
    AllocationTable {
        phase: u32,
        allocation: usize,
        what: &'static str,
    },
    #[error("phase {phase}, transfer {transfer}: {what}")]
    Provenance {
        phase: u32,
        transfer: usize,
        what: &'static str,
    },
}

/// A `--phase` that names no phase of a snapshot, with the ids it has and
/// the nearest keys.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the snapshot has no phase with id or key `{selector}`: give a phase's id (for a \
     superstep capture, its step: the first column of `superstep phases`) or its key; {}{}",
    ids_text(.ids),
    if .nearest.is_empty() { String::new() } else { format!("; nearest keys: {}", .nearest.join(", ")) }
)]
pub struct UnknownSnapshotPhase {
    pub selector: String,
    /// Every phase's id, in snapshot order.
    pub ids: Vec<u32>,
    /// The nearest keys the snapshot has (at most five).
    pub nearest: Vec<String>,
}

/// The most ids an [`UnknownSnapshotPhase`] lists.
const IDS_LISTED: usize = 16;

fn ids_text(ids: &[u32]) -> String {
    if ids.is_empty() {
        return String::from("it has no phases");
    }
    format!(
        "{} {}",
        if ids.len() == 1 {
            "its phase has id"
        } else {
            "its phases have ids"
        },
        crate::text::first_of(ids, IDS_LISTED)
    )
}

/// The ids of the phases `selectors` name, each by its id or its key, in
/// the order given (repeats once): what `--phase` of `bench-snapshot` and
/// `packing --snapshot` takes.
pub fn select_phases(
    snapshot: &Snapshot,
    selectors: &[String],
) -> Result<Vec<u32>, UnknownSnapshotPhase> {
    let mut selected = Vec::with_capacity(selectors.len());
    for selector in selectors {
        let found = snapshot
            .phases
            .iter()
            .find(|phase| phase.key.as_deref() == Some(selector.as_str()))
            .or_else(|| {
                let id = selector.parse::<u32>().ok()?;
                snapshot.phases.iter().find(|phase| phase.phase == id)
            });
        match found {
            Some(phase) => {
                if !selected.contains(&phase.phase) {
                    selected.push(phase.phase);
                }
            }
            None => {
                let keys: Vec<&str> = snapshot
                    .phases
                    .iter()
                    .filter_map(|phase| phase.key.as_deref())
                    .collect();
                return Err(UnknownSnapshotPhase {
                    selector: selector.clone(),
                    ids: snapshot.phases.iter().map(|phase| phase.phase).collect(),
                    nearest: crate::text::nearest_keys(selector, &keys, 5)
                        .into_iter()
                        // A number is an id: keys near its text mean nothing.
                        .filter(|_| selector.parse::<u32>().is_err())
                        .map(str::to_string)
                        .collect(),
                });
            }
        }
    }
    Ok(selected)
}

/// Imports every phase of `snapshot`.
pub fn import_snapshot(snapshot: &Snapshot) -> Result<Vec<PhaseSnapshot>, ImportError> {
    import_phases(snapshot, &[])
}

/// Imports the phases whose ids are in `selected` (every phase when empty),
/// in snapshot order.
pub fn import_phases(
    snapshot: &Snapshot,
    selected: &[u32],
) -> Result<Vec<PhaseSnapshot>, ImportError> {
    if snapshot.schema_version != SCHEMA_VERSION {
        return Err(ImportError::SchemaVersion {
            found: snapshot.schema_version,
            expected: SCHEMA_VERSION,
        });
    }
    if snapshot.tile_count == 0 {
        return Err(ImportError::NoTiles);
    }
    if snapshot.tile_count > MAXIMUM_TILES {
        return Err(ImportError::TooManyTiles {
            found: snapshot.tile_count,
        });
    }
    if let Some(&phase) = selected
        .iter()
        .find(|&&id| !snapshot.phases.iter().any(|phase| phase.phase == id))
    {
        return Err(ImportError::UnknownPhase { phase });
    }
    let chosen = |phase: &&SnapshotPhase| selected.is_empty() || selected.contains(&phase.phase);
    check_budget(snapshot.phases.iter().filter(chosen))?;
    snapshot
        .phases
        .par_iter()
        .filter(chosen)
        .map(|phase| import_phase(phase, snapshot.tile_count))
        .collect()
}

/// Bounds the work of an import before anything is allocated for it: the
/// words each phase delivers and the destinations of all phases (see
/// [`MAXIMUM_PHASE_DELIVERED_WORDS`] and [`MAXIMUM_DESTINATIONS`]).
fn check_budget<'a>(phases: impl Iterator<Item = &'a SnapshotPhase>) -> Result<(), ImportError> {
    let mut destinations = 0u64;
    for phase in phases {
        let mut delivered = 0u64;
        for (index, transfer) in phase.transfers.iter().enumerate() {
            let count = transfer.destinations.len() as u64;
            delivered = delivered.saturating_add(u64::from(transfer.words) * count);
            if delivered > MAXIMUM_PHASE_DELIVERED_WORDS {
                return Err(ImportError::PhaseTooLarge {
                    phase: phase.phase,
                    transfer: index,
                    delivered,
                });
            }
            destinations += count;
            if destinations > MAXIMUM_DESTINATIONS {
                return Err(ImportError::TooManyDestinations {
                    phase: phase.phase,
                    transfer: index,
                });
            }
        }
    }
    Ok(())
}

/// Imports one phase of a snapshot with `tiles` tiles.
pub fn import_phase(phase: &SnapshotPhase, tiles: u32) -> Result<PhaseSnapshot, ImportError> {
    let iterations = check_transfers(phase, tiles)?;
    let symbolic = phase.allocations.is_some();
    let (allocations, base, addresses, explicit_bindings) = match &phase.allocations {
        Some(table) => symbolic_addresses(phase, table, tiles, iterations)?,
        None => reconstruct(phase, iterations)?,
    };
    let mut problem = ExchangeProblem {
        tiles,
        iterations: iterations as u32,
        allocations,
        explicit_bindings,
        destination_start: vec![0],
        ..ExchangeProblem::default()
    };
    let mut paired = Vec::with_capacity(phase.transfers.len());
    let mut piece_transfers = Vec::with_capacity(phase.transfers.len());
    let mut split = false;
    for (index, transfer) in phase.transfers.iter().enumerate() {
        let (source, destinations) = addresses.of(index);
        if phase.segment_starts.contains(&(index as u32)) {
            problem.segment_starts.push(problem.pieces() as u32);
        }
        let mut done = 0;
        while done < transfer.words {
            let words = (transfer.words - done).min(MAX_LOGICAL_TRANSFER_WORDS);
            let shift = done * WORD_BYTES;
            let moved = |address: SymbolicAddress| SymbolicAddress {
                allocation: address.allocation,
                offset: address.offset + shift,
            };
            problem.source_tile.push(transfer.source);
            problem.source.push(moved(source));
            problem.words.push(words);
            for (&(tile, _), &address) in transfer.destinations.iter().zip(destinations) {
                problem.destination_tile.push(tile);
                problem.destination.push(moved(address));
            }
            problem
                .destination_start
                .push(problem.destination_tile.len() as u32);
            piece_transfers.push(index as u32);
            paired.push(transfer.width.is_paired());
            split |= done > 0;
            done += words;
        }
    }
    if !split {
        // One piece per transfer: nothing to map back.
        piece_transfers.clear();
    }
    Ok(PhaseSnapshot {
        phase: phase.phase,
        provenance: PhaseProvenance {
            key: phase.key.clone(),
            operator: phase.operator.clone(),
            reason: phase.reason.clone(),
            executions: phase.executions,
        },
        problem,
        piece_transfers,
        base,
        paired,
        symbolic,
    })
}

/// Checks every transfer of a phase; returns its Repeat iteration count.
fn check_transfers(phase: &SnapshotPhase, tiles: u32) -> Result<usize, ImportError> {
    let id = phase.phase;
    let starts = &phase.segment_starts;
    let ascending = starts.windows(2).all(|pair| pair[0] < pair[1]);
    let inside = starts
        .iter()
        .all(|&start| start > 0 && (start as usize) < phase.transfers.len());
    if !(ascending && inside) {
        return Err(ImportError::SegmentStarts {
            phase: id,
            starts: starts.clone(),
            transfers: phase.transfers.len(),
        });
    }
    let expected = phase
        .transfers
        .first()
        .map_or(1, |transfer| transfer.source_addresses.len());
    let mut seen = vec![u32::MAX; tiles as usize];
    for (index, transfer) in phase.transfers.iter().enumerate() {
        let tile_in_range = |tile: u32| {
            if tile < tiles {
                Ok(())
            } else {
                Err(ImportError::TileOutOfRange {
                    phase: id,
                    transfer: index,
                    tile,
                    tiles,
                })
            }
        };
        tile_in_range(transfer.source)?;
        if transfer.source_addresses.is_empty() {
            return Err(ImportError::NoSourceAddress {
                phase: id,
                transfer: index,
            });
        }
        if transfer.source_addresses.len() != expected {
            return Err(ImportError::IterationCount {
                phase: id,
                transfer: index,
                found: transfer.source_addresses.len(),
                expected,
            });
        }
        if transfer.words == 0 {
            return Err(ImportError::ZeroWords {
                phase: id,
                transfer: index,
            });
        }
        if transfer.destinations.is_empty() {
            return Err(ImportError::NoDestination {
                phase: id,
                transfer: index,
            });
        }
        let length = u64::from(transfer.words) * u64::from(WORD_BYTES);
        let check_address = |tile: u32, address: u32| {
            if !address.is_multiple_of(WORD_BYTES) {
                return Err(ImportError::MisalignedAddress {
                    phase: id,
                    transfer: index,
                    tile,
                    address,
                });
            }
            let end = u64::from(address) + length;
            if address < TILE_BASE_ADDRESS || end > u64::from(TILE_END_ADDRESS) {
                return Err(ImportError::AddressOutOfRange {
                    phase: id,
                    transfer: index,
                    tile,
                    address,
                    end,
                });
            }
            Ok(())
        };
        for &address in &transfer.source_addresses {
            check_address(transfer.source, address)?;
        }
        for &(tile, address) in &transfer.destinations {
            tile_in_range(tile)?;
            if seen[tile as usize] == index as u32 {
                return Err(ImportError::DuplicateDestination {
                    phase: id,
                    transfer: index,
                    tile,
                });
            }
            seen[tile as usize] = index as u32;
            check_address(tile, address)?;
        }
    }
    Ok(expected)
}

/// Symbolic addresses of every transfer: one source and one per destination,
/// in a flat list (`start[transfer]` into it).
struct TransferAddresses {
    start: Vec<usize>,
    addresses: Vec<SymbolicAddress>,
}

impl TransferAddresses {
    fn with_capacity(transfers: usize, addresses: usize) -> TransferAddresses {
        TransferAddresses {
            start: Vec::with_capacity(transfers + 1),
            addresses: Vec::with_capacity(addresses),
        }
    }

    fn begin(&mut self) {
        self.start.push(self.addresses.len());
    }

    fn of(&self, transfer: usize) -> (SymbolicAddress, &[SymbolicAddress]) {
        let start = self.start[transfer];
        let end = self
            .start
            .get(transfer + 1)
            .copied()
            .unwrap_or(self.addresses.len());
        (self.addresses[start], &self.addresses[start + 1..end])
    }
}

/// Local allocations, their absolute bases, every transfer's symbolic
/// addresses and the explicit bindings.
type Imported = (
    Vec<LocalAllocation>,
    Vec<u32>,
    TransferAddresses,
    Vec<ExplicitBinding>,
);

/// Through the snapshot's own allocation table and per-address allocations.
fn symbolic_addresses(
    phase: &SnapshotPhase,
    table: &[AllocationRecord],
    tiles: u32,
    iterations: usize,
) -> Result<Imported, ImportError> {
    let id = phase.phase;
    for (index, record) in table.iter().enumerate() {
        let fail = |what| ImportError::AllocationTable {
            phase: id,
            allocation: index,
            what,
        };
        let root = table
            .get(record.alias_root as usize)
            .ok_or(fail("its alias root is not in the table"))?;
        if root.alias_root != record.alias_root {
            return Err(fail("its alias root is not a root"));
        }
        if root.tile != record.tile || root.address != record.address {
            return Err(fail("it is not on its alias root's tile and address"));
        }
        if record.tile >= tiles {
            return Err(fail("its tile is outside the snapshot's tiles"));
        }
        if record.bytes == 0 || record.iterations == 0 || record.alignment == 0 {
            return Err(fail("it has zero bytes, iterations or alignment"));
        }
        let end =
            u64::from(record.address) + u64::from(record.bytes) * u64::from(record.iterations);
        if record.address < TILE_BASE_ADDRESS || end > u64::from(TILE_END_ADDRESS) {
            return Err(fail("it lies outside the tile's memory"));
        }
        if !record.address.is_multiple_of(record.alignment) {
            return Err(fail("its address is not a multiple of its alignment"));
        }
    }
    let allocations: Vec<LocalAllocation> = table
        .iter()
        .map(|record| LocalAllocation {
            tile: record.tile,
            bytes: record.bytes,
            iterations: record.iterations,
            alignment: record.alignment,
            alias_root: record.alias_root,
        })
        .collect();
    let base: Vec<u32> = table.iter().map(|record| record.address).collect();
    let receives: usize = phase
        .transfers
        .iter()
        .map(|transfer| transfer.destinations.len())
        .sum();
    let mut addresses =
        TransferAddresses::with_capacity(phase.transfers.len(), phase.transfers.len() + receives);
    for (index, transfer) in phase.transfers.iter().enumerate() {
        let fail = |what| ImportError::Provenance {
            phase: id,
            transfer: index,
            what,
        };
        let length = u64::from(transfer.words) * u64::from(WORD_BYTES);
        // The symbolic address of `addresses` (one per binding) in `allocation`.
        let resolve = |allocation: u32, tile: u32, bound: &[u32]| {
            let record = table
                .get(allocation as usize)
                .ok_or(fail("names an allocation that is not in the table"))?;
            if record.tile != tile {
                return Err(fail("names an allocation on another tile"));
            }
            let offset = bound[0]
                .checked_sub(record.address)
                .ok_or(fail("has an address below its allocation"))?;
            let stride = if record.iterations > 1 {
                u64::from(record.bytes)
            } else {
                0
            };
            let capacity = u64::from(record.bytes) * u64::from(record.iterations);
            let bindings = if record.iterations > 1 { iterations } else { 1 };
            for iteration in 0..iterations {
                let binding = iteration.min(bindings - 1) as u64;
                let relative = u64::from(offset) + binding * stride;
                if relative + length > capacity {
                    return Err(fail("has an address outside its allocation"));
                }
                if let Some(&address) = bound.get(iteration)
                    && u64::from(address) != u64::from(record.address) + relative
                {
                    return Err(fail(
                        "has a source address that is not its allocation's Repeat binding",
                    ));
                }
            }
            Ok(SymbolicAddress { allocation, offset })
        };
        let source = transfer.source_allocation.ok_or(fail(
            "lacks source_allocation, but the phase has allocations",
        ))?;
        let destinations = transfer
            .destination_allocations
            .as_ref()
            .filter(|list| list.len() == transfer.destinations.len())
            .ok_or(fail(
                "lacks one destination_allocations entry per destination, but the phase has \
                 allocations",
            ))?;
        addresses.begin();
        addresses.addresses.push(resolve(
            source,
            transfer.source,
            &transfer.source_addresses,
        )?);
        for (&(tile, address), &allocation) in transfer.destinations.iter().zip(destinations) {
            addresses
                .addresses
                .push(resolve(allocation, tile, std::slice::from_ref(&address))?);
        }
    }
    Ok((allocations, base, addresses, Vec::new()))
}

/// How a transfer's source moves over the Repeat iterations.
#[derive(Clone, PartialEq, Eq, Hash)]
enum SourcePattern {
    Constant,
    /// Increasing arithmetic progression with this stride in bytes.
    Progression(u32),
    /// Anything else: each iteration's address minus iteration 0's.
    Explicit(Vec<i64>),
}

fn source_pattern(transfer: &SnapshotTransfer) -> SourcePattern {
    let addresses = &transfer.source_addresses;
    let first = addresses[0];
    if addresses.iter().all(|&address| address == first) {
        return SourcePattern::Constant;
    }
    let stride = addresses[1].wrapping_sub(first);
    let increasing = addresses[1] > first
        && addresses.iter().enumerate().all(|(iteration, &address)| {
            u64::from(address) == u64::from(first) + iteration as u64 * u64::from(stride)
        });
    if increasing {
        SourcePattern::Progression(stride)
    } else {
        SourcePattern::Explicit(
            addresses
                .iter()
                .map(|&address| i64::from(address) - i64::from(first))
                .collect(),
        )
    }
}

/// Reconstructs allocations from the address pattern (`crate::snapshot`).
fn reconstruct(phase: &SnapshotPhase, iterations: usize) -> Result<Imported, ImportError> {
    let mut patterns = Vec::with_capacity(phase.transfers.len());
    // Touched ranges as (tile, start aligned down, end). A moving source
    // covers the whole span of its bindings, so that they share one root.
    let mut ranges: Vec<(u32, u32, u32)> = Vec::new();
    for transfer in &phase.transfers {
        patterns.push(source_pattern(transfer));
        let length = transfer.words * WORD_BYTES;
        let aligned = |address: u32| address - address % RECONSTRUCTED_ALIGNMENT;
        let bound = &transfer.source_addresses;
        let lowest = bound.iter().copied().min().unwrap_or(0);
        let highest = bound.iter().copied().max().unwrap_or(0);
        ranges.push((transfer.source, aligned(lowest), highest + length));
        for &(tile, address) in &transfer.destinations {
            ranges.push((tile, aligned(address), address + length));
        }
    }
    ranges.sort_unstable();
    // One root per contiguous run of touched bytes on a tile.
    let mut roots: Vec<(u32, u32, u32)> = Vec::new();
    for (tile, start, end) in ranges {
        match roots.last_mut() {
            Some(root) if root.0 == tile && start <= root.2 => root.2 = root.2.max(end),
            _ => roots.push((tile, start, end)),
        }
    }
    let mut allocations: Vec<LocalAllocation> = roots
        .iter()
        .enumerate()
        .map(|(index, &(tile, start, end))| LocalAllocation {
            tile,
            bytes: end - start,
            iterations: 1,
            alignment: RECONSTRUCTED_ALIGNMENT,
            alias_root: index as u32,
        })
        .collect();
    let mut base: Vec<u32> = roots.iter().map(|root| root.1).collect();
    let root_of = |tile: u32, address: u32| -> u32 {
        let position = roots.partition_point(|root| (root.0, root.1) <= (tile, address));
        (position - 1) as u32
    };
    // Iterated alias members, interned by (root, how they move).
    let mut members: HashMap<(u32, SourcePattern), u32> = HashMap::new();
    let mut explicit: Vec<ExplicitBinding> = Vec::new();
    let receives: usize = phase
        .transfers
        .iter()
        .map(|transfer| transfer.destinations.len())
        .sum();
    let mut addresses =
        TransferAddresses::with_capacity(phase.transfers.len(), phase.transfers.len() + receives);
    for (transfer, pattern) in phase.transfers.iter().zip(patterns) {
        addresses.begin();
        let first = transfer.source_addresses[0];
        let root = root_of(transfer.source, first);
        let offset = first - base[root as usize];
        let allocation = match pattern {
            SourcePattern::Constant => root,
            moving => *members
                .entry((root, moving))
                .or_insert_with_key(|(_, moving)| {
                    let local = allocations.len() as u32;
                    let bytes = match moving {
                        SourcePattern::Progression(stride) => *stride,
                        _ => 0,
                    };
                    if let SourcePattern::Explicit(deltas) = moving {
                        explicit.push(ExplicitBinding {
                            allocation: local,
                            deltas: deltas.clone(),
                        });
                    }
                    allocations.push(LocalAllocation {
                        tile: transfer.source,
                        bytes,
                        iterations: iterations as u32,
                        alignment: RECONSTRUCTED_ALIGNMENT,
                        alias_root: root,
                    });
                    base.push(base[root as usize]);
                    local
                }),
        };
        addresses
            .addresses
            .push(SymbolicAddress { allocation, offset });
        for &(tile, address) in &transfer.destinations {
            let root = root_of(tile, address);
            addresses.addresses.push(SymbolicAddress {
                allocation: root,
                offset: address - base[root as usize],
            });
        }
    }
    Ok((allocations, base, addresses, explicit))
}
