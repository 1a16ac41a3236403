//! A fast, non-cryptographic hasher for the compiler's internal hash maps
//! (keys are small integers and ids the compiler made itself, never
//! adversarial input): the multiply-rotate scheme of rustc's FxHasher.
//! Std's default SipHash costs more than the work around it in the hot
//! maps of expansion, hazard analysis and row sharing.
//!
//! Never iterate one of these maps where the order reaches an output; the
//! compiler's outputs must be deterministic and independent of hashing.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

const MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;

#[derive(Clone, Copy, Default)]
pub struct FastHasher {
    hash: u64,
}

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.add(value as u64);
    }

    #[inline]
    fn write_u16(&mut self, value: u16) {
        self.add(value as u64);
    }

    #[inline]
    fn write_u32(&mut self, value: u32) {
        self.add(value as u64);
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FastBuildHasher = BuildHasherDefault<FastHasher>;
pub type FastMap<K, V> = HashMap<K, V, FastBuildHasher>;
pub type FastSet<K> = HashSet<K, FastBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_work_and_hashes_spread() {
        let mut map: FastMap<(u32, u32), u32> = FastMap::default();
        for tile in 0..1472u32 {
            for slot in 0..16u32 {
                map.insert((tile, slot), tile * 16 + slot);
            }
        }
        assert_eq!(map.len(), 1472 * 16);
        assert_eq!(map[&(1000, 7)], 16_007);
        // Byte writes of different lengths differ.
        let hash = |bytes: &[u8]| {
            let mut hasher = FastHasher::default();
            hasher.write(bytes);
            hasher.finish()
        };
        assert_ne!(hash(&[1, 2, 3]), hash(&[1, 2, 3, 4]));
        assert_ne!(hash(&[1]), hash(&[2]));
    }
}
