//! The plain (database-free) path through the first half of the compiler:
//! build query -> graph -> layouts -> per-op expansion -> low program. The
//! salsa queries call the same functions stage by stage; this path exists for
//! the pure cores' tests and benchmarks, and as an independent cross-check of
//! the incremental path.

use crate::expand::assemble::assemble;
use crate::expand::program::LowProgram;
use crate::expand::{ExpandError, expand_op};
use crate::layout::overrides::LayoutOverride;
use crate::layout::plan::Layouts;
use crate::layout::planner::{
    CostOracle, DirectCosts, LayoutError, PlanningSettings, plan_layouts,
};
use crate::model::builder::{GraphKnobs, build_graph};
use crate::model::graph::Graph;
use crate::model::weights::{WeightError, Weights};
use crate::numerics::dot::ProductRecipe;

use crate::build_file::BuildQuery;

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Expand(#[from] ExpandError),
    #[error("{0}")]
    Calibration(String),
}

pub fn graph_knobs(query: &BuildQuery) -> GraphKnobs {
    GraphKnobs {
        batch: query.workload.batch,
        fuse_qkv: query.workload.fuse_qkv,
    }
}

/// The planning settings of a build query (one constructor, shared with the
/// salsa query of the same name: `crate::build_file::planning_settings`).
pub fn planning_settings(query: &BuildQuery) -> PlanningSettings {
    crate::build_file::planning_settings(
        query.machine.tiles,
        query.machine.cost_table,
        &query.planning,
        query.workload.attention,
    )
}

pub fn build_query_graph(query: &BuildQuery) -> Graph {
    build_graph(&query.workload.model, graph_knobs(query))
}

/// Layouts and low program from a graph under layout `overrides`, costing
/// through `oracle`.
pub fn lower(
    graph: &Graph,
    settings: PlanningSettings,
    overrides: &[LayoutOverride],
    recipe: &ProductRecipe,
    oracle: &mut dyn CostOracle,
) -> Result<(Layouts, LowProgram), CompileError> {
    let layouts = plan_layouts(graph, settings, overrides, recipe, oracle)?;
    let expansions = layouts
        .ops
        .iter()
        .map(|op| {
            let inputs: Vec<_> = op
                .inputs
                .iter()
                .map(|&input| &layouts.value(input).format)
                .collect();
            expand_op(op, &inputs, &layouts.value(op.output).format)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let references: Vec<_> = expansions.iter().collect();
    let program = assemble(&layouts, &references, settings.tiles);
    Ok((layouts, program))
}

/// The whole first half without a database.
pub fn compile(query: &BuildQuery) -> Result<(Graph, Layouts, LowProgram), CompileError> {
    let graph = build_query_graph(query);
    let recipe = product_recipe(query, &graph)?;
    let (layouts, program) = lower(
        &graph,
        planning_settings(query),
        &query.planning.layout_overrides,
        &recipe,
        &mut DirectCosts,
    )?;
    Ok((graph, layouts, program))
}

/// Each product's inputs under `query` (calibrating the activations'
/// scales on the FP32 reference when the query asks for it, as the
/// `product_recipe` query does).
pub fn product_recipe(query: &BuildQuery, graph: &Graph) -> Result<ProductRecipe, CompileError> {
    use crate::build_file::{ActivationScale, CalibrationInput};
    use crate::target::kernel_cost::MatrixInputs;
    let planning = &query.planning;
    let any_fp8 = planning.matrix_inputs == MatrixInputs::Fp8
        || planning
            .matrix_input_overrides
            .values()
            .any(|inputs| *inputs == MatrixInputs::Fp8);
    let recipe = crate::sim::calibration::recipe;
    let ActivationScale::Calibrate { input } = &planning.activation_scale else {
        return Ok(recipe(planning, None));
    };
    if !any_fp8 {
        return Ok(recipe(planning, None));
    }
    let failed =
        |error: String| CompileError::Calibration(format!("activation calibration: {error}"));
    if let CalibrationInput::File { path } = input {
        return Err(failed(format!(
            "the database-free path calibrates on the seeded input only, not on {}; \
             build through the session",
            path.display()
        )));
    }
    let weights = load_weights(query, graph).map_err(|error| failed(error.to_string()))?;
    let calibration = crate::sim::calibration::calibrate(graph, &weights)
        .map_err(|error| failed(error.to_string()))?;
    Ok(recipe(planning, Some(&calibration)))
}

/// The weights a query names (seeded, or read from SafeTensors).
pub fn load_weights(query: &BuildQuery, graph: &Graph) -> Result<Weights, WeightError> {
    query.workload.weights.load(graph, query.workload.fp8_scale)
}
