//! superstep: an incremental, query-based compiler of Vision Transformers
//! into bulk-synchronous programs for IPU21-class tile machines.
//!
//! Stages are pure cores in their own modules, in pipeline order: `model`
//! (the graph), `layout` (formats and operator plans), `expand` (the low
//! program), `group` (exchange phases), `schedule` (per-phase exchange
//! schedules), `rows` (IPU21 instruction rows and their sharing), `patch`
//! (Repeat and sharing patches), `place` (SRAM addresses), `package` (the
//! finished per-tile programs) and `estimate` (cycles). `incremental` wraps
//! them in memoized salsa queries, with `cache` as the persistent second
//! level; `session` is the one facade over that database (builds, phases,
//! placement, package, replay) that every user interface asks, and `direct`
//! is the database-free path through the first half. `studies` run the
//! compiler many times through the session to answer one question (the
//! layout search). `sim` executes the low
//! program and the package against an FP32 reference; `report`, `snapshot`,
//! `watch` and `cli` are what users see. `target` holds the machine's facts
//! and `build_file` parses and validates build files.

pub mod build_file;
pub mod cache;
pub mod cli;
pub mod direct;
pub mod estimate;
pub mod expand;
pub mod group;
pub mod hashing;
pub mod host_io;
pub mod incremental;
pub mod input_file;
pub mod layout;
pub mod model;
pub mod numerics;
pub mod output_file;
pub mod package;
pub mod patch;
pub mod place;
pub mod record;
pub mod report;
pub mod rows;
pub mod schedule;
pub mod session;
pub mod sim;
pub mod snapshot;
pub mod studies;
pub mod target;
pub mod text;
pub mod watch;
