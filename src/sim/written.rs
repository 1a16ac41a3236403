//! The low-program interpreter's record of which bytes of every allocation
//! the program has written: one bit per byte of each allocation's buffer
//! (every instance of an iterated allocation).
//!
//! The host load marks whole instances (it writes block images, padding
//! zero), kernels mark the bytes they write, fills mark what they zero,
//! and copies and exchange receives move the written-ness of their source
//! bytes with the data. A kernel reading a byte its allocation never had
//! written is a program that leaves padding undefined: the interpreter
//! refuses it (`interpreter`). This is the interpreter's own check, kept
//! apart from the package simulator's per-tile bitmap and ownership map
//! (`package::image`, `package::ownership`), so the two check each other.

use crate::expand::program::{Allocation, AllocationId};

/// Written bits of every allocation's buffer.
pub struct WrittenBytes {
    masks: Vec<Vec<u64>>,
}

impl WrittenBytes {
    /// Nothing written yet.
    pub fn new(allocations: &[Allocation]) -> WrittenBytes {
        WrittenBytes {
            masks: allocations
                .iter()
                .map(|allocation| {
                    let bytes = allocation.bytes as usize * allocation.iterations as usize;
                    vec![0u64; bytes.div_ceil(64)]
                })
                .collect(),
        }
    }

    /// Marks buffer bytes `start..start + length` of `allocation` written.
    pub fn mark(&mut self, allocation: AllocationId, start: usize, length: usize) {
        let mask = &mut self.masks[allocation.0 as usize];
        let end = start + length;
        let mut bit = start;
        while bit < end {
            if bit.is_multiple_of(64) && bit + 64 <= end {
                mask[bit / 64] = u64::MAX;
                bit += 64;
            } else {
                mask[bit / 64] |= 1 << (bit % 64);
                bit += 1;
            }
        }
    }

    /// The first never-written byte of `start..start + length` of
    /// `allocation`'s buffer, if any.
    pub fn first_unwritten(
        &self,
        allocation: AllocationId,
        start: usize,
        length: usize,
    ) -> Option<usize> {
        let mask = &self.masks[allocation.0 as usize];
        let end = start + length;
        let mut bit = start;
        while bit < end {
            let word = mask[bit / 64];
            if bit.is_multiple_of(64) && bit + 64 <= end && word == u64::MAX {
                bit += 64;
                continue;
            }
            if word & (1 << (bit % 64)) == 0 {
                return Some(bit);
            }
            bit += 1;
        }
        None
    }

    /// Which bytes of `start..start + length` were written: `None` when
    /// all were.
    pub fn partial(
        &self,
        allocation: AllocationId,
        start: usize,
        length: usize,
    ) -> Option<Vec<bool>> {
        self.first_unwritten(allocation, start, length)?;
        let mask = &self.masks[allocation.0 as usize];
        Some(
            (start..start + length)
                .map(|bit| mask[bit / 64] & (1 << (bit % 64)) != 0)
                .collect(),
        )
    }

    /// Sets the written-ness of `start..` of `allocation` to `written`
    /// (`None`: all written), as a copy or receive moving bytes does.
    pub fn moved(
        &mut self,
        allocation: AllocationId,
        start: usize,
        length: usize,
        written: Option<&[bool]>,
    ) {
        let Some(written) = written else {
            self.mark(allocation, start, length);
            return;
        };
        let mask = &mut self.masks[allocation.0 as usize];
        for (index, &was_written) in written.iter().enumerate() {
            let bit = start + index;
            if was_written {
                mask[bit / 64] |= 1 << (bit % 64);
            } else {
                mask[bit / 64] &= !(1 << (bit % 64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::program::{Provenance, Reason};
    use crate::layout::format::MemoryClass;

    fn allocation(bytes: u32, iterations: u32) -> Allocation {
        Allocation {
            tile: 0,
            bytes,
            alignment: 8,
            class: MemoryClass::Standard,
            alias_group: 0,
            iterations,
            provenance: Provenance {
                op: 0,
                value: None,
                reason: Reason::ValueBlock,
            },
        }
    }

    #[test]
    fn marks_ranges_and_finds_the_first_gap() {
        let mut written = WrittenBytes::new(&[allocation(100, 2)]);
        let id = AllocationId(0);
        assert_eq!(written.first_unwritten(id, 0, 200), Some(0));
        written.mark(id, 0, 130);
        assert_eq!(written.first_unwritten(id, 0, 130), None);
        assert_eq!(written.first_unwritten(id, 120, 20), Some(130));
        written.mark(id, 131, 69);
        assert_eq!(written.first_unwritten(id, 0, 200), Some(130));
    }

    #[test]
    fn moving_bytes_moves_their_written_ness() {
        let mut written = WrittenBytes::new(&[allocation(16, 1), allocation(16, 1)]);
        written.mark(AllocationId(0), 0, 4);
        written.mark(AllocationId(1), 0, 16);
        let mask = written.partial(AllocationId(0), 2, 4);
        assert_eq!(mask, Some(vec![true, true, false, false]));
        written.moved(AllocationId(1), 8, 4, mask.as_deref());
        assert_eq!(written.first_unwritten(AllocationId(1), 0, 16), Some(10));
        written.moved(AllocationId(1), 8, 4, None);
        assert_eq!(written.first_unwritten(AllocationId(1), 0, 16), None);
        assert_eq!(written.partial(AllocationId(1), 0, 16), None);
    }
}
