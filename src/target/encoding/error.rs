//! Errors of the exchange instruction encoder and decoder. This file owns the
//! error types only; it must not format instructions or decide recovery.

use thiserror::Error;

/// A field cannot be represented in its instruction's encoding.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// `value` of `field` lies outside `minimum..=maximum` for `instruction`.
    #[error("{instruction}: field `{field}` = {value} is out of range {minimum}..={maximum}")]
    FieldOutOfRange {
        instruction: &'static str,
        field: &'static str,
        value: u32,
        minimum: u32,
        maximum: u32,
    },
}

/// Words that are not a valid exchange instruction.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// There was no word at `position`.
    #[error("word {position}: no instruction word to decode")]
    Empty { position: usize },
    /// The word at `position` matches no instruction form.
    #[error("word {position}: {word:#010x} matches no exchange instruction")]
    UnknownOpcode { position: usize, word: u32 },
    /// The form at `position` needs more words than remain.
    #[error("word {position}: {instruction} needs {needed} words but only {available} remain")]
    Truncated {
        position: usize,
        instruction: &'static str,
        needed: usize,
        available: usize,
    },
}
