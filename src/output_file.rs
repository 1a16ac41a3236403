//! Writing a file whole: every file superstep writes for a user or for its
//! cache (package, reports, snapshots, records, cache entries, the trace) is
//! written to a temporary file beside it and renamed over the target (the
//! package is also synced to disk first), so a reader never sees half a
//! file, a full disk leaves the old file in place, and a failure names the
//! file.
//!
//! A user's output ([`write_atomically`], [`write_parts_durably`],
//! [`PendingFile`]) is refused, before anything is written, when its path
//! is a symbolic link (dangling or not: nothing is written through a link),
//! a folder, or a special file (a device, a FIFO, a socket: never replaced
//! by a regular file), when its folder does not exist (no folder the user
//! did not ask for is created), and when it is a file this command read
//! (`input_file::read_by_this_command`: the same canonical path, or the same
//! inode). What was written is remembered (length and BLAKE3 digest), so a
//! build record lists the bytes this process wrote, not bytes re-read from
//! disk ([`written_digest`]). docs/files.md states the rule.
//!
//! Temporary names are `.tmp-PID-SERIAL-NAME`: the cache's eviction knows
//! them and removes those of writers that died between writing and
//! renaming.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// A file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputFileError {
    #[error(
        "{path} is a symbolic link (to {target}); superstep does not write through links: remove it or write elsewhere"
    )]
    Link { path: PathBuf, target: PathBuf },
    #[error("{path} is a folder, not a file")]
    Folder { path: PathBuf },
    #[error(
        "{path} is {kind}; superstep never replaces a special file by its output: write to a regular file"
    )]
    Special { path: PathBuf, kind: &'static str },
    #[error(
        "the folder {folder} of {path} does not exist; create it first or name a file in an existing folder"
    )]
    MissingFolder { path: PathBuf, folder: PathBuf },
    #[error(
        "{path} is {input}, which this command reads; writing it would destroy it: write elsewhere"
    )]
    Input { path: PathBuf, input: PathBuf },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl OutputFileError {
    /// Whether the failure is the state of the user's folder (a link or a
    /// folder where the file goes, an input in the way) rather than of the
    /// machine.
    pub fn is_input(&self) -> bool {
        !matches!(self, Self::Write { .. })
    }
}

/// The prefix of every temporary file name.
pub const TEMPORARY_PREFIX: &str = ".tmp-";

static SERIAL: AtomicU64 = AtomicU64::new(0);

/// Parts of at least this many bytes are digested in parallel (below it
/// the threads cost more than they save).
pub const PARALLEL_DIGEST_BYTES: usize = 1 << 20;

/// What this process wrote, by canonical path: length and BLAKE3 digest.
static WRITTEN: Mutex<BTreeMap<PathBuf, (u64, [u8; 32])>> = Mutex::new(BTreeMap::new());

/// Writes a user's output `bytes` to `path` whole (see the module header).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OutputFileError> {
    write_parts(path, &[bytes], false)
}

/// [`write_atomically`] of the concatenation of `parts`, synced to disk
/// before the rename (the package file: a power loss leaves the old file or
/// the whole new one).
pub fn write_parts_durably(path: &Path, parts: &[&[u8]]) -> Result<(), OutputFileError> {
    write_parts(path, parts, true)
}

/// Writes one of the cache's entries whole, creating its folder when
/// missing: the cache's own folder, not a user's output, so it is neither
/// checked against the command's inputs nor remembered.
pub fn write_entry(path: &Path, bytes: &[u8]) -> Result<(), OutputFileError> {
    check_target(path)?;
    let parent = folder_of(path);
    fs::create_dir_all(parent).map_err(|source| OutputFileError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    let mut pending = PendingFile::begin(path)?;
    pending.write_parts(&[bytes], false)?;
    pending.rename()
}

/// The length and BLAKE3 digest of what this process last wrote at `path`
/// (by canonical path), if it wrote it.
pub fn written_digest(path: &Path) -> Option<(u64, [u8; 32])> {
    let canonical = crate::input_file::canonical_target(path)?;
    WRITTEN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&canonical)
        .copied()
}

/// Records that the file at `path`, which this process has just read whole
/// and found to have `bytes` bytes of BLAKE3 `digest`, stands as if this
/// process had written it (a warm build keeping its own unchanged output;
/// the caller holds the folder's lock).
pub fn keep_as_written(path: &Path, bytes: u64, digest: [u8; 32]) {
    if let Some(canonical) = crate::input_file::canonical_target(path) {
        WRITTEN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(canonical, (bytes, digest));
    }
}

fn write_parts(path: &Path, parts: &[&[u8]], sync: bool) -> Result<(), OutputFileError> {
    let mut pending = PendingFile::create(path)?;
    pending.write_parts(parts, sync)?;
    pending.commit()
}

/// A user's output being written: a temporary file beside the target,
/// renamed over it by [`PendingFile::commit`] (checked again then), removed
/// when dropped uncommitted. The trace is written through one.
pub struct PendingFile {
    path: PathBuf,
    temporary: PathBuf,
    file: Option<fs::File>,
    hasher: blake3::Hasher,
    length: u64,
}

impl PendingFile {
    /// Checks `path` as a user's output (see the module header) and creates
    /// its temporary file.
    pub fn create(path: &Path) -> Result<PendingFile, OutputFileError> {
        check_output(path)?;
        PendingFile::begin(path)
    }

    fn begin(path: &Path) -> Result<PendingFile, OutputFileError> {
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temporary = folder_of(path).join(format!(
            "{TEMPORARY_PREFIX}{}-{}-{name}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        // `create_new`: never through a link someone planted at the
        // temporary name.
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .map_err(|source| OutputFileError::Write {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(PendingFile {
            path: path.to_path_buf(),
            temporary,
            file: Some(file),
            hasher: blake3::Hasher::new(),
            length: 0,
        })
    }

    /// The target's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn failure(&self, source: std::io::Error) -> OutputFileError {
        OutputFileError::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// Appends `bytes` (an error names the target).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), OutputFileError> {
        let result = match self.file.as_mut() {
            Some(file) => file.write_all(bytes),
            None => Err(std::io::Error::other("the file was already finished")),
        };
        result.map_err(|source| self.failure(source))?;
        // A large part (a package's payload) is digested over the cores:
        // the same digest, in a fraction of the time.
        if bytes.len() >= PARALLEL_DIGEST_BYTES {
            self.hasher.update_rayon(bytes);
        } else {
            self.hasher.update(bytes);
        }
        self.length += bytes.len() as u64;
        Ok(())
    }

    fn write_parts(&mut self, parts: &[&[u8]], sync: bool) -> Result<(), OutputFileError> {
        for part in parts {
            self.write_all(part)?;
        }
        if sync && let Some(file) = &self.file {
            file.sync_all().map_err(|source| self.failure(source))?;
        }
        Ok(())
    }

    /// Checks the target again (a link or an input may have appeared since)
    /// and renames the temporary file over it, remembering what was written.
    pub fn commit(self) -> Result<(), OutputFileError> {
        check_output(&self.path)?;
        let path = self.path.clone();
        let written = (self.length, *self.hasher.finalize().as_bytes());
        self.rename()?;
        if let Some(canonical) = crate::input_file::canonical_target(&path) {
            WRITTEN
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(canonical, written);
        }
        Ok(())
    }

    fn rename(mut self) -> Result<(), OutputFileError> {
        drop(self.file.take());
        fs::rename(&self.temporary, &self.path).map_err(|source| self.failure(source))
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.temporary);
        }
    }
}

fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A user's output at `path`: no link, folder or special file in its
/// place, its folder present, not one of the command's inputs.
pub fn check_output(path: &Path) -> Result<(), OutputFileError> {
    check_target(path)?;
    let folder = folder_of(path);
    if !folder.is_dir() {
        return Err(OutputFileError::MissingFolder {
            path: path.to_path_buf(),
            folder: folder.to_path_buf(),
        });
    }
    if let Some(input) = crate::input_file::read_by_this_command(path) {
        return Err(OutputFileError::Input {
            path: path.to_path_buf(),
            input,
        });
    }
    Ok(())
}

/// What is at `path` now: nothing or a regular file may be replaced.
fn check_target(path: &Path) -> Result<(), OutputFileError> {
    let Ok(metadata) = fs::symlink_metadata(path) else {
        return Ok(());
    };
    let kind = metadata.file_type();
    if kind.is_symlink() {
        return Err(OutputFileError::Link {
            path: path.to_path_buf(),
            target: fs::read_link(path).unwrap_or_default(),
        });
    }
    if kind.is_dir() {
        return Err(OutputFileError::Folder {
            path: path.to_path_buf(),
        });
    }
    // Folders were refused above, so this names only special files.
    let special = crate::input_file::not_a_regular_file(kind);
    match special {
        Some(kind) => Err(OutputFileError::Special {
            path: path.to_path_buf(),
            kind,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let directory = std::env::temp_dir().join(format!(
            "superstep-output-file-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&directory);
        fs::create_dir_all(&directory).expect("temporary folder");
        directory
    }

    #[test]
    fn writes_whole_files_and_leaves_no_temporary_behind() {
        let directory = folder("whole");
        let path = directory.join("report.json");
        write_parts_durably(&path, &[b"ab", b"cd"]).expect("writes");
        assert_eq!(fs::read(&path).expect("reads"), b"abcd");
        write_atomically(&path, b"new").expect("replaces");
        assert_eq!(fs::read(&path).expect("reads"), b"new");
        let names: Vec<_> = fs::read_dir(path.parent().expect("parent"))
            .expect("lists")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("report.json")]);
        let _ = fs::remove_dir_all(&directory);
    }

    #[test]
    fn refuses_a_link_and_leaves_its_target_alone() {
        let directory = folder("link");
        let victim = directory.join("victim.txt");
        fs::write(&victim, b"keep me").expect("victim");
        let link = directory.join("report.html");
        std::os::unix::fs::symlink(&victim, &link).expect("link");
        let error = write_atomically(&link, b"overwritten").expect_err("refused");
        assert!(error.is_input());
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(fs::read(&victim).expect("reads"), b"keep me");
        let _ = fs::remove_dir_all(&directory);
    }

    #[test]
    fn a_folder_in_the_way_is_named() {
        let directory = folder("full");
        let path = directory.join("a").join("b");
        fs::create_dir_all(&path).expect("folder in the way");
        let error = write_atomically(&path, b"x").expect_err("a folder");
        assert!(error.to_string().contains("is a folder"), "{error}");
        let _ = fs::remove_dir_all(&directory);
    }

    #[test]
    fn special_files_missing_folders_and_inputs_are_refused() {
        let directory = folder("refused");
        let error = write_atomically(Path::new("/dev/null"), b"x").expect_err("a device");
        assert!(error.to_string().contains("character device"), "{error}");
        let dangling = directory.join("dangling");
        std::os::unix::fs::symlink(directory.join("target"), &dangling).expect("link");
        let error = write_atomically(&dangling, b"x").expect_err("a dangling link");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert!(!directory.join("target").exists());
        let nested = directory.join("missing").join("file");
        let error = write_atomically(&nested, b"x").expect_err("no folder");
        assert!(error.to_string().contains("does not exist"), "{error}");
        assert!(!directory.join("missing").exists());
        let input = directory.join("input");
        fs::write(&input, b"keep").expect("input");
        crate::input_file::remember_inputs();
        crate::input_file::remember(&input, &fs::metadata(&input).expect("metadata"));
        let spelled = directory.join(".").join("input");
        let error = write_atomically(&spelled, b"x").expect_err("an input");
        assert!(
            error.to_string().contains("which this command reads"),
            "{error}"
        );
        assert_eq!(fs::read(&input).expect("reads"), b"keep");
        let written = directory.join("written");
        write_atomically(&written, b"abc").expect("writes");
        assert_eq!(
            written_digest(&written),
            Some((3, *blake3::hash(b"abc").as_bytes()))
        );
        let _ = fs::remove_dir_all(&directory);
    }
}
