//! The layout planner's model of per-tile memory, and its "does not fit".
//!
//! An operator's working set (its operand blocks, partial sums and scratch)
//! must fit twice over. Its matrix-unit operands live in **region 1**
//! (interleaved memory, `0x80000..0xe7bb0`, 424,880 bytes), so the working
//! set may not exceed that. And the **whole tile** holds it together with
//! the resident weights (kept in ordinary memory for the whole program) in
//! the 638,976 bytes of SRAM less `planning.reserved_bytes_per_tile`, which
//! keeps room for the exchange table and patch lists in region 0 (the only
//! code-fetchable memory, validated to hold the reservation).
//!
//! This module owns the budgets the planner costs against and the error
//! that names the memory overflowed, its capacity, the overflow, the tiles
//! over, what fills it and a change that would make room. It never decides
//! a partition (that is `cost`) or a format (that is `planner`).

use crate::model::graph::{Graph, ValueKind};
use crate::target::mapping::C600_TILES;
use crate::target::memory::{LOADABLE_LIMIT, REGION_ONE_START, SRAM_BYTES_PER_TILE};
use crate::text::thousands;

/// Bytes of region 1 that data may use (interleaved, up to the loadable limit).
pub const REGION_ONE_BYTES: u64 = (LOADABLE_LIMIT - REGION_ONE_START) as u64;

/// Per-tile memory as the planner sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBudget {
    pub tiles: u32,
    /// `planning.reserved_bytes_per_tile`.
    pub reserved: u64,
    /// SRAM less the reservation.
    pub for_data: u64,
    /// Resident weights per tile (their total spread evenly).
    pub resident: u64,
    /// The part of `resident` one iteration of the repeated layer adds.
    pub resident_per_layer: u64,
    /// Iterations of the repeated layer (1 without a repeat).
    pub layers: u32,
}

impl MemoryBudget {
    pub fn of(graph: &Graph, tiles: u32, reserved: u32) -> MemoryBudget {
        let layers = graph.repeat.as_ref().map_or(1, |repeat| repeat.iterations);
        let (mut once, mut per_layer) = (0u64, 0u64);
        for value in &graph.values {
            if let ValueKind::Weight { iterated } = value.kind {
                let bytes = value.shape.elements() * value.precision.bytes() as u64;
                if iterated {
                    per_layer += bytes;
                } else {
                    once += bytes;
                }
            }
        }
        let tiles_wide = u64::from(tiles.max(1));
        MemoryBudget {
            tiles,
            reserved: u64::from(reserved),
            for_data: u64::from(SRAM_BYTES_PER_TILE).saturating_sub(u64::from(reserved)),
            resident: (once + per_layer * u64::from(layers)).div_ceil(tiles_wide),
            resident_per_layer: per_layer.div_ceil(tiles_wide),
            layers,
        }
    }

    /// What the whole tile leaves an operator once the resident weights are in.
    fn whole_tile_budget(&self) -> u64 {
        self.for_data.saturating_sub(self.resident)
    }

    /// The budget an operator's working set must meet.
    pub fn hard_budget(&self) -> u32 {
        u32::try_from(self.whole_tile_budget().min(REGION_ONE_BYTES)).unwrap_or(u32::MAX)
    }

    /// The budget the planner tries first: half of what the resident
    /// weights leave, the rest holding values live across the operator
    /// (the residual stream, carried values, norm parameters) and absorbing
    /// fragmentation between the two regions (model).
    pub fn soft_budget(&self) -> u32 {
        u32::try_from(self.whole_tile_budget() / 2).unwrap_or(u32::MAX)
    }

    /// The error for an operator whose smallest working set is `parts`
    /// (summing to its need) on `tiles_used` tiles.
    pub fn shortfall(
        &self,
        op: &str,
        parts: &[(&'static str, u64)],
        tiles_used: u32,
    ) -> CapacityShortfall {
        let needed: u64 = parts.iter().map(|(_, bytes)| bytes).sum();
        let mut contents: Vec<(String, u64)> = parts
            .iter()
            .filter(|(_, bytes)| *bytes > 0)
            .map(|(name, bytes)| (format!("{op}: {name}"), *bytes))
            .collect();
        let (memory, capacity, demand) = if needed > REGION_ONE_BYTES {
            (PlannedMemory::RegionOne, REGION_ONE_BYTES, needed)
        } else {
            contents.push((
                format!(
                    "resident weights ({})",
                    crate::text::counted(self.layers, "layer", "layers")
                ),
                self.resident,
            ));
            (
                PlannedMemory::WholeTile,
                self.for_data,
                needed + self.resident,
            )
        };
        contents.sort_by(|left, right| right.1.cmp(&left.1).then(left.0.cmp(&right.0)));
        let overflow = demand.saturating_sub(capacity);
        CapacityShortfall {
            op: op.to_string(),
            memory,
            capacity,
            demand,
            overflow,
            tiles_over: tiles_used,
            contents,
            hints: self.hints(memory, overflow),
            other_ops_over: Vec::new(),
        }
    }

    fn hints(&self, memory: PlannedMemory, overflow: u64) -> Vec<String> {
        let mut hints = Vec::new();
        // Fewer layers free resident weights, which only the whole tile holds.
        if memory == PlannedMemory::WholeTile && self.resident_per_layer > 0 && self.layers > 1 {
            let drop = overflow.div_ceil(self.resident_per_layer);
            if drop < u64::from(self.layers) {
                hints.push(format!(
                    "workload.layers = {} (now {}; each layer's resident weights take {} \
                     bytes per tile)",
                    u64::from(self.layers) - drop,
                    self.layers,
                    thousands(self.resident_per_layer)
                ));
            }
        }
        if self.tiles < C600_TILES {
            hints.push(format!(
                "more tiles (machine.tiles, now {}; the c600 has {C600_TILES})",
                self.tiles
            ));
        }
        hints.push(String::from(
            "a smaller batch (workload.batch): every activation block shrinks with it",
        ));
        hints
    }
}

/// Which memory an operator's working set overflows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannedMemory {
    /// Region 1, where matrix-unit operands must live.
    RegionOne,
    /// The whole tile less the reservation, shared with the resident weights.
    WholeTile,
}

impl std::fmt::Display for PlannedMemory {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlannedMemory::RegionOne => formatter.write_str(
                "region 1 (interleaved memory for matrix-unit operands, 0x80000-0xe7bb0)",
            ),
            PlannedMemory::WholeTile => formatter.write_str(
                "the whole tile (638,976 bytes of SRAM less planning.reserved_bytes_per_tile)",
            ),
        }
    }
}

/// An operator whose smallest working set does not fit, in the planner's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityShortfall {
    pub op: String,
    pub memory: PlannedMemory,
    /// Bytes that memory offers per tile.
    pub capacity: u64,
    /// Bytes the operator needs there per tile (with the resident weights
    /// for the whole tile).
    pub demand: u64,
    pub overflow: u64,
    /// Tiles over: every tile of the smallest partition (the planner's
    /// budget is the same on every tile).
    pub tiles_over: u32,
    /// What fills that memory, largest first: `(what, bytes per tile)`.
    pub contents: Vec<(String, u64)>,
    /// Changes that would make room for this operator, each on its own.
    pub hints: Vec<String>,
    /// Other operators over, with their overflow, largest first.
    pub other_ops_over: Vec<(String, u64)>,
}

impl std::fmt::Display for CapacityShortfall {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "the model does not fit: operator `{}` needs {} bytes per tile in {}, which holds {}; \
             {} bytes over on each of the {} tiles of its smallest partition",
            self.op,
            thousands(self.demand),
            self.memory,
            thousands(self.capacity),
            thousands(self.overflow),
            self.tiles_over
        )?;
        let contents: Vec<String> = self
            .contents
            .iter()
            .map(|(what, bytes)| format!("{what} {} B", thousands(*bytes)))
            .collect();
        write!(formatter, "; what fills it: {}", contents.join(", "))?;
        if !self.other_ops_over.is_empty() {
            let others: Vec<String> = self
                .other_ops_over
                .iter()
                .map(|(op, over)| format!("`{op}` by {} B", thousands(*over)))
                .collect();
            write!(formatter, "; also over: {}", others.join(", "))?;
        }
        Ok(())
    }
}

impl CapacityShortfall {
    /// The hints as one line of advice.
    pub fn advice(&self) -> String {
        format!("any one of: {}", self.hints.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> MemoryBudget {
        MemoryBudget {
            tiles: 1472,
            reserved: 65_536,
            for_data: 573_440,
            resident: 300_000,
            resident_per_layer: 10_000,
            layers: 27,
        }
    }

    #[test]
    fn a_working_set_larger_than_region_one_is_a_region_one_shortfall() {
        let shortfall = budget().shortfall("op", &[("a", 400_000), ("b", 30_000)], 12);
        assert_eq!(shortfall.memory, PlannedMemory::RegionOne);
        assert_eq!(shortfall.capacity, 424_880);
        assert_eq!(shortfall.overflow, 430_000 - 424_880);
        assert_eq!(shortfall.tiles_over, 12);
        // Fewer layers or a smaller reservation do not relieve region 1.
        assert!(
            shortfall
                .hints
                .iter()
                .all(|hint| !hint.contains("layers") && !hint.contains("reserved_bytes_per_tile"))
        );
        assert!(
            shortfall
                .hints
                .iter()
                .any(|hint| hint.contains("workload.batch"))
        );
        assert_eq!(budget().hard_budget(), 273_440);
    }

    #[test]
    fn a_whole_tile_shortfall_counts_the_resident_weights_and_proposes_fixes() {
        // 300,000 resident + 283,440 working = 10,000 over 573,440.
        let shortfall = budget().shortfall("op", &[("a", 283_440), ("b", 0)], 7);
        assert_eq!(shortfall.memory, PlannedMemory::WholeTile);
        assert_eq!(shortfall.demand, 583_440);
        assert_eq!(shortfall.overflow, 10_000);
        // Zero-byte parts are not listed; the largest comes first.
        assert_eq!(shortfall.contents.len(), 2);
        assert_eq!(shortfall.contents[0].1, 300_000);
        assert!(shortfall.hints[0].starts_with("workload.layers = 26 (now 27"));
        // The reservation is the planner's budget, not memory placement
        // frees: lowering it is never proposed.
        assert!(
            shortfall
                .hints
                .iter()
                .all(|hint| !hint.contains("reserved_bytes_per_tile"))
        );
        // All tiles in use: no "more tiles".
        assert!(
            shortfall
                .hints
                .iter()
                .all(|hint| !hint.contains("machine.tiles"))
        );
    }
}
