//! Pass 1 of the layout planner: a plan for every matrix product and
//! attention (asked of the `CostOracle` under the soft budget, then the
//! hard one), the worst capacity shortfall when some fit neither, and the
//! operand and output formats those plans need.

use std::collections::{BTreeMap, HashMap};

use super::{CostOracle, LayoutError, PlanningSettings};
use crate::layout::candidates::{attention_partitions, matmul_partitions, nearest_partitions};
use crate::layout::capacity::{CapacityShortfall, MemoryBudget, PlannedMemory};
use crate::layout::cost::{
    AttentionOrder, AttentionPlan, AttentionProblem, CostError, MatMulPlan, MatMulProblem,
};
use crate::layout::format::{TensorFormat, ceil_div};
use crate::layout::operand_formats::{attention_formats, matmul_formats};
use crate::layout::overrides::{LayoutOverride, OverrideCause, OverrideError, Partition};
use crate::model::graph::{Graph, Op, OpId, OpKind};

/// Pass 1's plans: one per matrix product and per attention.
#[derive(Clone)]
pub(super) struct OperatorPlans {
    pub(super) matmul: HashMap<OpId, MatMulPlan>,
    pub(super) attention: HashMap<OpId, AttentionPlan>,
    /// The ops a `[[layout.override]]` planned (their orders are the user's).
    pub(super) overridden: Vec<OpId>,
}

impl OperatorPlans {
    /// These plans with the fallback tile orders (`MatMulPlan::fallback_order`,
    /// attention's default `qk`) on every op the planner chose; `None` when
    /// that changes no order.
    pub(super) fn with_fallback_orders(&self) -> Option<OperatorPlans> {
        let mut fallback = self.clone();
        let mut changed = false;
        for (op, plan) in &mut fallback.matmul {
            if !self.overridden.contains(op) && plan.order != plan.fallback_order() {
                plan.order = plan.fallback_order();
                changed = true;
            }
        }
        for (op, plan) in &mut fallback.attention {
            if !self.overridden.contains(op) && plan.order != AttentionOrder::default() {
                plan.order = AttentionOrder::default();
                changed = true;
            }
        }
        changed.then_some(fallback)
    }
}

/// The formats the heavy ops (matrix products, attention) need for each
/// operand slot, and the formats of their outputs.
pub(super) struct HeavyFormats {
    pub(super) required: HashMap<(OpId, usize), TensorFormat>,
    pub(super) outputs: HashMap<OpId, TensorFormat>,
}

/// The smallest working set a costing failure found.
fn smallest_need(error: &CostError) -> u32 {
    match error {
        CostError::MatMulDoesNotFit { smallest, .. } => *smallest,
        CostError::AttentionDoesNotFit { needed, .. } => *needed,
    }
}

/// An operator's costing failure as a capacity shortfall (a costing that
/// found no candidate at all stays a costing error).
fn shortfall(
    budget: &MemoryBudget,
    op: &str,
    error: CostError,
) -> Result<CapacityShortfall, LayoutError> {
    match &error {
        CostError::MatMulDoesNotFit {
            smallest_plan: Some(plan),
            ..
        } => Ok(budget.shortfall(op, &plan.working_parts(), plan.tiles_used())),
        CostError::AttentionDoesNotFit {
            groups,
            dimension,
            smallest_plan: Some(plan),
            ..
        } => {
            let tiles_used =
                ceil_div(*groups, plan.block_groups.max(1)) * plan.query_parts * plan.key_parts;
            Ok(budget.shortfall(op, &plan.working_parts(*dimension), tiles_used))
        }
        _ => Err(LayoutError::Cost {
            op: op.to_string(),
            source: error,
        }),
    }
}

/// Pass 1: plans for matrix products and attention. An operator whose
/// smallest working set fits neither budget is a shortfall; all are
/// collected so the error speaks of the worst.
pub(super) fn plan_operators(
    graph: &Graph,
    settings: PlanningSettings,
    overrides: &[LayoutOverride],
    recipe: &crate::numerics::dot::ProductRecipe,
    budget: &MemoryBudget,
    oracle: &mut dyn CostOracle,
) -> Result<OperatorPlans, LayoutError> {
    let mut plans = OperatorPlans {
        matmul: HashMap::new(),
        attention: HashMap::new(),
        overridden: Vec::new(),
    };
    let by_op = overrides_by_op(graph, overrides)?;
    let mut shortfalls: Vec<CapacityShortfall> = Vec::new();
    for op_id in graph.op_ids() {
        let op = graph.op(op_id);
        let settings = PlanningSettings {
            matrix_inputs: recipe.inputs_of(&op.name),
            ..settings
        };
        if let Some(&partition) = by_op.get(op.name.as_str()) {
            let plan = overridden_plan(graph, op, partition, settings, budget)
                .map_err(|error| LayoutError::Override(Box::new(error)))?;
            plans.overridden.push(op_id);
            match plan {
                Overridden::MatMul(plan) => plans.matmul.insert(op_id, plan).map(|_| ()),
                Overridden::Attention(plan) => plans.attention.insert(op_id, plan).map(|_| ()),
            };
            continue;
        }
        match op.kind {
            OpKind::MatMul { .. } => match plan_matmul_op(graph, op, settings, budget, oracle) {
                Ok(Some(plan)) => {
                    plans.matmul.insert(op_id, plan);
                }
                Ok(None) => {}
                Err(error) => shortfalls.push(shortfall(budget, &op.name, error)?),
            },
            OpKind::Attention { .. } => {
                match plan_attention_op(graph, op, settings, budget, oracle) {
                    Ok(plan) => {
                        plans.attention.insert(op_id, plan);
                    }
                    Err(error) => shortfalls.push(shortfall(budget, &op.name, error)?),
                }
            }
            _ => {}
        }
    }
    if shortfalls.is_empty() {
        Ok(plans)
    } else {
        Err(worst_shortfall(shortfalls))
    }
}

/// The costing problem of matrix product `op` under `working_budget` and
/// `accumulation` (one constructor for the planner, overrides and the
/// layout search).
pub fn matmul_problem(
    graph: &Graph,
    op: &Op,
    settings: PlanningSettings,
    working_budget: u32,
    accumulation: crate::numerics::dot::Accumulation,
) -> MatMulProblem {
    let a = graph.value(op.inputs[0]).shape;
    let w = graph.value(op.inputs[1]).shape;
    MatMulProblem {
        m: a.rows,
        k: a.cols,
        n: w.cols,
        tiles: settings.tiles,
        working_budget,
        accumulation,
        inputs: settings.matrix_inputs,
        activations: graph.value(op.inputs[0]).precision.activation_store(),
        cost_table: settings.cost_table,
        candidate_limit: settings.candidate_limit,
    }
}

/// The costing problem of attention `op` under `working_budget`.
pub fn attention_problem(
    graph: &Graph,
    op: &Op,
    settings: PlanningSettings,
    working_budget: u32,
) -> AttentionProblem {
    let q = graph.value(op.inputs[0]).shape;
    let k = graph.value(op.inputs[1]).shape;
    AttentionProblem {
        groups: q.groups,
        queries: q.rows,
        keys: k.rows,
        dimension: q.cols,
        tiles: settings.tiles,
        working_budget,
        forced_flash: settings.forced_flash,
        output: graph.value(op.output).precision.activation_store(),
        value_product: settings.matrix_inputs,
        cost_table: settings.cost_table,
    }
}

/// The plan of one matrix product: each accumulation the policy allows is
/// costed under the soft budget, then the hard one, and the policy admits
/// the plans in turn. Without a plan, the error whose smallest working set
/// is least over (`None` without any accumulation to cost).
fn plan_matmul_op(
    graph: &Graph,
    op: &Op,
    settings: PlanningSettings,
    budget: &MemoryBudget,
    oracle: &mut dyn CostOracle,
) -> Result<Option<MatMulPlan>, CostError> {
    let problem = |working_budget, accumulation| {
        matmul_problem(graph, op, settings, working_budget, accumulation)
    };
    let (soft_budget, hard_budget) = (budget.soft_budget(), budget.hard_budget());
    let mut chosen: Option<MatMulPlan> = None;
    let mut least_error = None;
    for &accumulation in settings.accumulation.candidates(op.region) {
        match oracle
            .matmul(problem(soft_budget, accumulation))
            .or_else(|_| oracle.matmul(problem(hard_budget, accumulation)))
        {
            Ok(plan) => {
                if settings.accumulation.admits(&plan, chosen.as_ref()) {
                    chosen = Some(plan);
                }
            }
            // The error whose smallest working set is least over speaks.
            Err(error) => {
                if least_error
                    .as_ref()
                    .is_none_or(|known| smallest_need(&error) < smallest_need(known))
                {
                    least_error = Some(error);
                }
            }
        }
    }
    // Every policy costs at least one accumulation: no plan means an error.
    match (chosen, least_error) {
        (Some(plan), _) => Ok(Some(plan)),
        (None, Some(error)) => Err(error),
        (None, None) => Ok(None),
    }
}

/// The plan of one attention, under the soft budget, then the hard one.
fn plan_attention_op(
    graph: &Graph,
    op: &Op,
    settings: PlanningSettings,
    budget: &MemoryBudget,
    oracle: &mut dyn CostOracle,
) -> Result<AttentionPlan, CostError> {
    let problem = |working_budget| attention_problem(graph, op, settings, working_budget);
    oracle
        .attention(problem(budget.soft_budget()))
        .or_else(|_| oracle.attention(problem(budget.hard_budget())))
}

/// The error of pass 1's shortfalls: the worst first (region 1, which
/// fewer layers cannot relieve, then the largest overflow), naming the others.
fn worst_shortfall(mut shortfalls: Vec<CapacityShortfall>) -> LayoutError {
    shortfalls.sort_by(|left, right| {
        (
            right.memory == PlannedMemory::RegionOne,
            right.overflow,
            &left.op,
        )
            .cmp(&(
                left.memory == PlannedMemory::RegionOne,
                left.overflow,
                &right.op,
            ))
    });
    let mut worst = shortfalls.remove(0);
    worst.other_ops_over = shortfalls
        .into_iter()
        .map(|other| (other.op, other.overflow))
        .collect();
    LayoutError::DoesNotFit(Box::new(worst))
}

/// Formats the heavy ops need for each operand slot, and give their outputs.
pub(super) fn heavy_formats(graph: &Graph, plans: &OperatorPlans) -> HeavyFormats {
    let mut required: HashMap<(OpId, usize), TensorFormat> = HashMap::new();
    let mut outputs: HashMap<OpId, TensorFormat> = HashMap::new();
    for op_id in graph.op_ids() {
        let op = graph.op(op_id);
        if let Some(plan) = plans.matmul.get(&op_id) {
            let a = graph.value(op.inputs[0]).shape;
            let w = graph.value(op.inputs[1]).shape;
            let mut formats = matmul_formats(plan, a.rows, a.cols, w.cols);
            // An activation its producer stores in FP8 is read as such.
            formats.a.precision = graph.value(op.inputs[0]).precision;
            required.insert((op_id, 0), formats.a);
            required.insert((op_id, 1), formats.weight);
            required.insert((op_id, 2), formats.bias);
            outputs.insert(op_id, formats.output);
        } else if let Some(plan) = plans.attention.get(&op_id) {
            let q = graph.value(op.inputs[0]).shape;
            let k = graph.value(op.inputs[1]).shape;
            let mut formats = attention_formats(plan, q, k);
            formats.output.precision = graph.value(op.output).precision;
            required.insert((op_id, 0), formats.query);
            required.insert((op_id, 1), formats.key_value.clone());
            required.insert((op_id, 2), formats.key_value);
            outputs.insert(op_id, formats.output);
        }
    }
    HeavyFormats { required, outputs }
}

/// The overrides by op name, each checked to name a matrix product or an
/// attention of `graph` with a partition of its kind.
fn overrides_by_op<'a>(
    graph: &Graph,
    overrides: &'a [LayoutOverride],
) -> Result<BTreeMap<&'a str, Partition>, LayoutError> {
    let heavy: Vec<&Op> = graph
        .op_ids()
        .map(|id| graph.op(id))
        .filter(|op| matches!(op.kind, OpKind::MatMul { .. } | OpKind::Attention { .. }))
        .collect();
    let mut by_op = BTreeMap::new();
    for layout_override in overrides {
        let error = |message: String, nearest: Vec<String>| {
            LayoutError::Override(Box::new(OverrideError {
                op: layout_override.op.clone(),
                message,
                nearest,
                cause: OverrideCause::Entry,
            }))
        };
        let Some(op) = heavy.iter().find(|op| op.name == layout_override.op) else {
            let names: Vec<&str> = heavy.iter().map(|op| op.name.as_str()).collect();
            let nearest = crate::text::nearest_keys(&layout_override.op, &names, 3);
            let plain = graph
                .op_ids()
                .any(|id| graph.op(id).name == layout_override.op);
            return Err(error(
                if plain {
                    String::from(
                        "this op has no partition to choose (only matrix products and \
                         attention do)",
                    )
                } else {
                    String::from("the build has no such matrix product or attention")
                },
                nearest
                    .into_iter()
                    .map(|name| format!("`{name}`"))
                    .collect(),
            ));
        };
        let kind_matches = matches!(
            (&op.kind, layout_override.partition),
            (OpKind::MatMul { .. }, Partition::MatMul { .. })
                | (OpKind::Attention { .. }, Partition::Attention { .. })
        );
        if !kind_matches {
            return Err(error(
                match op.kind {
                    OpKind::MatMul { .. } => {
                        String::from("a matrix product takes ROWSxCOLSxREDUCTION (three numbers)")
                    }
                    _ => String::from("attention takes QUERIESxKEYS (two numbers)"),
                },
                Vec::new(),
            ));
        }
        if by_op
            .insert(layout_override.op.as_str(), layout_override.partition)
            .is_some()
        {
            return Err(error(
                String::from("the op is overridden twice; keep one entry"),
                Vec::new(),
            ));
        }
    }
    Ok(by_op)
}

/// An overridden op's plan.
enum Overridden {
    MatMul(MatMulPlan),
    Attention(AttentionPlan),
}

/// The plan `partition` asks for `op`, costed; an error with the nearest
/// valid partitions when its blocks do not come out at exactly the parts
/// asked for or its working set does not fit the hard budget.
fn overridden_plan(
    graph: &Graph,
    op: &Op,
    partition: Partition,
    settings: PlanningSettings,
    budget: &MemoryBudget,
) -> Result<Overridden, OverrideError> {
    let hard_budget = budget.hard_budget();
    let refuse = |message: String, valid: Vec<Partition>, cause: OverrideCause| OverrideError {
        op: op.name.clone(),
        message,
        nearest: nearest_partitions(&partition, &valid, 3)
            .into_iter()
            .map(|valid| format!("`{valid}`"))
            .collect(),
        cause,
    };
    // The configuration field that makes a partition impossible: the
    // tile count when it asks for more parts than tiles, else the batch
    // (the rows of a product are batch x tokens, the groups of attention
    // batch x heads).
    let shape_field = |parts: u32| {
        if parts > settings.tiles {
            "machine.tiles"
        } else {
            "workload.batch"
        }
    };
    let configuration_note = |field: &str| match field {
        "machine.tiles" => format!(
            " (machine.tiles = {} makes it impossible: more parts than tiles)",
            settings.tiles
        ),
        _ => String::from(
            " (the configuration's workload.batch sets this shape: rows are batch x tokens, \
             attention groups batch x heads)",
        ),
    };
    match partition {
        Partition::MatMul {
            rows,
            cols,
            reduction,
            order,
        } => {
            let a = graph.value(op.inputs[0]).shape;
            let w = graph.value(op.inputs[1]).shape;
            let problem =
                |accumulation| matmul_problem(graph, op, settings, hard_budget, accumulation);
            let mut chosen: Option<MatMulPlan> = None;
            for &accumulation in settings.accumulation.candidates(op.region) {
                let Some(mut plan) = crate::layout::cost::matmul_partition(
                    &problem(accumulation),
                    rows,
                    cols,
                    reduction,
                ) else {
                    continue;
                };
                if (plan.row_parts, plan.col_parts, plan.reduction_parts) != (rows, cols, reduction)
                    || plan.working_bytes > hard_budget
                {
                    continue;
                }
                plan.order = order;
                if settings.accumulation.admits(&plan, chosen.as_ref()) {
                    chosen = Some(plan);
                }
            }
            chosen.map(Overridden::MatMul).ok_or_else(|| {
                let first = *settings.accumulation.candidates(op.region).first().unwrap_or(
                    &crate::numerics::dot::Accumulation::F32,
                );
                let valid = matmul_partitions(&problem(first), order);
                let parts = rows.saturating_mul(cols).saturating_mul(reduction);
                let field = shape_field(parts);
                let (message, cause) = match crate::layout::cost::matmul_partition(
                    &problem(first),
                    rows,
                    cols,
                    reduction,
                ) {
                    None => (
                        format!(
                            "{rows}x{cols}x{reduction} does not split the {} x {} x {} product on {} \
                             tiles{}",
                            a.rows,
                            a.cols,
                            w.cols,
                            settings.tiles,
                            configuration_note(field)
                        ),
                        OverrideCause::Configuration(field),
                    ),
                    Some(plan)
                        if (plan.row_parts, plan.col_parts, plan.reduction_parts)
                            != (rows, cols, reduction) =>
                    {
                        (
                            format!(
                                "{rows}x{cols}x{reduction} gives blocks of {} x {} x {} that form {} \
                                 parts of the {} x {} x {} product, not the ones asked for{}",
                                plan.block_rows,
                                plan.block_cols,
                                plan.block_reduction,
                                plan.partition(),
                                a.rows,
                                a.cols,
                                w.cols,
                                configuration_note(field)
                            ),
                            OverrideCause::Configuration(field),
                        )
                    }
                    Some(plan) => (
                        format!(
                            "{rows}x{cols}x{reduction} needs {} bytes of working SRAM per tile, more \
                             than the {hard_budget} available",
                            plan.working_bytes
                        ),
                        OverrideCause::Memory,
                    ),
                };
                refuse(message, valid, cause)
            })
        }
        Partition::Attention {
            queries,
            keys,
            order,
        } => {
            let q = graph.value(op.inputs[0]).shape;
            let k = graph.value(op.inputs[1]).shape;
            let problem = attention_problem(graph, op, settings, hard_budget);
            let valid = attention_partitions(&problem, order);
            let best = valid_attention(&problem, queries, keys);
            match best {
                Some(mut plan) => {
                    plan.order = order;
                    Ok(Overridden::Attention(plan))
                }
                None => {
                    // Would it split with memory to spare? Then memory is
                    // what refuses it; else the configuration's shape.
                    let unbounded = AttentionProblem {
                        working_budget: u32::MAX,
                        ..problem
                    };
                    let splits = valid_attention(&unbounded, queries, keys).is_some();
                    let field = shape_field(queries.saturating_mul(keys));
                    Err(refuse(
                        if splits {
                            format!(
                                "{queries}x{keys} splits {} groups of {} queries over {} keys but \
                                 needs more than the {hard_budget} bytes per tile available",
                                q.groups, q.rows, k.rows
                            )
                        } else {
                            format!(
                                "{queries}x{keys} does not split {} groups of {} queries over {} \
                                 keys into exactly those parts on {} tiles{}",
                                q.groups,
                                q.rows,
                                k.rows,
                                settings.tiles,
                                configuration_note(field)
                            )
                        },
                        valid,
                        if splits {
                            OverrideCause::Memory
                        } else {
                            OverrideCause::Configuration(field)
                        },
                    ))
                }
            }
        }
    }
}

/// The cheapest method's plan of attention split into exactly
/// `queries x keys` parts that fits the problem's budget.
fn valid_attention(problem: &AttentionProblem, queries: u32, keys: u32) -> Option<AttentionPlan> {
    crate::layout::candidates::attention_methods(problem)
        .into_iter()
        .filter_map(|method| {
            crate::layout::attention_cost::attention_partition(problem, Some(queries), keys, method)
        })
        .filter(|plan| {
            plan.query_parts == queries
                && plan.key_parts == keys
                && plan.working_bytes <= problem.working_budget
        })
        .min_by_key(|plan| (plan.cycles, plan.working_bytes))
}
