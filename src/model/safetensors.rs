//! SafeTensors files: a validating reader that converts floating-point
//! tensors to f32, and a writer for tests and tools. Format: an 8-byte
//! little-endian header length `N`, `N` bytes of JSON mapping each tensor
//! name to `{"dtype", "shape", "data_offsets": [begin, end]}` (offsets relative
//! to the first byte after the header) plus an optional `"__metadata__"`
//! string map, then the data. This module owns the file format and its
//! validation; it must not know about models, layer names or quantisation
//! (FP8 payloads are exposed as raw bytes only).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::numerics::half_float::{
    bf16_bytes_to_f32, f16_bytes_to_f32, f32_bytes_to_f32, f32_to_bytes, f32_to_f16_bytes,
};

const METADATA_KEY: &str = "__metadata__";

/// The most bytes one checkpoint file (or shard) may have: 16 GiB, some
/// ten times SigLIP so400m's vision tower in F32. A larger file is refused
/// before it is read.
pub const MAX_CHECKPOINT_FILE_BYTES: u64 = 16 << 30;
const HEADER_LENGTH_BYTES: usize = 8;
/// The data section starts at a multiple of this (the header is padded with
/// spaces).
const DATA_ALIGNMENT: usize = 8;

/// Element types a SafeTensors header can name.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    Bool,
    U8,
    I8,
    F8E4M3,
    F8E5M2,
    F8E8M0,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    F64,
    I64,
    U64,
}

impl Dtype {
    const ALL: [Dtype; 16] = [
        Dtype::Bool,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8E4M3,
        Dtype::F8E5M2,
        Dtype::F8E8M0,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
    ];

    /// The name used in headers, e.g. `"F8_E4M3"`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E5M2 => "F8_E5M2",
            Dtype::F8E8M0 => "F8_E8M0",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::F64 => "F64",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
        }
    }

    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|dtype| dtype.name() == name)
    }

    pub fn element_bytes(self) -> usize {
        match self {
            Dtype::Bool | Dtype::U8 | Dtype::I8 | Dtype::F8E4M3 | Dtype::F8E5M2 | Dtype::F8E8M0 => {
                1
            }
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// Formats a shape as `[1152, 4304]`.
pub(crate) struct ShapeDisplay<'a>(pub(crate) &'a [usize]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{:?}", self.0)
    }
}

#[derive(Debug, Error)]
pub enum SafeTensorsError {
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Input(#[from] crate::input_file::InputFileError),
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("file is truncated: {file_length} bytes, fewer than the 8-byte header length")]
    Truncated { file_length: usize },
    #[error("header length {header_length} runs past the end of the {file_length}-byte file")]
    HeaderBeyondFile {
        header_length: u64,
        file_length: usize,
    },
    #[error("header is not valid JSON: {source}")]
    InvalidJson { source: serde_json::Error },
    #[error("header is not a JSON object: {found}")]
    HeaderNotObject { found: String },
    #[error("tensor `{name}`: invalid header entry: {source}")]
    InvalidEntry {
        name: String,
        source: serde_json::Error,
    },
    #[error("`__metadata__` must map strings to strings: {source}")]
    InvalidMetadata { source: serde_json::Error },
    #[error("tensor `{name}`: unknown dtype `{dtype}`")]
    UnknownDtype { name: String, dtype: String },
    #[error(
        "tensor `{name}`: shape {} has more elements than memory can address",
        ShapeDisplay(shape)
    )]
    ShapeOverflow { name: String, shape: Vec<usize> },
    #[error("tensor `{name}` is not in the file")]
    MissingTensor { name: String },
    /// A sharded checkpoint's index (`model.safetensors.index.json`) that
    /// does not describe its shards.
    #[error("index `{}`: {message}", path.display())]
    Index { path: PathBuf, message: String },
    #[error(
        "tensor `{name}`: expected shape {}, file has {}",
        ShapeDisplay(expected),
        ShapeDisplay(found)
    )]
    ShapeMismatch {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error(
        "tensor `{name}`: dtype {dtype} cannot be converted to f32 (supported: F32, F16, BF16)"
    )]
    UnsupportedDtype { name: String, dtype: Dtype },
    #[error("tensor `{name}`: data offsets [{begin}, {end}] are reversed")]
    OffsetsReversed { name: String, begin: u64, end: u64 },
    #[error(
        "tensor `{name}`: data offsets [{begin}, {end}] run past the {data_length}-byte data section"
    )]
    OffsetsOutOfBounds {
        name: String,
        begin: u64,
        end: u64,
        data_length: usize,
    },
    #[error(
        "tensor `{name}`: data offsets [{begin}, {end}] span {} bytes, but shape {} of {dtype} needs {expected_bytes}",
        end.saturating_sub(*begin),
        ShapeDisplay(shape)
    )]
    OffsetsInconsistent {
        name: String,
        begin: u64,
        end: u64,
        shape: Vec<usize>,
        dtype: Dtype,
        expected_bytes: usize,
    },
    #[error("tensors `{first}` and `{second}` have overlapping data offsets")]
    OverlappingTensors { first: String, second: String },
    #[error(
        "tensor `{name}`: {actual} bytes of data, but shape {} of {dtype} needs {expected}",
        ShapeDisplay(shape)
    )]
    DataLength {
        name: String,
        shape: Vec<usize>,
        dtype: Dtype,
        expected: usize,
        actual: usize,
    },
    #[error("tensor `{name}` was added twice")]
    DuplicateTensor { name: String },
    #[error("tensor name `{name}` is reserved")]
    ReservedName { name: String },
}

/// One tensor's header entry, validated against the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TensorEntry {
    dtype: Dtype,
    shape: Vec<usize>,
    /// Byte range within the data section.
    begin: usize,
    end: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [u64; 2],
}

/// A parsed, validated SafeTensors file held in memory.
#[derive(Debug, Clone)]
pub struct SafeTensors {
    bytes: Vec<u8>,
    data_start: usize,
    tensors: BTreeMap<String, TensorEntry>,
    metadata: BTreeMap<String, String>,
}

impl SafeTensors {
    /// Reads and validates a checkpoint: one file, or the shards a
    /// `*.index.json` names, read as one ([`SafeTensors::read_sharded`]).
    pub fn read_checkpoint(path: &Path) -> Result<SafeTensors, SafeTensorsError> {
        if path.to_string_lossy().ends_with(".index.json") {
            SafeTensors::read_sharded(path)
        } else {
            SafeTensors::read(path)
        }
    }

    /// Reads and validates a file: a regular file (`input_file`: a FIFO
    /// or a device such as `/dev/zero` is refused by kind) of at most
    /// [`MAX_CHECKPOINT_FILE_BYTES`], whose header then accounts for every
    /// byte ([`SafeTensors::parse`]).
    pub fn read(path: &Path) -> Result<SafeTensors, SafeTensorsError> {
        let bytes = crate::input_file::read(path, MAX_CHECKPOINT_FILE_BYTES, "a checkpoint file")?;
        SafeTensors::parse(bytes)
    }

    /// Validates the whole header against the data: every entry well formed,
    /// offsets ordered, in bounds, matching shape x dtype size, and disjoint.
    pub fn parse(bytes: Vec<u8>) -> Result<SafeTensors, SafeTensorsError> {
        let file_length = bytes.len();
        let Some(length_bytes) = bytes.first_chunk::<HEADER_LENGTH_BYTES>() else {
            return Err(SafeTensorsError::Truncated { file_length });
        };
        let header_length = u64::from_le_bytes(*length_bytes);
        let data_start = usize::try_from(header_length)
            .ok()
            .and_then(|length| length.checked_add(HEADER_LENGTH_BYTES))
            .filter(|&start| start <= file_length)
            .ok_or(SafeTensorsError::HeaderBeyondFile {
                header_length,
                file_length,
            })?;
        let header: serde_json::Value =
            serde_json::from_slice(&bytes[HEADER_LENGTH_BYTES..data_start])
                .map_err(|source| SafeTensorsError::InvalidJson { source })?;
        let serde_json::Value::Object(entries) = header else {
            return Err(SafeTensorsError::HeaderNotObject {
                found: header.to_string(),
            });
        };
        let data_length = file_length - data_start;
        let mut tensors = BTreeMap::new();
        let mut metadata = BTreeMap::new();
        for (name, value) in entries {
            if name == METADATA_KEY {
                metadata = serde_json::from_value(value)
                    .map_err(|source| SafeTensorsError::InvalidMetadata { source })?;
                continue;
            }
            let raw: RawEntry = match serde_json::from_value(value) {
                Ok(raw) => raw,
                Err(source) => return Err(SafeTensorsError::InvalidEntry { name, source }),
            };
            let entry = validate_entry(&name, raw, data_length)?;
            tensors.insert(name, entry);
        }
        check_disjoint(&tensors)?;
        Ok(SafeTensors {
            bytes,
            data_start,
            tensors,
            metadata,
        })
    }

    /// Tensor names in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.tensors.get(name).map(|entry| entry.shape.as_slice())
    }

    pub fn dtype(&self, name: &str) -> Option<Dtype> {
        self.tensors.get(name).map(|entry| entry.dtype)
    }

    /// The `__metadata__` map (empty when absent).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The raw little-endian payload of a tensor, whatever its dtype.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8], SafeTensorsError> {
        let entry = self.entry(name)?;
        Ok(&self.bytes[self.data_start + entry.begin..self.data_start + entry.end])
    }

    /// The tensor converted to f32 (from F32, F16 or BF16), after checking
    /// that its shape is `expected_shape`.
    pub fn tensor_f32(
        &self,
        name: &str,
        expected_shape: &[usize],
    ) -> Result<Vec<f32>, SafeTensorsError> {
        let entry = self.entry(name)?;
        if entry.shape != expected_shape {
            return Err(SafeTensorsError::ShapeMismatch {
                name: name.to_string(),
                expected: expected_shape.to_vec(),
                found: entry.shape.clone(),
            });
        }
        let payload = &self.bytes[self.data_start + entry.begin..self.data_start + entry.end];
        let mut values = vec![0.0f32; payload.len() / entry.dtype.element_bytes()];
        // Lengths were validated at parse time, so the converters cannot fail;
        // any failure is still reported rather than panicking.
        let converted = match entry.dtype {
            Dtype::F32 => f32_bytes_to_f32(payload, &mut values),
            Dtype::F16 => f16_bytes_to_f32(payload, &mut values),
            Dtype::BF16 => bf16_bytes_to_f32(payload, &mut values),
            dtype => {
                return Err(SafeTensorsError::UnsupportedDtype {
                    name: name.to_string(),
                    dtype,
                });
            }
        };
        converted.map_err(|_| self.inconsistent(name, entry))?;
        Ok(values)
    }

    fn entry(&self, name: &str) -> Result<&TensorEntry, SafeTensorsError> {
        self.tensors
            .get(name)
            .ok_or_else(|| SafeTensorsError::MissingTensor {
                name: name.to_string(),
            })
    }

    fn inconsistent(&self, name: &str, entry: &TensorEntry) -> SafeTensorsError {
        SafeTensorsError::OffsetsInconsistent {
            name: name.to_string(),
            begin: entry.begin as u64,
            end: entry.end as u64,
            shape: entry.shape.clone(),
            dtype: entry.dtype,
            expected_bytes: element_count(&entry.shape).unwrap_or(usize::MAX),
        }
    }
}

fn element_count(shape: &[usize]) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |count, &extent| count.checked_mul(extent))
}

fn validate_entry(
    name: &str,
    raw: RawEntry,
    data_length: usize,
) -> Result<TensorEntry, SafeTensorsError> {
    let dtype = Dtype::from_name(&raw.dtype).ok_or_else(|| SafeTensorsError::UnknownDtype {
        name: name.to_string(),
        dtype: raw.dtype.clone(),
    })?;
    let [begin, end] = raw.data_offsets;
    if begin > end {
        return Err(SafeTensorsError::OffsetsReversed {
            name: name.to_string(),
            begin,
            end,
        });
    }
    let in_bounds = |offset: u64| {
        usize::try_from(offset)
            .ok()
            .filter(|&offset| offset <= data_length)
    };
    let (Some(begin_index), Some(end_index)) = (in_bounds(begin), in_bounds(end)) else {
        return Err(SafeTensorsError::OffsetsOutOfBounds {
            name: name.to_string(),
            begin,
            end,
            data_length,
        });
    };
    let expected_bytes = element_count(&raw.shape)
        .and_then(|count| count.checked_mul(dtype.element_bytes()))
        .ok_or_else(|| SafeTensorsError::ShapeOverflow {
            name: name.to_string(),
            shape: raw.shape.clone(),
        })?;
    if end_index - begin_index != expected_bytes {
        return Err(SafeTensorsError::OffsetsInconsistent {
            name: name.to_string(),
            begin,
            end,
            shape: raw.shape,
            dtype,
            expected_bytes,
        });
    }
    Ok(TensorEntry {
        dtype,
        shape: raw.shape,
        begin: begin_index,
        end: end_index,
    })
}

/// Non-empty byte ranges must not overlap (gaps are tolerated).
fn check_disjoint(tensors: &BTreeMap<String, TensorEntry>) -> Result<(), SafeTensorsError> {
    let mut ranges: Vec<(usize, usize, &str)> = tensors
        .iter()
        .filter(|(_, entry)| entry.end > entry.begin)
        .map(|(name, entry)| (entry.begin, entry.end, name.as_str()))
        .collect();
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let (_, previous_end, previous_name) = pair[0];
        let (begin, _, name) = pair[1];
        if begin < previous_end {
            return Err(SafeTensorsError::OverlappingTensors {
                first: previous_name.to_string(),
                second: name.to_string(),
            });
        }
    }
    Ok(())
}

/// Builds a SafeTensors file in memory. Header keys are sorted; the data
/// section starts 8-byte aligned (header padded with spaces) and tensors are
/// laid out contiguously, largest element size first and then by name, so
/// each tensor is aligned to its element size and the file has no gaps (as
/// the reference implementation requires).
#[derive(Debug, Clone, Default)]
pub struct SafeTensorsWriter {
    tensors: BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>,
    metadata: BTreeMap<String, String>,
}

impl SafeTensorsWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an F32 tensor; `data.len()` must equal the shape's element count.
    pub fn add_f32(
        &mut self,
        name: &str,
        shape: &[usize],
        data: &[f32],
    ) -> Result<(), SafeTensorsError> {
        let mut bytes = vec![0u8; data.len() * 4];
        f32_to_bytes(data, &mut bytes)
            .map_err(|_| data_length_error(name, shape, Dtype::F32, data.len()))?;
        self.add_bytes(name, Dtype::F32, shape, bytes)
    }

    /// Adds an F16 tensor from f32 values, rounded to nearest f16 (saturating).
    pub fn add_f16(
        &mut self,
        name: &str,
        shape: &[usize],
        data: &[f32],
    ) -> Result<(), SafeTensorsError> {
        let mut bytes = vec![0u8; data.len() * 2];
        f32_to_f16_bytes(data, &mut bytes)
            .map_err(|_| data_length_error(name, shape, Dtype::F16, data.len()))?;
        self.add_bytes(name, Dtype::F16, shape, bytes)
    }

    /// Adds a tensor from its raw little-endian payload (e.g. FP8 codes).
    pub fn add_bytes(
        &mut self,
        name: &str,
        dtype: Dtype,
        shape: &[usize],
        bytes: Vec<u8>,
    ) -> Result<(), SafeTensorsError> {
        if name == METADATA_KEY {
            return Err(SafeTensorsError::ReservedName {
                name: name.to_string(),
            });
        }
        if self.tensors.contains_key(name) {
            return Err(SafeTensorsError::DuplicateTensor {
                name: name.to_string(),
            });
        }
        let expected = element_count(shape)
            .and_then(|count| count.checked_mul(dtype.element_bytes()))
            .ok_or_else(|| SafeTensorsError::ShapeOverflow {
                name: name.to_string(),
                shape: shape.to_vec(),
            })?;
        if bytes.len() != expected {
            return Err(SafeTensorsError::DataLength {
                name: name.to_string(),
                shape: shape.to_vec(),
                dtype,
                expected,
                actual: bytes.len(),
            });
        }
        self.tensors
            .insert(name.to_string(), (dtype, shape.to_vec(), bytes));
        Ok(())
    }

    /// Sets a `__metadata__` entry.
    pub fn add_metadata(&mut self, key: &str, value: &str) {
        self.metadata.insert(key.to_string(), value.to_string());
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut order: Vec<&String> = self.tensors.keys().collect();
        order.sort_by_key(|name| {
            let element_bytes = self
                .tensors
                .get(*name)
                .map_or(0, |(dtype, _, _)| dtype.element_bytes());
            (std::cmp::Reverse(element_bytes), *name)
        });
        let mut header: BTreeMap<&str, serde_json::Value> = BTreeMap::new();
        let mut data = Vec::new();
        for name in order {
            let Some((dtype, shape, bytes)) = self.tensors.get(name) else {
                continue;
            };
            let begin = data.len();
            data.extend_from_slice(bytes);
            header.insert(
                name,
                serde_json::json!({
                    "dtype": dtype.name(),
                    "shape": shape,
                    "data_offsets": [begin, data.len()],
                }),
            );
        }
        if !self.metadata.is_empty() {
            header.insert(METADATA_KEY, serde_json::json!(self.metadata));
        }
        // A BTreeMap of strings to JSON values always serialises.
        let mut header_bytes = serde_json::to_vec(&header).unwrap_or_default();
        while !header_bytes.len().is_multiple_of(DATA_ALIGNMENT) {
            header_bytes.push(b' ');
        }
        let mut file = Vec::with_capacity(HEADER_LENGTH_BYTES + header_bytes.len() + data.len());
        file.extend_from_slice(&(header_bytes.len() as u64).to_le_bytes());
        file.extend_from_slice(&header_bytes);
        file.extend_from_slice(&data);
        file
    }

    pub fn write(&self, path: &Path) -> Result<(), SafeTensorsError> {
        std::fs::write(path, self.to_bytes()).map_err(|source| SafeTensorsError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

fn data_length_error(
    name: &str,
    shape: &[usize],
    dtype: Dtype,
    actual_elements: usize,
) -> SafeTensorsError {
    let expected = element_count(shape).unwrap_or(usize::MAX);
    SafeTensorsError::DataLength {
        name: name.to_string(),
        shape: shape.to_vec(),
        dtype,
        expected: expected.saturating_mul(dtype.element_bytes()),
        actual: actual_elements.saturating_mul(dtype.element_bytes()),
    }
}

mod shards;

/// The most bytes a sharded checkpoint's index file may have (a 27-layer
/// model's is about 60 kB).
pub const MAX_INDEX_BYTES: u64 = 16 << 20;

#[cfg(test)]
mod tests;
