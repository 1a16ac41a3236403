//! superstep: an incremental, query-based compiler of Vision Transformers
//! into bulk-synchronous programs for IPU21-class tile machines.
//!
//! Stages are pure cores in their own modules (`model`, `layout`, `expand`)
//! wrapped by salsa queries in `queries`; `sim` executes what the stages
//! produce against an FP32 reference.

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
pub mod watch;
