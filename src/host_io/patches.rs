//! The order of `input.patches`: for image `b` and grid cell `(row, col)`
//! (row-major over the `grid x grid` patches), row `b * patches + row * grid
//! + col` holds the cell's pixels channel first, then pixel row, then pixel
//! column: a convolution patch embedding's receptive field flattened as
//! its kernel `[width, channels, patch, patch]` is.
//!
//! An image side that is not a multiple of the patch (SigLIP so400m/14 at
//! 384 pixels: 27 patches of 14 cover 378) loses its last rows and columns,
//! as the library's stride-`patch` convolution does.
//!
//! Owns the conversion from pixel values to patches and the shapes an
//! `--input` array may have.

use std::path::Path;

use super::HostIoError;
use super::npy::Array;
use crate::model::config::ModelConfig;

/// The patches of `images` channel-major pixel tensors `[3, side, side]`
/// laid end to end in `pixels` (`side` at least `patch * grid`).
pub fn from_pixels(pixels: &[f32], images: u32, side: u32, patch: u32, grid: u32) -> Vec<f32> {
    let (patch, grid, channels) = (patch as usize, grid as usize, 3usize);
    let side = side as usize;
    let plane = side * side;
    let row_length = channels * patch * patch;
    let mut patches = Vec::with_capacity(pixels.len());
    for image in 0..images as usize {
        let pixels = &pixels[image * channels * plane..(image + 1) * channels * plane];
        for cell in 0..grid * grid {
            let (cell_row, cell_col) = (cell / grid, cell % grid);
            for channel in 0..channels {
                for pixel_row in 0..patch {
                    let start =
                        channel * plane + (cell_row * patch + pixel_row) * side + cell_col * patch;
                    patches.extend_from_slice(&pixels[start..start + patch]);
                }
            }
        }
        debug_assert_eq!(patches.len(), (image + 1) * grid * grid * row_length);
    }
    patches
}

/// The patches an `--input` array holds: pixel values `[images, 3, side,
/// side]` (or `[3, side, side]` for one image) as the library's processor
/// returns them, for any side from `grid * patch` to `(grid + 1) * patch - 1`, or patches in superstep's order `[images * patches, 3 *
/// patch * patch]` (or `[images, patches, 3 * patch * patch]`).
pub fn from_array(
    array: &Array,
    path: &Path,
    config: &ModelConfig,
    images: u32,
) -> Result<Vec<f32>, HostIoError> {
    let Some(grid) = config.grid() else {
        return Err(HostIoError::file(
            path,
            format!(
                "the model's {} patches do not form a square grid",
                config.patches
            ),
        ));
    };
    let side = u64::from(grid * config.patch);
    let sides = side..side + u64::from(config.patch);
    let patch_values = u64::from(3 * config.patch * config.patch);
    let (batch, patches) = (u64::from(images), u64::from(config.patches));
    let shape = array.shape.as_slice();
    let pixel_shape = [batch, 3, side, side];
    let patch_shapes = [
        vec![batch * patches, patch_values],
        vec![batch, patches, patch_values],
    ];
    let pixel_side = match shape {
        [3, height, width] | [_, 3, height, width] if height == width => Some(*height),
        _ => None,
    };
    if let Some(pixel_side) = pixel_side.filter(|pixel_side| sides.contains(pixel_side)) {
        let leading = if shape.len() == 4 { shape[0] } else { 1 };
        if leading == batch {
            return Ok(from_pixels(
                &array.values,
                images,
                pixel_side as u32,
                config.patch,
                grid,
            ));
        }
    }
    if patch_shapes.iter().any(|expected| expected == shape) {
        return Ok(array.values.clone());
    }
    let leading = shape.first().copied();
    let hint = match shape.len() {
        4 if leading != Some(batch) && shape[1] == 3 && sides.contains(&shape[2]) => format!(
            "; it holds {} and the build has workload.batch = {images}: pass \
             --set workload.batch={}",
            crate::text::counted(shape[0], "image", "images"),
            shape[0]
        ),
        _ => String::new(),
    };
    Err(HostIoError::file(
        path,
        format!(
            "shape {shape:?} is neither pixel values {} (sides {} to {}) nor patches {}{hint}",
            pixel_shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" x "),
            sides.start,
            sides.end - 1,
            patch_shapes[0]
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" x "),
        ),
    ))
}

/// The patches of the file at `path` (a calibration input) for `batch` images of
/// `config`'s model: a `.npy` array as `run --input` reads it, else a photo
/// as `run --image` reads it (repeated for every image of the batch).
pub fn of_file(
    path: &std::path::Path,
    config: &crate::model::config::ModelConfig,
    batch: u32,
) -> Result<Vec<f32>, HostIoError> {
    use super::{npy, preprocessing::Preprocessing};
    if path.extension().is_some_and(|extension| extension == "npy") {
        let array = npy::read(path)?;
        return from_array(&array, path, config, batch);
    }
    let preprocessing = Preprocessing::for_model(config).ok_or_else(|| {
        HostIoError::file(
            path,
            format!(
                "the model's {} patches do not form a square grid, so no photo maps onto \
                 them; name a .npy array of patches",
                config.patches
            ),
        )
    })?;
    let pixels = preprocessing.pixels_of_file(path)?;
    let grid = config.grid().unwrap_or(1);
    let one = from_pixels(&pixels, 1, preprocessing.side, config.patch, grid);
    Ok(one.repeat(batch as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_follow_channel_then_pixel_row_then_pixel_column() {
        // One image, 2 x 2 patches of 2 x 2 pixels: side 4. Pixel value
        // encodes (channel, y, x) as 100 c + 10 y + x.
        let mut pixels = Vec::new();
        for channel in 0..3 {
            for y in 0..4 {
                for x in 0..4 {
                    pixels.push((100 * channel + 10 * y + x) as f32);
                }
            }
        }
        let patches = from_pixels(&pixels, 1, 4, 2, 2);
        assert_eq!(patches.len(), 4 * 12);
        // Cell (0, 1): x from 2, y from 0.
        assert_eq!(&patches[12..16], &[2.0, 3.0, 12.0, 13.0]);
        assert_eq!(&patches[16..20], &[102.0, 103.0, 112.0, 113.0]);
        // Cell (1, 0): y from 2.
        assert_eq!(&patches[24..28], &[20.0, 21.0, 30.0, 31.0]);
    }
}
