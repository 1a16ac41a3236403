//! Layouts: a `TensorFormat` for every value and an operator plan for every
//! op, chosen by a cost model on the target's rates within each tile's SRAM
//! budget, with explicit `Rearrange` ops where formats differ.
//!
//! `format`, `cost`, `plan` and `planner` are the pure core; the salsa query
//! layer lives in `crate::incremental`.

pub mod accumulation;
pub mod attention_cost;
pub mod candidates;
pub mod capacity;
pub mod cost;
pub mod format;
pub mod fp8_activations;
pub mod operand_formats;
pub mod overrides;
pub mod plan;
pub mod planner;
pub mod search_record;
pub mod validate;

#[cfg(test)]
#[path = "planner_tests.rs"]
mod planner_tests;

#[cfg(test)]
#[path = "cost_tests.rs"]
mod cost_tests;

#[cfg(test)]
#[path = "planner_override_tests.rs"]
mod planner_override_tests;
