//! How one model value is made from a checkpoint's tensors: which tensors,
//! the shape each must have, and the conversion (transpose a `torch.nn.Linear`
//! weight, take one block of a fused projection, fuse separate ones,
//! flatten a convolution kernel into the patch matrix, drop leading unit
//! extents). The namings say which recipe each value takes; this module
//! owns the arithmetic and the shape checks, and knows no naming.
//!
//! Patch order: superstep's patch matrix `[channels * patch * patch,
//! width]` takes its rows in the order channel, then pixel row, then pixel
//! column, which is a convolution kernel `[width, channels, patch, patch]`
//! flattened per output and transposed (and the order of `input.patches`).

use crate::model::safetensors::{SafeTensors, SafeTensorsError};

/// Colour channels of an image (every workload's `channels`).
const IMAGE_CHANNELS: usize = 3;

/// A block of a tensor split into `count` equal parts along its outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub index: usize,
    pub count: usize,
}

impl Part {
    pub const WHOLE: Part = Part { index: 0, count: 1 };

    /// Block `index` of a fused q, k, v projection.
    pub fn of_three(index: usize) -> Part {
        Part { index, count: 3 }
    }

    /// Block `index` of a fused k, v projection.
    pub fn of_two(index: usize) -> Part {
        Part { index, count: 2 }
    }
}

/// How one value (shape `[rows, cols]`) comes from the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// The tensor as it is, shape exactly `[rows, cols]`.
    Exact(String),
    /// Block `part` of a `torch.nn.Linear` weight `[outputs, inputs]`,
    /// transposed to `[inputs, outputs]`.
    LinearWeight { tensor: String, part: Part },
    /// Separate linear weights side by side (q, k, v into a fused qkv).
    FusedLinearWeights(Vec<String>),
    /// Block `part` of a vector `[n]`; leading unit extents (`[1, 1, n]`)
    /// are accepted.
    Vector { tensor: String, part: Part },
    /// Separate vectors end to end (q, k, v biases into a fused one).
    FusedVectors(Vec<String>),
    /// A table `[rows, cols]`, with leading unit extents accepted.
    Table(String),
    /// A convolution kernel `[width, channels, patch, patch]` as the patch
    /// matrix `[channels * patch * patch, width]`.
    PatchKernel(String),
    /// Zeros: the library's model has no such parameter (PE's patch bias).
    Zeros,
}

/// Why a recipe could not be followed; the caller adds the naming and the
/// value.
#[derive(Debug)]
pub enum RecipeFailure {
    Missing {
        tensor: String,
    },
    Shape {
        tensor: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    Tensor {
        tensor: String,
        source: SafeTensorsError,
    },
}

impl Recipe {
    pub fn linear_weight(tensor: impl Into<String>, part: Part) -> Recipe {
        Recipe::LinearWeight {
            tensor: tensor.into(),
            part,
        }
    }

    pub fn vector(tensor: impl Into<String>) -> Recipe {
        Recipe::Vector {
            tensor: tensor.into(),
            part: Part::WHOLE,
        }
    }

    pub fn vector_part(tensor: impl Into<String>, part: Part) -> Recipe {
        Recipe::Vector {
            tensor: tensor.into(),
            part,
        }
    }

    /// The tensor whose shape tells the value's shape (the first one).
    pub fn first_tensor(&self) -> Option<&str> {
        match self {
            Recipe::Exact(tensor)
            | Recipe::LinearWeight { tensor, .. }
            | Recipe::Vector { tensor, .. }
            | Recipe::Table(tensor)
            | Recipe::PatchKernel(tensor) => Some(tensor),
            Recipe::FusedLinearWeights(tensors) | Recipe::FusedVectors(tensors) => {
                tensors.first().map(String::as_str)
            }
            Recipe::Zeros => None,
        }
    }

    /// The value shape `[rows, cols]` the checkpoint's tensors would give,
    /// whether or not it is the model's: for describing what a checkpoint
    /// looks like.
    pub fn value_shape(&self, file: &SafeTensors) -> Option<[usize; 2]> {
        let shape = |tensor: &str| file.shape(tensor).map(<[usize]>::to_vec);
        match self {
            Recipe::Exact(tensor) => match shape(tensor)?.as_slice() {
                &[rows, cols] => Some([rows, cols]),
                _ => None,
            },
            Recipe::LinearWeight { tensor, part } => match shape(tensor)?.as_slice() {
                &[outputs, inputs] => Some([inputs, outputs / part.count]),
                _ => None,
            },
            Recipe::FusedLinearWeights(tensors) => {
                let mut total = [0, 0];
                for tensor in tensors {
                    let &[outputs, inputs] = shape(tensor)?.as_slice() else {
                        return None;
                    };
                    total = [inputs, total[1] + outputs];
                }
                Some(total)
            }
            Recipe::Vector { tensor, part } => {
                Some([1, shape(tensor)?.last().copied()? / part.count])
            }
            Recipe::FusedVectors(tensors) => tensors
                .iter()
                .map(|tensor| shape(tensor)?.last().copied())
                .sum::<Option<usize>>()
                .map(|cols| [1, cols]),
            Recipe::Table(tensor) => match shape(tensor)?.as_slice() {
                [.., rows, cols] => Some([*rows, *cols]),
                _ => None,
            },
            Recipe::PatchKernel(tensor) => match shape(tensor)?.as_slice() {
                &[width, channels, height, side] => Some([channels * height * side, width]),
                _ => None,
            },
            Recipe::Zeros => None,
        }
    }

    /// The value `[rows, cols]`, row-major, from the checkpoint.
    pub fn read(
        &self,
        file: &SafeTensors,
        rows: usize,
        cols: usize,
    ) -> Result<Vec<f32>, RecipeFailure> {
        match self {
            Recipe::Exact(tensor) => read_shaped(file, tensor, &[rows, cols]),
            Recipe::LinearWeight { tensor, part } => {
                let fused = read_shaped(file, tensor, &[cols * part.count, rows])?;
                Ok(transposed_block(&fused, rows, cols, part.index))
            }
            Recipe::FusedLinearWeights(tensors) => {
                let each = cols / tensors.len().max(1);
                let mut value = vec![0.0; rows * cols];
                for (index, tensor) in tensors.iter().enumerate() {
                    let block = read_shaped(file, tensor, &[each, rows])?;
                    let block = transposed_block(&block, rows, each, 0);
                    for (row, values) in block.chunks_exact(each).enumerate() {
                        value[row * cols + index * each..row * cols + (index + 1) * each]
                            .copy_from_slice(values);
                    }
                }
                Ok(value)
            }
            Recipe::Vector { tensor, part } => {
                let length = cols * part.count;
                let whole = read_leading_units(file, tensor, &[length])?;
                Ok(whole[part.index * cols..(part.index + 1) * cols].to_vec())
            }
            Recipe::FusedVectors(tensors) => {
                let each = cols / tensors.len().max(1);
                let mut value = Vec::with_capacity(cols);
                for tensor in tensors {
                    value.extend(read_leading_units(file, tensor, &[each])?);
                }
                Ok(value)
            }
            Recipe::Table(tensor) => read_leading_units(file, tensor, &[rows, cols]),
            Recipe::PatchKernel(tensor) => {
                let side = square_root((rows / IMAGE_CHANNELS).max(1));
                let expected = [cols, IMAGE_CHANNELS, side, side];
                let kernel = read_shaped(file, tensor, &expected)?;
                Ok(transposed_block(&kernel, rows, cols, 0))
            }
            Recipe::Zeros => Ok(vec![0.0; rows * cols]),
        }
    }
}

/// Rows `[index * cols, (index + 1) * cols)` of a `[_, rows]` matrix,
/// transposed to `[rows, cols]`.
fn transposed_block(source: &[f32], rows: usize, cols: usize, index: usize) -> Vec<f32> {
    let mut value = vec![0.0; rows * cols];
    for col in 0..cols {
        let source_row = &source[(index * cols + col) * rows..(index * cols + col + 1) * rows];
        for (row, &element) in source_row.iter().enumerate() {
            value[row * cols + col] = element;
        }
    }
    value
}

/// `tensor` as f32, after checking its shape is exactly `expected`.
fn read_shaped(
    file: &SafeTensors,
    tensor: &str,
    expected: &[usize],
) -> Result<Vec<f32>, RecipeFailure> {
    let found = file.shape(tensor).ok_or_else(|| RecipeFailure::Missing {
        tensor: tensor.to_string(),
    })?;
    if found != expected {
        return Err(RecipeFailure::Shape {
            tensor: tensor.to_string(),
            expected: expected.to_vec(),
            found: found.to_vec(),
        });
    }
    file.tensor_f32(tensor, expected)
        .map_err(|source| RecipeFailure::Tensor {
            tensor: tensor.to_string(),
            source,
        })
}

/// The largest integer whose square is at most `value`.
fn square_root(value: usize) -> usize {
    let mut root = (value as f64).sqrt() as usize;
    while root * root > value {
        root -= 1;
    }
    while (root + 1) * (root + 1) <= value {
        root += 1;
    }
    root
}

/// `tensor` as f32 when its shape is `expected` after dropping leading
/// unit extents.
fn read_leading_units(
    file: &SafeTensors,
    tensor: &str,
    expected: &[usize],
) -> Result<Vec<f32>, RecipeFailure> {
    let found = file.shape(tensor).ok_or_else(|| RecipeFailure::Missing {
        tensor: tensor.to_string(),
    })?;
    let leading = found.len().saturating_sub(expected.len());
    let fits = found.len() >= expected.len()
        && found[..leading].iter().all(|&extent| extent == 1)
        && found[leading..] == *expected;
    if !fits {
        return Err(RecipeFailure::Shape {
            tensor: tensor.to_string(),
            expected: expected.to_vec(),
            found: found.to_vec(),
        });
    }
    let found = found.to_vec();
    file.tensor_f32(tensor, &found)
        .map_err(|source| RecipeFailure::Tensor {
            tensor: tensor.to_string(),
            source,
        })
}
