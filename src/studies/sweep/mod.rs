//! `superstep sweep`: every exchange phase measured under a set of
//! (policy, width) configurations (`config`), next to the phase as built
//! (`points`), each point a phase measured by the session (`measure`); each phase's
//! Pareto frontier (`frontier`) and the per-phase selections and their
//! savings (`selection`). The seed system's exchange frontier study
//! (seeds/001), as a command.

pub mod config;
pub mod frontier;
pub mod measure;
pub mod points;
pub mod selection;

pub use crate::session::PointFigures;
pub use config::{ConfigList, DEFAULT_POLICIES, SweepConfig, chosen_configs, default_configs};
pub use frontier::{dominates, frontier};
pub use measure::{Shard, SweepOutcome, sweep, sweep_points};
pub use points::{BuiltPoint, Sweep, SweepPhase, SweepPoint};
pub use selection::{
    ChosenPoint, DEFAULT_WINDOW_BYTES, PhaseSelection, Selection, SelectionRule, select,
};
