//! `superstep verify`: checks a package as read from disk, independently of
//! the build that wrote it.
//!
//! Every per-tile table has one entry per tile; every placed allocation lies
//! inside its tile's memory; every location of every step lies inside the
//! allocation it names; every exchange row decodes, its sends start inside
//! an allocation of its tile and its sends and receive pointers stay inside
//! the tile's memory; every transfer's source and destinations lie, words
//! and all, inside one instance of an allocation of their tile (as the
//! package simulator binds them); every Repeat patch and row-sharing patch names a tile,
//! phase and word that exist; the tile count is one a C600 has (checked
//! first: every table is sized by it). The first failures are reported (by phase,
//! tile and word), with the counts of what was checked. Linear in the
//! package, plus a sort of each tile's allocations.

use std::fmt;
use std::ops::RangeInclusive;

use super::{Package, PackagePhase, PlacedAllocation};
use crate::expand::program::{Step, TransferList};
use crate::expand::visit::step_locations_mut;
use crate::rows::{RowEvent, decode_row};
use crate::target::mapping::{C600_TILES, logical_tile};
use crate::target::memory::{TILE_BASE_ADDRESS, TILE_END_ADDRESS};
use crate::target::timing::NEUTRAL_INCOMING_SOURCE;

/// How many failures a verification lists.
const FAILURES_LISTED: usize = 20;

/// What a verification checked, and what failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verification {
    pub tiles: u32,
    pub allocations: u64,
    pub step_locations: u64,
    pub phases: u64,
    pub row_words: u64,
    pub sends: u64,
    pub repeat_patch_words: u64,
    pub sharing_patches: u64,
    /// The first failures (at most `FAILURES_LISTED`).
    pub failures: Vec<String>,
    /// All failures, listed or not.
    pub failure_count: u64,
}

impl Verification {
    pub fn passed(&self) -> bool {
        self.failure_count == 0
    }

    fn fail(&mut self, message: String) {
        self.failure_count += 1;
        if self.failures.len() < FAILURES_LISTED {
            self.failures.push(message);
        }
    }
}

impl fmt::Display for Verification {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{} tiles, {} allocations, {} step locations, {} phases, {} row words decoded \
             ({} sends), {} Repeat patch words, {} sharing patches: ",
            self.tiles,
            self.allocations,
            self.step_locations,
            self.phases,
            self.row_words,
            self.sends,
            self.repeat_patch_words,
            self.sharing_patches
        )?;
        if self.passed() {
            return formatter.write_str("all checks pass");
        }
        write!(formatter, "{} failures", self.failure_count)?;
        for failure in &self.failures {
            write!(formatter, "\n  {failure}")?;
        }
        if self.failure_count > self.failures.len() as u64 {
            write!(
                formatter,
                "\n  ... and {} more",
                self.failure_count - self.failures.len() as u64
            )?;
        }
        Ok(())
    }
}

/// Per tile: allocation starts, sorted, with the largest end among the
/// allocations up to each (allocations may overlap: aliases).
struct TileRanges {
    starts: Vec<Vec<u64>>,
    reach: Vec<Vec<u64>>,
}

impl TileRanges {
    fn new(mut ranges: Vec<Vec<(u64, u64)>>) -> TileRanges {
        let mut starts = Vec::with_capacity(ranges.len());
        let mut reach = Vec::with_capacity(ranges.len());
        for tile in &mut ranges {
            tile.sort_unstable();
            starts.push(tile.iter().map(|&(start, _)| start).collect());
            let mut furthest = 0;
            reach.push(
                tile.iter()
                    .map(|&(_, end)| {
                        furthest = furthest.max(end);
                        furthest
                    })
                    .collect(),
            );
        }
        TileRanges { starts, reach }
    }

    /// Whether `address` lies inside an allocation of `tile`.
    fn contains(&self, tile: usize, address: u64) -> bool {
        let (Some(starts), Some(reach)) = (self.starts.get(tile), self.reach.get(tile)) else {
            return false;
        };
        let split = starts.partition_point(|&start| start <= address);
        split > 0 && reach[split - 1] > address
    }

    /// Whether one allocation of `tile` holds all of `start..end`: the
    /// furthest reach among the allocations starting at or before `start`
    /// is that of one allocation, which then spans the range.
    fn covers(&self, tile: usize, start: u64, end: u64) -> bool {
        let (Some(starts), Some(reach)) = (self.starts.get(tile), self.reach.get(tile)) else {
            return false;
        };
        let split = starts.partition_point(|&first| first <= start);
        split > 0 && reach[split - 1] >= end && reach[split - 1] > start
    }
}

/// The bytes a tile's memory spans.
fn tile_memory() -> RangeInclusive<u64> {
    u64::from(TILE_BASE_ADDRESS)..=u64::from(TILE_END_ADDRESS)
}

/// The bytes `allocation` spans, every instance of an iterated one.
fn allocation_bytes(allocation: &PlacedAllocation) -> (u64, u64) {
    let start = u64::from(allocation.address);
    let end = start + u64::from(allocation.bytes) * u64::from(allocation.iterations.max(1));
    (start, end)
}

/// What is wrong with `transfers` as a list on `tiles` tiles, if anything.
fn transfer_list_problem(
    transfers: &TransferList,
    tiles: u32,
    allocations: &[PlacedAllocation],
) -> Option<String> {
    let count = transfers.words.len();
    if transfers.source_tile.len() != count
        || transfers.source_location.len() != count
        || transfers.destination_start.len() != count
    {
        return Some(format!(
            "has columns of different lengths ({} words, {} source tiles, {} source locations, \
             {} destination starts)",
            count,
            transfers.source_tile.len(),
            transfers.source_location.len(),
            transfers.destination_start.len()
        ));
    }
    let mut previous = 0u32;
    for (transfer, &start) in transfers.destination_start.iter().enumerate() {
        if start < previous || start as usize > transfers.destinations.len() {
            return Some(format!(
                "transfer {transfer}: destinations start at {start}, after {previous} and within \
                 {} expected",
                transfers.destinations.len()
            ));
        }
        previous = start;
    }
    if let Some(transfer) = transfers.source_tile.iter().position(|&tile| tile >= tiles) {
        return Some(format!(
            "transfer {transfer}: sends from tile {}, outside the {tiles} tiles",
            transfers.source_tile[transfer]
        ));
    }
    if let Some(destination) = transfers
        .destinations
        .iter()
        .position(|destination| destination.tile >= tiles)
    {
        return Some(format!(
            "destination {destination}: tile {}, outside the {tiles} tiles",
            transfers.destinations[destination].tile
        ));
    }
    // Every transfer reads and writes its words inside one instance of an
    // allocation of the tile concerned: what the simulator binds.
    for transfer in 0..count {
        let bytes = u64::from(transfers.words[transfer]) * 4;
        let source = transfers.source_location[transfer];
        if let Some(problem) =
            access_problem(allocations, transfers.source_tile[transfer], source, bytes)
        {
            return Some(format!("transfer {transfer}: its source {problem}"));
        }
        for destination in transfers.destinations_of(transfer) {
            if let Some(problem) =
                access_problem(allocations, destination.tile, destination.location, bytes)
            {
                return Some(format!("transfer {transfer}: a destination {problem}"));
            }
        }
    }
    None
}

/// Why `bytes` bytes at `location` on `tile` are not inside one instance of
/// the allocation the location names, on that tile (the condition the
/// package simulator's `bind` applies), if they are not.
fn access_problem(
    allocations: &[PlacedAllocation],
    tile: u32,
    location: crate::expand::program::Location,
    bytes: u64,
) -> Option<String> {
    let Some(allocation) = allocations.get(location.allocation.0 as usize) else {
        return Some(format!(
            "names allocation {}, which does not exist",
            location.allocation.0
        ));
    };
    if allocation.tile != tile {
        return Some(format!(
            "on tile {tile} names allocation {} of tile {}",
            location.allocation.0, allocation.tile
        ));
    }
    let start = u64::from(allocation.address);
    let end = start + u64::from(allocation.bytes);
    let offset = u64::from(location.offset);
    if offset < start || offset + bytes > end {
        return Some(format!(
            "accesses {bytes} bytes at {offset:#x}, outside allocation {} ({start:#x}..{end:#x} on \
             tile {tile})",
            location.allocation.0
        ));
    }
    None
}

/// Checks `package` (see the module documentation).
pub fn verify_package(package: &Package) -> Verification {
    let mut result = Verification {
        tiles: package.tiles,
        ..Verification::default()
    };
    // Everything below is sized by the tile count: check it first.
    if !(1..=C600_TILES).contains(&package.tiles) {
        result.fail(format!(
            "the package declares {} tiles; a C600 has 1..={C600_TILES}",
            package.tiles
        ));
        return result;
    }
    result.check_tile_tables(package);
    let ranges = result.check_allocations(package);
    result.check_step_locations(package);
    result.check_transfer_lists(package, &package.steps, &mut Vec::new());
    for phase in &package.phases {
        result.check_phase(phase, package.tiles as usize, &ranges);
    }
    result.check_sharing_patches(package);
    result.check_phase_steps(package);
    result
}

/// The paths (indices from `Package::steps`, through Repeat bodies) of every
/// exchange step under `steps`.
fn exchange_paths(steps: &[Step], path: &mut Vec<u32>, found: &mut Vec<Vec<u32>>) {
    for (index, step) in steps.iter().enumerate() {
        path.push(index as u32);
        match step {
            Step::Exchange { .. } => found.push(path.clone()),
            Step::Repeat { body, .. } => exchange_paths(body, path, found),
            _ => {}
        }
        path.pop();
    }
}

impl Verification {
    /// Every exchange step has a phase (whose rows run it), and the phases
    /// that share one stored row of a tile give it one length (the stored
    /// row is the first phase's, rewritten by the others' sharing patches).
    fn check_phase_steps(&mut self, package: &Package) {
        let mut paths = Vec::new();
        exchange_paths(&package.steps, &mut Vec::new(), &mut paths);
        let phased: std::collections::HashSet<&[u32]> = package
            .phases
            .iter()
            .map(|phase| phase.step_path.as_slice())
            .collect();
        for path in paths
            .iter()
            .filter(|path| !phased.contains(path.as_slice()))
        {
            self.fail(format!(
                "step {}: an exchange step no phase runs (no phase's step path names it)",
                path.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join("/")
            ));
        }
        let mut stored_lengths: std::collections::HashMap<(usize, u32), (usize, &str)> =
            std::collections::HashMap::new();
        for phase in &package.phases {
            for (tile, &stored) in phase.stored_rows.iter().enumerate() {
                let length = phase.rows.get(tile).map_or(0, Vec::len);
                if stored == u32::MAX || length == 0 {
                    continue;
                }
                let (first_length, first_phase) = *stored_lengths
                    .entry((tile, stored))
                    .or_insert((length, phase.key.as_str()));
                if first_length != length {
                    self.fail(format!(
                        "phase {}, tile {tile}: stored row {stored} holds {first_length} words \
                         (phase {first_phase}'s row); this phase's row has {length}",
                        phase.key
                    ));
                }
            }
        }
    }

    /// The per-tile tables (exchange table and patch list bases): one entry
    /// per tile, each inside the tile's memory.
    fn check_tile_tables(&mut self, package: &Package) {
        let tiles = package.tiles as usize;
        let memory = tile_memory();
        for (name, table) in [
            ("exchange_table_base", &package.exchange_table_base),
            ("patch_lists_base", &package.patch_lists_base),
        ] {
            if table.len() != tiles {
                self.fail(format!(
                    "{name} has {} entries for {tiles} tiles",
                    table.len()
                ));
            }
            for (tile, &base) in table.iter().enumerate() {
                if !memory.contains(&u64::from(base)) {
                    self.fail(format!(
                        "{name} of tile {tile} is {base:#x}, outside the tile's memory"
                    ));
                }
            }
        }
    }

    /// Every placed allocation on a tile that exists and inside its memory;
    /// the allocations of each tile, for the sends.
    fn check_allocations(&mut self, package: &Package) -> TileRanges {
        let tiles = package.tiles as usize;
        let memory = tile_memory();
        let mut ranges = vec![Vec::new(); tiles];
        for (index, allocation) in package.allocations.iter().enumerate() {
            self.allocations += 1;
            let (start, end) = allocation_bytes(allocation);
            if allocation.tile as usize >= tiles {
                self.fail(format!(
                    "allocation {index} is on tile {}, outside the {tiles} tiles",
                    allocation.tile
                ));
                continue;
            }
            if start < *memory.start() || end > *memory.end() {
                self.fail(format!(
                    "allocation {index} on tile {}: bytes {start:#x}..{end:#x} are outside the tile's memory",
                    allocation.tile
                ));
            }
            ranges[allocation.tile as usize].push((start, end));
        }
        TileRanges::new(ranges)
    }

    /// Every location of every step inside the allocation it names.
    fn check_step_locations(&mut self, package: &Package) {
        let mut steps = package.steps.clone();
        for (step_index, step) in steps.iter_mut().enumerate() {
            let mut failures = Vec::new();
            let mut count = 0u64;
            step_locations_mut(step, &mut |location| {
                count += 1;
                match package.allocations.get(location.allocation.0 as usize) {
                    None => failures.push(format!(
                        "step {step_index}: a location names allocation {}, which does not exist",
                        location.allocation.0
                    )),
                    Some(allocation) => {
                        let (start, end) = allocation_bytes(allocation);
                        let offset = u64::from(location.offset);
                        if offset < start || offset > end {
                            failures.push(format!(
                                "step {step_index}: location {offset:#x} is outside allocation {} \
                                 ({start:#x}..{end:#x} on tile {})",
                                location.allocation.0, allocation.tile
                            ));
                        }
                    }
                }
            });
            self.step_locations += count;
            for failure in failures {
                self.fail(failure);
            }
        }
    }

    /// Every exchange step's transfer list is well formed: its columns
    /// equally long, its destination ranges increasing and inside the
    /// destination column, every tile one of the package's.
    fn check_transfer_lists(&mut self, package: &Package, steps: &[Step], path: &mut Vec<u32>) {
        let tiles = package.tiles;
        for (index, step) in steps.iter().enumerate() {
            path.push(index as u32);
            match step {
                Step::Exchange { transfers, .. } => {
                    let at = || {
                        path.iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join("/")
                    };
                    if let Some(problem) =
                        transfer_list_problem(transfers, tiles, &package.allocations)
                    {
                        self.fail(format!("step {}: the transfer list {problem}", at()));
                    }
                }
                Step::Repeat { body, .. } => self.check_transfer_lists(package, body, path),
                _ => {}
            }
            path.pop();
        }
    }

    /// One exchange phase: a row (and a stored-row index, if any) per tile,
    /// every row decoding with sends and pointers in bounds, and every
    /// Repeat patch rewriting a word of its tile's row.
    fn check_phase(&mut self, phase: &PackagePhase, tiles: usize, ranges: &TileRanges) {
        self.phases += 1;
        if phase.rows.len() != tiles {
            self.fail(format!(
                "phase {}: {} rows for {tiles} tiles",
                phase.key,
                phase.rows.len()
            ));
        }
        if !phase.stored_rows.is_empty() && phase.stored_rows.len() != tiles {
            self.fail(format!(
                "phase {}: {} stored-row indices for {tiles} tiles",
                phase.key,
                phase.stored_rows.len()
            ));
        }
        for (tile, row) in phase.rows.iter().enumerate() {
            self.check_row(&phase.key, tile, row, ranges);
        }
        self.check_repeat_patches(phase);
    }

    /// Tile `tile`'s row of phase `key`: it decodes, each send lies inside
    /// one allocation of the tile (and its memory), and its receive
    /// pointers lie inside its memory.
    fn check_row(&mut self, key: &str, tile: usize, row: &[u32], ranges: &TileRanges) {
        let tiles = ranges.starts.len();
        let memory = tile_memory();
        self.row_words += row.len() as u64;
        let events = match decode_row(row) {
            Ok(events) => events,
            Err(error) => {
                self.fail(format!(
                    "phase {key}, tile {tile}: the row does not decode: {error}"
                ));
                return;
            }
        };
        for event in events {
            match event {
                RowEvent::Send {
                    address,
                    events,
                    control,
                    ..
                } => {
                    self.sends += 1;
                    let start = u64::from(address) * 4;
                    let unit = if control & 4 != 0 { 8 } else { 4 };
                    let end = start + events * unit;
                    if !ranges.contains(tile, start) {
                        self.fail(format!(
                            "phase {key}, tile {tile}: a send starts at {start:#x}, outside \
                             every allocation of the tile"
                        ));
                    } else if end > *memory.end() {
                        self.fail(format!(
                            "phase {key}, tile {tile}: a send of bytes {start:#x}..{end:#x} runs \
                             past the tile's memory"
                        ));
                    } else if !ranges.covers(tile, start, end) {
                        self.fail(format!(
                            "phase {key}, tile {tile}: a send of bytes {start:#x}..{end:#x} runs \
                             past the end of the allocation it starts in"
                        ));
                    }
                }
                RowEvent::Pointer { address, .. } => {
                    let byte = u64::from(address) * 4;
                    if !memory.contains(&byte) {
                        self.fail(format!(
                            "phase {key}, tile {tile}: a receive pointer {byte:#x} is outside \
                             the tile's memory"
                        ));
                    }
                }
                RowEvent::Select { source, .. } => {
                    let known = source == NEUTRAL_INCOMING_SOURCE
                        || logical_tile(source).is_some_and(|sender| (sender as usize) < tiles);
                    if !known {
                        self.fail(format!(
                            "phase {key}, tile {tile}: a receive selects physical tile {source}, \
                             which is not one of the package's {tiles} tiles"
                        ));
                    }
                }
                RowEvent::End { .. } | RowEvent::Format { .. } => {}
            }
        }
    }

    /// Every Repeat patch of `phase` rewrites a word of its tile's row.
    fn check_repeat_patches(&mut self, phase: &PackagePhase) {
        for patches in &phase.repeat_patches {
            let row_words = phase
                .rows
                .get(patches.tile as usize)
                .map_or(0, |row| row.len() as u64);
            for word in &patches.words {
                self.repeat_patch_words += 1;
                if u64::from(word.word) >= row_words {
                    self.fail(format!(
                        "phase {}, tile {}: a Repeat patch rewrites word {} of a {row_words}-word row",
                        phase.key, patches.tile, word.word
                    ));
                }
            }
        }
    }

    /// Every row-sharing patch names a phase, tile and word that exist.
    fn check_sharing_patches(&mut self, package: &Package) {
        for patch in &package.sharing_patches {
            self.sharing_patches += 1;
            let row_words = package
                .phases
                .get(patch.phase as usize)
                .and_then(|phase| phase.rows.get(patch.tile as usize))
                .map(|row| row.len() as u64);
            match row_words {
                None => self.fail(format!(
                    "a sharing patch names phase {} tile {}, which do not exist",
                    patch.phase, patch.tile
                )),
                Some(words) if u64::from(patch.word) >= words => self.fail(format!(
                    "a sharing patch rewrites word {} of phase {} tile {}'s {words}-word row",
                    patch.word, patch.phase, patch.tile
                )),
                Some(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod range_tests {
    use super::TileRanges;

    #[test]
    fn a_span_is_covered_only_by_one_allocation() {
        // Tile 0: two adjacent allocations, 0x100..0x200 and 0x200..0x300.
        let ranges = TileRanges::new(vec![vec![(0x200, 0x300), (0x100, 0x200)]]);
        assert!(ranges.covers(0, 0x100, 0x200));
        assert!(ranges.covers(0, 0x280, 0x300));
        // Contiguous bytes, but across the boundary of two allocations.
        assert!(!ranges.covers(0, 0x180, 0x280));
        assert!(!ranges.covers(0, 0x280, 0x301));
        assert!(!ranges.covers(0, 0x80, 0x100));
        assert!(!ranges.covers(1, 0x100, 0x104));
        // An allocation aliasing both (0x100..0x300) covers the span.
        let aliased = TileRanges::new(vec![vec![(0x100, 0x200), (0x200, 0x300), (0x100, 0x300)]]);
        assert!(aliased.covers(0, 0x180, 0x280));
    }
}
