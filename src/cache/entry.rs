//! The cache's file format: one entry per file, self-describing and
//! self-checking, so that a file that is foreign, from another format or
//! compiler, truncated or corrupt is recognised as such and never decoded.
//!
//! ```text
//! magic            8 bytes  "SSTCACHE"
//! format version   u32 LE   ENTRY_FORMAT_VERSION
//! kind             u8       EntryKind
//! key              32 bytes the content address the entry answers
//! tool length      u16 LE   then the tool version, UTF-8
//! stored length    u64 LE   bytes of the stored (compressed) payload
//! payload length   u64 LE   bytes of the payload once decompressed
//! stored digest    32 bytes BLAKE3 of the stored payload
//! signature flag   u8       0: unsigned, 1: Ed25519, then
//!   signer         32 bytes the writer's public key
//!   signature      64 bytes over kind, key, tool, payload length and digest
//! stored payload   one zstd frame of the payload (bincode or a compact form)
//! ```
//!
//! A signature ([`super::signing`]) says who wrote the entry; a reader
//! verifies it only against the keys it trusts, after the digest, and
//! [`decode`] reports how it stands ([`Signature`]): whether the entry's
//! check for meaning may be skipped is the caller's decision.
//!
//! The digest covers the stored bytes, so a damaged file is refused before
//! it is decompressed, and decompression is bounded by the declared payload
//! length (at most [`MAXIMUM_PAYLOAD_BYTES`]): a frame that would expand
//! further, or to another length, is corrupt. Compression is zstd at
//! [`COMPRESSION_LEVEL`]: on a cold SigLIP so400m build's entries (schedules
//! and rows, 305 MiB as bincode) it stores about a fifth of the bytes and
//! decompresses at well over 1 GB/s (docs/measurements.md, "Cold builds and the cache").

use super::key::{CacheKey, tool_version};
use super::signing::{
    PUBLIC_KEY_BYTES, PublicKey, SIGNATURE_BYTES, Signature, SigningKey, TrustedKeys,
    signed_message,
};

pub const MAGIC: &[u8; 8] = b"SSTCACHE";

/// The version of the entry file's layout (3: the payload is stored as a
/// zstd frame with its decompressed length; 4: an optional signature).
pub const ENTRY_FORMAT_VERSION: u32 = 4;

/// The signature flag of an unsigned entry, and of an Ed25519-signed one.
const UNSIGNED: u8 = 0;
const ED25519: u8 = 1;

/// zstd's level for entries (its default: level 1 stores about 20% more
/// for about two thirds of the time; see the module notes).
pub const COMPRESSION_LEVEL: i32 = 3;

/// The largest payload an entry may declare (1 GiB): a declared length
/// beyond it is refused before anything is allocated.
pub const MAXIMUM_PAYLOAD_BYTES: u64 = 1 << 30;

/// The most bytes an entry file may have: its header and the largest
/// payload stored uncompressed (zstd's bound on an incompressible frame is
/// the payload and 1/128 of it more, at most); a file over it is refused
/// before it is read.
pub const MAXIMUM_ENTRY_BYTES: u64 =
    MAXIMUM_PAYLOAD_BYTES + (MAXIMUM_PAYLOAD_BYTES >> 7) + (1 << 16);

/// What an entry holds (also the name of its sub-folder).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// An exchange schedule of (problem, policy, width), as the scheduler
    /// made it (validated when the program uses it).
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
    /// A phase under one standard policy, measured only as far as it could
    /// beat the phase as built (a suggestion's candidate).
    Alternative = 8,
    /// A problem's lower bound (latency-aware and dependency chain), as
    /// fusion pricing reads it.
    Bound = 9,
    /// The activation calibration of (graph, weights, calibration input):
    /// every product position's scale and figures.
    Calibration = 10,
    /// The entries one command of one build used (kind and key each), so
    /// a reader can fetch them all at once, in parallel, before it starts.
    BuildIndex = 11,
    /// One low program's phase grouping under `auto` fusion: each
    /// boundary's verdict (hazards and price), in order, so that a warm
    /// build groups phases without judging or pricing them again.
    Grouping = 12,
    /// One trial of a layout search: a configuration with the trial's
    /// layouts and the estimate it compiled to (or that it did not build),
    /// so that another shard of the search, or a later search, reads it
    /// instead of compiling the program again. Used only when a trusted
    /// key signed it (no check short of compiling proves an estimate).
    SearchTrial = 13,
    /// What a build reads of one (problem, policy, width)'s rows besides
    /// the package: their sizes and the phase's Repeat patch lists under
    /// one base choice, so that a warm build that keeps its package does
    /// not load the rows.
    RowSummary = 14,
    /// The shared row table of a program's phases (each tile's stored
    /// rows, their bytes and the sharing patches), keyed by every phase's
    /// rows and allocation map.
    RowTable = 15,
}

impl EntryKind {
    pub const ALL: [EntryKind; 15] = [
        EntryKind::Schedule,
        EntryKind::Rows,
        EntryKind::Figures,
        EntryKind::Placement,
        EntryKind::SweepPoint,
        EntryKind::PackingStudy,
        EntryKind::LayoutSearch,
        EntryKind::Alternative,
        EntryKind::Bound,
        EntryKind::Calibration,
        EntryKind::BuildIndex,
        EntryKind::Grouping,
        EntryKind::SearchTrial,
        EntryKind::RowSummary,
        EntryKind::RowTable,
    ];

    /// Whether entries of this kind are fetched from (and uploaded to) a
    /// remote tier. Only kinds whose every value an independent checker
    /// proves before use are shared: a schedule (the schedule validator)
    /// and a placement (the placement checker). Every other kind is
    /// derived locally from those, since checking it would cost what
    /// recomputing it costs (rows need the schedule to be checked against;
    /// figures, bounds, sweep points, packing studies, suggestions and
    /// searches are figures of a schedule or a whole build).
    pub fn shared_remotely(self) -> bool {
        matches!(self, EntryKind::Schedule | EntryKind::Placement)
    }

    pub fn folder(self) -> &'static str {
        match self {
            EntryKind::Schedule => "schedule",
            EntryKind::Rows => "rows",
            EntryKind::Figures => "figures",
            EntryKind::Placement => "placement",
            EntryKind::SweepPoint => "sweep",
            EntryKind::PackingStudy => "packing",
            EntryKind::LayoutSearch => "search",
            EntryKind::Alternative => "alternative",
            EntryKind::Bound => "bound",
            EntryKind::Calibration => "calibration",
            EntryKind::BuildIndex => "index",
            EntryKind::Grouping => "grouping",
            EntryKind::SearchTrial => "trial",
            EntryKind::RowSummary => "summary",
            EntryKind::RowTable => "table",
        }
    }

    /// The kind whose tag is `tag`, if any.
    pub fn from_tag(tag: u8) -> Option<EntryKind> {
        EntryKind::ALL.into_iter().find(|kind| *kind as u8 == tag)
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
    Undecodable(super::refusal::PayloadError),
    /// The value decodes but fails its check for meaning (a validator or
    /// checker independent of the code that made it).
    #[error("its value fails a check: {0}")]
    Refused(super::refusal::Refusal),
    #[error("corrupt: declares a payload of {0} bytes, more than any entry holds")]
    Oversized(u64),
    #[error("corrupt: the compressed payload does not expand to its declared length ({0})")]
    Decompression(String),
}

/// Why an entry could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("a payload of {0} bytes is over the entry limit of {MAXIMUM_PAYLOAD_BYTES}")]
    TooLarge(u64),
    #[error("zstd: {0}")]
    Compression(std::io::Error),
}

/// Encodes one entry (compressing its payload), signed by `signer` when
/// there is one. Fails only if zstd does, or the payload is over
/// [`MAXIMUM_PAYLOAD_BYTES`].
pub fn encode(
    kind: EntryKind,
    key: &CacheKey,
    payload: &[u8],
    signer: Option<&SigningKey>,
) -> Result<Vec<u8>, EncodeError> {
    if payload.len() as u64 > MAXIMUM_PAYLOAD_BYTES {
        return Err(EncodeError::TooLarge(payload.len() as u64));
    }
    let stored =
        zstd::bulk::compress(payload, COMPRESSION_LEVEL).map_err(EncodeError::Compression)?;
    let tool = tool_version().as_bytes();
    let mut bytes = Vec::with_capacity(stored.len() + 160);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&ENTRY_FORMAT_VERSION.to_le_bytes());
    bytes.push(kind as u8);
    bytes.extend_from_slice(&key.0);
    bytes.extend_from_slice(&(tool.len() as u16).to_le_bytes());
    bytes.extend_from_slice(tool);
    bytes.extend_from_slice(&(stored.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let digest = *blake3::hash(&stored).as_bytes();
    bytes.extend_from_slice(&digest);
    match signer {
        None => bytes.push(UNSIGNED),
        Some(signer) => {
            let message = signed_message(kind as u8, key, tool, payload.len() as u64, &digest);
            bytes.push(ED25519);
            bytes.extend_from_slice(&signer.public().0);
            bytes.extend_from_slice(&signer.sign(&message));
        }
    }
    bytes.extend_from_slice(&stored);
    Ok(bytes)
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

/// An entry's payload, and how its signature stands with the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub payload: Vec<u8>,
    pub signature: Signature,
}

/// An entry whose header, digest and signature were checked, its payload
/// still compressed.
pub struct Verified<'bytes> {
    stored: &'bytes [u8],
    payload_length: u64,
    pub signature: Signature,
}

impl Verified<'_> {
    /// The decompressed payload (bounded by its declared length).
    pub fn payload(&self) -> Result<Vec<u8>, EntryError> {
        let payload = zstd::bulk::decompress(self.stored, self.payload_length as usize)
            .map_err(|error| EntryError::Decompression(error.to_string()))?;
        if payload.len() as u64 != self.payload_length {
            return Err(EntryError::Decompression(format!(
                "{} bytes instead of {}",
                payload.len(),
                self.payload_length
            )));
        }
        Ok(payload)
    }
}

/// Checks an entry's header, digest and (against `trusted`) signature;
/// returns its decompressed payload and how it is signed.
pub fn decode(
    bytes: &[u8],
    kind: EntryKind,
    key: &CacheKey,
    trusted: &TrustedKeys,
) -> Result<Decoded, EntryError> {
    let verified = verify(bytes, kind, key, trusted)?;
    Ok(Decoded {
        payload: verified.payload()?,
        signature: verified.signature,
    })
}

/// Checks an entry's header, digest and (against `trusted`) signature,
/// without decompressing its payload (what a fetch needs to decide whether
/// to keep it: reading it later decodes it whole).
pub fn verify<'bytes>(
    bytes: &'bytes [u8],
    kind: EntryKind,
    key: &CacheKey,
    trusted: &TrustedKeys,
) -> Result<Verified<'bytes>, EntryError> {
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
    if format != ENTRY_FORMAT_VERSION {
        return Err(EntryError::Format {
            found: format,
            expected: ENTRY_FORMAT_VERSION,
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
    let payload_length = u64::from_le_bytes(reader.array()?);
    let digest: [u8; 32] = reader.array()?;
    let signed = match reader.array::<1>()?[0] {
        UNSIGNED => None,
        ED25519 => Some((
            PublicKey(reader.array::<PUBLIC_KEY_BYTES>()?),
            reader.array::<SIGNATURE_BYTES>()?,
        )),
        _ => return Err(EntryError::Corrupt),
    };
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
    let stored = reader.take(length as usize)?;
    if blake3::hash(stored).as_bytes() != &digest {
        return Err(EntryError::Corrupt);
    }
    if payload_length > MAXIMUM_PAYLOAD_BYTES {
        return Err(EntryError::Oversized(payload_length));
    }
    let signature = match signed {
        None => Signature::Unsigned,
        Some((signer, signature)) => {
            let message = signed_message(kind as u8, key, tool, payload_length, &digest);
            trusted.judge(signer, &message, &signature)
        }
    };
    Ok(Verified {
        stored,
        payload_length,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the stored payload of an unsigned entry starts (after the
    /// fixed header, tool and signature flag).
    fn stored_start(bytes: &[u8]) -> usize {
        let tool = u16::from_le_bytes([bytes[45], bytes[46]]) as usize;
        47 + tool + 8 + 8 + 32 + 1
    }

    fn no_keys() -> TrustedKeys {
        TrustedKeys::default()
    }

    fn payload_of(bytes: &[u8], kind: EntryKind, key: &CacheKey) -> Result<Vec<u8>, EntryError> {
        decode(bytes, kind, key, &no_keys()).map(|decoded| decoded.payload)
    }

    fn key() -> CacheKey {
        CacheKey::of("test", &42u32)
    }

    #[test]
    fn round_trips_and_rejects_every_damage() {
        let payload: Vec<u8> = (0..1000u32).map(|value| value as u8).collect();
        let bytes = encode(EntryKind::Rows, &key(), &payload, None).unwrap();
        assert_eq!(
            payload_of(&bytes, EntryKind::Rows, &key()).unwrap(),
            payload
        );
        assert!(matches!(
            payload_of(&bytes, EntryKind::Schedule, &key()),
            Err(EntryError::Kind { .. })
        ));
        assert!(matches!(
            payload_of(&bytes, EntryKind::Rows, &CacheKey::of("test", &43u32)),
            Err(EntryError::Key { .. })
        ));
        for cut in [0, 3, 8, 20, 60, bytes.len() - 1] {
            assert!(
                matches!(
                    payload_of(&bytes[..cut], EntryKind::Rows, &key()),
                    Err(EntryError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 10;
        flipped[last] ^= 1;
        assert_eq!(
            payload_of(&flipped, EntryKind::Rows, &key()),
            Err(EntryError::Corrupt)
        );
        assert_eq!(
            payload_of(b"{\"json\": true}", EntryKind::Rows, &key()),
            Err(EntryError::Foreign)
        );
        // A re-digested frame that expands to another length, and a
        // declared length beyond the limit, are refused without expanding.
        let header = stored_start(&bytes);
        let mut lying = bytes.clone();
        lying[header - 41..header - 33].copy_from_slice(&999u64.to_le_bytes());
        assert!(matches!(
            payload_of(&lying, EntryKind::Rows, &key()),
            Err(EntryError::Decompression(_))
        ));
        lying[header - 41..header - 33].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            payload_of(&lying, EntryKind::Rows, &key()),
            Err(EntryError::Oversized(_))
        ));
        let mut garbage = bytes[..header].to_vec();
        let junk = vec![0x5au8; 64];
        garbage[header - 49..header - 41].copy_from_slice(&64u64.to_le_bytes());
        garbage[header - 33..header - 1].copy_from_slice(blake3::hash(&junk).as_bytes());
        garbage.extend_from_slice(&junk);
        assert!(matches!(
            payload_of(&garbage, EntryKind::Rows, &key()),
            Err(EntryError::Decompression(_))
        ));
        let mut other_format = bytes.clone();
        other_format[8] ^= 0xff;
        assert!(matches!(
            payload_of(&other_format, EntryKind::Rows, &key()),
            Err(EntryError::Format { .. })
        ));
    }

    /// Where a signed entry's signer starts (right after its flag, where an
    /// unsigned entry's stored payload would).
    fn signature_start(bytes: &[u8]) -> usize {
        stored_start(bytes)
    }

    #[test]
    fn a_signature_is_trusted_only_from_a_listed_key_over_this_entry() {
        let (writer, _) = SigningKey::generate().expect("key");
        let (stranger, _) = SigningKey::generate().expect("key");
        let trusted = TrustedKeys::new(vec![writer.public()]);
        let payload = vec![9u8; 500];
        let bytes = encode(EntryKind::Figures, &key(), &payload, Some(&writer)).unwrap();
        let decoded = decode(&bytes, EntryKind::Figures, &key(), &trusted).unwrap();
        assert_eq!(decoded.payload, payload);
        assert_eq!(decoded.signature, Signature::Trusted(writer.public()));
        // A reader that lists no key sees the signer, unverified.
        assert_eq!(
            decode(&bytes, EntryKind::Figures, &key(), &no_keys())
                .unwrap()
                .signature,
            Signature::UnknownSigner(writer.public())
        );
        // Re-signed by a key the reader does not list.
        let resigned = encode(EntryKind::Figures, &key(), &payload, Some(&stranger)).unwrap();
        assert_eq!(
            decode(&resigned, EntryKind::Figures, &key(), &trusted)
                .unwrap()
                .signature,
            Signature::UnknownSigner(stranger.public())
        );
        // A changed payload, re-digested, under the writer's signature.
        let signature_at = signature_start(&bytes);
        let stored_at = signature_at + PUBLIC_KEY_BYTES + SIGNATURE_BYTES;
        let changed_stored = zstd::bulk::compress(&vec![8u8; 500], COMPRESSION_LEVEL).unwrap();
        let mut changed = bytes[..stored_at].to_vec();
        changed[signature_at - 1 - 32 - 8 - 8..signature_at - 1 - 32 - 8]
            .copy_from_slice(&(changed_stored.len() as u64).to_le_bytes());
        changed[signature_at - 1 - 32..signature_at - 1]
            .copy_from_slice(blake3::hash(&changed_stored).as_bytes());
        changed.extend_from_slice(&changed_stored);
        let decoded = decode(&changed, EntryKind::Figures, &key(), &trusted).unwrap();
        assert_eq!(decoded.signature, Signature::Invalid(writer.public()));
        // The entry replayed under another key: refused by its header, and
        // with the header rewritten its signature no longer verifies.
        let other = CacheKey::of("test", &43u32);
        assert!(matches!(
            decode(&bytes, EntryKind::Figures, &other, &trusted),
            Err(EntryError::Key { .. })
        ));
        let mut rekeyed = bytes.clone();
        rekeyed[13..45].copy_from_slice(&other.0);
        assert_eq!(
            decode(&rekeyed, EntryKind::Figures, &other, &trusted)
                .unwrap()
                .signature,
            Signature::Invalid(writer.public())
        );
        // And under another kind, the same way.
        let mut rekinded = bytes.clone();
        rekinded[12] = EntryKind::Bound as u8;
        assert_eq!(
            decode(&rekinded, EntryKind::Bound, &key(), &trusted)
                .unwrap()
                .signature,
            Signature::Invalid(writer.public())
        );
    }
}
