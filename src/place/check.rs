//! An independent check of a placement: on every tile, no two allocations
//! live at the same step overlap (nor overlap the reservations); every base
//! is aligned; every allocation lies in its class's region and below the
//! loadable limit; alias members share their root's base; iterated blocks
//! are strided by an aligned instance size. It recomputes overlaps by its
//! own sweep over addresses and does not reuse the allocator.
//!
//! Owns verification only; it must not repair anything.

use serde::Serialize;

use super::Placement;
use super::liveness::liveness;
use crate::expand::program::{LowProgram, Step};

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
    #[error("iterated allocation {allocation}: instance size {bytes} breaks alignment {alignment}")]
    Stride {
        allocation: u32,
        bytes: u32,
        alignment: u32,
    },
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
