//! Placement: an SRAM address for every allocation on its tile, from
//! liveness over a step sequence (the low program's, or phase groups'
//! transformed one). Repeat bodies and iterated bindings are placed as
//! equal, consecutive, strided blocks; memory classes keep to their regions
//! (code in region 0, matrix-unit operands interleaved in region 1, all data
//! below the loadable limit); alignment is respected; per-tile reservations
//! for the exchange table (code, region 0 first) and the patch lists are
//! placed before any data. An exchange's send sources and receive
//! destinations on one tile are kept in different memory elements, and out
//! of the elements holding the exchange code, where memory allows
//! (`separation`); the element conflicts left are counted. The two members
//! of a receiving pair get their paired destination blocks at one address
//! where memory allows (the lower tile of each pair is placed first). A model that does
//! not fit is an error naming the tile, the bytes over and what is live.
//!
//! A pure core over plain data: it must not schedule, encode or change the
//! program, and `check` verifies its result with its own overlap test.

pub mod allocator;
pub mod check;
pub mod conflicts;
pub mod liveness;
pub mod separation;

#[cfg(test)]
mod tests;

use rayon::prelude::*;
use serde::Serialize;

use crate::expand::program::{LowProgram, Step};
use crate::target::mapping::partner;
use crate::target::memory::{MEMORY_ELEMENT_BYTES, MemoryClass, TILE_BASE_ADDRESS};
use allocator::{Block, ElementRules, PartnerFloor, USABLE_BYTES, blocks_by_tile, place_tile};
pub use check::{PlacementViolation, check_placement};
pub use conflicts::{ElementConflict, ElementConflicts};

/// Bytes each tile reserves outside the program's allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct TileReservations {
    /// Exchange table (rows of every phase): code, placed at the start of region 0.
    pub exchange_table: Vec<u32>,
    /// Repeat and sharing patch lists: data, placed right after the table.
    pub patch_lists: Vec<u32>,
}

impl TileReservations {
    /// The same reservation on every tile.
    pub fn uniform(tiles: u32, exchange_table: u32, patch_lists: u32) -> TileReservations {
        TileReservations {
            exchange_table: vec![exchange_table; tiles as usize],
            patch_lists: vec![patch_lists; tiles as usize],
        }
    }

    /// Reservations for a table of `table_bytes` and patch lists of
    /// `patch_bytes` per tile, each grown to whole granules so that a small
    /// change of one phase's rows leaves them (and so placement) unchanged.
    /// The table is grown to whole memory elements: the exchange code's
    /// elements hold nothing an exchange sends or receives (instruction
    /// fetch contends for them, IPU21.md), and placement, which follows
    /// element boundaries, stays put while the table grows inside them.
    pub fn sized(table_bytes: &[u64], patch_bytes: &[u32]) -> TileReservations {
        let granule = |bytes: u64| bytes.next_multiple_of(RESERVATION_GRANULE_BYTES) as u32;
        let elements = |bytes: u64| bytes.next_multiple_of(u64::from(MEMORY_ELEMENT_BYTES)) as u32;
        TileReservations {
            exchange_table: table_bytes.iter().map(|&bytes| elements(bytes)).collect(),
            patch_lists: patch_bytes
                .iter()
                .map(|&bytes| granule(u64::from(bytes)))
                .collect(),
        }
    }

    fn table(&self, tile: usize) -> u32 {
        self.exchange_table.get(tile).copied().unwrap_or(0)
    }

    fn patches(&self, tile: usize) -> u32 {
        self.patch_lists.get(tile).copied().unwrap_or(0)
    }
}

/// Reservations are made in units of this many bytes (model: a memory
/// allocator's granule).
pub const RESERVATION_GRANULE_BYTES: u64 = 1024;

/// Alignment of the reservations (instruction words; patch lists of words).
pub const RESERVATION_ALIGNMENT: u32 = 8;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Placement {
    /// Absolute tile byte address (`0x4c000`-based) of every allocation; alias
    /// members share their root's base. Allocations never touched by the
    /// steps get the start of their class's range and occupy nothing.
    pub base: Vec<u32>,
    /// Whether the allocation's root is live at some step (placed for real).
    pub live: Vec<bool>,
    /// Exchange table and patch list addresses per tile.
    pub exchange_table_base: Vec<u32>,
    pub patch_lists_base: Vec<u32>,
    /// First address after the reservations per tile (data starts here).
    pub reserved_end: Vec<u32>,
    /// Largest sum of simultaneously live bytes per tile, reservations included.
    pub peak_bytes_per_tile: Vec<u32>,
    /// Highest used address minus the tile base, per tile.
    pub high_water_per_tile: Vec<u32>,
    /// `(tile, bytes)` of the largest peak.
    pub max_peak: (u32, u32),
    pub element_conflicts: ElementConflicts,
}

/// What a tile holds when it runs out of memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LiveAllocation {
    /// `op/value (reason)` from the allocation's provenance.
    pub name: String,
    pub bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "the model does not fit: {region} of tile {tile} holds {capacity} bytes and needs {bytes_over} more \
         ({tiles_over} tiles over: {}{}); the whole tile has {usable} usable bytes ({reserved} reserved for the \
         exchange table and patch lists); largest live allocations there: {}; {hint}",
        first_tiles_over.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        if *tiles_over as usize > first_tiles_over.len() { ", ..." } else { "" },
        largest_live.iter().map(|live| format!("{} {} B", live.name, live.bytes)).collect::<Vec<_>>().join(", ")
    )]
    DoesNotFit {
        tile: u32,
        /// The memory that overflows: `region 1 (interleaved ...)` for
        /// matrix-unit operands, the whole tile for ordinary data, region 0 for code.
        region: String,
        /// Bytes that memory offers on this tile (after the reservations where they lie in it).
        capacity: u32,
        bytes_over: u32,
        usable: u32,
        reserved: u32,
        /// How many tiles fail, and the first of them.
        tiles_over: u32,
        first_tiles_over: Vec<u32>,
        largest_live: Vec<LiveAllocation>,
        /// What would help, for this region.
        hint: String,
    },
    #[error(
        "tile {tile}: the exchange table and patch lists ({bytes} bytes) do not fit in region 0"
    )]
    ReservationTooLarge { tile: u32, bytes: u32 },
}

/// How many of the largest live allocations an error names.
const LARGEST_LIVE_NAMED: usize = 5;

fn allocation_name(program: &LowProgram, id: u32) -> String {
    let allocation = &program.allocations[id as usize];
    let op = program
        .names
        .get(allocation.provenance.op as usize)
        .map_or("?", String::as_str);
    match allocation
        .provenance
        .value
        .and_then(|value| program.names.get(value as usize))
    {
        Some(value) if value != op => format!("{op}/{value} ({:?})", allocation.provenance.reason),
        _ => format!("{op} ({:?})", allocation.provenance.reason),
    }
}

/// Peak of simultaneously live bytes among `blocks` and the step where it occurs.
fn peak(blocks: &[Block]) -> (u64, u32) {
    let mut events: Vec<(u32, i64)> = Vec::with_capacity(blocks.len() * 2);
    for block in blocks {
        events.push((block.first, block.bytes as i64));
        events.push((block.last.saturating_add(1), -(block.bytes as i64)));
    }
    // Ends before starts at the same step: `last + 1` is already free.
    events.sort_unstable_by_key(|&(step, delta)| (step, delta));
    let (mut live, mut best, mut at) = (0i64, 0i64, 0u32);
    for (step, delta) in events {
        live += delta;
        if live > best {
            best = live;
            at = step;
        }
    }
    (best.max(0) as u64, at)
}

fn reservation_end(reservations: &TileReservations, tile: usize) -> (u32, u32, u32) {
    let table = TILE_BASE_ADDRESS;
    let patches =
        table + reservations.table(tile).div_ceil(RESERVATION_ALIGNMENT) * RESERVATION_ALIGNMENT;
    let end = patches.saturating_add(
        reservations.patches(tile).div_ceil(RESERVATION_ALIGNMENT) * RESERVATION_ALIGNMENT,
    );
    (table, patches, end)
}

fn does_not_fit(
    program: &LowProgram,
    tile: usize,
    blocks: &[Block],
    failed: Block,
    reserved: u32,
) -> PlacementError {
    // The failed block's memory: its class's address range, minus the
    // reservations where they lie in it; only blocks confined to that range
    // (the same class, or code in region 0) count against it.
    let range = failed.class.address_range();
    let reserved_end = TILE_BASE_ADDRESS + reserved;
    let capacity = range.end - range.start.max(reserved_end.min(range.end));
    let competing = |block: &Block| match failed.class {
        MemoryClass::Standard => true,
        class => block.class == class,
    };
    // What is live at the failed block's busiest step.
    let overlapping: Vec<Block> = blocks
        .iter()
        .copied()
        .filter(|block| block.first <= failed.last && failed.first <= block.last)
        .filter(competing)
        .collect();
    let (demand, step) = peak(&overlapping);
    let step = step.clamp(failed.first, failed.last);
    let bytes_over = if demand > capacity as u64 {
        (demand - capacity as u64).min(u32::MAX as u64) as u32
    } else {
        // Enough bytes in total, but not contiguous (or shared with
        // ordinary data placed there).
        failed.bytes
    };
    let mut live: Vec<&Block> = overlapping
        .iter()
        .filter(|block| block.first <= step && step <= block.last)
        .collect();
    live.sort_by(|left, right| {
        right
            .bytes
            .cmp(&left.bytes)
            .then(left.allocation.cmp(&right.allocation))
    });
    let (region, hint) = match failed.class {
        MemoryClass::Interleaved => (
            format!(
                "region 1 (interleaved memory for matrix-unit operands, {:#x}-{:#x})",
                range.start, range.end
            ),
            "matrix-unit operands can live only there: use a smaller batch (workload.batch), or \
             raise planning.reserved_bytes_per_tile so the planner budgets smaller operand blocks"
                .to_string(),
        ),
        MemoryClass::Code => (
            format!("region 0 (code, {:#x}-{:#x})", range.start, range.end),
            "use fewer layers (workload.layers) so fewer exchange phases need rows".to_string(),
        ),
        MemoryClass::Standard => (
            format!("the whole tile ({:#x}-{:#x})", range.start, range.end),
            "use fewer layers (workload.layers: each layer's resident weights stay on their tiles \
             for the whole program) or a smaller batch (workload.batch)"
                .to_string(),
        ),
    };
    PlacementError::DoesNotFit {
        tile: tile as u32,
        region,
        capacity,
        bytes_over,
        usable: USABLE_BYTES,
        reserved,
        tiles_over: 1,
        first_tiles_over: vec![tile as u32],
        largest_live: live
            .iter()
            .take(LARGEST_LIVE_NAMED)
            .map(|block| LiveAllocation {
                name: allocation_name(program, block.allocation),
                bytes: block.bytes,
            })
            .collect(),
        hint,
    }
}

/// How many failing tiles an error lists.
const TILES_OVER_NAMED: usize = 8;

/// A tile's placed blocks `(allocation, base)`, peak bytes and high water.
type TileResult = (Vec<(u32, u32)>, u32, u32);

/// Places every allocation of `program` for the step sequence `steps`.
pub fn place(
    program: &LowProgram,
    steps: &[Step],
    reservations: &TileReservations,
) -> Result<Placement, PlacementError> {
    let liveness = liveness::liveness(program, steps);
    let tiles = blocks_by_tile(program, &liveness.ranges);
    let separation = separation::separation(program, steps);
    let code_end = |tile: usize| {
        let (table, patches, _) = reservation_end(reservations, tile);
        (patches > table).then_some(patches)
    };
    let place_one = |tile: usize,
                     blocks: &[Block],
                     preferred: &[(u32, u32)],
                     linked: &[bool]|
     -> Result<TileResult, PlacementError> {
        let (_, _, reserved_end) = reservation_end(reservations, tile);
        let reserved = reserved_end - TILE_BASE_ADDRESS;
        if reserved_end > MemoryClass::Code.address_range().end {
            return Err(PlacementError::ReservationTooLarge {
                tile: tile as u32,
                bytes: reserved,
            });
        }
        let other = partner(tile as u32) as usize;
        let partner_floor =
            (!linked.is_empty() && other != tile && other < tiles.len()).then(|| PartnerFloor {
                linked,
                reserved_end: reservation_end(reservations, other).2,
                code_end: code_end(other),
            });
        let rules = ElementRules {
            separation: &separation,
            code_end: code_end(tile),
            preferred,
            partner_floor,
        };
        let assigned = place_tile(blocks.to_vec(), reserved_end, Some(rules))
            .map_err(|failure| does_not_fit(program, tile, blocks, failure.block, reserved))?;
        // Figures from the tile's own blocks (`blocks` may be widened).
        let own = &tiles[tile];
        let (demand, _) = peak(own);
        let high = assigned
            .iter()
            .map(|&(id, base)| {
                let block_bytes = own
                    .iter()
                    .find(|block| block.allocation == id)
                    .map_or(0, |block| block.bytes);
                base + block_bytes
            })
            .max()
            .unwrap_or(reserved_end);
        Ok((
            assigned,
            (demand + reserved as u64).min(u32::MAX as u64) as u32,
            high.max(reserved_end) - TILE_BASE_ADDRESS,
        ))
    };
    // The lower tile of each partner pair first, then the higher one with
    // its paired blocks preferred at their partners' addresses.
    let is_follower = |tile: usize| (partner(tile as u32) as usize) < tile;
    // A lower tile's block that a higher tile's block is paired with
    // reserves room for both: the larger size and both live ranges (its
    // own first if that does not fit).
    let mut partners: Vec<Option<(u32, u32, u32)>> = vec![None; program.allocations.len()];
    for (tile, blocks) in tiles.iter().enumerate() {
        if !is_follower(tile) {
            continue;
        }
        for block in blocks {
            for &root in separation.paired(block.allocation) {
                let entry = partners[root as usize].get_or_insert((0, block.first, block.last));
                *entry = (
                    entry.0.max(block.bytes),
                    entry.1.min(block.first),
                    entry.2.max(block.last),
                );
            }
        }
    }
    // The lower tile's roots its partner wants at the same address.
    let linked: Vec<bool> = partners.iter().map(Option::is_some).collect();
    let mut results: Vec<Option<Result<TileResult, PlacementError>>> = (0..tiles.len())
        .into_par_iter()
        .map(|tile| {
            if is_follower(tile) {
                return None;
            }
            let own = &tiles[tile];
            let widened: Vec<Block> = own
                .iter()
                .map(|&block| match partners[block.allocation as usize] {
                    Some((bytes, first, last)) => Block {
                        bytes: block.bytes.max(bytes),
                        first: block.first.min(first),
                        last: block.last.max(last),
                        ..block
                    },
                    None => block,
                })
                .collect();
            Some(
                place_one(tile, &widened, &[], &linked)
                    .or_else(|_| place_one(tile, own, &[], &linked)),
            )
        })
        .collect();
    let followers: Vec<(usize, Result<TileResult, PlacementError>)> = (0..tiles.len())
        .into_par_iter()
        .filter(|&tile| is_follower(tile))
        .map(|tile| {
            let mut leader: Vec<(u32, u32)> = match &results[partner(tile as u32) as usize] {
                Some(Ok((assigned, _, _))) => assigned.clone(),
                _ => Vec::new(),
            };
            leader.sort_unstable();
            let mut preferred: Vec<(u32, u32)> = tiles[tile]
                .iter()
                .filter_map(|block| {
                    separation
                        .paired(block.allocation)
                        .iter()
                        .find_map(|&root| {
                            leader
                                .binary_search_by_key(&root, |&(id, _)| id)
                                .ok()
                                .map(|index| (block.allocation, leader[index].1))
                        })
                })
                .collect();
            preferred.sort_unstable();
            let result = place_one(tile, &tiles[tile], &preferred, &[]);
            (tile, result)
        })
        .collect();
    for (tile, result) in followers {
        results[tile] = Some(result);
    }
    let results: Vec<Result<TileResult, PlacementError>> = results.into_iter().flatten().collect();
    let mut base: Vec<u32> = program
        .allocations
        .iter()
        .map(|allocation| allocation.class.address_range().start)
        .collect();
    // Every tile that does not fit counts; the first one's error speaks.
    let failed: Vec<u32> = results
        .iter()
        .enumerate()
        .filter(|(_, result)| matches!(result, Err(PlacementError::DoesNotFit { .. })))
        .map(|(tile, _)| tile as u32)
        .collect();
    let mut peak_bytes_per_tile = Vec::with_capacity(tiles.len());
    let mut high_water_per_tile = Vec::with_capacity(tiles.len());
    for result in results {
        let (assigned, peak, high) = result.map_err(|mut error| {
            if let PlacementError::DoesNotFit {
                tiles_over,
                first_tiles_over,
                ..
            } = &mut error
            {
                *tiles_over = failed.len() as u32;
                *first_tiles_over = failed.iter().copied().take(TILES_OVER_NAMED).collect();
            }
            error
        })?;
        for (id, address) in assigned {
            base[id as usize] = address;
        }
        peak_bytes_per_tile.push(peak);
        high_water_per_tile.push(high);
    }
    for (id, allocation) in program.allocations.iter().enumerate() {
        let root = allocation.alias_group as usize;
        if root != id && root < base.len() {
            base[id] = base[root];
        }
    }
    let live = program
        .allocations
        .iter()
        .map(|allocation| {
            liveness
                .ranges
                .get(allocation.alias_group as usize)
                .is_some_and(Option::is_some)
        })
        .collect();
    let max_peak =
        peak_bytes_per_tile
            .iter()
            .enumerate()
            .fold((0u32, 0u32), |best, (tile, &bytes)| {
                if bytes > best.1 {
                    (tile as u32, bytes)
                } else {
                    best
                }
            });
    let tables: Vec<(u32, u32, u32)> = (0..program.tiles as usize)
        .map(|tile| reservation_end(reservations, tile))
        .collect();
    let code: Vec<std::ops::Range<u32>> = tables
        .iter()
        .map(|&(table, patches, _)| table..patches)
        .collect();
    let element_conflicts = conflicts::count_conflicts(program, steps, &base, &code);
    Ok(Placement {
        base,
        live,
        exchange_table_base: tables.iter().map(|&(table, _, _)| table).collect(),
        patch_lists_base: tables.iter().map(|&(_, patches, _)| patches).collect(),
        reserved_end: tables.iter().map(|&(_, _, end)| end).collect(),
        peak_bytes_per_tile,
        high_water_per_tile,
        max_peak,
        element_conflicts,
    })
}
