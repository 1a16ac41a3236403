//! The cache's file format: one entry per file, self-describing and
//! self-checking, so that a file that is foreign, from another format or
//! compiler, truncated or corrupt is recognised as such and never decoded.
//!
//! ```text
//! magic            8 bytes  "SSTCACHE"
//! format version   u32 LE   CACHE_FORMAT_VERSION
//! kind             u8       EntryKind
//! key              32 bytes the content address the entry answers
//! tool length      u16 LE   then the tool version, UTF-8
//! payload length   u64 LE
//! payload digest   32 bytes BLAKE3 of the payload
//! payload          bincode
//! ```

use super::key::{CACHE_FORMAT_VERSION, CacheKey, tool_version};

pub const MAGIC: &[u8; 8] = b"SSTCACHE";

/// What an entry holds (also the name of its sub-folder).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A validated exchange schedule of (problem, policy, width).
    Schedule = 1,
    /// The checked rows of (problem, policy, width).
    Rows = 2,
    /// The horizon, lower bound and width of (problem, policy, width).
    Figures = 3,
    /// The placement of a program (first-half inputs) under reservations.
    Placement = 4,
    /// One `superstep sweep` point: a (problem, policy, width)'s figures,
    /// rows and Repeat patch words.
    SweepPoint = 5,
    /// One phase's `superstep packing` study under one (policy, width):
    /// the original and each counterfactual, measured.
    PackingStudy = 6,
    /// One `superstep search`: the starting build's key and the search
    /// settings, and the steps and overrides found.
    LayoutSearch = 7,
}

impl EntryKind {
    pub const ALL: [EntryKind; 7] = [
        EntryKind::Schedule,
        EntryKind::Rows,
        EntryKind::Figures,
        EntryKind::Placement,
        EntryKind::SweepPoint,
        EntryKind::PackingStudy,
        EntryKind::LayoutSearch,
    ];

    pub fn folder(self) -> &'static str {
        match self {
            EntryKind::Schedule => "schedule",
            EntryKind::Rows => "rows",
            EntryKind::Figures => "figures",
            EntryKind::Placement => "placement",
            EntryKind::SweepPoint => "sweep",
            EntryKind::PackingStudy => "packing",
            EntryKind::LayoutSearch => "search",
        }
    }
}

/// Why an entry's bytes cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("not a superstep cache file (bad magic)")]
    Foreign,
    #[error("cache format {found}, this compiler reads format {expected}")]
    Format { found: u32, expected: u32 },
    #[error("written by compiler {found}, this is {expected}")]
    Tool { found: String, expected: String },
    #[error("holds a {found} entry where a {expected} entry was expected")]
    Kind { found: u8, expected: u8 },
    #[error("answers key {found}, not {expected}")]
    Key { found: String, expected: String },
    #[error("truncated: {found} bytes where {expected} were expected")]
    Truncated { found: u64, expected: u64 },
    #[error("corrupt: the payload's digest does not match")]
    Corrupt,
    #[error("corrupt: the payload does not decode ({0})")]
    Undecodable(String),
}

/// Encodes one entry.
pub fn encode(kind: EntryKind, key: &CacheKey, payload: &[u8]) -> Vec<u8> {
    let tool = tool_version().as_bytes();
    let mut bytes = Vec::with_capacity(payload.len() + 128);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&CACHE_FORMAT_VERSION.to_le_bytes());
    bytes.push(kind as u8);
    bytes.extend_from_slice(&key.0);
    bytes.extend_from_slice(&(tool.len() as u16).to_le_bytes());
    bytes.extend_from_slice(tool);
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(blake3::hash(payload).as_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A cursor over an entry's bytes that reports truncation.
struct Reader<'bytes> {
    bytes: &'bytes [u8],
    position: usize,
}

impl<'bytes> Reader<'bytes> {
    fn take(&mut self, count: usize) -> Result<&'bytes [u8], EntryError> {
        let end = self.position + count;
        if end > self.bytes.len() {
            return Err(EntryError::Truncated {
                found: self.bytes.len() as u64,
                expected: end as u64,
            });
        }
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], EntryError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }
}

/// Checks an entry's header and digest; returns its payload.
pub fn decode<'bytes>(
    bytes: &'bytes [u8],
    kind: EntryKind,
    key: &CacheKey,
) -> Result<&'bytes [u8], EntryError> {
    let mut reader = Reader { bytes, position: 0 };
    // A file shorter than the magic that matches its prefix is a truncated
    // entry; anything else without the magic is foreign.
    if bytes.len() < MAGIC.len() {
        return Err(if MAGIC.starts_with(bytes) {
            EntryError::Truncated {
                found: bytes.len() as u64,
                expected: MAGIC.len() as u64,
            }
        } else {
            EntryError::Foreign
        });
    }
    if reader.take(MAGIC.len())? != MAGIC {
        return Err(EntryError::Foreign);
    }
    let format = u32::from_le_bytes(reader.array()?);
    if format != CACHE_FORMAT_VERSION {
        return Err(EntryError::Format {
            found: format,
            expected: CACHE_FORMAT_VERSION,
        });
    }
    let found_kind = reader.array::<1>()?[0];
    let found_key = CacheKey(reader.array()?);
    let tool_length = u16::from_le_bytes(reader.array()?) as usize;
    let tool = reader.take(tool_length)?;
    if tool != tool_version().as_bytes() {
        return Err(EntryError::Tool {
            found: String::from_utf8_lossy(tool).into_owned(),
            expected: tool_version().to_string(),
        });
    }
    if found_kind != kind as u8 {
        return Err(EntryError::Kind {
            found: found_kind,
            expected: kind as u8,
        });
    }
    if found_key != *key {
        return Err(EntryError::Key {
            found: found_key.hex(),
            expected: key.hex(),
        });
    }
    let length = u64::from_le_bytes(reader.array()?);
    let digest: [u8; 32] = reader.array()?;
    let start = reader.position as u64;
    let available = bytes.len() as u64 - start;
    if available < length {
        return Err(EntryError::Truncated {
            found: bytes.len() as u64,
            expected: start + length,
        });
    }
    if available > length {
        return Err(EntryError::Corrupt);
    }
    let payload = reader.take(length as usize)?;
    if blake3::hash(payload).as_bytes() != &digest {
        return Err(EntryError::Corrupt);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CacheKey {
        CacheKey::of("test", &42u32)
    }

    #[test]
    fn round_trips_and_rejects_every_damage() {
        let payload: Vec<u8> = (0..1000u32).map(|value| value as u8).collect();
        let bytes = encode(EntryKind::Rows, &key(), &payload);
        assert_eq!(
            decode(&bytes, EntryKind::Rows, &key()).unwrap(),
            &payload[..]
        );
        assert!(matches!(
            decode(&bytes, EntryKind::Schedule, &key()),
            Err(EntryError::Kind { .. })
        ));
        assert!(matches!(
            decode(&bytes, EntryKind::Rows, &CacheKey::of("test", &43u32)),
            Err(EntryError::Key { .. })
        ));
        for cut in [0, 3, 8, 20, 60, bytes.len() - 1] {
            assert!(
                matches!(
                    decode(&bytes[..cut], EntryKind::Rows, &key()),
                    Err(EntryError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 10;
        flipped[last] ^= 1;
        assert_eq!(
            decode(&flipped, EntryKind::Rows, &key()),
            Err(EntryError::Corrupt)
        );
        assert_eq!(
            decode(b"{\"json\": true}", EntryKind::Rows, &key()),
            Err(EntryError::Foreign)
        );
        let mut other_format = bytes.clone();
        other_format[8] ^= 0xff;
        assert!(matches!(
            decode(&other_format, EntryKind::Rows, &key()),
            Err(EntryError::Format { .. })
        ));
    }
}
