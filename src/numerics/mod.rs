//! Reference numerics: the bit-exact number formats (FP8 "F143", FP16), the
//! activation functions, the row-wise kernels (norm, softmax, rotary, online
//! softmax) and the matrix-product accumulation models that the FP32 reference
//! evaluation and the functional simulator share. It owns arithmetic only; it
//! must not know about graphs, tiles, plans or files.

pub mod activation;
pub mod dot;
pub mod error;
pub mod fp8;
pub mod half_float;
pub mod rows;
pub mod wide;

#[cfg(test)]
pub(crate) mod test_random;

pub use error::NumericsError;
