//! A snapshot folder on disk: reading what it holds (bounded reads, each
//! record file's header and digest checked), comparing it with a fresh
//! record (files changed, with what changed in each; added; removed;
//! damaged; a folder of another compiler, build or detail), and bringing it
//! up to date by writing exactly the files that differ, each atomically.
//! Files that are not record files are never touched, only reported.
//!
//! Layout: `program.txt`, `exchange/NAME.txt`, `compute/NAME.txt`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::identity::{FileKind, Identity, Record, RecordFile};
use super::sheet::{ParsedSheet, SheetError, parse};
use crate::output_file::{OutputFileError, write_atomically};
use crate::text::thousands;

/// No record file is larger (a `--detail full` record of the largest build
/// it allows is a few tens of MiB); a larger file is reported as damaged
/// without being read whole.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The sub-folders of a record, by kind.
const SUBFOLDERS: [&str; 2] = ["exchange", "compute"];

/// What a snapshot folder holds.
#[derive(Debug, Default)]
pub struct Stored {
    /// Record files by relative path: parsed, or why not.
    pub files: BTreeMap<String, Result<ParsedSheet, SheetError>>,
    /// Files and folders that are not record files (left alone).
    pub others: Vec<String>,
}

/// A folder that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("--dir {0}: it is a file, not a folder")]
    NotAFolder(PathBuf),
    #[error("--dir {path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Write {
        path: PathBuf,
        source: OutputFileError,
    },
    #[error("creating the folder {path}: {source}")]
    CreateFolder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("removing {path}: {source}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn unreadable(path: &Path) -> impl Fn(std::io::Error) -> FolderError + '_ {
    move |source| FolderError::Unreadable {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads the record files under `folder` (missing: an empty folder).
pub fn read(folder: &Path) -> Result<Stored, FolderError> {
    let mut stored = Stored::default();
    match fs::symlink_metadata(folder) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(stored),
        Err(error) => return Err(unreadable(folder)(error)),
        Ok(metadata) if !metadata.is_dir() => {
            return Err(FolderError::NotAFolder(folder.to_path_buf()));
        }
        Ok(_) => {}
    }
    for (name, is_file, is_folder) in entries(folder)? {
        if name == "program.txt" && is_file {
            stored
                .files
                .insert(name.clone(), read_file(&folder.join(&name))?);
        } else if SUBFOLDERS.contains(&name.as_str()) && is_folder {
            let sub = folder.join(&name);
            for (inner, is_file, _) in entries(&sub)? {
                let relative = format!("{name}/{inner}");
                if is_file && inner.ends_with(".txt") && !inner.starts_with('.') {
                    stored.files.insert(relative, read_file(&sub.join(&inner))?);
                } else {
                    stored.others.push(relative);
                }
            }
        } else {
            stored.others.push(name);
        }
    }
    Ok(stored)
}

/// The entries of a folder, sorted: (name, regular file, folder); a link
/// is neither.
fn entries(folder: &Path) -> Result<Vec<(String, bool, bool)>, FolderError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(folder).map_err(unreadable(folder))? {
        let entry = entry.map_err(unreadable(folder))?;
        let kind = entry.file_type().map_err(unreadable(folder))?;
        found.push((
            entry.file_name().to_string_lossy().into_owned(),
            kind.is_file(),
            kind.is_dir(),
        ));
    }
    found.sort();
    Ok(found)
}

fn read_file(path: &Path) -> Result<Result<ParsedSheet, SheetError>, FolderError> {
    let file = fs::File::open(path).map_err(unreadable(path))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable(path))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Ok(Err(SheetError::NoEnd));
    }
    Ok(parse(&bytes))
}

/// One record file that differs from its stored version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub kind: FileKind,
    pub key: String,
    /// What changed, one item per fact (`schedule horizon 1,052 -> 679`).
    pub items: Vec<String>,
}

/// A fresh record against a stored folder.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    pub changed: Vec<Change>,
    /// Files the record has and the folder does not: (path, kind, key).
    pub added: Vec<(String, FileKind, String)>,
    /// Record files the folder has and the record does not: (path, title).
    pub removed: Vec<(String, String)>,
    /// Stored record files that cannot be read: (path, why).
    pub damaged: Vec<(String, String)>,
    pub unchanged: usize,
    /// Files in the folder that are not record files (left alone).
    pub others: Vec<String>,
    /// The folder was written by another compiler, for another build or
    /// at another detail: what differs (of the first such file).
    pub mismatch: Option<String>,
}

impl Comparison {
    /// Whether the folder holds exactly the record.
    pub fn is_equal(&self) -> bool {
        self.changed.is_empty()
            && self.added.is_empty()
            && self.removed.is_empty()
            && self.damaged.is_empty()
            && self.mismatch.is_none()
    }
}

/// Compares `record` with what `stored` holds.
pub fn compare(record: &Record, stored: &Stored) -> Comparison {
    let mut comparison = Comparison::default();
    let header = record.identity.header();
    let generated: BTreeSet<&str> = record.files.iter().map(|file| file.path.as_str()).collect();
    comparison.others = stored.others.clone();
    for (path, parsed) in &stored.files {
        match parsed {
            // Not ours at all, at a name the record does not use.
            Err(SheetError::NoHeader | SheetError::NotText)
                if !generated.contains(path.as_str()) =>
            {
                comparison.others.push(path.clone())
            }
            Err(error) => comparison.damaged.push((path.clone(), error.to_string())),
            Ok(sheet) => {
                if sheet.header != header && comparison.mismatch.is_none() {
                    comparison.mismatch = Some(describe_mismatch(&sheet.header, &record.identity));
                }
                if !generated.contains(path.as_str()) {
                    comparison.removed.push((path.clone(), sheet.title.clone()));
                }
            }
        }
    }
    for file in &record.files {
        match stored.files.get(&file.path) {
            None => comparison
                .added
                .push((file.path.clone(), file.kind, file.key.clone())),
            Some(Err(_)) => {}
            Some(Ok(old)) => match parse(file.text.as_bytes()) {
                Ok(new) if *old == new => comparison.unchanged += 1,
                Ok(new) => comparison.changed.push(Change {
                    path: file.path.clone(),
                    kind: file.kind,
                    key: file.key.clone(),
                    items: differences(old, &new),
                }),
                Err(error) => comparison
                    .damaged
                    .push((file.path.clone(), error.to_string())),
            },
        }
    }
    comparison
}

/// What the stored header says that this build's does not.
fn describe_mismatch(stored: &str, identity: &Identity) -> String {
    let field = |header: &str, name: &str| -> String {
        header
            .split(" · ")
            .find_map(|part| part.strip_prefix(name).map(str::trim).map(str::to_string))
            .unwrap_or_else(|| "?".to_string())
    };
    let expected = identity.header();
    let mut reasons = Vec::new();
    if field(stored, super::sheet::HEADER_PREFIX) != field(&expected, super::sheet::HEADER_PREFIX) {
        reasons.push(format!(
            "is in snapshot format {} (this compiler writes {})",
            field(stored, super::sheet::HEADER_PREFIX),
            super::sheet::FORMAT_VERSION
        ));
    }
    for (name, what) in [
        ("compiler ", "was written by compiler"),
        ("build ", "is a snapshot of build"),
        ("model ", "is of another model or machine: digest"),
        ("detail ", "was written at detail"),
    ] {
        let (old, new) = (field(stored, name), field(&expected, name));
        if old != new {
            reasons.push(format!("{what} {old} (this run: {new})"));
        }
    }
    if reasons.is_empty() {
        reasons.push(format!("has the header `{stored}`"));
    }
    reasons.join("; ")
}

/// The facts of two versions of a file that differ, as review items.
fn differences(old: &ParsedSheet, new: &ParsedSheet) -> Vec<String> {
    type Facts<'sheet> = BTreeMap<(&'sheet str, &'sheet str, usize), &'sheet str>;
    fn facts(sheet: &ParsedSheet) -> (Facts<'_>, Vec<(&str, &str, usize)>) {
        let mut map = BTreeMap::new();
        let mut order = Vec::new();
        let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (section, label, value) in &sheet.facts {
            let count = seen.entry((section, label)).or_insert(0);
            let key = (section.as_str(), label.as_str(), *count);
            *count += 1;
            map.insert(key, value.as_str());
            order.push(key);
        }
        (map, order)
    }
    let (old_facts, old_order) = facts(old);
    let (new_facts, new_order) = facts(new);
    let mut items = Vec::new();
    let name = |(section, label, _): (&str, &str, usize)| {
        if section.is_empty() {
            label.to_string()
        } else {
            format!("{section} {label}")
        }
    };
    for key in &new_order {
        match old_facts.get(key) {
            None => items.push(format!("{} added", name(*key))),
            Some(old_value) if *old_value != new_facts[key] => {
                let new_value = new_facts[key];
                if key.1.ends_with("digest") || old_value.len() + new_value.len() > 80 {
                    items.push(format!("{} changed", name(*key)));
                } else {
                    items.push(format!("{} {old_value} -> {new_value}", name(*key)));
                }
            }
            Some(_) => {}
        }
    }
    for key in &old_order {
        if !new_facts.contains_key(key) {
            items.push(format!("{} removed", name(*key)));
        }
    }
    if items.is_empty() {
        items.push("layout of the file changed".to_string());
    }
    items
}

/// What [`apply`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub written: Vec<String>,
    pub removed: Vec<String>,
}

/// Brings `folder` to `record`: writes the files that changed, were added
/// or are damaged, and removes the record files the record no longer has.
/// Nothing else in the folder is touched.
pub fn apply(
    folder: &Path,
    record: &Record,
    comparison: &Comparison,
) -> Result<Applied, FolderError> {
    let mut applied = Applied::default();
    let rewrite: BTreeSet<&str> = if comparison.mismatch.is_some() {
        record.files.iter().map(|file| file.path.as_str()).collect()
    } else {
        comparison
            .changed
            .iter()
            .map(|change| change.path.as_str())
            .chain(comparison.added.iter().map(|(path, _, _)| path.as_str()))
            .chain(comparison.damaged.iter().map(|(path, _)| path.as_str()))
            .collect()
    };
    for file in &record.files {
        if rewrite.contains(file.path.as_str()) {
            write_file(folder, file)?;
            applied.written.push(file.path.clone());
        }
    }
    // Removed record files, and damaged ones (they carry the record's
    // header) the record no longer has.
    let generated: BTreeSet<&str> = record.files.iter().map(|file| file.path.as_str()).collect();
    let stale = comparison.removed.iter().map(|(path, _)| path).chain(
        comparison
            .damaged
            .iter()
            .map(|(path, _)| path)
            .filter(|path| !generated.contains(path.as_str())),
    );
    for path in stale {
        let full = folder.join(path);
        fs::remove_file(&full).map_err(|source| FolderError::Remove {
            path: full.clone(),
            source,
        })?;
        applied.removed.push(path.clone());
    }
    Ok(applied)
}

fn write_file(folder: &Path, file: &RecordFile) -> Result<(), FolderError> {
    let path = folder.join(&file.path);
    // The record's own subfolders (`exchange/`, `compute/`) are part of its
    // layout; the folder itself was created (or refused) by the command.
    if let Some(parent) = path.parent().filter(|parent| !parent.is_dir()) {
        fs::create_dir(parent).map_err(|source| FolderError::CreateFolder {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    write_atomically(&path, file.text.as_bytes()).map_err(|source| FolderError::Write {
        path: path.clone(),
        source,
    })
}

/// One line per changed file, `KIND KEY: item; item; ...` (at most
/// `items` items, then how many more).
pub fn change_line(change: &Change, items: usize) -> String {
    let mut text = match change.kind {
        FileKind::Program => "program: ".to_string(),
        kind => format!("{} {}: ", kind.name(), change.key),
    };
    let shown: Vec<&str> = change
        .items
        .iter()
        .take(items)
        .map(String::as_str)
        .collect();
    text.push_str(&shown.join("; "));
    if change.items.len() > items {
        text.push_str(&format!(
            "; and {} more",
            thousands((change.items.len() - items) as u64)
        ));
    }
    text
}
