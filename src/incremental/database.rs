//! The salsa database: storage plus an execution log of which queries ran
//! (`WillExecute` events), so users (`superstep build`, `watch`) and tests
//! can see what recomputed after an edit. It may carry a persistent cache
//! (`crate::cache`), the second level under salsa's memo for per-phase
//! results.

use std::sync::{Arc, Mutex};

use salsa::Database;

use crate::cache::PersistentCache;

/// The database trait every query takes.
#[salsa::db]
pub trait Db: salsa::Database {
    /// The persistent cache, when the session has one.
    fn cache(&self) -> Option<&PersistentCache>;
}

/// One query execution: the query's name and the id of its key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Execution {
    pub query: String,
    pub key: salsa::Id,
}

#[salsa::db]
#[derive(Clone)]
pub struct CompilerDatabase {
    storage: salsa::Storage<Self>,
    log: Arc<Mutex<Vec<salsa::DatabaseKeyIndex>>>,
    cache: Option<Arc<PersistentCache>>,
}

impl Default for CompilerDatabase {
    fn default() -> Self {
        let log: Arc<Mutex<Vec<salsa::DatabaseKeyIndex>>> = Arc::default();
        let sink = log.clone();
        CompilerDatabase {
            storage: salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
                if let salsa::EventKind::WillExecute { database_key } = event.kind
                    && let Ok(mut entries) = sink.lock()
                {
                    entries.push(database_key);
                }
            }))),
            log,
            cache: None,
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
}

impl CompilerDatabase {
    /// A database whose per-phase queries read and write `cache`.
    pub fn with_cache(cache: Option<Arc<PersistentCache>>) -> CompilerDatabase {
        CompilerDatabase {
            cache,
            ..CompilerDatabase::default()
        }
    }

    /// The queries executed since the last call, in execution order.
    pub fn take_executions(&self) -> Vec<Execution> {
        let keys = match self.log.lock() {
            Ok(mut entries) => std::mem::take(&mut *entries),
            Err(_) => Vec::new(),
        };
        keys.into_iter()
            .map(|key| Execution {
                query: self
                    .ingredient_debug_name(key.ingredient_index())
                    .to_string(),
                key: key.key_index(),
            })
            .collect()
    }
}
