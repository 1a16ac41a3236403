//! The exchange snapshot format, schema version 4, as serde types.
//!
//! One JSON object: `schema_version`, `tile_count` and the ordered `phases`.
//! A phase has its integer `phase` id, optional provenance and its
//! `transfers` in semantic order. A transfer names its `source` tile, one
//! absolute source byte address per Repeat iteration (`source_addresses`,
//! a single element outside a Repeat), its `destinations` as
//! `[tile, byte_address]` pairs, its `words` (32-bit) and its `width`.
//!
//! Everything this compiler adds beyond the seed system's fields is optional
//! and skipped when absent, so older snapshots read unchanged:
//!
//! - phase provenance: `key` (`op#ordinal`), `operator`, `reason`,
//!   `executions`;
//! - the symbolic-address provenance that makes a round trip exact:
//!   `allocations` (the phase's local allocations with their placed
//!   addresses) and, per transfer, `source_allocation` and
//!   `destination_allocations` (which local allocation each address lies
//!   in). See `crate::snapshot` for why addresses alone are not enough.
//!
//! This module owns the shape of the file only: it must not check meaning
//! (`import` does) or read a build (`capture` does).

use serde::{Deserialize, Serialize};

/// The schema version this compiler reads and writes.
pub const SCHEMA_VERSION: u32 = 4;

/// A whole snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub schema_version: u32,
    pub tile_count: u32,
    pub phases: Vec<SnapshotPhase>,
}

/// One exchange phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPhase {
    pub phase: u32,
    /// Stable phase key, `op#ordinal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The operator whose exchange this phase is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// Why the phase exists (free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How often the phase runs per inference (Repeat iterations inside a body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions: Option<u32>,
    /// The phase's local allocations, in local order (symbolic provenance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<Vec<AllocationRecord>>,
    pub transfers: Vec<SnapshotTransfer>,
    /// The first transfer of each exchange merged into this phase after
    /// the first (ascending; absent when it merged nothing): a scheduling
    /// hint (`ExchangeProblem::segment_starts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segment_starts: Vec<u32>,
}

/// One local allocation of a phase, as placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRecord {
    pub tile: u32,
    /// Absolute byte address of the allocation (alias members: their root's).
    pub address: u32,
    /// Bytes of one instance (the Repeat binding stride when iterated).
    pub bytes: u32,
    /// Instances stored consecutively; `> 1` means bound per Repeat iteration.
    pub iterations: u32,
    pub alignment: u32,
    /// Local index of the alias root.
    pub alias_root: u32,
}

/// One transfer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotTransfer {
    pub source: u32,
    pub source_addresses: Vec<u32>,
    pub destinations: Vec<(u32, u32)>,
    pub words: u32,
    pub width: SnapshotWidth,
    /// Local allocation of the source address (symbolic provenance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_allocation: Option<u32>,
    /// Local allocation of each destination address (symbolic provenance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_allocations: Option<Vec<u32>>,
}

/// Word width a transfer moved with, spelt as the build file spells a
/// transfer width (`word32`, `paired64`; captures written before read with
/// `Word32` and `Paired64` too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SnapshotWidth {
    #[serde(rename = "word32", alias = "Word32")]
    Word32,
    #[serde(rename = "paired64", alias = "Paired64")]
    Paired64,
}

impl SnapshotWidth {
    pub fn from_paired(paired: bool) -> SnapshotWidth {
        if paired {
            SnapshotWidth::Paired64
        } else {
            SnapshotWidth::Word32
        }
    }

    pub fn is_paired(self) -> bool {
        self == SnapshotWidth::Paired64
    }
}

/// A snapshot that cannot be read or written as JSON.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Output(crate::output_file::OutputFileError),
    #[error("{path} is not a schema-4 exchange snapshot: {location}: {message}")]
    Json {
        path: String,
        /// Where the bad value is: phase, transfer and field (`locate`).
        location: String,
        /// serde's message without its line and column.
        message: String,
    },
}

/// The `FormatError::Json` of a parse failure, located by phase, transfer and field.
fn json_error(bytes: &[u8], path: &str, source: &serde_json::Error) -> FormatError {
    let text = source.to_string();
    let mut message = match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    };
    let offset = super::locate::offset_of(bytes, source.line(), source.column());
    let mut steps = super::locate::path_at(bytes, offset);
    if message.starts_with("missing field")
        && matches!(steps.last(), Some(super::locate::PathStep::Key(_)))
    {
        // The scan stopped at the end of the object: its last key read is
        // not the one missing.
        steps.pop();
    }
    if message.contains("expected u32") {
        message.push_str(" (a whole number in 0..=4294967295)");
    }
    FormatError::Json {
        path: path.to_string(),
        location: super::locate::describe(&steps),
        message,
    }
}

/// The most bytes a snapshot file may have (SigLIP so400m's is some tens of
/// megabytes).
pub const MAX_SNAPSHOT_BYTES: u64 = 2 << 30;

impl Snapshot {
    /// Parses a snapshot from bytes (one pass, no quadratic work).
    pub fn from_slice(bytes: &[u8], path: &str) -> Result<Snapshot, FormatError> {
        serde_json::from_slice(bytes).map_err(|source| json_error(bytes, path, &source))
    }

    /// Reads and parses a snapshot file.
    pub fn read(path: &std::path::Path) -> Result<Snapshot, FormatError> {
        let name = path.display().to_string();
        let bytes =
            crate::input_file::read(path, MAX_SNAPSHOT_BYTES, "a snapshot").map_err(|error| {
                FormatError::Read {
                    path: name.clone(),
                    source: error.into_io(),
                }
            })?;
        Snapshot::from_slice(&bytes, &name)
    }

    /// The compact JSON text (deterministic: fields in declaration order).
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising plain structs of integers, strings and vectors cannot
        // fail (no maps, no non-finite floats, an in-memory writer).
        let mut bytes = serde_json::to_vec(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Writes the compact JSON text to `path`.
    pub fn write(&self, path: &std::path::Path) -> Result<(), FormatError> {
        crate::output_file::write_atomically(path, &self.to_bytes()).map_err(FormatError::Output)
    }
}
