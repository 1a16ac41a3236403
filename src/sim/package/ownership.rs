//! Which allocation owns each word of a tile's memory: the package
//! simulator's check of placement liveness, independent of the placer's
//! liveness analysis (`crate::place::liveness`).
//!
//! Every write (host load, kernel output, copy, fill, received exchange
//! data) claims the words it writes for the alias root of the allocation it
//! names. A write over words another allocation holds is recorded as a
//! clobber of that allocation; the victim's own later writes erase the
//! record. A read of an allocation's words that another allocation clobbered
//! since the reader last wrote them is a fault: placement put two
//! allocations whose values are live at the same time in the same bytes.
//! Liveness here is what actually happens when the program runs, Repeat
//! iterations included, not an analysis of the step list.
//!
//! Owns the ownership map and the clobber records only; the simulator
//! decides when to claim and when to check.

use std::collections::HashMap;

use crate::target::memory::TILE_BASE_ADDRESS;

/// Byte `index` of the poison pattern `80 ff` repeated: FP16 `0xff80` and
/// FP32 `0xff80ff80` are NaN, and so is FP8 `0x80`.
pub fn poison_byte(index: usize) -> u8 {
    if index.is_multiple_of(2) { 0x80 } else { 0xff }
}

/// Word granularity: allocations are placed at 4-byte aligned addresses.
const WORD_BYTES: usize = 4;

/// Which simulated step did something: an index into the simulator's step log.
pub type StepIndex = u32;

/// Words `[start, end)` of a victim overwritten by `writer` at `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clobber {
    pub start: u32,
    pub end: u32,
    pub writer: u32,
    pub step: StepIndex,
}

impl Clobber {
    /// Byte offset in the tile image of the first clobbered word.
    pub fn first_byte(&self) -> usize {
        self.start as usize * WORD_BYTES
    }
}

/// Ownership of one tile's memory.
#[derive(Clone, Default)]
pub struct TileOwnership {
    /// Per word: owning alias root + 1 (0: never written).
    owners: Vec<u32>,
    /// Per victim alias root: its clobbered word ranges, in record order.
    clobbered: HashMap<u32, Vec<Clobber>>,
}

fn words(start: usize, length: usize) -> (u32, u32) {
    (
        (start / WORD_BYTES) as u32,
        (start + length).div_ceil(WORD_BYTES) as u32,
    )
}

impl TileOwnership {
    pub fn new(bytes: usize) -> TileOwnership {
        TileOwnership {
            owners: vec![0; bytes.div_ceil(WORD_BYTES)],
            clobbered: HashMap::new(),
        }
    }

    /// `owner` (an alias root) writes image bytes `start..start + length` at `step`.
    pub fn claim(&mut self, start: usize, length: usize, owner: u32, step: StepIndex) {
        if length == 0 {
            return;
        }
        let (first, end) = words(start, length);
        if let Some(ranges) = self.clobbered.get_mut(&owner) {
            erase(ranges, first, end);
            if ranges.is_empty() {
                self.clobbered.remove(&owner);
            }
        }
        let tag = owner + 1;
        let mut word = first;
        while word < end {
            let previous = self.owners[word as usize];
            if previous == tag || previous == 0 {
                self.owners[word as usize] = tag;
                word += 1;
                continue;
            }
            let run_start = word;
            while word < end && self.owners[word as usize] == previous {
                self.owners[word as usize] = tag;
                word += 1;
            }
            let ranges = self.clobbered.entry(previous - 1).or_default();
            match ranges.last_mut() {
                Some(last) if last.end == run_start => last.end = word,
                _ => ranges.push(Clobber {
                    start: run_start,
                    end: word,
                    writer: owner,
                    step,
                }),
            }
        }
    }

    /// The first word of image bytes `start..start + length` that another
    /// allocation than `reader` (an alias root) owns, with its owner.
    pub fn foreign_word(&self, start: usize, length: usize, reader: u32) -> Option<(u32, u32)> {
        let (first, end) = words(start, length);
        let tag = reader + 1;
        self.owners[first as usize..end as usize]
            .iter()
            .position(|&owner| owner != 0 && owner != tag)
            .map(|index| {
                (
                    first + index as u32,
                    self.owners[first as usize + index] - 1,
                )
            })
    }

    /// Replaces with the poison pattern every byte of `bytes` (image bytes
    /// from `start`) in a word another allocation than `reader` owns.
    pub fn poison_foreign(&self, start: usize, bytes: &mut [u8], reader: u32) {
        let tag = reader + 1;
        for (index, byte) in bytes.iter_mut().enumerate() {
            let owner = self.owners[(start + index) / WORD_BYTES];
            if owner != 0 && owner != tag {
                *byte = poison_byte(start + index);
            }
        }
    }

    /// The clobber `reader` (an alias root) would see reading image bytes
    /// `start..start + length`, if any.
    pub fn clobber_under(&self, start: usize, length: usize, reader: u32) -> Option<Clobber> {
        let ranges = self.clobbered.get(&reader)?;
        let (first, end) = words(start, length);
        ranges
            .iter()
            .find(|range| range.start < end && first < range.end)
            .map(|range| Clobber {
                start: range.start.max(first),
                ..*range
            })
    }
}

/// A read of bytes another allocation overwrote while the reader's value
/// was live: placement put two live allocations in the same bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "allocation {reader} reads {address:#x}, which allocation {writer} overwrote at {step} after \
     allocation {reader} wrote it: placement put two allocations live at the same time in the \
     same bytes"
)]
pub struct Clobbered {
    pub reader: u32,
    pub address: u64,
    pub writer: u32,
    /// The step that overwrote it, as the simulator's log names it.
    pub step: String,
}

/// What claims and checks need to name allocations and steps.
#[derive(Clone, Copy)]
pub struct Owners<'a> {
    /// Alias root of every allocation.
    pub roots: &'a [u32],
    /// Description of every simulated step, by [`StepIndex`].
    pub log: &'a [String],
    /// The running step.
    pub step: StepIndex,
}

impl<'a> Owners<'a> {
    /// Claims and checks of the step logged last.
    pub fn current(roots: &'a [u32], log: &'a [String]) -> Owners<'a> {
        Owners {
            roots,
            log,
            step: log.len().saturating_sub(1) as StepIndex,
        }
    }

    pub fn root(&self, allocation: u32) -> u32 {
        self.roots
            .get(allocation as usize)
            .copied()
            .unwrap_or(allocation)
    }

    /// `allocation` writes image bytes `start..start + length` now.
    pub fn claim(
        &self,
        ownership: &mut TileOwnership,
        start: usize,
        length: usize,
        allocation: u32,
    ) {
        ownership.claim(start, length, self.root(allocation), self.step);
    }

    /// The first image byte of `start..start + length` in a word another
    /// allocation than `allocation` wrote (so its value depends on
    /// placement), with that allocation, if any.
    pub fn foreign_byte(
        &self,
        ownership: &TileOwnership,
        start: usize,
        length: usize,
        allocation: u32,
    ) -> Option<(usize, u32)> {
        let (word, owner) = ownership.foreign_word(start, length, self.root(allocation))?;
        Some(((word as usize * WORD_BYTES).max(start), owner))
    }

    /// `allocation` reads image bytes `start..start + length` now: fails
    /// when another allocation overwrote some of them since it wrote them.
    pub fn check(
        &self,
        ownership: &TileOwnership,
        start: usize,
        length: usize,
        allocation: u32,
    ) -> Result<(), Clobbered> {
        match ownership.clobber_under(start, length, self.root(allocation)) {
            None => Ok(()),
            Some(clobber) => Err(Clobbered {
                reader: allocation,
                address: clobber.first_byte() as u64 + u64::from(TILE_BASE_ADDRESS),
                writer: clobber.writer,
                step: self
                    .log
                    .get(clobber.step as usize)
                    .map_or_else(|| String::from("an unknown step"), String::clone),
            }),
        }
    }
}

/// Kernel reads of bytes another allocation wrote, counted in non-strict
/// runs, with the first by (step, tile) described.
#[derive(Default)]
pub struct ForeignReads {
    count: std::sync::atomic::AtomicU64,
    first: std::sync::Mutex<Option<(StepIndex, u32, String)>>,
}

impl ForeignReads {
    pub fn record(&self, tile: u32, step: StepIndex, message: String) {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut first = self
            .first
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if first
            .as_ref()
            .is_none_or(|&(known_step, known_tile, _)| (step, tile) < (known_step, known_tile))
        {
            *first = Some((step, tile, message));
        }
    }

    /// The count and the first read's description (`tile T, <message>`).
    pub fn into_summary(self) -> (u64, Option<String>) {
        let first = self
            .first
            .into_inner()
            .unwrap_or_else(|poison| poison.into_inner());
        (
            self.count.into_inner(),
            first.map(|(_, tile, message)| format!("tile {tile}: {message}")),
        )
    }
}

/// Removes words `[first, end)` from `ranges`.
fn erase(ranges: &mut Vec<Clobber>, first: u32, end: u32) {
    let mut kept = Vec::with_capacity(ranges.len());
    for range in ranges.drain(..) {
        if range.end <= first || end <= range.start {
            kept.push(range);
            continue;
        }
        if range.start < first {
            kept.push(Clobber {
                end: first,
                ..range
            });
        }
        if end < range.end {
            kept.push(Clobber {
                start: end,
                ..range
            });
        }
    }
    *ranges = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_after_another_allocation_overwrote_is_a_clobber() {
        let mut ownership = TileOwnership::new(64);
        ownership.claim(0, 16, 1, 0);
        ownership.claim(8, 16, 2, 1);
        assert_eq!(ownership.clobber_under(0, 8, 1), None);
        let clobber = ownership.clobber_under(0, 16, 1).expect("clobbered");
        assert_eq!((clobber.start, clobber.end, clobber.writer), (2, 4, 2));
        assert_eq!(clobber.step, 1);
        assert_eq!(ownership.clobber_under(8, 16, 2), None);
    }

    #[test]
    fn rewriting_erases_the_clobber() {
        let mut ownership = TileOwnership::new(64);
        ownership.claim(0, 32, 1, 0);
        ownership.claim(0, 32, 2, 1);
        ownership.claim(4, 8, 1, 2);
        assert_eq!(ownership.clobber_under(4, 8, 1), None);
        assert!(ownership.clobber_under(0, 4, 1).is_some());
        assert!(ownership.clobber_under(12, 4, 1).is_some());
        ownership.claim(0, 32, 1, 3);
        assert_eq!(ownership.clobber_under(0, 32, 1), None);
        assert!(ownership.clobber_under(0, 32, 2).is_some());
    }
}
