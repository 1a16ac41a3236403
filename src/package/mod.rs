//! The package: finalized per-tile programs, serialised to
//! `artifacts/NAME/package.bin`.
//!
//! It holds every allocation's placed address, the phase-grouped steps with
//! every location resolved to its absolute tile address, each exchange
//! phase's rows with their relocation slots filled (one row per tile, as the
//! tile's exchange table will hold it), the Repeat patch lists and the
//! row-sharing patches. Inside the package, `Location::offset` is the
//! absolute tile address (`0x4c000`-based); `Location::allocation` is kept
//! only to give a Repeat binding its stride (`bytes` of an iterated
//! allocation).
//!
//! The file is a fixed header (magic with the format version, payload
//! length, payload digest, build key; see [`file`]), then the bincode
//! encoding of [`Package`].

pub mod file;
pub mod verify;

#[cfg(test)]
mod tests;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::expand::program::Step;
use crate::layout::format::MemoryClass;
use crate::patch::TilePatches;
use crate::rows::SharingPatch;

use crate::cache::CacheKey;
pub use file::PACKAGE_MAGIC;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedAllocation {
    pub tile: u32,
    pub address: u32,
    pub bytes: u32,
    pub iterations: u32,
    pub class: MemoryClass,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackagePhase {
    pub key: String,
    pub executions: u32,
    /// Path from `Package::steps` to the phase's exchange step.
    pub step_path: Vec<u32>,
    /// Finalized row words of every tile (empty for idle tiles).
    pub rows: Vec<Vec<u32>>,
    pub repeat_patches: Vec<TilePatches>,
    /// Per tile: which stored row of the tile's exchange table this phase
    /// runs from (`u32::MAX`: none). Phases sharing one stored row differ
    /// only in the words their sharing patches rewrite.
    pub stored_rows: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    pub name: String,
    pub tiles: u32,
    /// The scale policy of the build's FP8 weights (the scales themselves
    /// are the weights', loaded with them).
    pub fp8_scale: crate::model::quantisation::Fp8Scale,
    pub names: Vec<String>,
    pub allocations: Vec<PlacedAllocation>,
    pub steps: Vec<Step>,
    pub phases: Vec<PackagePhase>,
    pub sharing_patches: Vec<SharingPatch>,
    pub exchange_table_base: Vec<u32>,
    pub patch_lists_base: Vec<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("phase `{phase}`: {message}")]
    Rows { phase: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Output(#[from] crate::output_file::OutputFileError),
    #[error(transparent)]
    Input(#[from] crate::input_file::InputFileError),
    #[error("{path} is not a superstep package (it does not start with `SSTPKG`)")]
    Foreign { path: String },
    #[error(
        "{path} is a package of format {found}, but this superstep reads format {expected}; \
         write it again with `superstep build`"
    )]
    Version {
        path: String,
        found: String,
        expected: String,
    },
    #[error(
        "{path} is truncated: its header promises {expected} bytes, the file has {found}; \
         write it again with `superstep build`"
    )]
    Truncated {
        path: String,
        expected: u64,
        found: u64,
    },
    #[error(
        "{path}: its header promises a payload of {promised} bytes, more than the {limit} a \
         package may have; it is not a package superstep wrote"
    )]
    Oversized {
        path: String,
        promised: u64,
        limit: u64,
    },
    #[error("{path} has {extra} bytes after the package its header describes")]
    TrailingBytes { path: String, extra: u64 },
    #[error(
        "{path} is corrupt: its payload's BLAKE3 digest is not the one in its header; \
         write it again with `superstep build`"
    )]
    Corrupt { path: String },
    #[error("{path}: the payload cannot be decoded as a package: {source}")]
    Encoding {
        path: String,
        source: bincode::Error,
    },
}

impl Package {
    /// Writes the package file (header and payload, see [`file`]) for the
    /// build whose [`build_key`] is `build`, atomically (a temporary file in
    /// the same folder, then a rename), and returns its length in bytes.
    pub fn write(&self, path: &Path, build: &CacheKey) -> Result<u64, PackageError> {
        let parts = self
            .encode_parts()
            .map_err(|source| PackageError::Encoding {
                path: path.display().to_string(),
                source,
            })?;
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let header = file::PackageHeader::of_parts(&parts, build);
        let header_bytes = header.to_bytes();
        let mut file: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        file.push(&header_bytes);
        file.extend_from_slice(&parts);
        crate::output_file::write_parts_durably(path, &file)?;
        Ok(file::HEADER_BYTES as u64 + header.payload_bytes)
    }

    /// The payload: the package in bincode, `bincode::serialize(self)`.
    pub fn encode(&self) -> bincode::Result<Vec<u8>> {
        Ok(self.encode_parts()?.concat())
    }

    /// The payload in consecutive parts, written one after another (never
    /// copied into one buffer: a SigLIP payload is 71 MB). The two bulky
    /// fields (the steps and the phases' rows) are encoded in parallel;
    /// bincode writes a struct as its fields in order, so the parts'
    /// concatenation is exactly `bincode::serialize(self)` (a test checks).
    pub fn encode_parts(&self) -> bincode::Result<[Vec<u8>; 4]> {
        let (steps, phases) = rayon::join(
            || bincode::serialize(&self.steps),
            || bincode::serialize(&self.phases),
        );
        let (steps, phases) = (steps?, phases?);
        let mut head = Vec::with_capacity(1 << 20);
        bincode::serialize_into(&mut head, &self.name)?;
        bincode::serialize_into(&mut head, &self.tiles)?;
        bincode::serialize_into(&mut head, &self.fp8_scale)?;
        bincode::serialize_into(&mut head, &self.names)?;
        bincode::serialize_into(&mut head, &self.allocations)?;
        let mut tail = Vec::new();
        bincode::serialize_into(&mut tail, &self.sharing_patches)?;
        bincode::serialize_into(&mut tail, &self.exchange_table_base)?;
        bincode::serialize_into(&mut tail, &self.patch_lists_base)?;
        Ok([head, steps, phases, tail])
    }

    /// Reads a package file: checks its header (magic and format version),
    /// its length and its payload digest before decoding anything, so a
    /// foreign, truncated or corrupt file is an error that says which.
    pub fn read(path: &Path) -> Result<Package, PackageError> {
        Ok(Package::read_with_header(path)?.0)
    }

    /// [`Package::read`], also returning the header.
    pub fn read_with_header(path: &Path) -> Result<(Package, file::PackageHeader), PackageError> {
        let (header, payload) = file::read_checked(path)?;
        let package = file::decode(&payload, &path.display().to_string())?;
        Ok((package, header))
    }
}
