//! Writing a file whole: every file superstep writes for a user or for its
//! cache (package, reports, snapshots, records, cache entries) is written
//! to a temporary file beside it and renamed over the target (the package
//! is also synced to disk first), so a reader never sees half a file, a full disk leaves the
//! old file in place, and a failure names the file. A target that is a
//! symbolic link is refused: no report is written through a link onto
//! another file.
//!
//! Temporary names are `.tmp-PID-SERIAL-NAME`: the cache's eviction knows
//! them and removes those of writers that died between writing and
//! renaming.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputFileError {
    #[error(
        "{path} is a symbolic link (to {target}); superstep does not write through links: remove it or write elsewhere"
    )]
    Link { path: PathBuf, target: PathBuf },
    #[error("{path} is a folder, not a file")]
    Folder { path: PathBuf },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl OutputFileError {
    /// Whether the failure is the state of the user's folder (a link or a
    /// folder where the file goes) rather than of the machine.
    pub fn is_input(&self) -> bool {
        matches!(self, Self::Link { .. } | Self::Folder { .. })
    }
}

/// The prefix of every temporary file name.
pub const TEMPORARY_PREFIX: &str = ".tmp-";

static SERIAL: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` whole (see the module header), creating its
/// folder when missing.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OutputFileError> {
    write_parts(path, &[bytes], false)
}

/// [`write_atomically`] of the concatenation of `parts`, synced to disk
/// before the rename (the package file: a power loss leaves the old file or
/// the whole new one).
pub fn write_parts_durably(path: &Path, parts: &[&[u8]]) -> Result<(), OutputFileError> {
    write_parts(path, parts, true)
}

fn write_parts(path: &Path, parts: &[&[u8]], sync: bool) -> Result<(), OutputFileError> {
    let failure = |source| OutputFileError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Ok(metadata) = fs::symlink_metadata(path) {
        if metadata.file_type().is_symlink() {
            return Err(OutputFileError::Link {
                path: path.to_path_buf(),
                target: fs::read_link(path).unwrap_or_default(),
            });
        }
        if metadata.is_dir() {
            return Err(OutputFileError::Folder {
                path: path.to_path_buf(),
            });
        }
    }
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(failure)?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = parent.join(format!(
        "{TEMPORARY_PREFIX}{}-{}-{name}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        // `create_new`: never through a link someone planted at the
        // temporary name.
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        for part in parts {
            file.write_all(part)?;
        }
        if sync {
            file.sync_all()?;
        }
        drop(file);
        fs::rename(&temporary, path)
    })();
    if let Err(source) = written {
        let _ = fs::remove_file(&temporary);
        return Err(failure(source));
    }
    Ok(())
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
        let path = directory.join("nested").join("report.json");
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
}
