//! The salsa database: storage plus an execution log of which queries ran
//! (`WillExecute` events), so users (`superstep build`, `watch`) and tests
//! can see what recomputed after an edit.

use std::sync::{Arc, Mutex};

use salsa::Database;

/// The database trait every query takes.
#[salsa::db]
pub trait Db: salsa::Database {}

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
        }
    }
}

#[salsa::db]
impl salsa::Database for CompilerDatabase {}

#[salsa::db]
impl Db for CompilerDatabase {}

impl CompilerDatabase {
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
