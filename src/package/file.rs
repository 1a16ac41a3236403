//! The package file's header and its checks.
//!
//! Layout (all integers little-endian), 80 bytes, then the payload:
//!
//! | bytes  | field                                                        |
//! |--------|--------------------------------------------------------------|
//! | 0..8   | magic `SSTPKG07`: `SSTPKG` and the two-digit format version |
//! | 8..16  | payload length in bytes (u64)                                |
//! | 16..48 | BLAKE3 digest of the payload                                 |
//! | 48..80 | build key: BLAKE3 of the compiler version and the effective build query (outputs and cache aside) |
//!
//! The payload is the bincode encoding of [`Package`]. A reader checks, in
//! this order and before decoding anything: the magic (a foreign file), the
//! format version, the length (a truncated file, or bytes after the
//! package), the digest (a corrupt file); then it decodes with a size limit
//! of the payload's length, so no length prefix can make it allocate more
//! than the file holds. The build key tells whether the file is what the
//! current build would write (`superstep simulate` uses it).

use bincode::Options;

use super::{Package, PackageError};
use crate::cache::CacheKey;

/// The first bytes of every package file (format version 5: exchange steps
/// carry the merged exchanges' segment starts).
pub const PACKAGE_MAGIC: &[u8; 8] = b"SSTPKG07";

/// What every package file starts with, whatever its version.
const MAGIC_STEM: &[u8; 6] = b"SSTPKG";

/// Length of the header.
pub const HEADER_BYTES: usize = 80;

/// The header of a package file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageHeader {
    pub payload_bytes: u64,
    pub digest: [u8; 32],
    pub build: CacheKey,
}

impl PackageHeader {
    /// The header of `payload` for the build `build`.
    pub fn of(payload: &[u8], build: &CacheKey) -> PackageHeader {
        PackageHeader::of_parts(&[payload], build)
    }

    /// The header of the payload that is `parts` one after another.
    pub fn of_parts(parts: &[&[u8]], build: &CacheKey) -> PackageHeader {
        // Over the cores: a SigLIP package's payload is 71 MB.
        let mut hasher = blake3::Hasher::new();
        for part in parts {
            hasher.update_rayon(part);
        }
        PackageHeader {
            payload_bytes: parts.iter().map(|part| part.len() as u64).sum(),
            digest: *hasher.finalize().as_bytes(),
            build: *build,
        }
    }

    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut bytes = [0u8; HEADER_BYTES];
        bytes[0..8].copy_from_slice(PACKAGE_MAGIC);
        bytes[8..16].copy_from_slice(&self.payload_bytes.to_le_bytes());
        bytes[16..48].copy_from_slice(&self.digest);
        bytes[48..80].copy_from_slice(&self.build.0);
        bytes
    }

    /// Parses the header at the start of `bytes` (magic and version checked).
    pub fn parse(bytes: &[u8], path: &str) -> Result<PackageHeader, PackageError> {
        if bytes.len() < MAGIC_STEM.len() || &bytes[..MAGIC_STEM.len()] != MAGIC_STEM {
            return Err(PackageError::Foreign {
                path: path.to_string(),
            });
        }
        let version = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        if bytes.len() >= 8 && &bytes[..8] != PACKAGE_MAGIC {
            return Err(PackageError::Version {
                path: path.to_string(),
                found: version(&bytes[6..8]),
                expected: version(&PACKAGE_MAGIC[6..8]),
            });
        }
        if bytes.len() < HEADER_BYTES {
            return Err(PackageError::Truncated {
                path: path.to_string(),
                expected: HEADER_BYTES as u64,
                found: bytes.len() as u64,
            });
        }
        let mut length = [0u8; 8];
        length.copy_from_slice(&bytes[8..16]);
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&bytes[16..48]);
        let mut build = [0u8; 32];
        build.copy_from_slice(&bytes[48..80]);
        Ok(PackageHeader {
            payload_bytes: u64::from_le_bytes(length),
            digest,
            build: CacheKey(build),
        })
    }

    /// Reads only the header of the file at `path` (a regular file:
    /// `input_file`).
    pub fn read(path: &std::path::Path) -> Result<PackageHeader, PackageError> {
        let mut file = crate::input_file::InputFile::open(path)?;
        let bytes = file.read_prefix(HEADER_BYTES as u64)?;
        PackageHeader::parse(&bytes, &path.display().to_string())
    }
}

/// The largest payload a header may promise: some 50 times the largest
/// shipped package (SigLIP so400m's, about 75 MB). A header that promises
/// more is refused before anything is read.
pub const MAXIMUM_PAYLOAD_BYTES: u64 = 4 << 30;

/// Checks a whole file's bytes and returns its header and payload.
pub fn split<'a>(bytes: &'a [u8], path: &str) -> Result<(PackageHeader, &'a [u8]), PackageError> {
    let header = PackageHeader::parse(bytes, path)?;
    check_payload(&header, &bytes[HEADER_BYTES..], path)?;
    Ok((header, &bytes[HEADER_BYTES..]))
}

/// Reads the file at `path` header first: the file must be a regular one
/// (`input_file`: a FIFO or a device is refused by kind, never waited on or
/// read without end), the header is checked before the payload is read, the
/// payload it promises is bounded ([`MAXIMUM_PAYLOAD_BYTES`]) and matched
/// against the file's length before a byte of it is read.
pub fn read_checked(path: &std::path::Path) -> Result<(PackageHeader, Vec<u8>), PackageError> {
    let name = path.display().to_string();
    let mut file = crate::input_file::InputFile::open(path)?;
    let head = file.read_prefix(HEADER_BYTES as u64)?;
    let header = PackageHeader::parse(&head, &name)?;
    if header.payload_bytes > MAXIMUM_PAYLOAD_BYTES {
        return Err(PackageError::Oversized {
            path: name,
            promised: header.payload_bytes,
            limit: MAXIMUM_PAYLOAD_BYTES,
        });
    }
    let expected = HEADER_BYTES as u64 + header.payload_bytes;
    if file.length() < expected {
        return Err(PackageError::Truncated {
            path: name,
            expected,
            found: file.length(),
        });
    }
    if file.length() > expected {
        return Err(PackageError::TrailingBytes {
            path: name,
            extra: file.length() - expected,
        });
    }
    let payload = file.read_exactly(header.payload_bytes, "the payload")?;
    check_payload(&header, &payload, &name)?;
    Ok((header, payload))
}

/// The payload's length and digest against its header.
fn check_payload(header: &PackageHeader, payload: &[u8], path: &str) -> Result<(), PackageError> {
    let expected = (HEADER_BYTES as u64).saturating_add(header.payload_bytes);
    let found = HEADER_BYTES as u64 + payload.len() as u64;
    if found < expected {
        return Err(PackageError::Truncated {
            path: path.to_string(),
            expected,
            found,
        });
    }
    if found > expected {
        return Err(PackageError::TrailingBytes {
            path: path.to_string(),
            extra: found - expected,
        });
    }
    if blake3::hash(payload).as_bytes() != &header.digest {
        return Err(PackageError::Corrupt {
            path: path.to_string(),
        });
    }
    Ok(())
}

/// Decodes a checked payload (bincode's fixed-width encoding, as
/// `bincode::serialize` writes it), allocating at most its length.
pub fn decode(payload: &[u8], path: &str) -> Result<Package, PackageError> {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(payload.len() as u64)
        .deserialize(payload)
        .map_err(|source| PackageError::Encoding {
            path: path.to_string(),
            source,
        })
}
