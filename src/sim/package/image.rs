//! Tile memory images at the IPU21 addresses: one 624 KiB image per tile,
//! a written-byte bitmap per tile (for reads of never-written memory), the
//! owning allocation of every word (`super::ownership`), and
//! the placed allocations of every tile as an interval set (for writes
//! outside them).

use crate::package::Package;
use crate::target::memory::{SRAM_BYTES_PER_TILE, TILE_BASE_ADDRESS};

use super::ownership::TileOwnership;
pub use super::ownership::poison_byte;

/// One tile's memory: bytes at `TILE_BASE_ADDRESS..`, which were written,
/// and which allocation owns them.
#[derive(Clone, Default)]
pub struct TileImage {
    pub bytes: Vec<u8>,
    written: Vec<u64>,
    pub ownership: TileOwnership,
}

impl TileImage {
    /// Zeroed memory, or with `poisoned` the [`poison_byte`] pattern.
    pub fn new(poisoned: bool) -> TileImage {
        let bytes = if poisoned {
            (0..SRAM_BYTES_PER_TILE as usize).map(poison_byte).collect()
        } else {
            vec![0; SRAM_BYTES_PER_TILE as usize]
        };
        TileImage {
            bytes,
            written: vec![0; (SRAM_BYTES_PER_TILE as usize).div_ceil(64)],
            ownership: TileOwnership::new(SRAM_BYTES_PER_TILE as usize),
        }
    }

    /// Image index of absolute `address` for `length` bytes, if inside the tile.
    pub fn index(address: u64, length: usize) -> Option<usize> {
        let start = address.checked_sub(u64::from(TILE_BASE_ADDRESS))?;
        (start + length as u64 <= u64::from(SRAM_BYTES_PER_TILE)).then_some(start as usize)
    }

    pub fn mark_written(&mut self, start: usize, length: usize) {
        let end = start + length;
        let mut bit = start;
        while bit < end {
            if bit.is_multiple_of(64) && bit + 64 <= end {
                self.written[bit / 64] = u64::MAX;
                bit += 64;
            } else {
                self.written[bit / 64] |= 1 << (bit % 64);
                bit += 1;
            }
        }
    }

    /// The first never-written byte of `start..start + length`, if any.
    pub fn first_unwritten(&self, start: usize, length: usize) -> Option<usize> {
        let end = start + length;
        let mut bit = start;
        while bit < end {
            let word = self.written[bit / 64];
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
    /// all were (the common case, without a per-byte mask).
    pub fn written_mask_if_partial(&self, start: usize, length: usize) -> Option<Vec<bool>> {
        self.first_unwritten(start, length)
            .map(|_| self.written_mask(start, length))
    }

    /// Writes `data` with the written-ness `mask` (`None`: all written).
    pub fn write_with(&mut self, start: usize, data: &[u8], mask: Option<&[bool]>) {
        match mask {
            Some(mask) => self.write_masked(start, data, mask),
            None => self.write(start, data),
        }
    }

    /// Which bytes of `start..start + length` were written.
    pub fn written_mask(&self, start: usize, length: usize) -> Vec<bool> {
        (start..start + length)
            .map(|bit| self.written[bit / 64] & (1 << (bit % 64)) != 0)
            .collect()
    }

    /// Writes `data`, marking only the bytes `mask` says were written at
    /// their source (moving memory moves its written-ness with it).
    pub fn write_masked(&mut self, start: usize, data: &[u8], mask: &[bool]) {
        self.bytes[start..start + data.len()].copy_from_slice(data);
        for (index, &written) in mask.iter().enumerate() {
            let bit = start + index;
            if written {
                self.written[bit / 64] |= 1 << (bit % 64);
            } else {
                self.written[bit / 64] &= !(1 << (bit % 64));
            }
        }
    }

    pub fn write(&mut self, start: usize, data: &[u8]) {
        self.bytes[start..start + data.len()].copy_from_slice(data);
        self.mark_written(start, data.len());
    }
}

/// Placed allocations of every tile as sorted, merged `[start, end)` byte intervals.
pub struct PlacedIntervals {
    tiles: Vec<Vec<(u64, u64)>>,
}

impl PlacedIntervals {
    pub fn new(package: &Package) -> PlacedIntervals {
        let mut tiles: Vec<Vec<(u64, u64)>> = vec![Vec::new(); package.tiles as usize];
        for allocation in &package.allocations {
            let start = u64::from(allocation.address);
            let end = start + u64::from(allocation.bytes) * u64::from(allocation.iterations);
            if let Some(list) = tiles.get_mut(allocation.tile as usize) {
                list.push((start, end));
            }
        }
        for list in &mut tiles {
            list.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(list.len());
            for &(start, end) in list.iter() {
                match merged.last_mut() {
                    Some(last) if start <= last.1 => last.1 = last.1.max(end),
                    _ => merged.push((start, end)),
                }
            }
            *list = merged;
        }
        PlacedIntervals { tiles }
    }

    /// Whether `address..address + length` lies inside one placed interval of `tile`.
    pub fn contains(&self, tile: u32, address: u64, length: u64) -> bool {
        let Some(list) = self.tiles.get(tile as usize) else {
            return false;
        };
        let position = list.partition_point(|&(start, _)| start <= address);
        position > 0 && {
            let (_, end) = list[position - 1];
            address + length <= end
        }
    }
}
