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
//! Pure: plain data in, plain data out.

use std::collections::HashMap;

pub use super::accumulation::AccumulationPolicy;
use super::capacity::{CapacityShortfall, MemoryBudget, PlannedMemory};
use super::cost::{
    AttentionPlan, AttentionProblem, CostError, MatMulPlan, MatMulProblem, plan_attention,
    plan_matmul,
};
use super::format::{ElementOrder, TensorFormat, ceil_div};
pub use super::operand_formats::{
    AttentionFormats, MatMulFormats, attention_formats, canonical_format, matmul_formats,
};
use super::operand_formats::{
    broadcast_vector_format, name_rotation, storage_format, with_precision,
};
use super::plan::{
    Layouts, OpPlan, PlannedOp, PlannedRepeat, PlannedValue, PlannedValueId, RearrangeReason,
};
use crate::model::graph::{Graph, OpId, OpKind, Region, ValueId, ValueKind, ViewKind};

/// Planning inputs that come from the build query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlanningSettings {
    pub tiles: u32,
    pub reserved_bytes_per_tile: u32,
    pub accumulation: AccumulationPolicy,
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

pub fn plan_layouts(
    graph: &Graph,
    settings: PlanningSettings,
    oracle: &mut dyn CostOracle,
) -> Result<Layouts, LayoutError> {
    let tiles = settings.tiles;
    let budget = MemoryBudget::of(graph, tiles, settings.reserved_bytes_per_tile);
    let available = budget.for_data;
    let (soft_budget, hard_budget) = (budget.soft_budget(), budget.hard_budget());

    // Pass 1: plans for matrix products and attention. An operator whose
    // smallest working set fits neither budget is a shortfall; all are
    // collected so the error speaks of the worst.
    let mut matmul_plans: HashMap<OpId, MatMulPlan> = HashMap::new();
    let mut attention_plans: HashMap<OpId, AttentionPlan> = HashMap::new();
    let mut shortfalls: Vec<CapacityShortfall> = Vec::new();
    for op_id in graph.op_ids() {
        let op = graph.op(op_id);
        match op.kind {
            OpKind::MatMul { .. } => {
                let a = graph.value(op.inputs[0]).shape;
                let w = graph.value(op.inputs[1]).shape;
                let problem = |working_budget, accumulation| MatMulProblem {
                    m: a.rows,
                    k: a.cols,
                    n: w.cols,
                    tiles,
                    working_budget,
                    accumulation,
                    candidate_limit: settings.candidate_limit,
                };
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
                if let Some(plan) = chosen {
                    matmul_plans.insert(op_id, plan);
                } else if let Some(error) = least_error {
                    shortfalls.push(shortfall(&budget, &op.name, error)?);
                }
            }
            OpKind::Attention { .. } => {
                let q = graph.value(op.inputs[0]).shape;
                let k = graph.value(op.inputs[1]).shape;
                let problem = |working_budget| AttentionProblem {
                    groups: q.groups,
                    queries: q.rows,
                    keys: k.rows,
                    dimension: q.cols,
                    tiles,
                    working_budget,
                    forced_flash: settings.forced_flash,
                };
                match oracle
                    .attention(problem(soft_budget))
                    .or_else(|_| oracle.attention(problem(hard_budget)))
                {
                    Ok(plan) => {
                        attention_plans.insert(op_id, plan);
                    }
                    Err(error) => shortfalls.push(shortfall(&budget, &op.name, error)?),
                }
            }
            _ => {}
        }
    }
    if !shortfalls.is_empty() {
        // The worst first: region 1 (which fewer layers cannot relieve), then the largest overflow.
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
        return Err(LayoutError::DoesNotFit(Box::new(worst)));
    }

    // Formats the heavy ops need for each operand slot.
    let mut required: HashMap<(OpId, usize), TensorFormat> = HashMap::new();
    let mut heavy_outputs: HashMap<OpId, TensorFormat> = HashMap::new();
    for op_id in graph.op_ids() {
        let op = graph.op(op_id);
        if let Some(plan) = matmul_plans.get(&op_id) {
            let a = graph.value(op.inputs[0]).shape;
            let w = graph.value(op.inputs[1]).shape;
            let formats = matmul_formats(plan, a.rows, a.cols, w.cols);
            required.insert((op_id, 0), formats.a);
            required.insert((op_id, 1), formats.weight);
            required.insert((op_id, 2), formats.bias);
            heavy_outputs.insert(op_id, formats.output);
        } else if let Some(plan) = attention_plans.get(&op_id) {
            let q = graph.value(op.inputs[0]).shape;
            let k = graph.value(op.inputs[1]).shape;
            let formats = attention_formats(plan, q, k);
            required.insert((op_id, 0), formats.query);
            required.insert((op_id, 1), formats.key_value.clone());
            required.insert((op_id, 2), formats.key_value);
            heavy_outputs.insert(op_id, formats.output);
        }
    }

    let mut consumers: Vec<Vec<(OpId, usize)>> = vec![Vec::new(); graph.values.len()];
    for op_id in graph.op_ids() {
        for (slot, input) in graph.op(op_id).inputs.iter().enumerate() {
            consumers[input.0 as usize].push((op_id, slot));
        }
    }
    if let Some(repeat) = &graph.repeat {
        // The carried output is also read by the carry rearrange.
        consumers[repeat.carried_output.0 as usize].push((OpId(u32::MAX), 0));
    }

    let mut planner = Planner {
        graph,
        settings,
        values: Vec::new(),
        formats: vec![None; graph.values.len()],
    };

    // The format a single-consumer view/rotary chain ends in, if a heavy op.
    // Through a rotary, a replicated target is not taken: rotating every
    // replica of a block costs each tile the whole block.
    let chain_target = |value: ValueId| -> Option<TensorFormat> {
        let mut current = value;
        let mut through_rotary = false;
        loop {
            let users = &consumers[current.0 as usize];
            if users.len() != 1 || users[0].0.0 == u32::MAX {
                return None;
            }
            let (consumer, slot) = users[0];
            if let Some(format) = required.get(&(consumer, slot)) {
                if format.shape != graph.value(value).shape {
                    return None;
                }
                // A replicated target through a rotary: the rotary runs in
                // the canonical format (spread over every tile) and its
                // output is rearranged into the replicas.
                return (!(through_rotary && format.replicas > 1)).then(|| format.clone());
            }
            match graph.op(consumer).kind {
                OpKind::Rotary { .. } => {
                    through_rotary = true;
                    current = graph.op(consumer).output;
                }
                _ => return None,
            }
        }
    };

    // Pass 2: output formats, forward.
    for id in graph.value_ids() {
        let value = graph.value(id);
        if matches!(value.kind, ValueKind::Input)
            || graph.repeat.as_ref().is_some_and(|r| r.carried_input == id)
        {
            planner.formats[id.0 as usize] =
                Some(canonical_format(value.shape, value.precision, tiles));
        }
    }
    for op_id in graph.op_ids() {
        let op = graph.op(op_id);
        let output = graph.value(op.output);
        let input_format =
            |planner: &Planner, slot: usize| planner.formats[op.inputs[slot].0 as usize].clone();
        let format = match &op.kind {
            OpKind::MatMul { .. } | OpKind::Attention { .. } => heavy_outputs[&op_id].clone(),
            OpKind::View(_) => chain_target(op.output)
                .unwrap_or_else(|| canonical_format(output.shape, output.precision, tiles)),
            OpKind::Rotary { .. } => match input_format(&planner, 0) {
                Some(format) => format,
                None => canonical_format(output.shape, output.precision, tiles),
            },
            OpKind::LayerNorm { .. } => match input_format(&planner, 0) {
                Some(format) if format.rows_complete() && format.replicas == 1 => {
                    with_precision(&format, output.precision)
                }
                _ => canonical_format(output.shape, output.precision, tiles),
            },
            OpKind::Gelu { .. } | OpKind::Add | OpKind::Cast => match input_format(&planner, 0) {
                Some(format) if format.order == ElementOrder::RowMajor => {
                    with_precision(&format, output.precision)
                }
                _ => canonical_format(output.shape, output.precision, tiles),
            },
        };
        planner.formats[op.output.0 as usize] = Some(format);
    }

    // Pass 3: operands, storage and rearranges.
    for id in graph.value_ids() {
        let value = graph.value(id);
        let iterations = match value.kind {
            ValueKind::Weight { iterated: true } => {
                graph.repeat.as_ref().map_or(1, |repeat| repeat.iterations)
            }
            _ => 1,
        };
        planner.values.push(PlannedValue {
            name: value.name.clone(),
            graph_value: Some(id),
            kind: value.kind,
            region: value.region,
            format: planner.formats[id.0 as usize]
                .clone()
                .unwrap_or_else(|| canonical_format(value.shape, value.precision, tiles)),
            iterations,
        });
    }
    let mut ops = Vec::new();
    let mut entry_inserted = false;
    for op_id in graph.op_ids() {
        let op = graph.op(op_id);
        if let Some(repeat) = &graph.repeat
            && op.region == Region::Body
            && !entry_inserted
        {
            entry_inserted = true;
            ops.push(planner.rearrange_op(
                "repeat.entry",
                PlannedValueId(repeat.initial.0),
                PlannedValueId(repeat.carried_input.0),
                RearrangeReason::RepeatEntry,
                Region::Prologue,
            ));
        }
        let output_format = planner.values[op.output.0 as usize].format.clone();
        let mut inputs = Vec::with_capacity(op.inputs.len());
        for (slot, &input) in op.inputs.iter().enumerate() {
            let input_value = graph.value(input);
            let wanted = match (&op.kind, slot) {
                (OpKind::MatMul { .. } | OpKind::Attention { .. }, _) => {
                    required.get(&(op_id, slot)).cloned()
                }
                (OpKind::View(_), _) => None,
                (OpKind::LayerNorm { .. }, 1 | 2) => Some(broadcast_vector_format(
                    &output_format,
                    input_value.precision,
                )),
                _ => Some(with_precision(&output_format, input_value.precision)),
            };
            let planned_input = PlannedValueId(input.0);
            let Some(wanted) = wanted else {
                inputs.push(planned_input);
                continue;
            };
            if let ValueKind::Weight { .. } = input_value.kind {
                let storage = storage_format(&wanted, name_rotation(&input_value.name));
                planner.values[input.0 as usize].format = storage;
                if wanted.replicas == 1 {
                    inputs.push(planned_input);
                    continue;
                }
                let operand = planner.new_value(
                    format!("{}.{}", op.name, slot_name(&op.kind, slot)),
                    wanted,
                    op.region,
                );
                ops.push(planner.rearrange_op(
                    &format!("{}.{}.broadcast", op.name, slot_name(&op.kind, slot)),
                    planned_input,
                    operand,
                    RearrangeReason::WeightBroadcast,
                    op.region,
                ));
                inputs.push(operand);
            } else if planner.values[input.0 as usize].format == wanted {
                inputs.push(planned_input);
            } else {
                let operand = planner.new_value(
                    format!("{}.{}", op.name, slot_name(&op.kind, slot)),
                    wanted,
                    op.region,
                );
                ops.push(planner.rearrange_op(
                    &format!("{}.{}.rearrange", op.name, slot_name(&op.kind, slot)),
                    planned_input,
                    operand,
                    RearrangeReason::OperandFormat,
                    op.region,
                ));
                inputs.push(operand);
            }
        }
        let plan = if let Some(plan) = matmul_plans.get(&op_id) {
            OpPlan::MatMul(*plan)
        } else if let Some(plan) = attention_plans.get(&op_id) {
            OpPlan::Attention(*plan)
        } else if let OpKind::View(view) = &op.kind {
            OpPlan::Rearrange {
                view: view.clone(),
                reason: RearrangeReason::View,
            }
        } else {
            OpPlan::Blockwise
        };
        ops.push(PlannedOp {
            name: op.name.clone(),
            graph_op: Some(op_id),
            kind: op.kind.clone(),
            plan,
            inputs,
            output: PlannedValueId(op.output.0),
            region: op.region,
        });
        let next_region = graph.ops.get(op_id.0 as usize + 1).map(|next| next.region);
        if let Some(repeat) = &graph.repeat
            && op.region == Region::Body
            && next_region != Some(Region::Body)
        {
            ops.push(planner.rearrange_op(
                "repeat.carry",
                PlannedValueId(repeat.carried_output.0),
                PlannedValueId(repeat.carried_input.0),
                RearrangeReason::RepeatCarry,
                Region::Body,
            ));
        }
    }

    let (resident_weight_tile, resident_weight_bytes_max) = planner.resident_weights_peak();
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
        values: planner.values,
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

fn slot_name(kind: &OpKind, slot: usize) -> &'static str {
    match (kind, slot) {
        (OpKind::MatMul { .. }, 0) => "a",
        (OpKind::MatMul { .. }, 1) => "weight",
        (OpKind::MatMul { .. }, 2) => "bias",
        (OpKind::Attention { .. }, 0) => "q",
        (OpKind::Attention { .. }, 1) => "k",
        (OpKind::Attention { .. }, 2) => "v",
        (OpKind::LayerNorm { .. }, 1) => "gamma",
        (OpKind::LayerNorm { .. }, 2) => "beta",
        (_, 0) => "input",
        (_, 1) => "other",
        _ => "operand",
    }
}

impl Planner<'_> {
    fn new_value(&mut self, name: String, format: TensorFormat, region: Region) -> PlannedValueId {
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

    fn rearrange_op(
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
