//! The salsa database: storage plus an execution log of which queries ran
//! (`WillExecute` events), so users (`superstep build`, `watch`) and tests
//! can see what recomputed after an edit. It may carry a persistent cache
//! (`crate::cache`), the second level under salsa's memo for per-phase
//! results. Clones share its build cancellation (`super::cancellation`).

use std::sync::{Arc, Mutex};

use salsa::Database;

use super::cancellation::{BuildCancellation, Canceller};
use super::price_memo::PriceMemo;
use super::tracked::TrackedQuery;
use crate::cache::{EntryKind, PersistentCache};

/// The database trait every query takes.
#[salsa::db]
pub trait Db: salsa::Database {
    /// The persistent cache, when the session has one.
    fn cache(&self) -> Option<&PersistentCache>;

    /// The persistent cache for entries of `kind`: the cache, unless the
    /// session keeps only some kinds there.
    fn cache_for(&self, kind: EntryKind) -> Option<&PersistentCache>;

    /// Reports `items` more done of the stage the caller is showing (a
    /// side channel for progress only: nothing computed may depend on it).
    fn advance_progress(&self, items: u64);

    /// Whether schedules are validated and rows checked as they are made
    /// (always, but in a layout search's trials: their schedules and rows
    /// only price a candidate, and the plan the search keeps is built
    /// again in a session that checks everything).
    fn checks_schedules_and_rows(&self) -> bool;

    /// Merge prices by content, shared with the database's clones: fusion
    /// pricing fills it and phase grouping reads it (`super::price_memo`).
    fn fusion_prices(&self) -> &PriceMemo;
}

/// Where a database reports progress (`Db::advance_progress`).
pub type ProgressSink = Arc<dyn Fn(u64) + Send + Sync>;

/// One query execution: which tracked function ran, and the id of its key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Execution {
    pub query: TrackedQuery,
    pub key: salsa::Id,
}

#[salsa::db]
#[derive(Clone)]
pub struct CompilerDatabase {
    storage: salsa::Storage<Self>,
    log: Arc<Mutex<Vec<salsa::DatabaseKeyIndex>>>,
    cache: Option<Arc<PersistentCache>>,
    /// The only kinds read from and kept in `cache` (`None`: every kind).
    cached_kinds: Option<&'static [EntryKind]>,
    progress: Option<ProgressSink>,
    /// `Db::checks_schedules_and_rows`.
    checks: bool,
    /// `Db::fusion_prices`.
    prices: Arc<PriceMemo>,
    /// The cancellation of the current build, shared with every clone
    /// (checked by the storage's event callback at every query call).
    cancellation: Arc<BuildCancellation>,
}

impl Default for CompilerDatabase {
    fn default() -> Self {
        let log: Arc<Mutex<Vec<salsa::DatabaseKeyIndex>>> = Arc::default();
        let sink = log.clone();
        let cancellation: Arc<BuildCancellation> = Arc::default();
        let cancelled = cancellation.clone();
        CompilerDatabase {
            storage: salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
                match event.kind {
                    salsa::EventKind::WillExecute { database_key } => {
                        if let Ok(mut entries) = sink.lock() {
                            entries.push(database_key);
                        }
                    }
                    // Salsa is about to check its own cancellation here
                    // (and may unwind itself): a cancelled build unwinds.
                    salsa::EventKind::WillCheckCancellation => {
                        cancelled.unwind_if_cancelled();
                    }
                    _ => {}
                }
            }))),
            log,
            cache: None,
            cached_kinds: None,
            progress: None,
            checks: true,
            prices: Arc::default(),
            cancellation,
        }
    }
}

#[salsa::db]
impl salsa::Database for CompilerDatabase {}

#[salsa::db]
impl Db for CompilerDatabase {
    fn cache(&self) -> Option<&PersistentCache> {
        self.cache.as_deref()
    }

    fn cache_for(&self, kind: EntryKind) -> Option<&PersistentCache> {
        match self.cached_kinds {
            Some(kinds) if !kinds.contains(&kind) => None,
            _ => self.cache.as_deref(),
        }
    }

    fn advance_progress(&self, items: u64) {
        if let Some(sink) = &self.progress {
            sink(items);
        }
    }

    fn checks_schedules_and_rows(&self) -> bool {
        self.checks
    }

    fn fusion_prices(&self) -> &PriceMemo {
        &self.prices
    }
}

impl CompilerDatabase {
    /// A database whose per-phase queries read and write `cache`.
    pub fn with_cache(cache: Option<Arc<PersistentCache>>) -> CompilerDatabase {
        CompilerDatabase {
            cache,
            ..CompilerDatabase::default()
        }
    }

    /// A database whose queries read and keep only entries of `kinds` in
    /// `cache` (a layout search keeps the activation calibration, which
    /// no trial changes, and none of its trials' schedules).
    pub fn with_cache_for(cache: Arc<PersistentCache>, kinds: &'static [EntryKind]) -> Self {
        CompilerDatabase {
            cache: Some(cache),
            cached_kinds: Some(kinds),
            ..CompilerDatabase::default()
        }
    }

    /// This database with its schedules unvalidated and rows unchecked
    /// (`Db::checks_schedules_and_rows`): for a layout search's trials,
    /// which keep no schedule or rows in the persistent cache.
    pub fn for_trials(self) -> CompilerDatabase {
        CompilerDatabase {
            checks: false,
            ..self
        }
    }

    /// The persistent cache, shared, if any.
    pub fn shared_cache(&self) -> Option<Arc<PersistentCache>> {
        self.cache.clone()
    }

    /// Reports queries' progress (`Db::advance_progress`) to `sink`.
    pub fn set_progress(&mut self, sink: ProgressSink) {
        self.progress = Some(sink);
    }

    /// Starts a build that another thread may cancel through the returned
    /// handle (this database and its clones then unwind with
    /// `salsa::Cancelled`). End it with [`CompilerDatabase::end_cancellable`].
    pub fn begin_cancellable(&self) -> Canceller {
        self.cancellation.arm()
    }

    /// Ends the cancellable build: a cancel that arrived after its last
    /// check is dropped, so that the next build does not unwind at once.
    pub fn end_cancellable(&self) {
        self.cancellation.disarm();
    }

    /// The queries executed since the last call, in execution order.
    pub fn take_executions(&self) -> Vec<Execution> {
        let keys = match self.log.lock() {
            Ok(mut entries) => std::mem::take(&mut *entries),
            Err(_) => Vec::new(),
        };
        keys.into_iter()
            .filter_map(|key| {
                let name = self.ingredient_debug_name(key.ingredient_index());
                let query = TrackedQuery::from_name(&name);
                // The list is checked against the sources by a test; a
                // function missing from it is a bug there, not an input.
                debug_assert!(query.is_some(), "{name} is not in TrackedQuery");
                Some(Execution {
                    query: query?,
                    key: key.key_index(),
                })
            })
            .collect()
    }
}
