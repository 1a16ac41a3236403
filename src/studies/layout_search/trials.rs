//! The trials of a layout search as entries of the persistent cache, and
//! the split of a search's trials over shards.
//!
//! A trial is a function of its configuration: the build's key with the
//! trial's `[[layout.override]]` set ([`trial_key`]) names the program,
//! and its estimate (or its failure to build or fit) follows from it. A
//! search keeps each trial it compiles ([`TrialRecord`], entry kind
//! `trial`) and reads the trials kept before it, so that a second search
//! of the same configuration under other settings compiles only trials no
//! search ran, and shards of one search share their work through the
//! cache (local, or the remote tier when a writer's key signs): `superstep
//! search --shard I/N` compiles the candidates `j` (numbered in the
//! search's sequence of candidates) with `j mod N == I` and reads the rest
//! from the other shards. Every shard
//! takes the same steps, since every trial's value is the same whoever
//! compiled it, so each ends with the unsharded search's plan.
//!
//! An estimate has no check short of compiling the program again, so a
//! trial is read only when a trusted key signed it (this user's local
//! key, or a trusted writer's): an unsigned or foreign entry is a miss.
//!
//! Owns the record, its key, reading, keeping and waiting for it
//! ([`TrialStore`]) and the shard of a search ([`SearchShard`]). The
//! search loop is `crate::studies::layout_search`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::build_file::{BuildQuery, package_build_key};
use crate::cache::{CacheKey, EntryError, EntryKind, PersistentCache, Provenance};
use crate::layout::overrides::LayoutOverride;

pub use crate::studies::sweep::Shard;

/// What one trial compiled to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// The whole program's estimate; `None` when the trial did not build.
    pub cycles: Option<u64>,
    /// Whether the program places in the tiles' memory: checked only for
    /// a trial that would win (`None`: not checked yet). The estimate
    /// does not read the placement, so a trial that loses is never placed.
    pub fits: Option<bool>,
    /// Queries the trial re-executed where it was compiled (salsa's event
    /// log), and of those the exchange schedules computed.
    pub recomputed_queries: u32,
    pub recomputed_schedules: u32,
}

/// The cache key of the trial of `query` under `overrides`: the build's
/// key with the build's name cleared and the override set replaced by the
/// trial's (sorted), so that a trial is one configuration's whatever the
/// build file is called.
pub fn trial_key(query: &BuildQuery, overrides: &[LayoutOverride]) -> CacheKey {
    let mut neutral = query.clone();
    neutral.name = String::new();
    neutral.planning.skipped_layout_overrides = 0;
    neutral.planning.layout_overrides = overrides.to_vec();
    neutral.planning.layout_overrides.sort();
    CacheKey::of("search trial", &package_build_key(&neutral))
}

/// A trial entry's payload, used only when a trusted key signed it.
fn decode(payload: &[u8], provenance: Provenance) -> Result<TrialRecord, EntryError> {
    if provenance.needs_check() {
        return Err(EntryError::Refused(crate::cache::Refusal::UnsignedTrial));
    }
    bincode::deserialize(payload).map_err(|error| EntryError::Undecodable(error.into()))
}

/// How a search splits its trials: which it compiles itself, and how long
/// it waits for the others' before it compiles them too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchShard {
    pub shard: Shard,
    /// How long to wait, with no new trial from another shard, before
    /// taking the other shards for gone and compiling their trials here.
    pub patience: Duration,
}

impl SearchShard {
    /// Whether candidate `index` (in the search's deterministic sequence
    /// of candidates) is this shard's to compile.
    pub fn owns(&self, index: usize) -> bool {
        self.shard.owns(index)
    }
}

/// The trials kept in a persistent cache for one search's query.
pub struct TrialStore {
    cache: Arc<PersistentCache>,
    query: BuildQuery,
    /// Whether the other shards still answer (a wait that ran out of
    /// patience stops the waiting for the rest of the search).
    others_answer: bool,
}

/// How often a waiting shard asks for a trial again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

impl TrialStore {
    pub fn new(cache: Arc<PersistentCache>, query: &BuildQuery) -> Self {
        TrialStore {
            cache,
            query: query.clone(),
            others_answer: true,
        }
    }

    /// The kept trial of `overrides`, if a trusted key signed one.
    pub fn lookup(&self, overrides: &[LayoutOverride]) -> Option<TrialRecord> {
        self.cache.load_with(
            EntryKind::SearchTrial,
            &trial_key(&self.query, overrides),
            decode,
        )
    }

    /// Keeps `record` as the trial of `overrides`.
    pub fn keep(&self, overrides: &[LayoutOverride], record: &TrialRecord) {
        self.cache.store(
            EntryKind::SearchTrial,
            &trial_key(&self.query, overrides),
            record,
        );
    }

    /// The trial of `overrides` as another shard keeps it: asked for until
    /// it is there, or until `patience` passes (then `None`, and every
    /// later wait returns at once: the other shards are taken for gone).
    pub fn wait_for(
        &mut self,
        overrides: &[LayoutOverride],
        patience: Duration,
    ) -> Option<TrialRecord> {
        if let Some(record) = self.lookup(overrides) {
            return Some(record);
        }
        if !self.others_answer {
            return None;
        }
        let key = trial_key(&self.query, overrides);
        let started = Instant::now();
        let _span = tracing::debug_span!("wait_for_shard").entered();
        while started.elapsed() < patience {
            std::thread::sleep(POLL_INTERVAL);
            if let Some(record) = self.cache.poll_with(EntryKind::SearchTrial, &key, decode) {
                return Some(record);
            }
        }
        self.cache.warn(format!(
            "search: no other shard kept a trial within {} s; compiling their trials here",
            patience.as_secs()
        ));
        self.others_answer = false;
        None
    }
}
