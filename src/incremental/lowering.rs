//! The first half's queries: `graph`, per-problem operator costing,
//! `layouts`, the per-op firewall `planned_op`, per-op `op_expansion` and
//! the assembled `low_program`. Each is a thin layer over a pure core.
//!
//! Identity: ops are keyed by their name path (`OpKey`), costing problems by
//! content, so adding an op never renumbers the others and identical
//! problems are costed once.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::database::Db;
use super::inputs::BuildInputs;
pub use super::model_graph::graph;
use crate::expand::assemble::assemble;
use crate::expand::expansion::OpExpansion;
use crate::expand::program::LowProgram;
use crate::expand::summary::{ProgramSummary, summarize};
use crate::expand::{ExpandError, expand_op};
use crate::layout::attention_cost::plan_attention;
use crate::layout::cost::{
    AttentionPlan, AttentionProblem, CostError, MatMulPlan, MatMulProblem, plan_matmul,
};
use crate::layout::format::TensorFormat;
use crate::layout::overrides::LayoutOverride;
use crate::layout::plan::{Layouts, PlannedOp, PlannedValueId};
use crate::layout::planner::{CostOracle, LayoutError, PlanningSettings, plan_layouts};

/// A stage failure, as a query value (cloneable, comparable).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Expand(#[from] ExpandError),
}

/// Firewall: the planning-relevant projection of the build's fields.
#[salsa::tracked(returns(copy))]
pub fn planning_settings(db: &dyn Db, build: BuildInputs) -> PlanningSettings {
    let machine = build.machine(db);
    crate::build_file::planning_settings(
        machine.tiles,
        machine.cost_table,
        build.planning(db),
        build.attention(db),
    )
}

#[salsa::interned(debug)]
pub struct MatMulKey<'db> {
    #[returns(copy)]
    pub problem: MatMulProblem,
}

#[salsa::interned(debug)]
pub struct AttentionKey<'db> {
    #[returns(copy)]
    pub problem: AttentionProblem,
}

/// Candidate costing of one matrix-product problem (memoized per content).
#[salsa::tracked]
pub fn matmul_costing<'db>(db: &'db dyn Db, key: MatMulKey<'db>) -> Result<MatMulPlan, CostError> {
    plan_matmul(&key.problem(db))
}

/// Candidate costing of one attention problem (memoized per content).
#[salsa::tracked]
pub fn attention_costing<'db>(
    db: &'db dyn Db,
    key: AttentionKey<'db>,
) -> Result<AttentionPlan, CostError> {
    plan_attention(&key.problem(db))
}

struct QueryCosts<'db> {
    db: &'db dyn Db,
}

impl CostOracle for QueryCosts<'_> {
    fn matmul(&mut self, problem: MatMulProblem) -> Result<MatMulPlan, CostError> {
        matmul_costing(self.db, MatMulKey::new(self.db, problem)).clone()
    }
    fn attention(&mut self, problem: AttentionProblem) -> Result<AttentionPlan, CostError> {
        attention_costing(self.db, AttentionKey::new(self.db, problem)).clone()
    }
}

#[salsa::tracked(returns(ref))]
pub fn layouts(db: &dyn Db, build: BuildInputs) -> Result<Arc<Layouts>, LayoutError> {
    let graph = graph(db, build);
    let settings = planning_settings(db, build);
    let overrides = layout_overrides(db, build);
    let recipe = super::calibration::product_recipe(db, build)
        .clone()
        .map_err(|error| LayoutError::Calibration(error.to_string()))?;
    plan_layouts(graph, settings, overrides, &recipe, &mut QueryCosts { db }).map(Arc::new)
}

/// Firewall: the per-operator layout overrides alone (the build's
/// `[[layout.override]]` pins over the plan a search kept for its
/// configuration, `super::searched_plan`), so that a change to another
/// planning flag does not re-plan through them.
#[salsa::tracked(returns(ref))]
pub fn layout_overrides(db: &dyn Db, build: BuildInputs) -> Vec<LayoutOverride> {
    super::searched_plan::pinned_over(
        &build.planning(db).layout_overrides,
        super::searched_plan::searched_plan(db, build).as_deref(),
    )
}

/// An op, identified by its provenance path.
#[salsa::interned(debug)]
pub struct OpKey<'db> {
    #[returns(copy)]
    pub build: BuildInputs,
    #[returns(ref)]
    pub name: String,
}

/// The planned ops in execution order.
#[salsa::tracked(returns(ref))]
pub fn op_keys<'db>(db: &'db dyn Db, build: BuildInputs) -> Vec<OpKey<'db>> {
    match layouts(db, build) {
        Ok(layouts) => layouts
            .ops
            .iter()
            .map(|op| OpKey::new(db, build, op.name.clone()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Firewall: one op's plan and the formats of its operands and result.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedOpView {
    pub op: PlannedOp,
    pub inputs: Vec<TensorFormat>,
    pub output: TensorFormat,
}

/// Each planned op's position by name, built once per layouts (so finding
/// every op's plan is linear, not quadratic).
#[salsa::tracked(returns(ref))]
pub fn op_positions(db: &dyn Db, build: BuildInputs) -> Arc<BTreeMap<String, u32>> {
    Arc::new(match layouts(db, build) {
        Ok(layouts) => layouts
            .ops
            .iter()
            .enumerate()
            .map(|(position, op)| (op.name.clone(), position as u32))
            .collect(),
        Err(_) => BTreeMap::new(),
    })
}

#[salsa::tracked(returns(ref))]
pub fn planned_op<'db>(db: &'db dyn Db, key: OpKey<'db>) -> Option<PlannedOpView> {
    let build = key.build(db);
    let layouts = layouts(db, build).as_ref().ok()?;
    let position = *op_positions(db, build).get(key.name(db))?;
    let op = layouts.ops.get(position as usize)?;
    // Value ids are positions in the layouts' value list: a change to one
    // op (a weight broadcast more or less) renumbers every later value.
    // Expansion reads the formats, never the ids, so the view carries
    // slot numbers instead, and an op whose formats did not change is not
    // re-expanded because its neighbours' values were renumbered.
    let mut normalized = op.clone();
    for (slot, input) in normalized.inputs.iter_mut().enumerate() {
        *input = PlannedValueId(slot as u32);
    }
    normalized.output = PlannedValueId(u32::MAX);
    Some(PlannedOpView {
        op: normalized,
        inputs: op
            .inputs
            .iter()
            .map(|&input| layouts.value(input).format.clone())
            .collect(),
        output: layouts.value(op.output).format.clone(),
    })
}

/// One op's expansion (re-runs only when its own plan or formats change).
#[salsa::tracked(returns(ref))]
pub fn op_expansion<'db>(
    db: &'db dyn Db,
    key: OpKey<'db>,
) -> Result<Arc<OpExpansion>, ExpandError> {
    let Some(view) = planned_op(db, key) else {
        // Only ops of the current plan are expanded (`op_keys`): a key
        // without a plan is a broken invariant, not an empty expansion.
        debug_assert!(false, "op `{}` has no plan to expand", key.name(db));
        return Ok(Arc::new(OpExpansion::default()));
    };
    let inputs: Vec<&TensorFormat> = view.inputs.iter().collect();
    expand_op(&view.op, &inputs, &view.output).map(Arc::new)
}

#[salsa::tracked(returns(ref))]
pub fn low_program(db: &dyn Db, build: BuildInputs) -> Result<Arc<LowProgram>, StageError> {
    let layouts = layouts(db, build).clone()?;
    let mut expansions = Vec::with_capacity(layouts.ops.len());
    for &key in op_keys(db, build) {
        expansions.push(op_expansion(db, key).clone()?);
    }
    let references: Vec<&OpExpansion> = expansions
        .iter()
        .map(|expansion| expansion.as_ref())
        .collect();
    Ok(Arc::new(assemble(
        &layouts,
        &references,
        build.machine(db).tiles,
    )))
}

/// Firewall for reports: the program's counts.
#[salsa::tracked(returns(ref))]
pub fn program_summary(db: &dyn Db, build: BuildInputs) -> Result<ProgramSummary, StageError> {
    low_program(db, build)
        .as_ref()
        .map(|program| summarize(program))
        .map_err(Clone::clone)
}
