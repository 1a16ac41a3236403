//! The outputs of `superstep sweep` under `outputs.directory/NAME/sweep/`:
//! `results.csv`, `frontier.csv`, `selection.csv` (`tables`), `index.html`
//! (`page`), and the `[[schedule.override]]` fragment of a selection
//! (`fragment`). All deterministic: a rerun writes the same bytes.

pub mod fragment;
pub mod page;
pub mod tables;

use std::path::{Path, PathBuf};

use crate::studies::sweep::{Selection, Sweep};

/// A sweep output that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SweepOutputError {
    #[error("creating {path}: {source}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] crate::output_file::OutputFileError),
}

/// Writes `text` to `path`.
pub fn write_text(path: &Path, text: &str) -> Result<(), SweepOutputError> {
    Ok(crate::output_file::write_atomically(path, text.as_bytes())?)
}

/// Writes the CSV files and the page into `directory` (created if needed);
/// returns the paths written, in order.
pub fn write_sweep(
    directory: &Path,
    name: &str,
    sweep: &Sweep,
    no_growth: &Selection,
    window: &Selection,
) -> Result<Vec<PathBuf>, SweepOutputError> {
    let files = [
        ("results.csv", tables::results_csv(sweep)),
        ("frontier.csv", tables::frontier_csv(sweep)),
        (
            "selection.csv",
            tables::selection_csv(sweep, &[no_growth, window]),
        ),
        (
            "index.html",
            page::render(&page::SweepPage {
                name,
                sweep,
                no_growth,
                window,
            }),
        ),
    ];
    write_files(directory, files)
}

/// Writes each `(file, text)` into `directory` (created if needed);
/// returns the paths written, in order.
pub fn write_files<const COUNT: usize>(
    directory: &Path,
    files: [(&str, String); COUNT],
) -> Result<Vec<PathBuf>, SweepOutputError> {
    std::fs::create_dir_all(directory).map_err(|source| SweepOutputError::Folder {
        path: directory.to_path_buf(),
        source,
    })?;
    let mut written = Vec::with_capacity(COUNT);
    for (file, text) in files {
        let path = directory.join(file);
        write_text(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}
