//! The salsa query layer: the database, the build inputs, and one tracked
//! function per stage, each a thin wrapper over a pure core. `lowering`
//! holds the first half (graph, layouts, per-op expansion, low program),
//! `phases` the per-phase queries, `schedules` the per-problem ones (schedule,
//! figures, rows), `grouping` the pricing of fusion and the record of a
//! program's grouping that lets a warm build group phases without judging, `whole_program` the aggregates over all
//! phases (row table, reservations, placement, estimate) and `package` the
//! finished package's assembly, `weights` the parameter values the
//! simulators read, `calibration` the FP8 activation scales and each
//! product's inputs, `searched_plan` the plan a layout search kept for the
//! build's configuration; `sweep` measures one phase under one (policy, width)
//! for `superstep sweep`; `on_disk` is the one path to the persistent cache;
//! `cancellation` lets another thread cancel a running build.

pub mod alternatives;
pub mod calibration;
pub mod cancellation;
pub mod database;
pub mod grouping;
pub mod inputs;
pub mod lowering;
pub mod model_graph;
pub mod on_disk;
pub mod package;
pub mod packing;
pub mod phases;
pub mod price_memo;
pub mod row_summary;
pub mod schedules;
pub mod searched_plan;
pub mod sweep;
pub mod tracked;
pub mod weights;
pub mod whole_program;

pub use database::{CompilerDatabase, Db, Execution};
pub use inputs::{BuildInputs, apply_query, create_inputs};
pub use tracked::{Stage, TrackedQuery};
