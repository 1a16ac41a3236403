//! The exchange row table: every tile reserves storage for the rows of all
//! phases it takes part in. Identical rows of a tile (same words, same
//! relocation slots resolving to the same global allocations and offsets)
//! are stored once; rows that differ only in address words share storage
//! through sharing patches (the differing slot words are patched before
//! use). Owns the accounting of that storage; it must not place the table or
//! emit the patch code.

use std::collections::HashMap;

use super::{PhaseRows, SlotField};
use crate::expand::program::AllocationId;

/// A row word that must be patched before `phase` runs on `tile` because it
/// shares storage with an earlier row whose address there differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SharingPatch {
    pub tile: u32,
    pub phase: u32,
    pub word: u32,
}

/// Shared row storage of a program's phases.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RowTable {
    /// Per tile: bytes of the distinct stored rows.
    pub bytes_per_tile: Vec<u64>,
    /// Per phase, per tile: index of the stored row on that tile (`u32::MAX` for an empty row).
    pub stored: Vec<Vec<u32>>,
    /// Rows that are exact copies of an earlier row of their tile.
    pub identical_rows: u64,
    pub sharing_patches: Vec<SharingPatch>,
}

type Shape = (Vec<u32>, Vec<(u32, SlotField)>);
type Addresses = Vec<(AllocationId, u32)>;

impl RowTable {
    /// `phases[i]` is a phase's rows with the global allocation of each of
    /// its problem's local allocations.
    pub fn build(phases: &[(&PhaseRows, &[AllocationId])], tiles: u32) -> RowTable {
        let tiles = tiles as usize;
        let mut table = RowTable {
            bytes_per_tile: vec![0; tiles],
            stored: Vec::with_capacity(phases.len()),
            ..RowTable::default()
        };
        let mut seen: Vec<HashMap<Shape, (u32, Addresses)>> = vec![HashMap::new(); tiles];
        for (phase_index, &(phase, phase_allocations)) in phases.iter().enumerate() {
            let mut stored = vec![u32::MAX; tiles];
            for (tile, row) in phase.rows.iter().enumerate().take(tiles) {
                if row.words.is_empty() {
                    continue;
                }
                let shape: Shape = (
                    row.words.clone(),
                    row.slots
                        .iter()
                        .map(|slot| (slot.word, slot.field))
                        .collect(),
                );
                let addresses: Addresses = row
                    .slots
                    .iter()
                    .map(|slot| {
                        let global = phase_allocations
                            .get(slot.address.allocation as usize)
                            .copied();
                        (
                            global.unwrap_or(AllocationId(u32::MAX)),
                            slot.address.offset,
                        )
                    })
                    .collect();
                let known = &mut seen[tile];
                let next = known.len() as u32;
                match known.get(&shape) {
                    Some((index, first)) => {
                        stored[tile] = *index;
                        let mut patched = false;
                        for (slot, (address, original)) in
                            row.slots.iter().zip(addresses.iter().zip(first))
                        {
                            if address != original {
                                patched = true;
                                table.sharing_patches.push(SharingPatch {
                                    tile: tile as u32,
                                    phase: phase_index as u32,
                                    word: slot.word,
                                });
                            }
                        }
                        if !patched {
                            table.identical_rows += 1;
                        }
                    }
                    None => {
                        table.bytes_per_tile[tile] += row.bytes();
                        stored[tile] = next;
                        known.insert(shape, (next, addresses));
                    }
                }
            }
            table.stored.push(stored);
        }
        table
    }

    pub fn max_bytes(&self) -> u64 {
        self.bytes_per_tile.iter().copied().max().unwrap_or(0)
    }

    pub fn total_bytes(&self) -> u64 {
        self.bytes_per_tile.iter().sum()
    }
}
