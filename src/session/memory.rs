//! The memory view of a build for reports: every tile's peak SRAM and
//! exchange-table bytes, and the fullest tile's live bytes at every step of
//! the placed step sequence (the phase groups' steps, Repeat bodies inlined
//! once, as `crate::place::liveness` numbers them). Derived from the
//! placement, the row table and liveness; it places and schedules nothing.

use serde::Serialize;

use super::{BackendError, Session};
use crate::expand::program::{LowProgram, Step};
use crate::place::Placement;
use crate::place::allocator::{USABLE_BYTES, blocks_by_tile};
use crate::place::liveness::{flat_count, liveness};
use crate::target::memory::TILE_BASE_ADDRESS;

/// Per-tile memory figures and the fullest tile's memory over time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryView {
    /// Largest sum of simultaneously live bytes per tile, reservations included.
    pub peak_bytes_per_tile: Vec<u32>,
    /// Bytes of the distinct exchange-table rows stored on each tile.
    pub exchange_table_bytes_per_tile: Vec<u64>,
    /// Bytes a tile can use for code and data.
    pub usable_bytes_per_tile: u32,
    /// The tile with the largest peak.
    pub fullest_tile: FullestTile,
}

/// One tile's live bytes at every flattened step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FullestTile {
    pub tile: u32,
    /// Exchange table and patch lists, held for the whole program.
    pub reserved_bytes: u64,
    /// Live bytes at each flattened step, reservations included; the
    /// largest equals the tile's peak.
    pub live_bytes_per_step: Vec<u64>,
    /// Flattened step ranges `[first, last]` of the top-level Repeats (one
    /// iteration of the body is shown).
    pub repeat_steps: Vec<(u32, u32)>,
}

impl Session {
    /// Per-tile peaks and exchange-table bytes, and the fullest tile's live
    /// bytes over the placed steps.
    pub fn memory_view(&self) -> Result<MemoryView, BackendError> {
        let placement = self.placement()?;
        let table = self.row_table()?;
        let program = self.low_program()?;
        let groups = self.phase_groups()?;
        let tile = placement.max_peak.0;
        Ok(MemoryView {
            peak_bytes_per_tile: placement.peak_bytes_per_tile.clone(),
            exchange_table_bytes_per_tile: table.bytes_per_tile.clone(),
            usable_bytes_per_tile: USABLE_BYTES,
            fullest_tile: FullestTile {
                tile,
                reserved_bytes: reserved_bytes(&placement, tile),
                live_bytes_per_step: live_bytes_per_step(&program, &groups.steps, &placement, tile),
                repeat_steps: repeat_ranges(&groups.steps),
            },
        })
    }
}

/// Bytes `tile` reserves before any data (exchange table, patch lists).
fn reserved_bytes(placement: &Placement, tile: u32) -> u64 {
    placement
        .reserved_end
        .get(tile as usize)
        .map_or(0, |&end| u64::from(end.saturating_sub(TILE_BASE_ADDRESS)))
}

/// Live bytes of `tile` at every flattened step of `steps`, reservations included.
fn live_bytes_per_step(
    program: &LowProgram,
    steps: &[Step],
    placement: &Placement,
    tile: u32,
) -> Vec<u64> {
    let live = liveness(program, steps);
    let blocks = blocks_by_tile(program, &live.ranges);
    let count = live.steps as usize;
    // Bytes entering at a step and leaving after it, summed in one pass.
    let mut changes = vec![0i64; count + 1];
    for block in blocks.get(tile as usize).into_iter().flatten() {
        let first = (block.first as usize).min(count);
        let after = (block.last as usize + 1).min(count);
        changes[first] += i64::from(block.bytes);
        changes[after] -= i64::from(block.bytes);
    }
    let reserved = reserved_bytes(placement, tile) as i64;
    let mut running = 0i64;
    changes[..count]
        .iter()
        .map(|change| {
            running += change;
            (running + reserved).max(0) as u64
        })
        .collect()
}

/// Flattened ranges of the top-level Repeats of `steps`.
fn repeat_ranges(steps: &[Step]) -> Vec<(u32, u32)> {
    let mut ranges = Vec::new();
    let mut next = 0u32;
    for step in steps {
        let count = flat_count(std::slice::from_ref(step));
        if matches!(step, Step::Repeat { .. }) && count > 0 {
            ranges.push((next, next + count - 1));
        }
        next += count;
    }
    ranges
}
