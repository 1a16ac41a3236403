//! The memory view of a build for reports: every tile's peak SRAM and
//! exchange-table bytes, and every tile's live bytes at every program step
//! (the one step index `phases` shows: exchange phases and compute steps,
//! the Repeat body once) with what it holds at its peak, by category and
//! by value. Derived from the placement, the row
//! table, liveness and the allocations' provenance; it places and
//! schedules nothing.

use serde::Serialize;

use super::{BackendError, Session};
use crate::estimate::profile::program_steps;
use crate::expand::program::{LowProgram, Reason, Step};
use crate::layout::plan::Layouts;
use crate::model::graph::ValueKind;
use crate::place::Placement;
use crate::place::allocator::{Block, USABLE_BYTES, blocks_by_tile};
use crate::place::liveness::liveness;
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
    /// Every tile's memory over the program and at its peak.
    pub tiles: TileMemories,
}

/// What holds a tile's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryCategory {
    /// The tile's exchange-table rows (reserved for the whole program).
    ExchangeTable,
    /// The Repeat and sharing patch lists (reserved for the whole program).
    PatchLists,
    /// Blocks of weights (every layer's instance of an iterated one).
    Weights,
    /// Blocks of activations and of the input.
    Activations,
    /// Partial sums of split reductions, their own and received.
    PartialSums,
    /// Attention scores and online-softmax state.
    AttentionScratch,
    /// Buffers of format conversions.
    Rearranges,
    /// Zeroed padding of operand blocks.
    Padding,
    /// Working storage of an operator's computation.
    Compute,
}

impl MemoryCategory {
    pub const ALL: [MemoryCategory; 9] = [
        MemoryCategory::ExchangeTable,
        MemoryCategory::PatchLists,
        MemoryCategory::Weights,
        MemoryCategory::Activations,
        MemoryCategory::PartialSums,
        MemoryCategory::AttentionScratch,
        MemoryCategory::Rearranges,
        MemoryCategory::Padding,
        MemoryCategory::Compute,
    ];

    /// The category's words in the report.
    pub fn label(self) -> &'static str {
        match self {
            MemoryCategory::ExchangeTable => "exchange table",
            MemoryCategory::PatchLists => "patch lists",
            MemoryCategory::Weights => "weights",
            MemoryCategory::Activations => "activations",
            MemoryCategory::PartialSums => "partial sums",
            MemoryCategory::AttentionScratch => "attention scratch",
            MemoryCategory::Rearranges => "rearrange buffers",
            MemoryCategory::Padding => "padding",
            MemoryCategory::Compute => "compute scratch",
        }
    }

    /// The category of a block held for `reason` for a value of `kind`.
    fn of(reason: Reason, kind: Option<ValueKind>) -> MemoryCategory {
        match reason {
            Reason::ValueBlock => match kind {
                Some(ValueKind::Weight { .. }) => MemoryCategory::Weights,
                _ => MemoryCategory::Activations,
            },
            Reason::PartialSums | Reason::ReceivedPartials | Reason::PartialExchange => {
                MemoryCategory::PartialSums
            }
            Reason::AttentionScratch => MemoryCategory::AttentionScratch,
            Reason::Rearrange => MemoryCategory::Rearranges,
            Reason::Padding => MemoryCategory::Padding,
            Reason::Compute => MemoryCategory::Compute,
        }
    }
}

/// Every tile's live bytes over the program and its peak's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TileMemories {
    /// Labels of what tiles hold (`value` or `op (reason)`), indexed by
    /// [`HeldValue::label`].
    pub labels: Vec<String>,
    /// One per tile, in tile order.
    pub tiles: Vec<TileMemory>,
}

/// One tile's memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TileMemory {
    /// Live bytes at each program step (the one step index), reservations included.
    pub live_bytes_per_step: Vec<u64>,
    /// The first step at which the live bytes are largest.
    pub peak_step: u32,
    /// The live bytes there (the tile's peak).
    pub peak_bytes: u64,
    /// Bytes at the peak step by category, in [`MemoryCategory::ALL`]
    /// order (they add up to the peak).
    pub peak_by_category: Vec<u64>,
    /// What is live at the peak step, by value, largest first.
    pub peak_by_value: Vec<HeldValue>,
}

/// Bytes of one value (or one op's working storage) on a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HeldValue {
    /// Index into [`TileMemories::labels`].
    pub label: u32,
    pub category: MemoryCategory,
    pub bytes: u64,
}

/// One tile's live bytes at every program step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FullestTile {
    pub tile: u32,
    /// Exchange table and patch lists, held for the whole program.
    pub reserved_bytes: u64,
    /// Live bytes at each program step, reservations included; the
    /// largest equals the tile's peak.
    pub live_bytes_per_step: Vec<u64>,
    /// Program-step ranges `[first, last]` of the top-level Repeats (one
    /// iteration of the body is shown).
    pub repeat_steps: Vec<(u32, u32)>,
}

impl Session {
    /// Per-tile peaks and exchange-table bytes, every tile's live bytes
    /// over the program steps with what it holds at its peak, and the
    /// fullest tile's curve.
    pub fn memory_view(&self) -> Result<MemoryView, BackendError> {
        let placement = self.placement()?;
        let table = self.row_table()?;
        let program = self.low_program()?;
        let groups = self.phase_groups()?;
        let tile = placement.max_peak.0;
        let layouts = self.layouts()?;
        let tiles = tile_memories(&program, &groups.steps, &placement, &layouts);
        Ok(MemoryView {
            peak_bytes_per_tile: placement.peak_bytes_per_tile.clone(),
            exchange_table_bytes_per_tile: table.bytes_per_tile.clone(),
            usable_bytes_per_tile: USABLE_BYTES,
            fullest_tile: FullestTile {
                tile,
                reserved_bytes: reserved_bytes(&placement, tile),
                live_bytes_per_step: tiles
                    .tiles
                    .get(tile as usize)
                    .map(|shown| shown.live_bytes_per_step.clone())
                    .unwrap_or_default(),
                repeat_steps: repeat_ranges(&groups.steps),
            },
            tiles,
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

/// Every tile's live bytes at every program step of `steps`, and what
/// it holds at its peak: one pass over the live blocks per tile.
fn tile_memories(
    program: &LowProgram,
    steps: &[Step],
    placement: &Placement,
    layouts: &Layouts,
) -> TileMemories {
    let live = liveness(program, steps);
    let blocks = blocks_by_tile(program, &live.ranges);
    let count = live.steps as usize;
    // Liveness numbers checkpoints too; the report shows the one step index
    // (exchange phases and compute steps only). A block live at a
    // checkpoint is live at the step before it, so no peak is lost.
    let flat_of_step: Vec<usize> = program_steps(steps)
        .into_iter()
        .map(|(flat, _)| flat)
        .collect();
    // A weight's replicas and operand copies share its name: a name any
    // weight carries is a weight's.
    let mut kinds: std::collections::HashMap<&str, ValueKind> = std::collections::HashMap::new();
    for value in &layouts.values {
        let kind = kinds.entry(value.name.as_str()).or_insert(value.kind);
        if matches!(value.kind, ValueKind::Weight { .. }) {
            *kind = value.kind;
        }
    }
    let mut labels: Vec<String> = Vec::new();
    let mut label_of: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let mut held_label = |block: &Block| -> (u32, MemoryCategory) {
        let provenance = program.allocations[block.allocation as usize].provenance;
        let value = provenance
            .value
            .and_then(|index| program.names.get(index as usize));
        let category = MemoryCategory::of(
            provenance.reason,
            value.and_then(|name| kinds.get(name.as_str()).copied()),
        );
        let text = match (value, provenance.reason) {
            (Some(name), Reason::ValueBlock) => name.clone(),
            (Some(name), _) => format!("{name} ({})", category.label()),
            (None, _) => {
                let op = program
                    .names
                    .get(provenance.op as usize)
                    .map_or("?", String::as_str);
                format!("{op} ({})", category.label())
            }
        };
        let next = labels.len() as u32;
        let label = *label_of.entry(text.clone()).or_insert_with(|| {
            labels.push(text);
            next
        });
        (label, category)
    };
    let mut tiles = Vec::with_capacity(program.tiles as usize);
    for tile in 0..program.tiles {
        let tile_blocks = blocks.get(tile as usize).map_or(&[][..], Vec::as_slice);
        let table = exchange_table_bytes(placement, tile);
        let patches = reserved_bytes(placement, tile).saturating_sub(table);
        let mut changes = vec![0i64; count + 1];
        for block in tile_blocks {
            let first = (block.first as usize).min(count);
            let after = (block.last as usize + 1).min(count);
            changes[first] += i64::from(block.bytes);
            changes[after] -= i64::from(block.bytes);
        }
        let mut running = (table + patches) as i64;
        let flat_live: Vec<u64> = changes[..count]
            .iter()
            .map(|change| {
                running += change;
                running.max(0) as u64
            })
            .collect();
        let live_bytes_per_step: Vec<u64> = flat_of_step
            .iter()
            .map(|&flat| flat_live.get(flat).copied().unwrap_or(0))
            .collect();
        let (peak_step, peak_bytes) =
            live_bytes_per_step
                .iter()
                .enumerate()
                .fold((0usize, 0u64), |best, (step, &bytes)| {
                    if bytes > best.1 { (step, bytes) } else { best }
                });
        let mut peak_by_category = vec![0u64; MemoryCategory::ALL.len()];
        peak_by_category[MemoryCategory::ExchangeTable as usize] = table;
        peak_by_category[MemoryCategory::PatchLists as usize] = patches;
        let mut by_label: std::collections::BTreeMap<(u32, MemoryCategory), u64> =
            std::collections::BTreeMap::new();
        let peak_flat = flat_of_step.get(peak_step).copied().unwrap_or(0);
        for block in tile_blocks {
            if (block.first as usize) <= peak_flat && peak_flat <= block.last as usize {
                let (label, category) = held_label(block);
                peak_by_category[category as usize] += u64::from(block.bytes);
                *by_label.entry((label, category)).or_default() += u64::from(block.bytes);
            }
        }
        let mut peak_by_value: Vec<HeldValue> = by_label
            .into_iter()
            .map(|((label, category), bytes)| HeldValue {
                label,
                category,
                bytes,
            })
            .collect();
        peak_by_value.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.label.cmp(&b.label)));
        tiles.push(TileMemory {
            live_bytes_per_step,
            peak_step: peak_step as u32,
            peak_bytes,
            peak_by_category,
            peak_by_value,
        });
    }
    TileMemories { labels, tiles }
}

/// Bytes of `tile`'s exchange table as placed (from its base to the patch
/// lists' base, which follow it).
fn exchange_table_bytes(placement: &Placement, tile: u32) -> u64 {
    let index = tile as usize;
    match (
        placement.exchange_table_base.get(index),
        placement.patch_lists_base.get(index),
    ) {
        (Some(&table), Some(&patches)) => u64::from(patches.saturating_sub(table)),
        _ => 0,
    }
}

/// Program-step ranges `[first, last]` of the top-level Repeats of `steps`.
fn repeat_ranges(steps: &[Step]) -> Vec<(u32, u32)> {
    let mut ranges = Vec::new();
    let mut next = 0u32;
    for step in steps {
        let count = program_steps(std::slice::from_ref(step)).len() as u32;
        if matches!(step, Step::Repeat { .. }) && count > 0 {
            ranges.push((next, next + count - 1));
        }
        next += count;
    }
    ranges
}
