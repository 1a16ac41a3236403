//! The incremental workflow users see: `superstep watch` (one long-lived
//! session rebuilt on every save of the build file) and `superstep build
//! --why` (what changed since the last recorded build, and what re-ran).
//!
//! Split by concept: `watcher` is the loop's logic, driven through a channel
//! and testable without a file system watcher; `source` turns notify events
//! into that channel's messages; `why` explains one-shot rebuilds (from
//! the record `report::last_build` keeps); `stages`, `metrics` and `report`
//! format what changed (the settings compared are
//! `build_file::settings`'); `snapshot` keeps a `--snapshot` folder current.
//! Nothing here computes compiler results: it drives `session::Session`.

pub mod metrics;
pub mod moves;
pub mod report;
pub mod snapshot;
pub mod source;
pub mod stages;
pub mod watcher;
pub mod why;

pub use metrics::WatchMetrics;
pub use source::{FolderWatch, watch_file};
pub use watcher::{
    BuildHook, FailureExplainer, Refresh, WatchEvent, WatchOptions, WatchSummary, Watcher,
};
pub use why::{WhyRebuild, rebuild_from};
