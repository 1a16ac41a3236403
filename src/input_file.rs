//! Reading a file: every file superstep reads (a build file, a checkpoint and
//! its index, shards and `config.json`, an `.npy` array, an image, a
//! package, a report, a snapshot, a cache entry, a build record) is opened
//! here, once, and read through the handle that was checked:
//!
//! - it is opened without blocking (`O_NONBLOCK`), so a FIFO named as an
//!   input never waits for a writer;
//! - the opened handle is `fstat`ed: it must be a regular file (a FIFO, a
//!   device such as `/dev/zero`, a socket or a folder is refused by kind),
//!   and its length is known before anything is read;
//! - a read is bounded: by the caller's documented cap on the whole file
//!   ([`read`]), or by what the file's own header declares (the caller
//!   reads the header with [`InputFile::read_prefix`] and the rest with
//!   [`InputFile::read_exactly`]); bytes beyond what was declared are an
//!   error, never ignored.
//!
//! The files a command reads as its inputs ([`InputFile::open`], not the
//! cache's entries or the outputs folder's own records, which use
//! [`InputFile::open_record`]) are remembered for the process, by canonical
//! path and by device and inode, so that `output_file` refuses to write
//! over any of them ([`read_by_this_command`]). docs/files.md states the
//! rule.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// `O_NONBLOCK` of the platforms superstep builds on.
#[cfg(any(target_os = "linux", target_os = "android"))]
const OPEN_NONBLOCKING: i32 = 0o4000;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const OPEN_NONBLOCKING: i32 = 0x0004;

/// A file that could not be read as an input.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    #[error("{path}: cannot read: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is {kind}, not a regular file; superstep reads its inputs from regular files only"
    )]
    Kind { path: PathBuf, kind: &'static str },
    #[error("{path}: {length} bytes is more than {what} may have ({limit} at most)")]
    TooLarge {
        path: PathBuf,
        length: u64,
        limit: u64,
        what: &'static str,
    },
    #[error("{path}: the file has {found} bytes where {expected} were expected ({reason})")]
    Length {
        path: PathBuf,
        expected: u64,
        found: u64,
        reason: String,
    },
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl InputFileError {
    /// The failure as an I/O error without the path, for callers whose
    /// messages name the file themselves (an open's or read's own error
    /// kept, so a missing file is still `NotFound`).
    pub fn into_io(self) -> std::io::Error {
        match self {
            Self::Open { source, .. } | Self::Read { source, .. } => source,
            Self::Kind { kind, .. } => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "it is {kind}, not a regular file; superstep reads its inputs from regular files only"
                ),
            ),
            Self::TooLarge {
                length,
                limit,
                what,
                ..
            } => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{length} bytes is more than {what} may have ({limit} at most)"),
            ),
            Self::Length {
                expected,
                found,
                reason,
                ..
            } => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the file has {found} bytes where {expected} were expected ({reason})"),
            ),
        }
    }

    /// Whether the failure is the file's (its kind, size, or absence)
    /// rather than the machine's (a read error).
    pub fn is_input(&self) -> bool {
        !matches!(self, Self::Read { .. })
    }
}

/// A regular file opened for reading, its length known.
#[derive(Debug)]
pub struct InputFile {
    file: File,
    path: PathBuf,
    length: u64,
    position: u64,
}

/// Where a read file is remembered: a command's inputs, never to be written over.
static INPUTS: Mutex<Vec<Identity>> = Mutex::new(Vec::new());

/// Whether this process is a command whose inputs are remembered
/// ([`remember_inputs`]); a library user (a test, another tool) that reads
/// a file and then writes it on purpose is not.
static REMEMBERING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process a command: from now on every input it opens is
/// remembered, and no output may replace it. `superstep`'s `main` calls it
/// first.
pub fn remember_inputs() {
    REMEMBERING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// One read file: its canonical path, and its device and inode.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    canonical: PathBuf,
    device: u64,
    inode: u64,
}

impl InputFile {
    /// Opens one of the command's inputs (remembered: no output of this
    /// process may replace it).
    pub fn open(path: &Path) -> Result<InputFile, InputFileError> {
        let file = InputFile::open_record(path)?;
        if REMEMBERING.load(std::sync::atomic::Ordering::Relaxed) {
            let metadata = file
                .file
                .metadata()
                .map_err(|source| file.read_error(source))?;
            remember(path, &metadata);
        }
        Ok(file)
    }

    /// Opens a file superstep itself keeps (a cache entry, a build record),
    /// with the same checks, not remembered as an input.
    pub fn open_record(path: &Path) -> Result<InputFile, InputFileError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(OPEN_NONBLOCKING)
            .open(path)
            .map_err(|source| InputFileError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        let metadata = file.metadata().map_err(|source| InputFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let refused = not_a_regular_file(metadata.file_type());
        if let Some(kind) = refused {
            return Err(InputFileError::Kind {
                path: path.to_path_buf(),
                kind,
            });
        }
        Ok(InputFile {
            file,
            path: path.to_path_buf(),
            length: metadata.len(),
            position: 0,
        })
    }

    /// The file's length when it was opened.
    pub fn length(&self) -> u64 {
        self.length
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes left after what has been read.
    pub fn remaining(&self) -> u64 {
        self.length.saturating_sub(self.position)
    }

    fn read_error(&self, source: std::io::Error) -> InputFileError {
        InputFileError::Read {
            path: self.path.clone(),
            source,
        }
    }

    /// Up to `count` next bytes (fewer at the end of the file): a header.
    pub fn read_prefix(&mut self, count: u64) -> Result<Vec<u8>, InputFileError> {
        let count = count.min(self.remaining());
        let mut bytes = Vec::with_capacity(count as usize);
        (&mut self.file)
            .take(count)
            .read_to_end(&mut bytes)
            .map_err(|source| self.read_error(source))?;
        self.position += bytes.len() as u64;
        Ok(bytes)
    }

    /// Exactly `count` next bytes, which must be all the file has left
    /// (`what` names what they are for the messages): a file shorter or
    /// longer than declared is refused before anything is read.
    pub fn read_exactly(&mut self, count: u64, what: &str) -> Result<Vec<u8>, InputFileError> {
        let remaining = self.remaining();
        if remaining != count {
            return Err(InputFileError::Length {
                path: self.path.clone(),
                expected: self.position + count,
                found: self.length,
                reason: if remaining > count {
                    format!("{} bytes after {what}", remaining - count)
                } else {
                    format!("{what} is cut short")
                },
            });
        }
        self.read_to_end_of_file()
    }

    /// The rest of the file (its length bounded by the caller before).
    fn read_to_end_of_file(&mut self) -> Result<Vec<u8>, InputFileError> {
        let expected = self.remaining();
        let mut bytes = Vec::with_capacity(expected as usize);
        // One byte more than the length: a file that grew since it was
        // opened is refused, not read without end.
        (&mut self.file)
            .take(expected + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| self.read_error(source))?;
        if bytes.len() as u64 != expected {
            return Err(InputFileError::Length {
                path: self.path.clone(),
                expected: self.length,
                found: self.position + bytes.len() as u64,
                reason: String::from("the file changed while it was read"),
            });
        }
        self.position += expected;
        Ok(bytes)
    }

    /// The BLAKE3 digest of the rest of the file, read in chunks (no copy
    /// of the whole file is held) and hashed over the cores; a file that
    /// changes length while it is read is refused.
    pub fn digest_rest(&mut self) -> Result<blake3::Hash, InputFileError> {
        const CHUNK_BYTES: usize = 4 << 20;
        let expected = self.remaining();
        let mut hasher = blake3::Hasher::new();
        let mut chunk = vec![0u8; CHUNK_BYTES];
        let mut read = 0u64;
        loop {
            let filled =
                fill(&mut self.file, &mut chunk).map_err(|source| self.read_error(source))?;
            if filled == 0 {
                break;
            }
            read += filled as u64;
            if read > expected {
                break;
            }
            hasher.update_rayon(&chunk[..filled]);
        }
        if read != expected {
            return Err(InputFileError::Length {
                path: self.path.clone(),
                expected: self.length,
                found: self.position + read,
                reason: String::from("the file changed while it was read"),
            });
        }
        self.position += expected;
        Ok(hasher.finalize())
    }

    /// The whole rest of the file, at most `limit` bytes of it (`what`
    /// names the kind of file for the message).
    pub fn read_rest(&mut self, limit: u64, what: &'static str) -> Result<Vec<u8>, InputFileError> {
        if self.length > limit {
            return Err(InputFileError::TooLarge {
                path: self.path.clone(),
                length: self.length,
                limit,
                what,
            });
        }
        self.read_to_end_of_file()
    }
}

/// Remembers the file at `path` (`metadata` its own) as an input of this
/// process.
pub(crate) fn remember(path: &Path, metadata: &std::fs::Metadata) {
    let identity = Identity {
        canonical: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        device: metadata.dev(),
        inode: metadata.ino(),
    };
    let mut inputs = INPUTS.lock().unwrap_or_else(PoisonError::into_inner);
    if !inputs.contains(&identity) {
        inputs.push(identity);
    }
}

/// Reads the whole of one of the command's inputs, refusing a file over
/// `limit` bytes before reading it (`what` names the kind of file).
pub fn read(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, InputFileError> {
    InputFile::open(path)?.read_rest(limit, what)
}

/// What a file of `kind` is, in words, when it is not a regular file
/// (`None` for a regular file): the one naming of refused kinds that reads
/// and writes share.
pub fn not_a_regular_file(kind: std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("a special file")
    }
}

/// [`read`] as UTF-8 text (a file that is not is an error naming it).
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, InputFileError> {
    String::from_utf8(read(path, limit, what)?).map_err(|_| InputFileError::Read {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

/// [`read`] of a file superstep itself keeps ([`InputFile::open_record`]).
pub fn read_record(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, InputFileError> {
    InputFile::open_record(path)?.read_rest(limit, what)
}

/// The input of this process `path` would replace, if any: the same
/// canonical path (through links and `..`), or the same device and inode (a
/// hard link). A missing `path` is compared by its folder's canonical path.
pub fn read_by_this_command(path: &Path) -> Option<PathBuf> {
    let inputs = INPUTS.lock().unwrap_or_else(PoisonError::into_inner);
    if inputs.is_empty() {
        return None;
    }
    let canonical = canonical_target(path);
    let existing = std::fs::metadata(path).ok();
    let same_inode = |input: &Identity, metadata: &std::fs::Metadata| {
        metadata.dev() == input.device && metadata.ino() == input.inode
    };
    inputs
        .iter()
        .find(|input| {
            Some(&input.canonical) == canonical.as_ref()
                // A hard link of the input: the same inode, which the input's
                // own path still has (an inode freed and reused is not it).
                || existing.as_ref().is_some_and(|metadata| {
                    same_inode(input, metadata)
                        && std::fs::metadata(&input.canonical)
                            .is_ok_and(|now| same_inode(input, &now))
                })
        })
        .map(|input| input.canonical.clone())
}

/// The canonical path a write to `path` lands on: its folder canonical,
/// its own name kept (the file itself may not exist yet).
pub fn canonical_target(path: &Path) -> Option<PathBuf> {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return Some(canonical);
    }
    let name = path.file_name()?;
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(parent)
        .ok()
        .map(|parent| parent.join(name))
}

/// Reads into `buffer` until it is full or the file ends; the bytes read.
fn fill(file: &mut std::fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let directory = std::env::temp_dir().join(format!(
            "superstep-input-file-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).expect("temporary folder");
        directory
    }

    #[test]
    fn devices_and_folders_are_refused_by_kind() {
        let error = read(Path::new("/dev/zero"), 1 << 20, "a test file").expect_err("a device");
        assert!(error.to_string().contains("a character device"), "{error}");
        let error = read(Path::new("/"), 1 << 20, "a test file").expect_err("a folder");
        assert!(error.to_string().contains("a folder"), "{error}");
    }

    #[test]
    fn reads_are_bounded_and_exact() {
        let directory = folder("bounded");
        let path = directory.join("data");
        std::fs::write(&path, b"headerpayload").expect("writes");
        let error = read(&path, 4, "a test file").expect_err("over the cap");
        assert!(error.to_string().contains("4 at most"), "{error}");
        remember_inputs();
        let mut file = InputFile::open(&path).expect("opens");
        assert_eq!(file.read_prefix(6).expect("header"), b"header");
        let error = file.read_exactly(3, "the payload").expect_err("trailing");
        assert!(
            error.to_string().contains("4 bytes after the payload"),
            "{error}"
        );
        assert_eq!(
            file.read_exactly(7, "the payload").expect("payload"),
            b"payload"
        );
        remember(&path, &std::fs::metadata(&path).expect("metadata"));
        assert!(read_by_this_command(&path).is_some());
        assert!(read_by_this_command(&directory.join("other")).is_none());
        let _ = std::fs::remove_dir_all(&directory);
    }
}
