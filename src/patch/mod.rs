//! Patch lists: what the supervisor rewrites in the exchange table before a
//! phase runs.
//!
//! - Repeat patches: in a Repeat body phase, a send whose source is an
//!   iterated allocation reads a different instance every iteration, so its
//!   encoded address moves by the allocation's stride. Per tile, the row is
//!   either encoded against a zero base (every moving address word is patched
//!   with `+stride`) or against an outgoing base register that itself moves by
//!   the most common stride (then only the exceptions are patched: stationary
//!   addresses with `-stride`, other strides with their difference). The base
//!   is taken only when it makes the tile's patching strictly cheaper (fewer
//!   cycles, then fewer words; the bulk patcher makes 24 words cheaper than
//!   23), counted on the row's actual encoded sender-address words (every
//!   `send` restart is its own word), and only when the build allows it
//!   (`planning.repeat_base`). Receive-pointer words in iterated allocations are always
//!   patched. A paired (64-bit) send's address counts 8-byte units, so its
//!   patch step is half the stride in words; a tile whose row has a paired
//!   send keeps a zero base (how the base register offsets an 8-byte-unit
//!   address is not validated on hardware).
//! - Sharing patches: rows that share storage with a row whose address words
//!   differ (from the row table) have those words rewritten before use.
//!
//! Costs follow IPU21.md: about 54 cycles per word in the supervisor loop, or
//! the six-worker bulk patcher for lists of 24 words or more.
//!
//! Pure: rows and problems in, lists out. It must not encode rows or place.

pub mod memory;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::rows::{PhaseRows, SlotField};
use crate::schedule::ExchangeProblem;

#[cfg(test)]
mod tests;

/// How a tile's sender addresses are encoded in a Repeat body phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BaseChoice {
    /// Absolute addresses: every moving word is patched.
    Zero,
    /// Relative to an outgoing base moving `stride_words` per iteration.
    Moving { stride_words: u32 },
}

/// One patched word: `row word += step_words` before every iteration after
/// the first (in the units of the word's address field: words, or 8 bytes
/// for a paired send).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PatchWord {
    pub word: u32,
    pub step_words: i64,
}

/// A tile's Repeat patch list for one phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TilePatches {
    pub tile: u32,
    pub base: BaseChoice,
    /// Patched words with a zero base and with the chosen base (for audit).
    pub zero_base_words: u32,
    pub words: Vec<PatchWord>,
}

/// Repeat patch lists of one phase, one entry per tile that needs patches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct PhasePatches {
    pub tiles: Vec<TilePatches>,
}

impl PhasePatches {
    pub fn words(&self) -> u64 {
        self.tiles.iter().map(|tile| tile.words.len() as u64).sum()
    }

    pub fn calls(&self) -> u64 {
        self.tiles
            .iter()
            .filter(|tile| !tile.words.is_empty())
            .count() as u64
    }

    pub fn max_words(&self) -> u64 {
        self.tiles
            .iter()
            .map(|tile| tile.words.len() as u64)
            .max()
            .unwrap_or(0)
    }

    /// Cycles before the phase: the slowest tile's patching.
    pub fn cycles(&self) -> u64 {
        self.tiles
            .iter()
            .map(
                |tile| crate::target::kernel_cost::composite::patch_cycles(tile.words.len() as u64),
            )
            .max()
            .unwrap_or(0)
    }
}

/// The per-iteration stride (in words) of a slot's address: 0 when stationary.
fn stride_words(problem: &ExchangeProblem, allocation: u32) -> u32 {
    let local = problem.allocations[allocation as usize];
    if local.iterations > 1 && problem.iterations > 1 {
        local.bytes / 4
    } else {
        0
    }
}

/// Repeat patch lists for a phase that runs `problem.iterations` times;
/// with `base_selection` false every row keeps a zero base.
pub fn repeat_patches(
    problem: &ExchangeProblem,
    rows: &PhaseRows,
    base_selection: bool,
) -> PhasePatches {
    let mut phase = PhasePatches::default();
    if problem.iterations <= 1 {
        return phase;
    }
    for (tile, row) in rows.rows.iter().enumerate() {
        let mut senders: Vec<(u32, u32)> = Vec::new();
        let mut receivers: Vec<PatchWord> = Vec::new();
        let mut paired_senders: Vec<PatchWord> = Vec::new();
        for slot in &row.slots {
            let stride = stride_words(problem, slot.address.allocation);
            match slot.field {
                SlotField::SendAddress => senders.push((slot.word, stride)),
                SlotField::PairedSendAddress => {
                    if stride > 0 {
                        paired_senders.push(PatchWord {
                            word: slot.word,
                            step_words: i64::from(stride / 2),
                        });
                    }
                }
                SlotField::PicValue | SlotField::InlinePic => {
                    if stride > 0 {
                        receivers.push(PatchWord {
                            word: slot.word,
                            step_words: stride as i64,
                        });
                    }
                }
            }
        }
        let zero_base_words = senders.iter().filter(|&&(_, stride)| stride > 0).count() as u32
            + paired_senders.len() as u32;
        let receivers: Vec<PatchWord> = paired_senders.into_iter().chain(receivers).collect();
        let base_selection = base_selection
            && !row
                .slots
                .iter()
                .any(|slot| slot.field == SlotField::PairedSendAddress);
        // The most common moving stride (ties: the smaller stride).
        let mut frequency: BTreeMap<u32, u32> = BTreeMap::new();
        for &(_, stride) in &senders {
            if stride > 0 {
                *frequency.entry(stride).or_insert(0) += 1;
            }
        }
        let common = frequency
            .iter()
            .max_by_key(|&(&stride, &count)| (count, std::cmp::Reverse(stride)))
            .map(|(&stride, _)| stride);
        let with_base = common.map(|base| {
            senders
                .iter()
                .filter(|&&(_, stride)| stride != base)
                .count() as u32
        });
        // The base must make the tile's patching strictly cheaper: fewer
        // cycles (the bulk patcher makes cost fall at its threshold, so
        // fewer words can cost more), then fewer words. Receive pointers are
        // patched either way.
        let receiving = receivers.len() as u32;
        let cheaper = |patched: u32| {
            let cost = |words: u32| {
                (
                    crate::target::kernel_cost::composite::patch_cycles(u64::from(words)),
                    words,
                )
            };
            cost(patched + receiving) < cost(zero_base_words + receiving)
        };
        let (base, mut words) = match (common, with_base) {
            (Some(base), Some(patched)) if base_selection && cheaper(patched) => (
                BaseChoice::Moving { stride_words: base },
                senders
                    .iter()
                    .filter(|&&(_, stride)| stride != base)
                    .map(|&(word, stride)| PatchWord {
                        word,
                        step_words: stride as i64 - base as i64,
                    })
                    .collect::<Vec<_>>(),
            ),
            _ => (
                BaseChoice::Zero,
                senders
                    .iter()
                    .filter(|&&(_, stride)| stride > 0)
                    .map(|&(word, stride)| PatchWord {
                        word,
                        step_words: stride as i64,
                    })
                    .collect::<Vec<_>>(),
            ),
        };
        words.extend(receivers);
        if !words.is_empty() || base != BaseChoice::Zero {
            phase.tiles.push(TilePatches {
                tile: tile as u32,
                base,
                zero_base_words,
                words,
            });
        }
    }
    phase
}
