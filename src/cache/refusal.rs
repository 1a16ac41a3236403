//! Why a cache entry whose bytes are intact is still not used: its payload
//! does not decode ([`PayloadError`]), or the value it decodes to fails its
//! check for meaning ([`Refusal`]). Either makes the entry a miss with one
//! warning (`EntryError::Undecodable`, `EntryError::Refused`); the types
//! say which check refused it, the text only adds the detail.

/// A payload that does not decode to (or encode from) its value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// bincode could not read or write the value.
    #[error("{0}")]
    Bincode(String),
    /// A value's own compact form (the rows') is inconsistent.
    #[error("{0}")]
    Compact(String),
}

impl From<bincode::Error> for PayloadError {
    fn from(error: bincode::Error) -> PayloadError {
        PayloadError::Bincode(error.to_string())
    }
}

/// A decoded value that its check refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A kind used only when a trusted key signed it, unsigned.
    #[error("no trusted key signed it")]
    Unsigned,
    /// A layout search's trial, unsigned: its estimate has no check short
    /// of compiling it.
    #[error("no trusted key signed it, and a trial's estimate has no check short of compiling it")]
    UnsignedTrial,
    /// Signed by a trusted key, but the signature does not verify.
    #[error("its signature by trusted key {signer} does not verify")]
    BadSignature { signer: String },
    /// Its arrays do not fit the shapes its users index by.
    #[error("{0}")]
    Shape(String),
    /// An independent checker (a validator, the row or placement checker)
    /// refuses it.
    #[error("the {checker} refuses it: {detail}")]
    Checker {
        checker: &'static str,
        detail: String,
    },
    /// Made again from checked inputs, it differs.
    #[error("it is not the {what} of {from}")]
    NotRemade {
        what: &'static str,
        from: &'static str,
    },
    /// What it is checked against could not be made.
    #[error("{what}: {detail}")]
    Unverifiable { what: &'static str, detail: String },
}
