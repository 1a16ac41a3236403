//! The exchange row table: every tile reserves storage for the rows of all
//! phases it takes part in. Identical rows of a tile (same words, same
//! relocation slots resolving to the same global allocations and offsets)
//! are stored once; rows that differ only in address words share storage
//! through sharing patches. Phases run from a shared row in any order (and
//! again in every Repeat iteration), so every phase running from a stored
//! row whose sharers differ rewrites every word that varies among them
//! before it runs, the first phase included: the storage then holds the
//! running phase's row whatever ran from it before. Owns the accounting of that storage; it must not place the table or
//! emit the patch code.

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use rayon::prelude::*;

use super::{PhaseRows, Row};
use crate::expand::program::AllocationId;
use crate::hashing::FastMap;

/// A row word that must be patched before `phase` runs on `tile` because it
/// shares storage with another phase's row whose address there differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SharingPatch {
    pub tile: u32,
    pub phase: u32,
    pub word: u32,
}

/// Shared row storage of a program's phases.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct RowTable {
    /// Per tile: bytes of the distinct stored rows.
    pub bytes_per_tile: Vec<u64>,
    /// Per phase, per tile: index of the stored row on that tile (`u32::MAX` for an empty row).
    pub stored: Vec<Vec<u32>>,
    /// Rows that are exact copies of an earlier row of their tile.
    pub identical_rows: u64,
    pub sharing_patches: Vec<SharingPatch>,
}

/// Per tile: what the table keeps while scanning the phases.
#[derive(Default)]
struct TileTable {
    bytes: u64,
    stored: Vec<u32>,
    identical_rows: u64,
    sharing_patches: Vec<SharingPatch>,
}

fn shape_hash(row: &Row) -> u64 {
    let mut hasher = DefaultHasher::new();
    row.words.hash(&mut hasher);
    for slot in &row.slots {
        (slot.word, slot.field).hash(&mut hasher);
    }
    hasher.finish()
}

fn same_shape(a: &Row, b: &Row) -> bool {
    a.words == b.words
        && a.slots.len() == b.slots.len()
        && a.slots
            .iter()
            .zip(&b.slots)
            .all(|(x, y)| x.word == y.word && x.field == y.field)
}

impl RowTable {
    /// `phases[i]` is a phase's rows with the global allocation of each of
    /// its problem's local allocations. Tiles are independent and are
    /// scanned in parallel; rows are compared by a hash of their words and
    /// slot fields, confirmed by full comparison.
    pub fn build(phases: &[(&PhaseRows, &[AllocationId])], tiles: u32) -> RowTable {
        let tiles = tiles as usize;
        let address = |phase: usize, slot: &super::RelocationSlot| {
            let allocations = phases[phase].1;
            (
                allocations
                    .get(slot.address.allocation as usize)
                    .copied()
                    .unwrap_or(AllocationId(u32::MAX)),
                slot.address.offset,
            )
        };
        let per_tile: Vec<TileTable> = (0..tiles)
            .into_par_iter()
            .map(|tile| {
                let mut table = TileTable {
                    stored: vec![u32::MAX; phases.len()],
                    ..TileTable::default()
                };
                // hash -> (stored index, phase of its first row)
                let mut seen: FastMap<u64, Vec<(u32, usize)>> = FastMap::default();
                // Per stored row: the phases running from it, and the words
                // whose addresses differ among them.
                let mut users: Vec<Vec<usize>> = Vec::new();
                let mut varying: Vec<BTreeSet<u32>> = Vec::new();
                let mut next = 0u32;
                for (phase_index, &(phase, _)) in phases.iter().enumerate() {
                    let Some(row) = phase.rows.get(tile) else {
                        continue;
                    };
                    if row.words.is_empty() {
                        continue;
                    }
                    let candidates = seen.entry(shape_hash(row)).or_default();
                    let found = candidates
                        .iter()
                        .find(|&&(_, first)| same_shape(&phases[first].0.rows[tile], row))
                        .copied();
                    match found {
                        Some((index, first)) => {
                            table.stored[phase_index] = index;
                            users[index as usize].push(phase_index);
                            let original = &phases[first].0.rows[tile];
                            let mut patched = false;
                            for (slot, first_slot) in row.slots.iter().zip(&original.slots) {
                                if address(phase_index, slot) != address(first, first_slot) {
                                    patched = true;
                                    varying[index as usize].insert(slot.word);
                                }
                            }
                            if !patched {
                                table.identical_rows += 1;
                            }
                        }
                        None => {
                            table.bytes += row.bytes();
                            table.stored[phase_index] = next;
                            candidates.push((next, phase_index));
                            users.push(vec![phase_index]);
                            varying.push(BTreeSet::new());
                            next += 1;
                        }
                    }
                }
                for (phases, words) in users.iter().zip(&varying) {
                    for &phase in phases {
                        table
                            .sharing_patches
                            .extend(words.iter().map(|&word| SharingPatch {
                                tile: tile as u32,
                                phase: phase as u32,
                                word,
                            }));
                    }
                }
                table
            })
            .collect();
        let mut table = RowTable {
            bytes_per_tile: per_tile.iter().map(|tile| tile.bytes).collect(),
            stored: vec![vec![u32::MAX; tiles]; phases.len()],
            identical_rows: per_tile.iter().map(|tile| tile.identical_rows).sum(),
            sharing_patches: Vec::new(),
        };
        for (tile, tile_table) in per_tile.iter().enumerate() {
            for (phase, &index) in tile_table.stored.iter().enumerate() {
                table.stored[phase][tile] = index;
            }
        }
        table.sharing_patches = per_tile
            .into_iter()
            .flat_map(|tile| tile.sharing_patches)
            .collect();
        table
            .sharing_patches
            .sort_unstable_by_key(|patch| (patch.phase, patch.tile, patch.word));
        table
    }

    pub fn max_bytes(&self) -> u64 {
        self.bytes_per_tile.iter().copied().max().unwrap_or(0)
    }

    /// `Err` unless the table has the shape its users index by for
    /// `phases` phases on `tiles` tiles (a cached table's check): a byte
    /// count per tile, a stored-row index per phase and tile, and every
    /// sharing patch on a tile and phase of the program.
    pub fn fits(&self, phases: usize, tiles: u32) -> Result<(), crate::cache::Refusal> {
        let tiles_count = tiles as usize;
        if self.bytes_per_tile.len() != tiles_count {
            return Err(crate::cache::Refusal::Shape(format!(
                "{} byte counts for {tiles} tiles",
                self.bytes_per_tile.len()
            )));
        }
        if self.stored.len() != phases {
            return Err(crate::cache::Refusal::Shape(format!(
                "stored rows of {} phases for {phases}",
                self.stored.len()
            )));
        }
        if let Some((phase, stored)) = self
            .stored
            .iter()
            .enumerate()
            .find(|(_, stored)| stored.len() != tiles_count)
        {
            return Err(crate::cache::Refusal::Shape(format!(
                "phase {phase} has stored rows for {} tiles, not {tiles}",
                stored.len()
            )));
        }
        match self
            .sharing_patches
            .iter()
            .find(|patch| patch.tile >= tiles || patch.phase as usize >= phases)
        {
            Some(patch) => Err(crate::cache::Refusal::Shape(format!(
                "a sharing patch of phase {} on tile {} is beyond the program",
                patch.phase, patch.tile
            ))),
            None => Ok(()),
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.bytes_per_tile.iter().sum()
    }
}
