//! Build indexes: a writer keeps, under a key of (command, build), the list
//! of entries one command of one build used (kind and key each), as an
//! entry of its own, signed and uploaded like any other. A reader that
//! trusts the writer fetches the index first and then every listed entry
//! it lacks in batches of parallel requests, instead of one request per
//! query as the build reaches it: a build knows its keys up front.
//!
//! The index is only a list of what to fetch: every fetched entry is
//! checked like any remote one (header, digest, and a signature by a
//! trusted key; an entry without one is not kept), and the build then
//! reads it from the local cache with the checks of its kind.

use super::entry::{EntryKind, verify};
use super::key::CacheKey;
use super::remote::Fetched;
use super::store::PersistentCache;

/// The largest index read: one entry is 33 bytes, so about 30,000 entries.
const MAXIMUM_INDEX_ENTRIES: usize = 1 << 15;

impl PersistentCache {
    /// Starts a command's use of the cache under the index key of
    /// (`command`, `build`): a writer will keep the entries it uses under
    /// it ([`PersistentCache::finish`]); a reader that lists trusted keys
    /// and has a remote fetches the entries a trusted writer's index lists
    /// now, in parallel batches, into the local cache.
    pub fn begin_command(&self, command: &str, build: &CacheKey) {
        let key = CacheKey::of("build index", &(command, build));
        if let Ok(mut index_key) = self.index_key.lock() {
            *index_key = Some(key);
        }
        if self.remote().is_some() && self.fetches(EntryKind::Rows) {
            self.prefetch(&key);
        }
    }

    fn prefetch(&self, index: &CacheKey) {
        let Some(remote) = self.remote() else {
            return;
        };
        let _span = tracing::info_span!("prefetch").entered();
        // The index itself must be signed by a trusted key (a non-checked
        // kind: an untrusted one is not used).
        let listed: Option<Vec<(u8, [u8; 32])>> =
            self.load_with(EntryKind::BuildIndex, index, |payload, provenance| {
                if provenance.needs_check() {
                    return Err(super::EntryError::Refused(
                        super::refusal::Refusal::Unsigned,
                    ));
                }
                bincode::deserialize(payload)
                    .map_err(|error| super::EntryError::Undecodable(error.into()))
            });
        let Some(listed) = listed else {
            return;
        };
        let wanted: Vec<(EntryKind, CacheKey)> = listed
            .into_iter()
            .take(MAXIMUM_INDEX_ENTRIES)
            .filter_map(|(tag, key)| Some((EntryKind::from_tag(tag)?, CacheKey(key))))
            .filter(|(kind, key)| *kind != EntryKind::BuildIndex && !self.path(*kind, key).exists())
            .collect();
        let relatives: Vec<String> = wanted
            .iter()
            .map(|(kind, key)| Self::relative(*kind, key))
            .collect();
        let fetched = remote.fetch_many(&relatives);
        for ((kind, key), fetched) in wanted.iter().zip(fetched) {
            let Fetched::Found(bytes) = fetched else {
                continue;
            };
            // Kept only when whole and signed by a trusted key; the build
            // decompresses it and checks its shape when it reads it.
            let trusted = verify(&bytes, *kind, key, self.trusted_keys())
                .is_ok_and(|verified| verified.signature.is_trusted());
            if trusted
                && self
                    .write_atomically(&self.path(*kind, key), &bytes)
                    .is_ok()
            {
                remote.record_prefetched();
            }
        }
    }

    /// A writer's index of what this command used, stored (and so
    /// uploaded) under the key [`PersistentCache::begin_command`] set.
    pub(super) fn store_build_index(&self) {
        if !self.is_writer() || self.remote().is_none() {
            return;
        }
        let Some(key) = self.index_key.lock().ok().and_then(|key| *key) else {
            return;
        };
        let mut used: Vec<(u8, [u8; 32])> = self
            .used
            .lock()
            .map(|used| {
                used.iter()
                    .map(|(kind, key)| (*kind as u8, key.0))
                    .collect()
            })
            .unwrap_or_default();
        used.sort_unstable();
        used.dedup();
        self.store(EntryKind::BuildIndex, &key, &used);
    }
}
