//! A photo made into the pixel values a model's reference library feeds it.
//!
//! Every preset's reference preprocessing resizes with a bicubic filter,
//! scales bytes to `[0, 1]` and normalises each channel with mean 0.5 and
//! standard deviation 0.5 (values in `[-1, 1]`):
//!
//! - `siglip-so400m`: transformers' `SiglipImageProcessor`: resize to 384 x
//!   384 (the aspect ratio is not kept), no crop; the 27 x 27 patches of 14
//!   pixels cover the first 378 rows and columns, as the library's
//!   convolution does.
//! - `pe-core-l14`: timm's `vit_pe_core_large_patch14_336` evaluation
//!   transform (crop fraction 1.0): resize the shorter side to 336, keeping
//!   the aspect ratio, then crop the centre 336 x 336.
//! - `vit-b16`: timm's `vit_base_patch16_224` (`augreg2_in21k_ft_in1k`,
//!   crop fraction 0.9): resize the shorter side to 248 (= floor(224 / 0.9)),
//!   keeping the aspect ratio, then crop the centre 224 x 224.
//! - `custom`: resize to the model's image side, as SigLIP.
//!
//! The bicubic filter is the `image` crate's Catmull-Rom (the same cubic,
//! a = -0.5, widened when shrinking, as PIL's); its rounding to bytes can
//! differ from PIL's by one level in a few pixels, so an embedding from
//! `--image` agrees with the library's to about four digits, not bit for bit.
//! For bit-exact inputs pass the library's own `pixel_values` with `--input`.
//!
//! A photo is bounded before it is decoded: the file at most
//! [`MAX_IMAGE_FILE_BYTES`], its declared sides (read from its header) at
//! most [`MAX_IMAGE_SIDE`] pixels each, and the images its resize makes (the
//! filter resamples the width first, then the height, in F32) at most
//! [`MAX_RESAMPLED_PIXELS`] each, so a tiny file declaring a huge or
//! extremely narrow image is refused with a message, never allocated.

use std::path::Path;

use image::imageops::FilterType;

use super::HostIoError;
use crate::model::config::ModelConfig;

/// The most bytes a photo file may have.
pub const MAX_IMAGE_FILE_BYTES: u64 = 64 << 20;

/// The most pixels either side of a photo may declare.
pub const MAX_IMAGE_SIDE: u32 = 16384;

/// The most pixels of any image the resize makes on its way (the height
/// resampled first: old width x new height; then new width x new height),
/// 128 MiB of F32 RGBA.
pub const MAX_RESAMPLED_PIXELS: u64 = 8 << 20;

/// A photo whose size superstep does not preprocess.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageSizeError {
    #[error(
        "the image is {width} x {height} pixels; superstep reads images of 1 to \
         {MAX_IMAGE_SIDE} pixels a side: scale it down first"
    )]
    Side { width: u32, height: u32 },
    #[error(
        "the image is {width} x {height} pixels; its resize ({resize}) would make a \
         {new_width} x {new_height} image, more than superstep resamples \
         ({MAX_RESAMPLED_PIXELS} pixels at most): crop it nearer to square first"
    )]
    Resampled {
        width: u32,
        height: u32,
        resize: String,
        new_width: u64,
        new_height: u64,
    },
}

/// How the photo is brought to the model's square image side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Resize {
    /// Both sides to the image side (the aspect ratio is not kept).
    Square,
    /// The shorter side to `floor(side / crop_fraction)` keeping the aspect
    /// ratio, then the centre `side x side`.
    ShorterSideThenCentreCrop { crop_fraction: f64 },
}

/// A model's preprocessing: the image side, how to reach it, and the
/// per-channel normalisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Preprocessing {
    pub side: u32,
    pub resize: Resize,
    pub mean: [f32; 3],
    pub standard_deviation: [f32; 3],
}

impl Preprocessing {
    /// The reference preprocessing of `config`'s model (see the module
    /// header), or `None` when its patches do not form a square grid.
    pub fn for_model(config: &ModelConfig) -> Option<Preprocessing> {
        let covered = config.grid()? * config.patch;
        let (side, resize) = match config.name.as_str() {
            // 384 pixels, of which the 27 patches of 14 cover 378.
            "siglip-so400m" if covered == 378 => (384, Resize::Square),
            "vit-b16" => (
                covered,
                Resize::ShorterSideThenCentreCrop { crop_fraction: 0.9 },
            ),
            "pe-core-l14" => (
                covered,
                Resize::ShorterSideThenCentreCrop { crop_fraction: 1.0 },
            ),
            _ => (covered, Resize::Square),
        };
        Some(Preprocessing {
            side,
            resize,
            mean: [0.5; 3],
            standard_deviation: [0.5; 3],
        })
    }

    /// One line for users: `resize to 384 x 384 (bicubic), mean 0.5, std 0.5`.
    pub fn describe(&self) -> String {
        let resize = match self.resize {
            Resize::Square => format!("resize to {0} x {0} (bicubic)", self.side),
            Resize::ShorterSideThenCentreCrop { crop_fraction } => format!(
                "shorter side to {} (bicubic), centre {1} x {1}",
                self.scaled_side(crop_fraction),
                self.side
            ),
        };
        format!(
            "{resize}, mean {:?}, std {:?}",
            self.mean, self.standard_deviation
        )
    }

    fn scaled_side(&self, crop_fraction: f64) -> u32 {
        (f64::from(self.side) / crop_fraction).floor() as u32
    }

    /// Decodes the PNG or JPEG at `path` and returns its pixel values,
    /// channel-major `[3, side, side]`, normalised.
    pub fn pixels_of_file(&self, path: &Path) -> Result<Vec<f32>, HostIoError> {
        let bytes = crate::input_file::read(path, MAX_IMAGE_FILE_BYTES, "a photo")?;
        let reader = || {
            image::ImageReader::new(std::io::Cursor::new(&bytes[..]))
                .with_guessed_format()
                .map_err(|error| HostIoError::file(path, format!("cannot read: {error}")))
        };
        let (width, height) = reader()?.into_dimensions().map_err(|error| {
            HostIoError::file(
                path,
                format!("not an image superstep can read (PNG or JPEG): {error}"),
            )
        })?;
        self.check_dimensions(width, height)
            .map_err(|error| HostIoError::file(path, error.to_string()))?;
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(MAX_IMAGE_SIDE);
        limits.max_image_height = Some(MAX_IMAGE_SIDE);
        limits.max_alloc = Some(4 * u64::from(MAX_IMAGE_SIDE) * u64::from(MAX_IMAGE_SIDE));
        let mut decoder = reader()?;
        decoder.limits(limits);
        let image = decoder.decode().map_err(|error| {
            HostIoError::file(
                path,
                format!("not an image superstep can read (PNG or JPEG): {error}"),
            )
        })?;
        Ok(self.pixels(&image.to_rgb8()))
    }

    /// The size the resize brings a `width` x `height` photo to (before
    /// the centre crop): torchvision's Resize(int) truncates the longer side.
    fn resized(&self, width: u32, height: u32) -> (u64, u64) {
        let (width, height) = (u64::from(width.max(1)), u64::from(height.max(1)));
        match self.resize {
            Resize::Square => (u64::from(self.side), u64::from(self.side)),
            Resize::ShorterSideThenCentreCrop { crop_fraction } => {
                let shorter = u64::from(self.scaled_side(crop_fraction));
                if width <= height {
                    (shorter, shorter * height / width)
                } else {
                    (shorter * width / height, shorter)
                }
            }
        }
    }

    /// Why a photo of `width` x `height` pixels (as its header declares)
    /// cannot be preprocessed within the bounds of the module header.
    pub fn check_dimensions(&self, width: u32, height: u32) -> Result<(), ImageSizeError> {
        if width == 0 || height == 0 || width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
            return Err(ImageSizeError::Side { width, height });
        }
        let (new_width, new_height) = self.resized(width, height);
        let largest = (u64::from(width) * new_height).max(new_width * new_height);
        if largest > MAX_RESAMPLED_PIXELS {
            return Err(ImageSizeError::Resampled {
                width,
                height,
                resize: self.describe(),
                new_width,
                new_height,
            });
        }
        Ok(())
    }

    /// The normalised pixel values of `image`, channel-major `[3, side, side]`.
    pub fn pixels(&self, image: &image::RgbImage) -> Vec<f32> {
        let side = self.side;
        let square = match self.resize {
            Resize::Square => image::imageops::resize(image, side, side, FilterType::CatmullRom),
            Resize::ShorterSideThenCentreCrop { .. } => {
                let (width, height) = image.dimensions();
                let (new_width, new_height) = self.resized(width, height);
                let (new_width, new_height) = (new_width as u32, new_height as u32);
                let resized =
                    image::imageops::resize(image, new_width, new_height, FilterType::CatmullRom);
                // torchvision's CenterCrop: offsets rounded half to even.
                let left = (f64::from(new_width - side) / 2.0).round_ties_even() as u32;
                let top = (f64::from(new_height - side) / 2.0).round_ties_even() as u32;
                image::imageops::crop_imm(&resized, left, top, side, side).to_image()
            }
        };
        let plane = (side * side) as usize;
        let mut pixels = vec![0.0f32; 3 * plane];
        for (x, y, pixel) in square.enumerate_pixels() {
            for channel in 0..3 {
                let value = f32::from(pixel.0[channel]) / 255.0;
                pixels[channel * plane + (y * side + x) as usize] =
                    (value - self.mean[channel]) / self.standard_deviation[channel];
            }
        }
        pixels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preprocessing(resize: Resize, side: u32) -> Preprocessing {
        Preprocessing {
            side,
            resize,
            mean: [0.5; 3],
            standard_deviation: [0.5; 3],
        }
    }

    #[test]
    fn a_uniform_image_normalises_to_its_level_everywhere() {
        let image = image::RgbImage::from_pixel(40, 30, image::Rgb([255, 0, 51]));
        let pixels = preprocessing(Resize::Square, 8).pixels(&image);
        assert_eq!(pixels.len(), 3 * 64);
        assert!(pixels[..64].iter().all(|&value| value == 1.0));
        assert!(pixels[64..128].iter().all(|&value| value == -1.0));
        assert!(
            pixels[128..]
                .iter()
                .all(|&value| (value - (-0.6)).abs() < 1e-6)
        );
    }

    #[test]
    fn the_centre_crop_keeps_the_middle_of_a_wide_image() {
        // 30 x 10: left third black, middle white, right third black. The
        // shorter side goes to floor(10 / 0.5) = 20 (60 x 20), and the
        // centre 10 x 10 lies inside the white middle (columns 25..35).
        let image = image::RgbImage::from_fn(30, 10, |x, _| {
            if (10..20).contains(&x) {
                image::Rgb([255, 255, 255])
            } else {
                image::Rgb([0, 0, 0])
            }
        });
        let crop = preprocessing(Resize::ShorterSideThenCentreCrop { crop_fraction: 0.5 }, 10);
        let pixels = crop.pixels(&image);
        assert_eq!(pixels.len(), 300);
        assert!(pixels.iter().all(|&value| value > 0.9), "{pixels:?}");
    }
}
