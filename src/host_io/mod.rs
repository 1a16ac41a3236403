//! What a user hands the compiled model and takes back: a photo (PNG or
//! JPEG) preprocessed as the model's reference library does, or a NumPy
//! `.npy` array of pixel values or patches; the pooled embedding written as
//! `.npy`; and the comparison of that embedding with an external one.
//!
//! Owns decoding, preprocessing, the patch order of `input.patches`, `.npy`
//! reading and writing, and per-image comparison. It knows the model's
//! configuration, not the graph, the program or the simulators: `cli::run`
//! and `cli::simulate` put the patches into the weights and take the output.

pub mod comparison;
pub mod npy;
pub mod patches;
pub mod preprocessing;

use std::path::PathBuf;

/// An input or reference file that cannot be used, naming it and what to change.
#[derive(Debug, thiserror::Error)]
pub enum HostIoError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error(transparent)]
    Read(#[from] crate::input_file::InputFileError),
    #[error("{flag}: {message}")]
    Count { flag: &'static str, message: String },
}

impl HostIoError {
    pub fn file(path: &std::path::Path, message: impl Into<String>) -> HostIoError {
        HostIoError::File {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}
