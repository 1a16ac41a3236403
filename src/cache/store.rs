//! The on-disk store: entries as files under `DIRECTORY/KIND/XX/KEY`
//! (content addressed), written atomically (temporary file, then rename),
//! read with every check of [`super::entry`], and bounded by a size limit
//! with least-recently-used eviction (a hit refreshes the file's
//! modification time).
//!
//! Nothing here can fail a build: an unreadable, foreign, truncated or
//! corrupt file is a miss with a warning, and a failed write is a warning.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::entry::{EntryError, EntryKind, decode, encode};
use super::key::CacheKey;
use super::remote::{Fetched, RemoteCache, RemoteReport};
use super::signing::{PublicKey, Signature, SigningKey, TrustedKeys};

/// The default size limit: 2 GiB.
pub const DEFAULT_LIMIT_BYTES: u64 = 2 << 30;

/// A cache directory that cannot be used at all.
#[derive(Debug, thiserror::Error)]
#[error("cache directory {directory}: {reason}")]
pub struct CacheError {
    pub directory: PathBuf,
    pub reason: String,
}

/// Counters of one session's use of the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStatistics {
    pub hits: u64,
    /// Lookups without a usable entry (absent, or rejected with a warning).
    pub misses: u64,
    /// Entries rejected (foreign, truncated, corrupt, another compiler).
    pub rejected: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// What one eviction pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Eviction {
    pub entries: u64,
    pub bytes_before: u64,
    pub removed_entries: u64,
    pub removed_bytes: u64,
}

impl Eviction {
    pub fn bytes_after(&self) -> u64 {
        self.bytes_before - self.removed_bytes
    }
}

/// The end of a build's use of the cache: its warnings, what it did and
/// the eviction that followed. Displays as one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheReport {
    pub directory: PathBuf,
    pub limit_bytes: u64,
    pub warnings: Vec<String>,
    pub statistics: CacheStatistics,
    pub eviction: Eviction,
    /// The remote tier's use, when there is one.
    pub remote: Option<RemoteReport>,
}

impl std::fmt::Display for CacheReport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let megabytes = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
        let statistics = &self.statistics;
        write!(
            formatter,
            "cache {}: {} hits, {} misses ({} rejected), {} written; {:.1} of {:.0} MiB",
            self.directory.display(),
            statistics.hits,
            statistics.misses,
            statistics.rejected,
            statistics.writes,
            megabytes(self.eviction.bytes_after()),
            megabytes(self.limit_bytes),
        )?;
        if self.eviction.removed_entries > 0 {
            write!(
                formatter,
                " ({} least recently used entries, {:.1} MiB, evicted)",
                self.eviction.removed_entries,
                megabytes(self.eviction.removed_bytes)
            )?;
        }
        if let Some(remote) = &self.remote {
            write!(formatter, "; {remote}")?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    rejected: AtomicU64,
    writes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// Where a loaded entry came from: the local folder (written by this
/// machine's builds, or kept from a remote after its checks passed) or a
/// remote tier (checked for meaning before use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Local,
    Remote,
}

/// Where a loaded entry came from and how it is signed: what its user
/// needs to know to decide how much to check it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Provenance {
    pub source: Source,
    pub signature: Signature,
}

impl Provenance {
    /// Whether the value must pass its kind's check for meaning (a
    /// validator or checker independent of the code that made it): always,
    /// unless a key this reader trusts signed it. Checks of shape (what the
    /// value's users index by) apply to every entry.
    pub fn needs_check(self) -> bool {
        !self.signature.is_trusted()
    }
}

/// Who signs this cache's entries and whose signatures it trusts.
#[derive(Debug, Default)]
pub struct Signing {
    /// The key entries are signed with: a writer's (from the environment)
    /// or the per-user local key.
    pub signer: Option<SigningKey>,
    /// Whether the signer is a writer's key (the team's): its entries of
    /// every kind are uploaded, not only those a reader can check.
    pub writer: bool,
    /// The keys listed as trusted (`cache.trusted_keys`,
    /// `--cache-trusted-key`): with any, a remote's entries of every kind
    /// are fetched, and used when one of them signed it.
    pub listed: TrustedKeys,
    /// Keys trusted for this cache's own reads without being listed (the
    /// per-user local key, when a writer's key signs).
    pub also_trusted: Vec<PublicKey>,
}

/// A persistent, content-addressed cache in one directory.
pub struct PersistentCache {
    directory: PathBuf,
    limit_bytes: u64,
    counters: Counters,
    warnings: Mutex<Vec<String>>,
    /// The shared tier behind this one (read-through, write-back).
    remote: Option<RemoteCache>,
    signing: Signing,
    /// The listed keys and the signer's own: what this reader trusts.
    trusted: TrustedKeys,
    /// Every entry this process read or wrote, and the key of the build
    /// index it keeps them under ([`super::build_index`]).
    pub(super) used: Mutex<Vec<(EntryKind, CacheKey)>>,
    pub(super) index_key: Mutex<Option<CacheKey>>,
}

impl std::fmt::Debug for PersistentCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PersistentCache")
            .field("directory", &self.directory)
            .field("limit_bytes", &self.limit_bytes)
            .finish()
    }
}

impl PersistentCache {
    /// Opens (creating if needed) the cache in `directory`, bounded to
    /// `limit_bytes`.
    pub fn open(directory: &Path, limit_bytes: u64) -> Result<PersistentCache, CacheError> {
        fs::create_dir_all(directory).map_err(|error| CacheError {
            directory: directory.to_path_buf(),
            reason: format!("cannot be created ({error}); choose another with --cache DIR or turn the cache off with --no-cache"),
        })?;
        if !directory.is_dir() {
            return Err(CacheError {
                directory: directory.to_path_buf(),
                reason: "is not a directory".to_string(),
            });
        }
        Ok(PersistentCache {
            directory: directory.to_path_buf(),
            limit_bytes,
            counters: Counters::default(),
            warnings: Mutex::new(Vec::new()),
            remote: None,
            signing: Signing::default(),
            trusted: TrustedKeys::default(),
            used: Mutex::new(Vec::new()),
            index_key: Mutex::new(None),
        })
    }

    /// This cache signing and trusting as `signing` says.
    pub fn with_signing(mut self, signing: Signing) -> PersistentCache {
        let mut trusted = signing.listed.clone();
        if let Some(signer) = &signing.signer {
            trusted.insert(signer.public());
        }
        for key in &signing.also_trusted {
            trusted.insert(*key);
        }
        self.trusted = trusted;
        self.signing = signing;
        self
    }

    /// The keys this cache's reads trust (listed, and its own signer's).
    pub fn trusted_keys(&self) -> &TrustedKeys {
        &self.trusted
    }

    /// The key this cache signs with, if any.
    pub fn signer(&self) -> Option<&SigningKey> {
        self.signing.signer.as_ref()
    }

    /// Whether entries of `kind` are asked of the remote: those a reader
    /// checks for meaning always, every kind once a key is listed or when
    /// a writer's key signs (a writer trusts its own key: the shards of
    /// one search or sweep read what the others kept).
    pub(super) fn fetches(&self, kind: EntryKind) -> bool {
        kind.shared_remotely() || !self.signing.listed.is_empty() || self.is_writer()
    }

    /// Whether a local miss of `kind` would be asked of a remote tier (one
    /// is configured and fetches that kind): a caller that only probes for
    /// an entry may skip the lookup, and its miss, when it is neither on
    /// disk nor fetched.
    pub fn fetches_remotely(&self, kind: EntryKind) -> bool {
        self.remote.is_some() && self.fetches(kind)
    }

    /// Whether entries of `kind` are uploaded: those a reader checks for
    /// meaning always, every kind when a writer's key signs them.
    pub(super) fn uploads(&self, kind: EntryKind) -> bool {
        kind.shared_remotely() || self.is_writer()
    }

    /// Whether a writer's key signs this cache's entries.
    pub(super) fn is_writer(&self) -> bool {
        self.signing.writer && self.signing.signer.is_some()
    }

    fn note_use(&self, kind: EntryKind, key: &CacheKey) {
        if kind != EntryKind::BuildIndex
            && !inside_computation()
            && let Ok(mut used) = self.used.lock()
        {
            used.push((kind, *key));
        }
    }

    /// Notes that this command's build may need the entry of `kind` under
    /// `key` although this run read it inside another value's computation,
    /// or not at all (a warm build reads a phase's row summary, not its
    /// rows; a reader with a fresh outputs folder writes the package and
    /// reads the rows): the writer's build index lists it.
    pub fn note_needed(&self, kind: EntryKind, key: &CacheKey) {
        if let Ok(mut used) = self.used.lock() {
            used.push((kind, *key));
        }
    }

    /// This cache with `remote` behind it.
    pub fn with_remote(mut self, remote: RemoteCache) -> PersistentCache {
        self.remote = Some(remote);
        self
    }

    pub fn remote(&self) -> Option<&RemoteCache> {
        self.remote.as_ref()
    }

    /// An entry's place relative to the cache's root, `KIND/XX/KEY` (the
    /// same on the remote).
    pub(super) fn relative(kind: EntryKind, key: &CacheKey) -> String {
        let hex = key.hex();
        format!("{}/{}/{hex}", kind.folder(), &hex[..2])
    }

    pub fn directory(&self) -> &Path {
        &self.directory
    }

    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// The file of an entry.
    pub fn path(&self, kind: EntryKind, key: &CacheKey) -> PathBuf {
        let hex = key.hex();
        self.directory
            .join(kind.folder())
            .join(&hex[..2])
            .join(&hex)
    }

    pub fn warn(&self, message: String) {
        // Printed once, by the command (`finish_cache`); traced at debug level only.
        tracing::debug!("{message}");
        if let Ok(mut warnings) = self.warnings.lock() {
            warnings.push(message);
        }
    }

    /// The warnings since the last call (rejected entries, failed writes).
    pub fn take_warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .map(|mut warnings| std::mem::take(&mut *warnings))
            .unwrap_or_default()
    }

    pub fn statistics(&self) -> CacheStatistics {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        CacheStatistics {
            hits: load(&self.counters.hits),
            misses: load(&self.counters.misses),
            rejected: load(&self.counters.rejected),
            writes: load(&self.counters.writes),
            bytes_read: load(&self.counters.bytes_read),
            bytes_written: load(&self.counters.bytes_written),
        }
    }

    /// The entry for `key`, or `None` (a miss). A file that exists but is
    /// unusable is a miss with a warning.
    pub fn load<T: DeserializeOwned>(&self, kind: EntryKind, key: &CacheKey) -> Option<T> {
        self.load_with(kind, key, |payload, _| {
            bincode::deserialize::<T>(payload)
                .map_err(|error| EntryError::Undecodable(error.into()))
        })
    }

    /// Like [`PersistentCache::load`], with the payload's own decoder and
    /// check, told where the entry came from and how it is signed: `Err`
    /// (the decoding or check that failed: [`EntryError::Undecodable`],
    /// [`EntryError::Refused`]) makes the entry a miss with a warning, and
    /// a remote entry that fails is never kept locally.
    pub fn load_with<T>(
        &self,
        kind: EntryKind,
        key: &CacheKey,
        decode_payload: impl FnOnce(&[u8], Provenance) -> Result<T, EntryError>,
    ) -> Option<T> {
        self.load_counting(kind, key, decode_payload, true)
    }

    /// [`PersistentCache::load_with`] for a caller that asks again and
    /// again for an entry another process is expected to write (a sharded
    /// search waiting for the other shards' trials): an entry not there
    /// yet is not counted as a miss. An entry there and unusable still is.
    pub fn poll_with<T>(
        &self,
        kind: EntryKind,
        key: &CacheKey,
        decode_payload: impl FnOnce(&[u8], Provenance) -> Result<T, EntryError>,
    ) -> Option<T> {
        self.load_counting(kind, key, decode_payload, false)
    }

    fn load_counting<T>(
        &self,
        kind: EntryKind,
        key: &CacheKey,
        decode_payload: impl FnOnce(&[u8], Provenance) -> Result<T, EntryError>,
        count_absent: bool,
    ) -> Option<T> {
        let path = self.path(kind, key);
        let bytes = match crate::input_file::read_record(
            &path,
            super::entry::MAXIMUM_ENTRY_BYTES,
            "a cache entry",
        ) {
            Ok(bytes) => bytes,
            Err(error) => {
                let missing = matches!(
                    &error,
                    crate::input_file::InputFileError::Open { source, .. }
                        if source.kind() == std::io::ErrorKind::NotFound
                );
                if !missing {
                    self.warn(format!(
                        "cache: cannot read {} ({error}); recomputing",
                        path.display()
                    ));
                } else if let Some(remote) = &self.remote {
                    return self.load_remote(
                        remote,
                        kind,
                        key,
                        &path,
                        decode_payload,
                        count_absent,
                    );
                }
                if count_absent || !missing {
                    self.counters.misses.fetch_add(1, Ordering::Relaxed);
                }
                return None;
            }
        };
        let decoded = decode(&bytes, kind, key, &self.trusted).and_then(|decoded| {
            let provenance = Provenance {
                source: Source::Local,
                signature: decoded.signature,
            };
            decode_payload(&decoded.payload, provenance)
        });
        match decoded {
            Ok(value) => {
                self.count_hit(bytes.len());
                self.note_use(kind, key);
                // Least-recently-used eviction goes by modification time.
                if let Ok(file) = fs::File::options().write(true).open(&path) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Some(value)
            }
            Err(error) => {
                self.count_rejected();
                self.warn(format!(
                    "cache: ignoring {}: {error}; recomputing",
                    path.display()
                ));
                None
            }
        }
    }

    fn count_hit(&self, bytes: usize) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_read
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// An entry that failed a check: a miss, and counted as rejected.
    fn count_rejected(&self) {
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// A local miss asked of the remote: the entry is checked like a local
    /// file, used and kept locally only when every check passes. An entry
    /// a trusted key signed is used without its check for meaning; one
    /// whose trusted signature fails is rejected; any other is checked for
    /// meaning if its kind has such a check, and otherwise not used (a
    /// miss, counted as untrusted, never kept).
    fn load_remote<T>(
        &self,
        remote: &RemoteCache,
        kind: EntryKind,
        key: &CacheKey,
        path: &Path,
        decode_payload: impl FnOnce(&[u8], Provenance) -> Result<T, EntryError>,
        count_absent: bool,
    ) -> Option<T> {
        let relative = Self::relative(kind, key);
        if !self.fetches(kind) {
            if count_absent {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
            }
            return None;
        }
        let Fetched::Found(bytes) = remote.fetch_counting(&relative, count_absent) else {
            if count_absent {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
            }
            return None;
        };
        let decoded = decode(&bytes, kind, key, &self.trusted).and_then(|decoded| {
            let provenance = Provenance {
                source: Source::Remote,
                signature: decoded.signature,
            };
            match decoded.signature {
                Signature::Invalid(signer) => {
                    Err(EntryError::Refused(super::refusal::Refusal::BadSignature {
                        signer: signer.to_string(),
                    }))
                }
                Signature::Trusted(_) => decode_payload(&decoded.payload, provenance).map(Some),
                Signature::Unsigned | Signature::UnknownSigner(_) if kind.shared_remotely() => {
                    decode_payload(&decoded.payload, provenance).map(Some)
                }
                Signature::Unsigned | Signature::UnknownSigner(_) => Ok(None),
            }
        });
        let decoded = match decoded {
            Ok(None) => {
                remote.record_untrusted();
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Ok(Some(value)) => Ok(value),
            Err(error) => Err(error),
        };
        match decoded {
            Ok(value) => {
                remote.record_hit();
                self.count_hit(bytes.len());
                self.note_use(kind, key);
                if let Err(error) = self.write_atomically(path, &bytes) {
                    self.warn(format!(
                        "cache: cannot keep {} ({error}); continuing without it",
                        path.display()
                    ));
                }
                Some(value)
            }
            Err(error) => {
                remote.record_rejected(&relative, &error.to_string());
                self.count_rejected();
                None
            }
        }
    }

    /// Stores `value` under `key` (atomically; a failure is a warning).
    pub fn store<T: Serialize>(&self, kind: EntryKind, key: &CacheKey, value: &T) {
        match bincode::serialize(value) {
            Ok(payload) => self.store_payload(kind, key, &payload),
            Err(error) => self.warn(format!("cache: cannot encode a {:?} entry: {error}", kind)),
        }
    }

    /// Stores an already encoded payload under `key`.
    pub fn store_payload(&self, kind: EntryKind, key: &CacheKey, payload: &[u8]) {
        let bytes = match encode(kind, key, payload, self.signing.signer.as_ref()) {
            Ok(bytes) => bytes,
            Err(error) => {
                self.warn(format!("cache: cannot encode a {kind:?} entry: {error}"));
                return;
            }
        };
        let path = self.path(kind, key);
        self.note_use(kind, key);
        match self.write_atomically(&path, &bytes) {
            Ok(()) => {
                self.counters.writes.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .bytes_written
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            Err(error) => self.warn(format!(
                "cache: cannot write {} ({error}); continuing without it",
                path.display()
            )),
        }
        if let Some(remote) = self.remote.as_ref().filter(|_| self.uploads(kind)) {
            remote.upload(&Self::relative(kind, key), bytes);
        }
    }

    pub(super) fn write_atomically(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        crate::output_file::write_entry(path, bytes).map_err(|error| match error {
            crate::output_file::OutputFileError::Write { source, .. } => source,
            other => std::io::Error::other(other),
        })
    }

    /// Every entry file: (path, bytes, modification time). Only files
    /// named as entries are (`KIND/XX/KEY`, KEY 64 hex digits starting
    /// with XX): anything else a user put in the folder is neither counted
    /// nor ever evicted. A temporary file a dead writer left behind (killed
    /// between writing and renaming) is removed on the way.
    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let mut entries = Vec::new();
        for kind in EntryKind::ALL {
            let Ok(shards) = fs::read_dir(self.directory.join(kind.folder())) else {
                continue;
            };
            for shard in shards.flatten() {
                let shard_name = shard.file_name().to_string_lossy().into_owned();
                let Ok(files) = fs::read_dir(shard.path()) else {
                    continue;
                };
                for file in files.flatten() {
                    let name = file.file_name().to_string_lossy().into_owned();
                    // Another process's entry being written is not an entry
                    // yet: neither counted nor evicted (unless its writer
                    // is gone).
                    if name.starts_with(".tmp-") {
                        if abandoned(&name, &file) {
                            let _ = fs::remove_file(file.path());
                        }
                        continue;
                    }
                    if !is_entry_name(&shard_name, &name) {
                        continue;
                    }
                    let Ok(metadata) = file.metadata() else {
                        continue;
                    };
                    if metadata.is_file() {
                        let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                        entries.push((file.path(), metadata.len(), modified));
                    }
                }
            }
        }
        entries
    }

    /// Total bytes of the entries on disk.
    pub fn size_on_disk(&self) -> u64 {
        self.entries().iter().map(|entry| entry.1).sum()
    }

    /// Ends a build's use of the cache: takes the warnings, evicts beyond
    /// the limit, and reports (statistics are the session's so far).
    pub fn finish(&self) -> CacheReport {
        self.store_build_index();
        let remote = self.remote.as_ref().map(RemoteCache::finish);
        if let Some(warning) = remote.as_ref().and_then(RemoteCache::warning) {
            self.warn(warning);
        }
        let statistics = self.statistics();
        let eviction = self.evict();
        CacheReport {
            directory: self.directory.clone(),
            limit_bytes: self.limit_bytes,
            warnings: self.take_warnings(),
            statistics,
            eviction,
            remote,
        }
    }

    /// Removes least-recently-used entries until the cache holds at most
    /// its limit.
    pub fn evict(&self) -> Eviction {
        let mut entries = self.entries();
        let total: u64 = entries.iter().map(|entry| entry.1).sum();
        let mut eviction = Eviction {
            entries: entries.len() as u64,
            bytes_before: total,
            ..Eviction::default()
        };
        if total <= self.limit_bytes {
            return eviction;
        }
        // Oldest first; ties broken by path for determinism.
        entries.sort_by(|left, right| left.2.cmp(&right.2).then_with(|| left.0.cmp(&right.0)));
        let mut remaining = total;
        for (path, bytes, _) in entries {
            if remaining <= self.limit_bytes {
                break;
            }
            match fs::remove_file(&path) {
                Ok(()) => {
                    remaining -= bytes;
                    eviction.removed_entries += 1;
                    eviction.removed_bytes += bytes;
                }
                // Another process sharing the folder evicted it first.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    remaining -= bytes;
                }
                Err(error) => {
                    self.warn(format!("cache: cannot evict {} ({error})", path.display()))
                }
            }
        }
        eviction
    }
}

/// Whether `name` in shard folder `shard` names an entry: 64 lowercase hex
/// digits, the first two of which are the shard's name.
fn is_entry_name(shard: &str, name: &str) -> bool {
    name.len() == 64
        && name.starts_with(shard)
        && shard.len() == 2
        && name
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// How old a temporary file must be before it counts as abandoned even if
/// its writer's process id is alive again (ids are reused).
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Whether a temporary file (`.tmp-PID-SERIAL-NAME`) was left by a writer
/// that no longer runs: its process is gone (on Linux, no `/proc/PID`), or
/// it is older than [`ABANDONED_AFTER`].
fn abandoned(name: &str, file: &fs::DirEntry) -> bool {
    let old = file
        .metadata()
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age > ABANDONED_AFTER);
    let pid: Option<u32> = name
        .strip_prefix(".tmp-")
        .and_then(|rest| rest.split('-').next())
        .and_then(|pid| pid.parse().ok());
    let gone = pid.is_some_and(|pid| {
        pid != std::process::id()
            && Path::new("/proc/self").exists()
            && !Path::new(&format!("/proc/{pid}")).exists()
    });
    old || gone
}

thread_local! {
    /// How deep this thread is inside the computation of a cached value.
    static COMPUTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `compute`, the computation of a value that is cached itself: the
/// entries it reads and stores are not noted for the command's build index,
/// since a reader that fetches the value never reads them (a warm build
/// reads rows, not the schedule they were encoded from; a sweep point, not
/// the rows it measured).
pub fn within_computation<T>(compute: impl FnOnce() -> T) -> T {
    struct Depth;
    impl Drop for Depth {
        fn drop(&mut self) {
            COMPUTING.with(|depth| depth.set(depth.get().saturating_sub(1)));
        }
    }
    COMPUTING.with(|depth| depth.set(depth.get() + 1));
    let _depth = Depth;
    compute()
}

/// Whether this thread is inside [`within_computation`].
fn inside_computation() -> bool {
    COMPUTING.with(|depth| depth.get() > 0)
}
