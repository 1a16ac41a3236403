//! The record of the last successful build (`artifacts/NAME/last-build.json`)
//! that lets a one-shot `superstep build --why` explain what changed.
//!
//! It stores what is needed to reproduce the effective query exactly (the
//! build file's text, its folder and the `--set` overrides) plus the
//! resolved settings as `key = value` strings for people reading the file.
//! A record written by another version of superstep is ignored rather than
//! trusted: the resolution rules may have changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::build_file::settings::query_settings;
use crate::build_file::{BuildQuery, QueryError, parse_query};

/// The state file's format version.
pub const STATE_FORMAT: u32 = 1;

/// The state file's name inside a build's artifacts folder.
pub const STATE_FILE: &str = "last-build.json";

/// Where the record of `query`'s last successful build is kept:
/// `OUTPUTS/NAME/last-build.json`.
pub fn last_build_path(query: &BuildQuery) -> PathBuf {
    query.outputs.directory.join(&query.name).join(STATE_FILE)
}

/// What `superstep build` records after a successful build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastBuild {
    pub format: u32,
    /// The superstep version that wrote the record.
    pub superstep: String,
    /// The build file as named on the command line.
    pub query_file: PathBuf,
    /// Where relative SafeTensors paths in the text resolved.
    pub base_dir: PathBuf,
    /// The `--set` overrides, in order.
    pub sets: Vec<String>,
    /// The build file's text.
    pub text: String,
    /// The resolved settings, for reading (not used to restore).
    pub settings: BTreeMap<String, String>,
}

/// Why a recorded build cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Output(#[from] crate::output_file::OutputFileError),
    #[error("{path} is not a build record: {source}")]
    Format {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path} was written by superstep {found} (format {format}); this is {ours}")]
    Version {
        path: PathBuf,
        found: String,
        format: u32,
        ours: String,
    },
    #[error("the recorded build query no longer resolves: {0}")]
    Query(Box<QueryError>),
}

impl LastBuild {
    /// A record of `query`, built from `text` (the file at `query_file`) and `sets`.
    pub fn new(query_file: &Path, text: &str, sets: &[String], query: &BuildQuery) -> LastBuild {
        LastBuild {
            format: STATE_FORMAT,
            superstep: env!("CARGO_PKG_VERSION").to_string(),
            query_file: query_file.to_path_buf(),
            base_dir: query_file.parent().unwrap_or(Path::new("")).to_path_buf(),
            sets: sets.to_vec(),
            text: text.to_string(),
            settings: query_settings(query)
                .into_iter()
                .map(|setting| (setting.key, setting.value))
                .collect(),
        }
    }

    /// Reads the record at `path`; `Ok(None)` when there is none.
    pub fn load(path: &Path) -> Result<Option<LastBuild>, StateError> {
        let read = crate::input_file::read_record(path, 16 << 20, "a build record")
            .map_err(crate::input_file::InputFileError::into_io);
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StateError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let record: LastBuild =
            serde_json::from_slice(&bytes).map_err(|source| StateError::Format {
                path: path.to_path_buf(),
                source,
            })?;
        let ours = env!("CARGO_PKG_VERSION");
        if record.format != STATE_FORMAT || record.superstep != ours {
            return Err(StateError::Version {
                path: path.to_path_buf(),
                found: record.superstep,
                format: record.format,
                ours: ours.to_string(),
            });
        }
        Ok(Some(record))
    }

    /// Writes the record to `path`, creating its folder.
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let mut text = serde_json::to_string_pretty(self).map_err(|source| StateError::Format {
            path: path.to_path_buf(),
            source,
        })?;
        text.push('\n');
        Ok(crate::output_file::write_atomically(path, text.as_bytes())?)
    }

    /// The recorded query, resolved again from the recorded text and sets.
    pub fn query(&self) -> Result<BuildQuery, StateError> {
        let mut query = parse_query(
            &self.query_file.display().to_string(),
            &self.text,
            Some(&self.base_dir),
            &self.sets,
        )
        .map_err(|error| StateError::Query(Box::new(error)))?;
        query.source_path = Some(self.query_file.clone());
        Ok(query)
    }
}
