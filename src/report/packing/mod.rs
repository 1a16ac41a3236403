//! The outputs of `superstep packing` under `outputs.directory/NAME/packing/`:
//! `packing.json` (the whole study: per phase its independence, the
//! original and every counterfactual's figures or refusal) and
//! `packing.html` (`page`). Deterministic: a rerun writes the same bytes.

pub mod page;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::report::sweep::{SweepOutputError, write_files};
use crate::studies::packing::Packing;

/// `packing.json`.
#[derive(Serialize)]
pub struct PackingDocument<'a> {
    pub name: &'a str,
    #[serde(flatten)]
    pub packing: &'a Packing,
}

/// Writes `packing.json` and `packing.html` into `directory` (created if
/// needed); returns the paths written.
pub fn write_packing(
    directory: &Path,
    name: &str,
    packing: &Packing,
) -> Result<Vec<PathBuf>, SweepOutputError> {
    let mut json = serde_json::to_string_pretty(&PackingDocument { name, packing })
        .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
    json.push('\n');
    let files = [
        ("packing.json", json),
        ("packing.html", page::render(name, packing)),
    ];
    write_files(directory, files)
}
