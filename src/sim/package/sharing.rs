//! Shared row storage: phases whose rows on a tile differ only in address
//! words share one stored row of the tile's exchange table, and the
//! supervisor rewrites the differing words (the row-sharing patches)
//! before such a phase runs.
//!
//! The simulator keeps every tile's stored rows as the hardware would: a
//! stored row starts as the finalized row of the first phase that runs
//! from it; before each phase its sharing patches write that phase's words
//! into the storage, and the phase runs from what the storage then holds.
//! A word the patches leave at another phase's value (a missing or dropped
//! sharing patch) is reported before the phase runs.
//!
//! Owns the stored rows only; Repeat patches are applied on top by
//! `super::exchange`.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::package::{Package, PackagePhase};

use super::exchange::TileFault;

/// Every tile's stored rows and the sharing patches of every (tile, phase).
pub struct SharedRows {
    /// Per tile: stored row index -> its current words.
    storage: Vec<HashMap<u32, Vec<u32>>>,
    /// (tile, phase index) -> words its sharing patches rewrite.
    patches: HashMap<(u32, u32), Vec<u32>>,
}

impl SharedRows {
    pub fn new(package: &Package) -> SharedRows {
        let mut patches: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for patch in &package.sharing_patches {
            patches
                .entry((patch.tile, patch.phase))
                .or_default()
                .push(patch.word);
        }
        SharedRows {
            storage: vec![HashMap::new(); package.tiles as usize],
            patches,
        }
    }

    /// The rows phase `index` runs from on every tile, after its sharing
    /// patches rewrote the stored rows; fails when one differs from the
    /// phase's finalized row. Returns how many words the patches wrote.
    pub fn rows_for(
        &mut self,
        phase: &PackagePhase,
        index: usize,
    ) -> Result<(Vec<Vec<u32>>, u64), TileFault> {
        let patches = &self.patches;
        let results: Vec<(Vec<u32>, u64)> = self
            .storage
            .par_iter_mut()
            .enumerate()
            .map(|(tile, storage)| {
                let finalized = &phase.rows[tile];
                let stored = phase.stored_rows.get(tile).copied().unwrap_or(u32::MAX);
                if stored == u32::MAX || finalized.is_empty() {
                    return Ok((finalized.clone(), 0));
                }
                let row = storage.entry(stored).or_insert_with(|| finalized.clone());
                if row.len() != finalized.len() {
                    return Err(TileFault {
                        tile: Some(tile as u32),
                        message: format!(
                            "stored row {stored} holds {} words; this phase's row has {}",
                            row.len(),
                            finalized.len()
                        ),
                    });
                }
                let words = patches
                    .get(&(tile as u32, index as u32))
                    .map_or(&[][..], Vec::as_slice);
                for &word in words {
                    let word = word as usize;
                    if word >= row.len() {
                        return Err(TileFault {
                            tile: Some(tile as u32),
                            message: format!(
                                "sharing patch names word {word}, outside the row of {} words",
                                row.len()
                            ),
                        });
                    }
                    row[word] = finalized[word];
                }
                if let Some(word) = (0..row.len()).find(|&word| row[word] != finalized[word]) {
                    return Err(TileFault {
                        tile: Some(tile as u32),
                        message: format!(
                            "stored row {stored} holds {:#010x} at word {word} after the \
                             sharing patches; this phase's row needs {:#010x} (a sharing \
                             patch is missing)",
                            row[word], finalized[word]
                        ),
                    });
                }
                Ok((row.clone(), words.len() as u64))
            })
            .collect::<Result<_, TileFault>>()?;
        let patched = results.iter().map(|(_, words)| words).sum();
        Ok((results.into_iter().map(|(row, _)| row).collect(), patched))
    }
}
