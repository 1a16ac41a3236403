//! The build record `build.json` of an outputs folder: which build the
//! folder holds (its package build key, build name, compiler) and every
//! file that build wrote there, with its length and BLAKE3 digest.
//!
//! A build removes the old record before it writes anything ([`begin`]),
//! writes each output whole (`output_file`), then removes the files the
//! previous record listed that this build did not write and writes the new
//! record last ([`finish`]), its lengths and digests those of the bytes this
//! process wrote (`output_file::written_digest`), never re-read from disk. So a folder with a record holds exactly one
//! build's files, each as that build wrote it ([`check`] proves it), and a
//! folder without one is a build that did not finish.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::build_file::{BuildQuery, package_build_key};
use crate::output_file::{OutputFileError, write_atomically};

/// The record's file name in `outputs.directory/NAME`.
pub const MANIFEST_FILE: &str = "build.json";

/// The most bytes a file a record lists may have when it is checked (a
/// package's limit and its header).
const MAX_LISTED_FILE_BYTES: u64 = crate::package::file::MAXIMUM_PAYLOAD_BYTES + 4096;

/// The record's schema.
pub const MANIFEST_SCHEMA: u32 = 1;

/// `build.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildManifest {
    pub schema: u32,
    /// `build_file::package_build_key` of the build, 64 hex digits (the
    /// same key package.bin's header carries).
    pub build_key: String,
    pub name: String,
    /// The compiler that wrote the folder (`cache::tool_version`).
    pub compiler: String,
    /// Every file of the build in the folder, in the order written.
    pub files: Vec<ManifestFile>,
}

/// One file of a build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// A plain file name in the folder.
    pub name: String,
    pub bytes: u64,
    /// BLAKE3 of the file, 64 hex digits.
    pub blake3: String,
}

/// A record that could not be written, or a folder that does not match its
/// record.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(transparent)]
    Output(#[from] OutputFileError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a build record: {message}")]
    Format { path: PathBuf, message: String },
    #[error("{path} does not belong to the build in {record}: {reason}")]
    Mismatch {
        path: PathBuf,
        record: PathBuf,
        reason: String,
    },
}

/// The names of the files a build writes in its outputs folder, whatever
/// its settings (the record itself among them).
pub const BUILD_FILE_NAMES: [&str; 7] = [
    MANIFEST_FILE,
    "package.bin",
    "report.json",
    "report.html",
    "phases.csv",
    "compute.csv",
    crate::report::last_build::STATE_FILE,
];

/// The outputs folder `directory`'s own files: those its record lists and
/// those a build writes ([`BUILD_FILE_NAMES`]); no output a flag names may
/// be one of them.
pub fn own_files(directory: &Path) -> Vec<PathBuf> {
    let listed = read(&directory.join(MANIFEST_FILE))
        .map(|record| record.files)
        .unwrap_or_default();
    BUILD_FILE_NAMES
        .iter()
        .map(|name| directory.join(name))
        .chain(
            listed
                .iter()
                .filter(|file| is_plain(&file.name))
                .map(|file| directory.join(&file.name)),
        )
        .collect()
}

/// The outputs folder held by this process: while it lives no other
/// superstep writes the folder (an advisory `flock` on the folder itself,
/// so no lock file is left in it; released when dropped or when the
/// process ends, however it ends).
#[derive(Debug)]
pub struct FolderLock {
    _folder: fs::File,
}

/// Takes `directory`'s lock, waiting (with a note on standard error) while
/// another superstep holds it.
pub fn lock(directory: &Path) -> Result<FolderLock, ManifestError> {
    let failure = |source: std::io::Error| ManifestError::Io {
        path: directory.to_path_buf(),
        source,
    };
    // The outputs folder is the one folder a build creates.
    fs::create_dir_all(directory).map_err(failure)?;
    let folder = fs::File::open(directory).map_err(failure)?;
    match folder.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            eprintln!(
                "note: another superstep is writing {}; waiting for it to finish",
                directory.display()
            );
            folder.lock().map_err(failure)?;
        }
        Err(fs::TryLockError::Error(error)) => return Err(failure(error)),
    }
    Ok(FolderLock { _folder: folder })
}

/// Takes the folder's lock ([`lock`]), then reads and removes its previous
/// record, so that while this build writes the folder no record describes
/// it and no other build writes it. A record that cannot be read is removed
/// and ignored. Keep the lock until [`finish`] has written the new record.
pub fn begin(directory: &Path) -> Result<(FolderLock, Option<BuildManifest>), ManifestError> {
    let lock = lock(directory)?;
    let path = directory.join(MANIFEST_FILE);
    let previous = read(&path).ok();
    let _ = fs::remove_file(&path);
    Ok((lock, previous))
}

/// Removes the files `previous` listed that `written` does not (plain
/// names in `directory` only, never through a link or out of the folder),
/// then writes the record of `written` last.
pub fn finish(
    directory: &Path,
    query: &BuildQuery,
    written: &[PathBuf],
    previous: Option<&BuildManifest>,
) -> Result<PathBuf, ManifestError> {
    let mut files = Vec::with_capacity(written.len());
    let mut names = BTreeSet::new();
    for path in written {
        let Some(name) = plain_name(path) else {
            continue;
        };
        if path.parent() != Some(directory) || !names.insert(name.clone()) {
            continue;
        }
        // What this process wrote there, not what is on disk now: another
        // writer's file is never vouched for.
        let Some((bytes, digest)) = crate::output_file::written_digest(path) else {
            return Err(ManifestError::Io {
                path: path.clone(),
                source: std::io::Error::other("this build did not write it"),
            });
        };
        files.push(ManifestFile {
            name,
            bytes,
            blake3: blake3::Hash::from_bytes(digest).to_hex().to_string(),
        });
    }
    for stale in previous.iter().flat_map(|record| &record.files) {
        if names.contains(&stale.name) || !is_plain(&stale.name) {
            continue;
        }
        let path = directory.join(&stale.name);
        if fs::symlink_metadata(&path).is_ok_and(|metadata| metadata.is_file()) {
            let _ = fs::remove_file(&path);
        }
    }
    let record = BuildManifest {
        schema: MANIFEST_SCHEMA,
        build_key: package_build_key(query).hex(),
        name: query.name.clone(),
        compiler: crate::cache::tool_version().to_string(),
        files,
    };
    let path = directory.join(MANIFEST_FILE);
    let mut text =
        serde_json::to_string_pretty(&record).map_err(|error| ManifestError::Format {
            path: path.clone(),
            message: error.to_string(),
        })?;
    text.push('\n');
    write_atomically(&path, text.as_bytes())?;
    Ok(path)
}

/// Whether the file `name` in `directory` is already this build's: the
/// previous record (read by [`begin`]) is of the same build key and
/// compiler, lists it, and the file on disk has the length and digest the
/// record lists. If so the file is kept as if written now (for [`finish`])
/// and its length returned, so a warm build does not rewrite it. A build
/// that reads a file besides its build file (a checkpoint, a calibration
/// input) is never kept: the build key names such a file, not its content.
pub fn unchanged(
    directory: &Path,
    previous: Option<&BuildManifest>,
    query: &BuildQuery,
    name: &str,
) -> Option<u64> {
    let record = previous?;
    let reads_other_files = query.workload.weights.is_checkpoint()
        || matches!(
            query.planning.activation_scale,
            crate::build_file::ActivationScale::Calibrate {
                input: crate::build_file::CalibrationInput::File { .. }
            }
        );
    if reads_other_files
        || record.build_key != package_build_key(query).hex()
        || record.compiler != crate::cache::tool_version()
        || !is_plain(name)
    {
        return None;
    }
    let listed = record.files.iter().find(|file| file.name == name)?;
    let path = directory.join(name);
    let mut file = crate::input_file::InputFile::open_record(&path).ok()?;
    if file.length() != listed.bytes || listed.bytes > MAX_LISTED_FILE_BYTES {
        return None;
    }
    let digest = file.digest_rest().ok()?;
    if digest.to_hex().as_str() != listed.blake3 {
        return None;
    }
    crate::output_file::keep_as_written(&path, listed.bytes, *digest.as_bytes());
    Some(listed.bytes)
}

/// Reads `directory`'s record and checks every file it lists against its
/// length and digest; `Err` names the first file that does not match.
pub fn check(directory: &Path) -> Result<BuildManifest, ManifestError> {
    let record_path = directory.join(MANIFEST_FILE);
    let record = read(&record_path)?;
    for file in &record.files {
        let path = directory.join(&file.name);
        let mismatch = |reason: String| ManifestError::Mismatch {
            path: path.clone(),
            record: record_path.clone(),
            reason,
        };
        if !is_plain(&file.name) {
            return Err(mismatch(String::from("not a plain file name")));
        }
        let bytes = crate::input_file::read_record(&path, MAX_LISTED_FILE_BYTES, "a build's file")
            .map_err(|error| mismatch(error.into_io().to_string()))?;
        if bytes.len() as u64 != file.bytes {
            return Err(mismatch(format!(
                "{} bytes, the record says {}",
                bytes.len(),
                file.bytes
            )));
        }
        if blake3::hash(&bytes).to_hex().as_str() != file.blake3 {
            return Err(mismatch(String::from("its digest differs")));
        }
    }
    Ok(record)
}

fn read(path: &Path) -> Result<BuildManifest, ManifestError> {
    let bytes =
        crate::input_file::read_record(path, 16 << 20, "a build record").map_err(|error| {
            ManifestError::Io {
                path: path.to_path_buf(),
                source: error.into_io(),
            }
        })?;
    let text = String::from_utf8_lossy(&bytes);
    let record: BuildManifest =
        serde_json::from_str(&text).map_err(|error| ManifestError::Format {
            path: path.to_path_buf(),
            message: error.to_string(),
        })?;
    if record.schema != MANIFEST_SCHEMA {
        return Err(ManifestError::Format {
            path: path.to_path_buf(),
            message: format!(
                "schema {}, this superstep writes {MANIFEST_SCHEMA}",
                record.schema
            ),
        });
    }
    Ok(record)
}

fn plain_name(path: &Path) -> Option<String> {
    path.file_name()
        .and_then(|name| name.to_str())
        .filter(|name| is_plain(name))
        .map(str::to_string)
}

/// A file name with no folder part, not `.`/`..`, not the record itself.
fn is_plain(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name != MANIFEST_FILE
        && !name.contains(['/', '\\', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let directory =
            std::env::temp_dir().join(format!("superstep-manifest-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&directory);
        fs::create_dir_all(&directory).expect("folder");
        directory
    }

    fn query() -> BuildQuery {
        let text = std::fs::read_to_string("queries/vit-tiny.toml").expect("shipped build file");
        crate::build_file::parse_query("vit-tiny.toml", &text, None, &[]).expect("a build file")
    }

    #[test]
    fn a_finished_folder_checks_and_a_changed_file_is_named() {
        let directory = folder("check");
        let report = directory.join("report.json");
        write_atomically(&report, b"{}").expect("report");
        let (_lock, previous) = begin(&directory).expect("locked");
        assert!(previous.is_none());
        finish(&directory, &query(), std::slice::from_ref(&report), None).expect("record");
        let record = check(&directory).expect("checks");
        assert_eq!(record.files.len(), 1);
        assert_eq!(record.build_key, package_build_key(&query()).hex());
        fs::write(&report, b"{ }").expect("changed");
        let error = check(&directory).expect_err("changed file");
        assert!(error.to_string().contains("report.json"), "{error}");
        let _ = fs::remove_dir_all(&directory);
    }

    #[test]
    fn files_of_the_previous_build_it_did_not_write_again_are_removed() {
        let directory = folder("stale");
        let (package, report, mine) = (
            directory.join("package.bin"),
            directory.join("report.json"),
            directory.join("notes.txt"),
        );
        for path in [&package, &report, &mine] {
            write_atomically(path, b"x").expect("file");
        }
        finish(
            &directory,
            &query(),
            &[package.clone(), report.clone()],
            None,
        )
        .expect("first");
        let (_lock, previous) = begin(&directory).expect("locked");
        assert!(!directory.join(MANIFEST_FILE).exists());
        finish(
            &directory,
            &query(),
            std::slice::from_ref(&report),
            previous.as_ref(),
        )
        .expect("second");
        assert!(!package.exists(), "the old build's package is removed");
        assert!(mine.exists(), "a file no build wrote is left alone");
        assert_eq!(check(&directory).expect("checks").files.len(), 1);
        let _ = fs::remove_dir_all(&directory);
    }
}
