//! The salsa query layer: the database, the build inputs, and one tracked
//! function per stage, each a thin wrapper over a pure core.

pub mod backend;
pub mod database;
pub mod inputs;
pub mod package;
pub mod phases;
pub mod stages;

pub use database::{CompilerDatabase, Db, Execution};
pub use inputs::{BuildInputs, apply_query, create_inputs};
