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
use std::sync::Arc;

pub use super::accumulation::AccumulationPolicy;
use super::capacity::{CapacityShortfall, MemoryBudget, PlannedMemory};
use super::cost::{
    AttentionPlan, AttentionProblem, CostError, MatMulPlan, MatMulProblem, plan_attention,
    plan_matmul,
};
use super::format::{ElementOrder, MemoryClass, TensorFormat, ceil_div, round_up};
use super::plan::{
    Layouts, OpPlan, PlannedOp, PlannedRepeat, PlannedValue, PlannedValueId, RearrangeReason,
};
use crate::model::graph::{
    Graph, OpId, OpKind, Precision, Region, Shape, ValueId, ValueKind, ViewKind,
};

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

/// Canonical format: whole rows, groups and row blocks spread over the tiles.
pub fn canonical_format(shape: Shape, precision: Precision, tiles: u32) -> TensorFormat {
    let block = if shape.groups >= tiles {
        [ceil_div(shape.groups, tiles), shape.rows, shape.cols]
    } else {
        let row_parts = (tiles / shape.groups).clamp(1, shape.rows.max(1));
        [1, ceil_div(shape.rows, row_parts), shape.cols]
    };
    TensorFormat::sequential(
        shape,
        precision,
        ElementOrder::RowMajor,
        block,
        1,
        MemoryClass::Standard,
        tiles,
    )
}

/// Operand and output formats of a planned matrix product.
pub struct MatMulFormats {
    pub a: TensorFormat,
    pub weight: TensorFormat,
    pub bias: TensorFormat,
    pub output: TensorFormat,
}

pub fn matmul_formats(plan: &MatMulPlan, m: u32, k: u32, n: u32) -> MatMulFormats {
    let (pm, pn, pk) = (plan.row_parts, plan.col_parts, plan.reduction_parts);
    let mut a_tiles = Vec::with_capacity((pm * pk * pn) as usize);
    for i in 0..pm {
        for kk in 0..pk {
            for j in 0..pn {
                a_tiles.push(plan.tile(i, j, kk));
            }
        }
    }
    let mut weight_tiles = Vec::with_capacity((pk * pn * pm) as usize);
    for kk in 0..pk {
        for j in 0..pn {
            for i in 0..pm {
                weight_tiles.push(plan.tile(i, j, kk));
            }
        }
    }
    let mut bias_tiles = Vec::with_capacity((pn * pm * pk) as usize);
    for j in 0..pn {
        for i in 0..pm {
            for s in 0..pk {
                bias_tiles.push(plan.tile(i, j, s));
            }
        }
    }
    let slice_rows = plan.block_rows / pk;
    let output_row_parts = ceil_div(m, slice_rows);
    let mut output_tiles = Vec::with_capacity((output_row_parts * pn) as usize);
    for row_block in 0..output_row_parts {
        for j in 0..pn {
            output_tiles.push(plan.tile(row_block / pk, j, row_block % pk));
        }
    }
    MatMulFormats {
        a: TensorFormat {
            shape: Shape::matrix(m, k),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, plan.block_rows, plan.block_reduction],
            replicas: pn,
            class: MemoryClass::Interleaved,
            tiles: Arc::from(a_tiles),
        },
        weight: TensorFormat {
            shape: Shape::matrix(k, n),
            precision: Precision::F8,
            order: ElementOrder::ColumnMajor,
            block: [1, plan.block_reduction, plan.block_cols],
            replicas: pm,
            class: MemoryClass::Interleaved,
            tiles: Arc::from(weight_tiles),
        },
        bias: TensorFormat {
            shape: Shape::matrix(1, n),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, 1, plan.block_cols],
            replicas: pm * pk,
            class: MemoryClass::Standard,
            tiles: Arc::from(bias_tiles),
        },
        output: TensorFormat {
            shape: Shape::matrix(m, n),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, slice_rows, plan.block_cols],
            replicas: 1,
            class: MemoryClass::Standard,
            tiles: Arc::from(output_tiles),
        },
    }
}

/// Query, key/value and output formats of planned attention.
pub struct AttentionFormats {
    /// Query blocks, replicated over the key tiles.
    pub query: TensorFormat,
    /// Key and value blocks, replicated over the query tiles.
    pub key_value: TensorFormat,
    /// Output rows, split over the key tiles that combine them.
    pub output: TensorFormat,
}

pub fn attention_formats(
    plan: &AttentionPlan,
    query_shape: Shape,
    key_shape: Shape,
) -> AttentionFormats {
    let group_blocks = ceil_div(query_shape.groups, plan.block_groups);
    let (query_parts, key_parts) = (plan.query_parts, plan.key_parts);
    let mut query_tiles = Vec::with_capacity((group_blocks * query_parts * key_parts) as usize);
    let mut key_tiles = Vec::with_capacity((group_blocks * key_parts * query_parts) as usize);
    for group_block in 0..group_blocks {
        for query_block in 0..query_parts {
            for key_block in 0..key_parts {
                query_tiles.push(plan.tile(group_block, query_block, key_block));
            }
        }
        for key_block in 0..key_parts {
            for query_block in 0..query_parts {
                key_tiles.push(plan.tile(group_block, query_block, key_block));
            }
        }
    }
    let slice_rows = plan.block_queries / key_parts;
    let output_row_parts = ceil_div(query_shape.rows, slice_rows);
    let mut output_tiles = Vec::with_capacity((group_blocks * output_row_parts) as usize);
    for group_block in 0..group_blocks {
        for row_block in 0..output_row_parts {
            output_tiles.push(plan.tile(group_block, row_block / key_parts, row_block % key_parts));
        }
    }
    let format = |shape: Shape, block: [u32; 3], replicas: u32, tiles: Vec<u32>| TensorFormat {
        shape,
        precision: Precision::F16,
        order: ElementOrder::RowMajor,
        block,
        replicas,
        class: MemoryClass::Standard,
        tiles: Arc::from(tiles),
    };
    AttentionFormats {
        query: format(
            query_shape,
            [plan.block_groups, plan.block_queries, query_shape.cols],
            key_parts,
            query_tiles,
        ),
        key_value: format(
            key_shape,
            [plan.block_groups, plan.block_keys, key_shape.cols],
            query_parts,
            key_tiles,
        ),
        output: format(
            query_shape,
            [plan.block_groups, slice_rows, query_shape.cols],
            1,
            output_tiles,
        ),
    }
}

/// A `[1, 1, cols]` vector replicated next to every block of `output`.
fn broadcast_vector_format(output: &TensorFormat, precision: Precision) -> TensorFormat {
    let parts = output.parts();
    let replicas = parts[0] * parts[1] * output.replicas;
    let mut tiles = Vec::with_capacity((parts[2] * replicas) as usize);
    for col_block in 0..parts[2] {
        for group_block in 0..parts[0] {
            for row_block in 0..parts[1] {
                for replica in 0..output.replicas {
                    tiles.push(output.tile(
                        output.block_index(group_block, row_block, col_block),
                        replica,
                    ));
                }
            }
        }
    }
    TensorFormat {
        shape: Shape::matrix(1, output.shape.cols),
        precision,
        order: ElementOrder::RowMajor,
        block: [1, 1, output.block[2]],
        replicas,
        class: MemoryClass::Standard,
        tiles: Arc::from(tiles),
    }
}

fn with_precision(format: &TensorFormat, precision: Precision) -> TensorFormat {
    TensorFormat {
        precision,
        ..format.clone()
    }
}

/// Storage of a weight. A replicated weight is stored split by columns over
/// its replicas, so the tiles that use it keep equal shares and the
/// per-iteration broadcast is an all-gather: matrix-unit weights split into
/// one piece per replica, vectors (biases, norm parameters) into pieces of
/// at least `VECTOR_STORAGE_PIECE` elements homed at replicas spread by
/// `rotation`. Unreplicated weights are stored in the operand's format.
fn storage_format(required: &TensorFormat, rotation: u32) -> TensorFormat {
    if required.replicas <= 1 {
        return required.clone();
    }
    let replicas = required.replicas;
    let block_cols = required.block[2];
    let (pieces, alignment) = match required.order {
        ElementOrder::ColumnMajor => (replicas, 1),
        ElementOrder::RowMajor => (
            replicas
                .min(ceil_div(block_cols, VECTOR_STORAGE_PIECE))
                .max(1),
            // Pieces of whole 32-bit words.
            4 / required.precision.bytes().min(4),
        ),
    };
    let sub_cols = round_up(ceil_div(block_cols, pieces), alignment.max(1))
        .min(block_cols)
        .max(1);
    let pieces_per_block = ceil_div(block_cols, sub_cols);
    let parts = required.parts();
    let storage_col_parts = ceil_div(required.shape.cols, sub_cols);
    let mut tiles = Vec::with_capacity((parts[0] * parts[1] * storage_col_parts) as usize);
    for group_block in 0..parts[0] {
        for row_block in 0..parts[1] {
            for storage_col in 0..storage_col_parts {
                let first_col = storage_col * sub_cols;
                let col_block = (first_col / block_cols).min(parts[2] - 1);
                let piece = (first_col - col_block * block_cols) / sub_cols;
                let replica = match required.order {
                    ElementOrder::ColumnMajor => piece.min(replicas - 1),
                    ElementOrder::RowMajor => {
                        let spread = (replicas / pieces_per_block).max(1);
                        rotation
                            .wrapping_add(piece * spread)
                            .wrapping_add(col_block)
                            % replicas
                    }
                };
                tiles.push(required.tile(
                    required.block_index(group_block, row_block, col_block),
                    replica,
                ));
            }
        }
    }
    TensorFormat {
        block: [required.block[0], required.block[1], sub_cols],
        replicas: 1,
        // Read only by the broadcast (exchange sends and local copies),
        // never by a kernel: ordinary memory, leaving the interleaved
        // region to matrix-unit operands.
        class: MemoryClass::Standard,
        tiles: Arc::from(tiles),
        ..required.clone()
    }
}

/// Smallest piece (elements) a replicated vector weight is stored in.
pub const VECTOR_STORAGE_PIECE: u32 = 64;

/// A well-mixed rotation from a weight's name (FNV-1a), so that the homes
/// of small weights spread over the tiles instead of piling onto the first.
fn name_rotation(name: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= byte as u32;
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
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
