//! The layout planner: chooses an operator plan for every op and a format
//! for every value, then inserts the `Rearrange` ops that connect producers
//! to consumers wanting other formats.
//!
//! Three passes over the graph: (1) plans for matrix products and attention,
//! which depend only on their shapes and the machine (asked through a
//! `CostOracle` so the query layer can memoize each costing); (2) output
//! formats, forward, with views and rotary taking the format their single
//! consumer wants so that a head split and its redistribution are one
//! exchange; (3) operand formats, with rearranges and weight storage.
//! Pure: plain data in, plain data out. Each pass has its file under
//! `planner/` (`operator_plans`, `output_formats`, `operands`); this file
//! holds the planner's state and runs the passes in turn.

mod operands;
mod operator_plans;
mod output_formats;

use operator_plans::{OperatorPlans, heavy_formats, plan_operators};
pub use operator_plans::{attention_problem, matmul_problem};
use output_formats::consumers;

pub use super::accumulation::AccumulationPolicy;
use super::attention_cost::plan_attention;
use super::capacity::{CapacityShortfall, MemoryBudget};
use super::cost::{
    AttentionPlan, AttentionProblem, CostError, MatMulPlan, MatMulProblem, plan_matmul,
};
use super::format::TensorFormat;
use super::fp8_activations::with_fp8_activations;
pub use super::operand_formats::{
    AttentionFormats, MatMulFormats, attention_formats, canonical_format, matmul_formats,
};
use super::overrides::{LayoutOverride, OverrideError};
use super::plan::{
    Layouts, OpPlan, PlannedOp, PlannedRepeat, PlannedValue, PlannedValueId, RearrangeReason,
};
use crate::model::graph::{Graph, OpKind, Region, ValueKind, ViewKind};

/// Planning inputs that come from the build query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlanningSettings {
    pub tiles: u32,
    /// The kernel cost model's constants (`machine.calibration`).
    pub cost_table: crate::target::kernel_cost::CostTable,
    pub reserved_bytes_per_tile: u32,
    pub accumulation: AccumulationPolicy,
    /// What the matrix unit multiplies in every product (`planning.matrix_inputs`).
    pub matrix_inputs: crate::numerics::dot::ProductInputs,
    /// Where FP8 activations are cast (`planning.fp8_cast`).
    pub fp8_cast: super::fp8_activations::Fp8Cast,
    pub candidate_limit: u32,
    /// `None`: choose by cost; `Some(true)`: flash; `Some(false)`: materialized.
    pub forced_flash: Option<bool>,
}

/// Where per-op costings come from (the query layer memoizes them).
pub trait CostOracle {
    fn matmul(&mut self, problem: MatMulProblem) -> Result<MatMulPlan, CostError>;
    fn attention(&mut self, problem: AttentionProblem) -> Result<AttentionPlan, CostError>;
}

/// Costs computed directly, without memoization.
pub struct DirectCosts;

impl CostOracle for DirectCosts {
    fn matmul(&mut self, problem: MatMulProblem) -> Result<MatMulPlan, CostError> {
        plan_matmul(&problem)
    }
    fn attention(&mut self, problem: AttentionProblem) -> Result<AttentionPlan, CostError> {
        plan_attention(&problem)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayoutError {
    #[error("operator `{op}`: {source}")]
    Cost {
        op: String,
        #[source]
        source: CostError,
    },
    #[error("{0}")]
    DoesNotFit(Box<CapacityShortfall>),
    /// The products' inputs could not be chosen (activation calibration).
    #[error("{0}")]
    Calibration(String),
    #[error("{0}")]
    Override(Box<OverrideError>),
    #[error(
        "the resident weights need {needed} bytes on tile {tile}, but only {available} bytes per tile remain after \
         planning.reserved_bytes_per_tile; use more tiles (machine.tiles), fewer layers (workload.layers) or a smaller reservation"
    )]
    WeightsDoNotFit {
        tile: u32,
        needed: u64,
        available: u64,
    },
}

struct Planner<'graph> {
    graph: &'graph Graph,
    settings: PlanningSettings,
    values: Vec<PlannedValue>,
    formats: Vec<Option<TensorFormat>>,
}

/// Plans every op and value of `graph`: the three passes in turn, then the
/// check that the resident weights fit. `overrides` replace the cost
/// model's partition of the ops they name; `recipe` gives each product's
/// inputs (`settings.matrix_inputs` is replaced by its choice per op).
pub fn plan_layouts(
    graph: &Graph,
    settings: PlanningSettings,
    overrides: &[LayoutOverride],
    recipe: &crate::numerics::dot::ProductRecipe,
    oracle: &mut dyn CostOracle,
) -> Result<Layouts, LayoutError> {
    let rewritten = with_fp8_activations(graph, settings.fp8_cast, |op| {
        recipe.inputs_of(&graph.op(op).name)
    });
    let graph = &*rewritten;
    let budget = MemoryBudget::of(graph, settings.tiles, settings.reserved_bytes_per_tile);
    let plans = plan_operators(graph, settings, overrides, recipe, &budget, oracle)?;
    match plan_with(graph, settings, &plans, &budget) {
        // The tile orders decide where replicated weights are homed: on a
        // tight machine the preferred ones may crowd one tile past its
        // memory where the fallback orders do not (PE-Core-L14 on 736
        // tiles, docs/measurements.md, "The reduction outermost").
        Err(error @ LayoutError::WeightsDoNotFit { .. }) => match plans.with_fallback_orders() {
            Some(fallback) => plan_with(graph, settings, &fallback, &budget).map_err(|_| error),
            None => Err(error),
        },
        planned => planned,
    }
}

/// Passes 2 and 3 and the resident weights' check, on pass 1's `plans`.
fn plan_with(
    graph: &Graph,
    settings: PlanningSettings,
    plans: &OperatorPlans,
    budget: &MemoryBudget,
) -> Result<Layouts, LayoutError> {
    let heavy = heavy_formats(graph, plans);
    let consumers = consumers(graph);
    let mut planner = Planner {
        graph,
        settings,
        values: Vec::new(),
        formats: vec![None; graph.values.len()],
    };
    planner.plan_output_formats(&consumers, &heavy);
    planner.plan_values();
    let ops = planner.plan_operands(plans, &heavy);
    planner.finish(ops, budget.for_data)
}

impl Planner<'_> {
    /// The layouts, once the resident weights are known to fit in `available` bytes.
    fn finish(self, ops: Vec<PlannedOp>, available: u64) -> Result<Layouts, LayoutError> {
        let graph = self.graph;
        let (resident_weight_tile, resident_weight_bytes_max) = self.resident_weights_peak();
        if resident_weight_bytes_max > available {
            return Err(LayoutError::WeightsDoNotFit {
                tile: resident_weight_tile,
                needed: resident_weight_bytes_max,
                available,
            });
        }
        let output = graph
            .output
            .map_or(PlannedValueId(0), |id| PlannedValueId(id.0));
        Ok(Layouts {
            values: self.values,
            ops,
            repeat: graph.repeat.as_ref().map(|repeat| PlannedRepeat {
                iterations: repeat.iterations,
                carried_input: PlannedValueId(repeat.carried_input.0),
            }),
            output,
            resident_weight_bytes_max,
            resident_weight_tile,
        })
    }

    pub(super) fn new_value(
        &mut self,
        name: String,
        format: TensorFormat,
        region: Region,
    ) -> PlannedValueId {
        let id = PlannedValueId(self.values.len() as u32);
        self.values.push(PlannedValue {
            name,
            graph_value: None,
            kind: ValueKind::Activation,
            region,
            format,
            iterations: 1,
        });
        id
    }

    pub(super) fn rearrange_op(
        &self,
        name: &str,
        input: PlannedValueId,
        output: PlannedValueId,
        reason: RearrangeReason,
        region: Region,
    ) -> PlannedOp {
        PlannedOp {
            name: name.to_string(),
            graph_op: None,
            kind: OpKind::View(ViewKind::Identity),
            plan: OpPlan::Rearrange {
                view: ViewKind::Identity,
                reason,
            },
            inputs: vec![input],
            output,
            region,
        }
    }

    /// The tile holding the most resident weight bytes, and how many.
    fn resident_weights_peak(&self) -> (u32, u64) {
        let mut per_tile = vec![0u64; self.settings.tiles as usize];
        for value in &self.values {
            if let ValueKind::Weight { .. } = value.kind {
                let bytes = value.format.block_bytes() as u64 * value.iterations as u64;
                for &tile in value.format.tiles.iter() {
                    per_tile[tile as usize] += bytes;
                }
            }
        }
        let _ = self.graph;
        per_tile
            .iter()
            .enumerate()
            .max_by_key(|&(tile, &bytes)| (bytes, std::cmp::Reverse(tile)))
            .map_or((0, 0), |(tile, &bytes)| (tile as u32, bytes))
    }
}
