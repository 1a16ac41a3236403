//! superstep: an incremental, query-based compiler of Vision Transformers
//! into bulk-synchronous programs for IPU21-class tile machines.
//!
//! Stages are pure cores in their own modules, in pipeline order: `model`
//! (the graph), `layout` (formats and operator plans), `expand` (the low
//! program), `group` (exchange phases), `schedule` (per-phase exchange
//! schedules), `rows` (IPU21 instruction rows and their sharing), `patch`
//! (Repeat and sharing patches), `place` (SRAM addresses), `package` (the
//! finished per-tile programs) and `estimate` (cycles). `queries` wraps them
//! in memoized salsa queries, with `cache` as the persistent second level;
//! `driver` runs a build over them and `pipeline` is the database-free path.
//! `sim` executes the low program and the package against an FP32
//! reference; `report`, `snapshot`, `replay_phases`, `watch` and `cli` are
//! what users see. `target` holds the machine's facts and `query` the build
//! files.

pub mod cache;
pub mod cli;
pub mod driver;
pub mod estimate;
pub mod expand;
pub mod group;
pub mod hashing;
pub mod layout;
pub mod model;
pub mod numerics;
pub mod package;
pub mod patch;
pub mod pipeline;
pub mod place;
pub mod queries;
pub mod query;
pub mod replay_phases;
pub mod report;
pub mod rows;
pub mod schedule;
pub mod sim;
pub mod snapshot;
pub mod target;
pub mod text;
pub mod watch;
