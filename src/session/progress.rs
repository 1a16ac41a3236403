//! How a session tells its caller what it is doing: a stage begins (with
//! the number of items when it has some), items complete, the stage ends.
//! The session reports; the user interface decides whether and how to
//! show it (`crate::cli::progress` draws bars on a terminal).

use std::sync::Arc;

/// An observer of a session's work. Called from worker threads.
pub trait Progress: Send + Sync {
    /// A stage begins; `total` items when it counts items.
    fn begin(&self, stage: &str, total: Option<u64>);
    /// `items` more items of the current stage are done.
    fn advance(&self, items: u64);
    /// The current stage is over.
    fn end(&self);
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn begin(&self, _: &str, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}

/// The observer sessions start with.
pub fn silent() -> Arc<dyn Progress> {
    Arc::new(Silent)
}
