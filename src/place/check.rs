//! An independent check of a placement: on every tile, no two allocations
//! live at the same step overlap (nor overlap the reservations); every base
//! is aligned; every allocation lies in its class's region and below the
//! loadable limit; alias members share their root's base; iterated blocks
//! are strided by an aligned instance size. It recomputes overlaps by its
//! own sweep over addresses and does not reuse the allocator.
//!
//! Owns verification only; it must not repair anything.

use serde::Serialize;

use super::liveness::liveness;
use super::{Placement, RESERVATION_ALIGNMENT, TileReservations};
use crate::expand::program::{LowProgram, Step};
use crate::target::memory::{MemoryClass, TILE_BASE_ADDRESS};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum PlacementViolation {
    #[error("tile {tile}: allocations {first} and {second} are live together and overlap")]
    Overlap { tile: u32, first: u32, second: u32 },
    #[error("tile {tile}: allocation {allocation} overlaps the exchange table or patch lists")]
    Reservation { tile: u32, allocation: u32 },
    #[error("allocation {allocation} at {base:#x} is not aligned to {alignment}")]
    Alignment {
        allocation: u32,
        base: u32,
        alignment: u32,
    },
    #[error("allocation {allocation} at {base:#x}..{end:#x} is outside its class's range")]
    Region {
        allocation: u32,
        base: u32,
        end: u64,
    },
    #[error("alias {allocation} is not at its root's base")]
    Alias { allocation: u32 },
    #[error(
        "tile {tile}: the exchange table ({table_bytes} bytes at {table:#x}) and patch lists \
         ({patch_bytes} bytes at {patches:#x}) are not laid out from the tile base, in order, \
         before data starting at {data:#x} inside the code region"
    )]
    ReservationLayout {
        tile: u32,
        table: u32,
        table_bytes: u32,
        patches: u32,
        patch_bytes: u32,
        data: u32,
    },
    #[error("the placement's largest peak is not its tiles' largest peak")]
    LargestPeak,
    #[error("iterated allocation {allocation}: instance size {bytes} breaks alignment {alignment}")]
    Stride {
        allocation: u32,
        bytes: u32,
        alignment: u32,
    },
}

/// Every violation of the reservations' layout in `placement` for
/// `reservations` (empty when it is sound): on each tile the exchange
/// table starts at the tile base, the patch lists follow it, aligned,
/// without overlapping it, data starts after both, and all of it lies in
/// the code region; the largest peak is the tiles' largest. (The package
/// reads these addresses; `check_placement` checks the data against
/// `reserved_end`.)
pub fn check_reservations(
    placement: &Placement,
    reservations: &TileReservations,
) -> Vec<PlacementViolation> {
    let mut violations = Vec::new();
    let code_end = u64::from(MemoryClass::Code.address_range().end);
    for tile in 0..placement.reserved_end.len() {
        let at = |table: &[u32]| table.get(tile).copied().unwrap_or(u32::MAX);
        let table = at(&placement.exchange_table_base);
        let patches = at(&placement.patch_lists_base);
        let data = at(&placement.reserved_end);
        let table_bytes = reservations.exchange_table.get(tile).copied().unwrap_or(0);
        let patch_bytes = reservations.patch_lists.get(tile).copied().unwrap_or(0);
        let sound = table == TILE_BASE_ADDRESS
            && u64::from(patches) >= u64::from(table) + u64::from(table_bytes)
            && patches.is_multiple_of(RESERVATION_ALIGNMENT)
            && u64::from(data) >= u64::from(patches) + u64::from(patch_bytes)
            && u64::from(data) <= code_end;
        if !sound {
            violations.push(PlacementViolation::ReservationLayout {
                tile: tile as u32,
                table,
                table_bytes,
                patches,
                patch_bytes,
                data,
            });
        }
    }
    let largest = placement
        .peak_bytes_per_tile
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    let (tile, bytes) = placement.max_peak;
    if bytes != largest || placement.peak_bytes_per_tile.get(tile as usize) != Some(&bytes) {
        violations.push(PlacementViolation::LargestPeak);
    }
    violations
}

/// `(start, end, first step, last step, allocation)` of one live root.
type LiveBlock = (u64, u64, u32, u32, u32);

/// Every violation of `placement` for `steps` (empty when it is sound).
pub fn check_placement(
    program: &LowProgram,
    steps: &[Step],
    placement: &Placement,
) -> Vec<PlacementViolation> {
    let mut violations = Vec::new();
    let live = liveness(program, steps);
    let count = program.allocations.len();
    // Per tile: (start, end, first, last, id) of live roots.
    let mut tiles: Vec<Vec<LiveBlock>> = vec![Vec::new(); program.tiles as usize];
    for (id, allocation) in program.allocations.iter().enumerate() {
        let base = placement.base[id];
        let root = allocation.alias_group as usize;
        if root != id && root < count && placement.base[root] != base {
            violations.push(PlacementViolation::Alias {
                allocation: id as u32,
            });
        }
        let Some((first, last)) = live.ranges.get(root).copied().flatten() else {
            continue;
        };
        let end = base as u64 + allocation.bytes as u64 * allocation.iterations.max(1) as u64;
        if !base.is_multiple_of(allocation.alignment.max(1)) {
            violations.push(PlacementViolation::Alignment {
                allocation: id as u32,
                base,
                alignment: allocation.alignment,
            });
        }
        if allocation.iterations > 1
            && !allocation.bytes.is_multiple_of(allocation.alignment.max(1))
        {
            violations.push(PlacementViolation::Stride {
                allocation: id as u32,
                bytes: allocation.bytes,
                alignment: allocation.alignment,
            });
        }
        let range = allocation.class.address_range();
        if base < range.start || end > range.end as u64 {
            violations.push(PlacementViolation::Region {
                allocation: id as u32,
                base,
                end,
            });
        }
        if let Some(entries) = tiles.get_mut(allocation.tile as usize) {
            entries.push((base as u64, end, first, last, id as u32));
        }
    }
    for (tile, entries) in tiles.iter_mut().enumerate() {
        let reserved = placement.reserved_end.get(tile).copied().unwrap_or(0) as u64;
        entries.sort_unstable();
        for (index, &(start, end, first, last, id)) in entries.iter().enumerate() {
            if start < reserved {
                violations.push(PlacementViolation::Reservation {
                    tile: tile as u32,
                    allocation: id,
                });
            }
            for &(other_start, _, other_first, other_last, other) in &entries[index + 1..] {
                if other_start >= end {
                    break;
                }
                if first <= other_last && other_first <= last {
                    violations.push(PlacementViolation::Overlap {
                        tile: tile as u32,
                        first: id,
                        second: other,
                    });
                }
            }
        }
    }
    violations
}
