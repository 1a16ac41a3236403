//! What patch lists take in tile memory and what sharing patches cost.
//!
//! A patch list entry is the patched word's offset in the exchange table and
//! the step to add (model: two 32-bit words). Repeat patches are listed per
//! (phase, tile); sharing patches (`rows::SharingPatch`) are one entry per
//! rewritten word, applied by the supervisor before the phase on its tile,
//! so a phase waits for its slowest tile's list.
//!
//! Pure: lists in, bytes per tile and cycles per phase out.

use std::collections::HashMap;

use super::PhasePatches;
use crate::rows::SharingPatch;

/// Bytes a patch list entry takes in tile memory.
pub const PATCH_ENTRY_BYTES: u32 = 8;

/// Bytes of patch lists on each of `tiles` tiles: every phase's Repeat
/// patch words and every sharing patch.
pub fn patch_list_bytes<'a>(
    tiles: u32,
    repeat: impl IntoIterator<Item = &'a PhasePatches>,
    sharing: &[SharingPatch],
) -> Vec<u32> {
    let mut bytes = vec![0u32; tiles as usize];
    for phase in repeat {
        for list in &phase.tiles {
            if let Some(tile) = bytes.get_mut(list.tile as usize) {
                *tile += list.words.len() as u32 * PATCH_ENTRY_BYTES;
            }
        }
    }
    for patch in sharing {
        if let Some(tile) = bytes.get_mut(patch.tile as usize) {
            *tile += PATCH_ENTRY_BYTES;
        }
    }
    bytes
}

/// Sharing-patch cycles of each of `phases` phases: its slowest tile's
/// patching (the phase waits for every tile).
pub fn sharing_patch_cycles(sharing: &[SharingPatch], phases: usize) -> Vec<u64> {
    let mut per_phase_tile: HashMap<(u32, u32), u64> = HashMap::new();
    for patch in sharing {
        *per_phase_tile.entry((patch.phase, patch.tile)).or_insert(0) += 1;
    }
    let mut cycles = vec![0u64; phases];
    for ((phase, _), words) in per_phase_tile {
        if let Some(slot) = cycles.get_mut(phase as usize) {
            *slot = (*slot).max(crate::target::kernel_cost::composite::patch_cycles(words));
        }
    }
    cycles
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{BaseChoice, PatchWord, TilePatches};

    fn sharing(tile: u32, phase: u32, word: u32) -> SharingPatch {
        SharingPatch { tile, phase, word }
    }

    #[test]
    fn patch_lists_take_eight_bytes_an_entry_on_their_tile() {
        let phase = PhasePatches {
            tiles: vec![TilePatches {
                tile: 1,
                base: BaseChoice::Zero,
                zero_base_words: 3,
                words: vec![
                    PatchWord {
                        word: 0,
                        step_words: 4
                    };
                    3
                ],
            }],
        };
        let bytes = patch_list_bytes(3, [&phase, &phase], &[sharing(2, 0, 5)]);
        assert_eq!(bytes, vec![0, 48, 8]);
    }

    #[test]
    fn a_phase_waits_for_its_slowest_tiles_sharing_patches() {
        let patches = [
            sharing(0, 1, 0),
            sharing(0, 1, 1),
            sharing(3, 1, 0),
            sharing(0, 0, 0),
        ];
        let cycles = sharing_patch_cycles(&patches, 3);
        // Below the bulk patcher's threshold the supervisor patches word by word.
        let per_word = crate::target::costs::ARITHMETIC_PATCH_CYCLES_PER_WORD;
        assert_eq!(cycles, vec![per_word, 2 * per_word, 0]);
    }
}
