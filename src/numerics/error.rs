//! Typed errors of the reference numerics: every way a caller can hand a
//! kernel or converter inconsistent lengths or shapes. It owns the messages;
//! it must not perform arithmetic.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NumericsError {
    #[error(
        "a byte buffer of {byte_length} bytes cannot hold exactly {element_count} elements of {element_bytes} bytes"
    )]
    ByteLength {
        element_bytes: usize,
        byte_length: usize,
        element_count: usize,
    },
    #[error("{what}: expected length {expected}, got {actual}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    #[error("{what}: the row is empty")]
    EmptyRow { what: &'static str },
    #[error("softmax: no finite score (the row is empty or fully masked)")]
    NoFiniteScore,
    #[error("rotary: row length {length} is odd; rotation needs consecutive pairs")]
    OddRowLength { length: usize },
    #[error("matrix `{matrix}`: row stride {row_stride} is smaller than its {columns} columns")]
    StrideTooSmall {
        matrix: &'static str,
        columns: usize,
        row_stride: usize,
    },
    #[error(
        "matrix `{matrix}`: {rows} x {columns} with row stride {row_stride} does not fit a slice of {slice_length} elements"
    )]
    MatrixOutOfBounds {
        matrix: &'static str,
        rows: usize,
        columns: usize,
        row_stride: usize,
        slice_length: usize,
    },
}
