//! The embedding compared with an external one (`--reference FILE.npy`):
//! per image, cosine similarity and maximum absolute error.

use std::path::Path;

use super::HostIoError;
use super::npy::Array;
use crate::sim::compare::{Agreement, compare};

/// A reference must be `[images, width]` (or `[width]` for one image).
pub fn check_shape(
    reference: &Array,
    images: u32,
    width: u64,
    path: &Path,
) -> Result<(), HostIoError> {
    let accepted = reference.shape == [u64::from(images), width]
        || (images == 1 && reference.shape == [width]);
    if accepted {
        return Ok(());
    }
    Err(HostIoError::file(
        path,
        format!(
            "shape {:?} is not the output's [{images}, {width}] (images x embedding width)",
            reference.shape
        ),
    ))
}

/// Per image, the agreement of `output` (`images x width`) with the
/// reference array, which must be `[images, width]` (or `[width]` for one
/// image).
pub fn compare_per_image(
    output: &[f32],
    images: u32,
    reference: &Array,
    path: &Path,
) -> Result<Vec<Agreement>, HostIoError> {
    let width = output.len() as u64 / u64::from(images.max(1));
    check_shape(reference, images, width, path)?;
    let width = width as usize;
    Ok((0..images as usize)
        .map(|image| {
            let range = image * width..(image + 1) * width;
            compare(&output[range.clone()], &reference.values[range])
        })
        .collect())
}
