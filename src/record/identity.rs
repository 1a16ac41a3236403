//! What a record is made of and what it belongs to: the detail asked
//! for, the kinds of file, the build identity every file's header names,
//! the files themselves and their names on disk (one-to-one with the
//! stable keys), and why a record could not be made.

use super::sheet;
use crate::build_file::BuildQuery;
use crate::session::BackendError;

/// How much a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Detail {
    /// Figures, histograms and digests (any build).
    Summary,
    /// Also every scheduled event, every row word and every kernel run
    /// (small builds only).
    Full,
}

impl Detail {
    pub fn name(self) -> &'static str {
        match self {
            Detail::Summary => "summary",
            Detail::Full => "full",
        }
    }
}

/// The largest build `--detail full` records: transfers plus receives of
/// every phase (the events and row words are one line per piece).
pub const FULL_DETAIL_LIMIT: u64 = 200_000;

/// What a record file records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    Program,
    Exchange,
    Compute,
}

impl FileKind {
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Program => "program",
            FileKind::Exchange => "exchange",
            FileKind::Compute => "compute",
        }
    }
}

/// The build a record belongs to: what the header line names. A folder
/// written by another compiler version, for another model or machine, or at
/// another detail is not compared with this one (unless accepted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub compiler: String,
    pub build: String,
    /// Digest of the model and machine (workload shapes, batch, precision,
    /// attention, tiles), not of planning or schedule choices: those are
    /// what a snapshot is for showing the effect of.
    pub model: String,
    pub detail: Detail,
}

impl Identity {
    pub fn of(query: &BuildQuery, detail: Detail) -> Identity {
        let workload = &query.workload;
        let model = format!(
            "{:?} batch {} fuse_qkv {} {:?} {:?} {:?}",
            workload.model,
            workload.batch,
            workload.fuse_qkv,
            workload.fp8_scale,
            workload.attention,
            query.machine
        );
        Identity {
            compiler: format!("superstep {}", env!("CARGO_PKG_VERSION")),
            build: query.name.clone(),
            model: sheet::text_digest(model.as_bytes()),
            detail,
        }
    }

    /// The header line every file of the record starts with.
    pub fn header(&self) -> String {
        format!(
            "{} {} · compiler {} · build {} · model {} · detail {}",
            sheet::HEADER_PREFIX,
            sheet::FORMAT_VERSION,
            self.compiler,
            self.build,
            self.model,
            self.detail.name()
        )
    }
}

/// One file of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFile {
    /// Relative path, `/`-separated: `program.txt`, `exchange/NAME.txt`,
    /// `compute/NAME.txt` (NAME from [`file_stem`]).
    pub path: String,
    pub kind: FileKind,
    /// The stable key (`op#ordinal`, `op:kernels#ordinal`, `program`).
    pub key: String,
    pub text: String,
}

/// A whole record: the program file, then every exchange phase and compute
/// step in program order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub identity: Identity,
    pub files: Vec<RecordFile>,
}

/// Why a record could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{0}")]
    Inconsistent(String),
    #[error(
        "--detail full records every event and row word; this build has {events} transfers and \
         receives, above the limit of {limit} (use the summary detail, or a smaller build such \
         as --set workload.layers=1)"
    )]
    TooLarge { events: u64, limit: u64 },
}

/// The file name (without extension) of a stable key, safe on every file
/// system and one-to-one: letters, digits, `.`, `_` and `-` stay; `#`
/// becomes `@`, `:` becomes `=`; anything else (and `@`, `=`, `%`) is
/// `%XX` per byte.
pub fn file_stem(key: &str) -> String {
    let mut stem = String::with_capacity(key.len() + 4);
    for byte in key.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => stem.push(byte as char),
            b'#' => stem.push('@'),
            b':' => stem.push('='),
            _ => stem.push_str(&format!("%{byte:02X}")),
        }
    }
    // A name of dots only would be `.`/`..`.
    if stem.bytes().all(|byte| byte == b'.') {
        stem = stem.replace('.', "%2E");
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_safe_and_one_to_one() {
        assert_eq!(file_stem("layer.attn.split_q#0"), "layer.attn.split_q@0");
        assert_eq!(
            file_stem("layer.attn.core:kernels#1"),
            "layer.attn.core=kernels@1"
        );
        assert_eq!(file_stem("a/b@c"), "a%2Fb%40c");
        assert_eq!(file_stem(".."), "%2E%2E");
        assert_ne!(file_stem("a#0"), file_stem("a@0"));
        assert_ne!(file_stem("a:0"), file_stem("a=0"));
    }
}
