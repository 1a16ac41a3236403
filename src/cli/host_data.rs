//! `run` and `simulate`'s real inputs and outputs: `--image` (PNG or JPEG,
//! preprocessed as the model's reference library does) or `--input
//! FILE.npy` (pixel values or patches) replace the build's seeded input;
//! `--output FILE.npy` writes the pooled embedding (images x width, F32);
//! `--reference FILE.npy` compares it with an external one per image.

use std::path::PathBuf;
use std::sync::Arc;

use super::command_error::CommandError;
use super::common::write_output;
use crate::build_file::BuildQuery;
use crate::host_io::preprocessing::Preprocessing;
use crate::host_io::{HostIoError, comparison, npy, patches};
use crate::model::weights::Weights;
use crate::numerics::half_float;

/// The input and output files of `run` and `simulate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HostArguments {
    /// Run the model on this photo (PNG or JPEG) instead of the build's
    /// seeded input, resized and normalised as the model's reference
    /// preprocessing does (docs/checkpoints.md). Repeat once per
    /// image: as many as workload.batch.
    #[arg(long, value_name = "FILE", conflicts_with = "input")]
    pub image: Vec<PathBuf>,
    /// Run the model on this NumPy array (float16, float32 or float64):
    /// pixel values [batch, 3, side, side] as the reference library's
    /// processor returns them (or [3, side, side] for one image), or patches
    /// in superstep's order [batch * patches, 3 * patch * patch].
    #[arg(long, value_name = "FILE.npy")]
    pub input: Option<PathBuf>,
    /// Write the pooled embedding to this NumPy file: float32, [batch,
    /// embedding width]. Its folder must exist.
    #[arg(long, value_name = "FILE.npy")]
    pub output: Option<PathBuf>,
    /// Compare the embedding with this NumPy array ([batch, width], or
    /// [width] for one image): cosine and max abs error per image.
    #[arg(long, value_name = "FILE.npy")]
    pub reference: Option<PathBuf>,
}

impl HostArguments {
    /// The files these flags read.
    pub fn inputs(&self) -> Vec<PathBuf> {
        self.image
            .iter()
            .chain(&self.input)
            .chain(&self.reference)
            .cloned()
            .collect()
    }
}

fn input_error(error: HostIoError) -> CommandError {
    CommandError::Input(format!("error: {error}"))
}

/// What the flags name, read and checked before any compile: the input's
/// patches (none: the build's seeded input), a line saying what the input
/// is, and the reference array.
pub struct HostData {
    patches: Option<Vec<f32>>,
    pub input_line: String,
    reference: Option<(PathBuf, npy::Array)>,
    images: u32,
}

/// Reads `--image` / `--input` and `--reference` for `query`'s model and batch.
pub fn read(arguments: &HostArguments, query: &BuildQuery) -> Result<HostData, CommandError> {
    let config = &query.workload.model;
    let images = query.workload.batch;
    let (patches, input_line) = if !arguments.image.is_empty() {
        if arguments.image.len() as u64 != u64::from(images) {
            return Err(input_error(HostIoError::Count {
                flag: "--image",
                message: format!(
                    "{} for workload.batch = {images}; give one --image per image of \
                     the batch, or pass --set workload.batch={}",
                    crate::text::counted(arguments.image.len() as u64, "image", "images"),
                    arguments.image.len()
                ),
            }));
        }
        let preprocessing = Preprocessing::for_model(config).ok_or_else(|| {
            input_error(HostIoError::Count {
                flag: "--image",
                message: format!(
                    "the model's {} patches do not form a square grid, so no image maps onto \
                     them; pass patches with --input",
                    config.patches
                ),
            })
        })?;
        let mut pixels = Vec::new();
        for path in &arguments.image {
            pixels.extend(preprocessing.pixels_of_file(path).map_err(input_error)?);
        }
        let grid = config.grid().unwrap_or(1);
        let names: Vec<String> = arguments
            .image
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        (
            Some(patches::from_pixels(
                &pixels,
                images,
                preprocessing.side,
                config.patch,
                grid,
            )),
            format!("input: {} ({})", names.join(", "), preprocessing.describe()),
        )
    } else if let Some(path) = &arguments.input {
        let array = npy::read(path).map_err(input_error)?;
        let patches = patches::from_array(&array, path, config, images).map_err(input_error)?;
        (
            Some(patches),
            format!("input: {} (shape {:?})", path.display(), array.shape),
        )
    } else {
        (
            None,
            String::from("input: seeded (--image or --input runs a real one)"),
        )
    };
    let reference = match &arguments.reference {
        Some(path) => {
            let array = npy::read(path).map_err(input_error)?;
            let width = u64::from(config.projection.unwrap_or(config.width));
            comparison::check_shape(&array, images, width, path).map_err(input_error)?;
            Some((path.clone(), array))
        }
        None => None,
    };
    Ok(HostData {
        patches,
        input_line,
        reference,
        images,
    })
}

impl HostData {
    /// The weights with this input (unchanged for the seeded one).
    pub fn apply(&self, weights: Arc<Weights>) -> Result<Arc<Weights>, CommandError> {
        let Some(patches) = &self.patches else {
            return Ok(weights);
        };
        if patches.len() != weights.input.len() {
            return Err(CommandError::Internal(format!(
                "the input has {} values where the graph's input.patches has {}",
                patches.len(),
                weights.input.len()
            )));
        }
        let mut replaced = Weights::clone(&weights);
        replaced.input = patches
            .iter()
            .map(|&value| half_float::round_f16(value))
            .collect();
        Ok(Arc::new(replaced))
    }

    /// Writes `--output` (the program's embedding) and compares it and
    /// superstep's own FP32 reference with `--reference`; returns the lines
    /// to print.
    pub fn finish(
        &self,
        arguments: &HostArguments,
        output: &[f32],
        fp32_reference: &[f32],
    ) -> Result<Vec<String>, CommandError> {
        let images = self.images;
        let mut lines = Vec::new();
        let width = output.len() as u64 / u64::from(images.max(1));
        if let Some(path) = &arguments.output {
            write_output(path, &npy::encode(&[u64::from(images), width], output))?;
            lines.push(format!(
                "wrote {} (float32, {images} x {width})",
                path.display()
            ));
        }
        if let Some((path, reference)) = &self.reference {
            for (what, values) in [("program", output), ("FP32 reference", fp32_reference)] {
                let agreements = comparison::compare_per_image(values, images, reference, path)
                    .map_err(input_error)?;
                for (image, agreement) in agreements.iter().enumerate() {
                    lines.push(format!(
                        "{what} against {} image {image}: cosine {:.9}, max abs error {:.6}{}",
                        path.display(),
                        agreement.cosine,
                        agreement.max_abs_error,
                        if agreement.non_finite > 0 {
                            format!(", {} non-finite", agreement.non_finite)
                        } else {
                            String::new()
                        }
                    ));
                }
            }
        }
        Ok(lines)
    }
}
