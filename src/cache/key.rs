//! Cache keys: 256-bit BLAKE3 digests of everything a cached result depends
//! on, computed through a [`std::hash::Hasher`] so that any `Hash` type
//! (an exchange problem, a policy) can feed one.
//!
//! The std `Hash` impls of integers and slices of integers write raw
//! little-endian bytes (and slice lengths as `usize`), which is stable for a
//! given source; the compiler's source fingerprint is part of every key, so
//! a change of any derived `Hash` impl can only cause misses.

use std::fmt;
use std::hash::{Hash, Hasher};

/// Bytes buffered before they are fed to BLAKE3 (small writes are common).
const BUFFER_BYTES: usize = 64 * 1024;

/// The version of the cache's key derivation (and of every digest made with
/// [`StableHasher::for_domain`], such as a package's build key). Bump it
/// whenever a key changes meaning; the entry file's own layout has its
/// version in `super::entry::ENTRY_FORMAT_VERSION`.
pub const CACHE_FORMAT_VERSION: u32 = 2;

/// The compiler that computes cached results: its package version and a
/// fingerprint of its source tree (see build.rs).
pub fn tool_version() -> &'static str {
    concat!(
        env!("CARGO_PKG_VERSION"),
        "+",
        env!("SUPERSTEP_SOURCE_FINGERPRINT")
    )
}

/// A BLAKE3 hasher behind the `Hasher` interface, with a write buffer.
pub struct StableHasher {
    hasher: blake3::Hasher,
    buffer: Vec<u8>,
}

impl Default for StableHasher {
    fn default() -> Self {
        StableHasher {
            hasher: blake3::Hasher::new(),
            buffer: Vec::with_capacity(BUFFER_BYTES),
        }
    }
}

impl StableHasher {
    /// A hasher already fed with the domain `label`, the format version and
    /// the tool version.
    pub fn for_domain(label: &str) -> StableHasher {
        let mut hasher = StableHasher::default();
        label.hash(&mut hasher);
        CACHE_FORMAT_VERSION.hash(&mut hasher);
        tool_version().hash(&mut hasher);
        hasher
    }

    pub fn digest(mut self) -> CacheKey {
        self.hasher.update(&self.buffer);
        CacheKey(*self.hasher.finalize().as_bytes())
    }
}

impl Hasher for StableHasher {
    fn write(&mut self, bytes: &[u8]) {
        if self.buffer.len() + bytes.len() > BUFFER_BYTES {
            self.hasher.update(&self.buffer);
            self.buffer.clear();
            if bytes.len() >= BUFFER_BYTES {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// Unused by the cache (keys come from [`StableHasher::digest`]); the
    /// first 8 bytes of the digest so far.
    fn finish(&self) -> u64 {
        let mut hasher = self.hasher.clone();
        hasher.update(&self.buffer);
        let bytes = hasher.finalize();
        u64::from_le_bytes(bytes.as_bytes()[..8].try_into().unwrap_or([0; 8]))
    }
}

/// A content address: the digest names the file and is stored inside it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// The key of `value` in domain `label` (which names what is cached).
    pub fn of<T: Hash + ?Sized>(label: &str, value: &T) -> CacheKey {
        let mut hasher = StableHasher::for_domain(label);
        value.hash(&mut hasher);
        hasher.digest()
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "CacheKey({})", &self.hex()[..16])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_have_equal_keys_and_domains_separate_them() {
        let words: Vec<u32> = (0..100_000).collect();
        assert_eq!(CacheKey::of("a", &words), CacheKey::of("a", &words));
        assert_ne!(CacheKey::of("a", &words), CacheKey::of("b", &words));
        let mut other = words.clone();
        other[99_999] += 1;
        assert_ne!(CacheKey::of("a", &words), CacheKey::of("a", &other));
    }

    #[test]
    fn buffering_does_not_change_the_digest() {
        let bytes: Vec<u8> = (0..200_000u32).map(|value| value as u8).collect();
        let mut whole = StableHasher::default();
        whole.write(&bytes);
        let mut pieces = StableHasher::default();
        for chunk in bytes.chunks(7) {
            pieces.write(chunk);
        }
        assert_eq!(whole.digest(), pieces.digest());
    }
}
