//! The persistent, content-addressed cache of per-phase results, so that
//! one-shot `superstep build` runs benefit from earlier runs.
//!
//! A phase's schedule and rows are stored under a key that is the BLAKE3
//! digest of the phase problem's content, the effective policy and width,
//! the cache format version and the compiler's version and source
//! fingerprint ([`key`]). Entries are self-checking files ([`entry`]) in a
//! size-bounded directory with least-recently-used eviction ([`store`]); an
//! unusable file is a miss with a warning, never a wrong result. Entries
//! are signed by their writer ([`signing`]): one a trusted key signed is
//! used without its check for meaning.
//!
//! The salsa queries `scheduled`, `schedule_figures`, `encoded_rows`,
//! `row_summary`, `row_table` and `placement` (among others) consult the
//! cache of the database
//! (`crate::incremental::Db::cache`); salsa's memo stays the first level, the
//! cache is the second.

pub mod build_index;
pub mod entry;
pub mod key;
pub mod refusal;
pub mod remote;
pub mod signing;
pub mod store;

#[cfg(test)]
mod tests;

pub use entry::{EntryError, EntryKind};
pub use key::{CACHE_FORMAT_VERSION, CacheKey, StableHasher, tool_version};
pub use refusal::{PayloadError, Refusal};
pub use store::{
    CacheError, CacheReport, CacheStatistics, DEFAULT_LIMIT_BYTES, Eviction, PersistentCache,
    Provenance, Signing, Source, within_computation,
};
