//! Pass 3 of the layout planner: one planned value per graph value, then
//! every op with its operands in the formats it wants (weights stored so,
//! broadcast when replicated; activations in another format rearranged) and
//! the repeat's entry and carry rearranges.

use std::collections::HashMap;

use super::Planner;
use super::operator_plans::{HeavyFormats, OperatorPlans};
use crate::layout::format::TensorFormat;
use crate::layout::operand_formats::{
    broadcast_vector_format, canonical_format, name_rotation, storage_format, with_precision,
};
use crate::layout::plan::{OpPlan, PlannedOp, PlannedValue, PlannedValueId, RearrangeReason};
use crate::model::graph::{Op, OpId, OpKind, Region, ValueId, ValueKind};

/// The plan of `op`: pass 1's for the heavy ops, a rearrange for views,
/// block-wise for the rest.
fn op_plan(plans: &OperatorPlans, op_id: OpId, op: &Op) -> OpPlan {
    if let Some(plan) = plans.matmul.get(&op_id) {
        OpPlan::MatMul(*plan)
    } else if let Some(plan) = plans.attention.get(&op_id) {
        OpPlan::Attention(*plan)
    } else if let OpKind::View(view) = &op.kind {
        OpPlan::Rearrange {
            view: view.clone(),
            reason: RearrangeReason::View,
        }
    } else {
        OpPlan::Blockwise
    }
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
    /// Pass 3, first part: one planned value per graph value, in pass 2's
    /// format (iterated weights once per iteration).
    pub(super) fn plan_values(&mut self) {
        let (graph, tiles) = (self.graph, self.settings.tiles);
        for id in graph.value_ids() {
            let value = graph.value(id);
            let iterations = match value.kind {
                ValueKind::Weight { iterated: true } => {
                    graph.repeat.as_ref().map_or(1, |repeat| repeat.iterations)
                }
                _ => 1,
            };
            self.values.push(PlannedValue {
                name: value.name.clone(),
                graph_value: Some(id),
                kind: value.kind,
                region: value.region,
                format: self.formats[id.0 as usize]
                    .clone()
                    .unwrap_or_else(|| canonical_format(value.shape, value.precision, tiles)),
                iterations,
            });
        }
    }

    /// Pass 3: operands, storage and rearranges. Every op in graph order,
    /// preceded by the rearranges its operands need; the repeat's entry
    /// before the first body op and its carry after the last.
    pub(super) fn plan_operands(
        &mut self,
        plans: &OperatorPlans,
        heavy: &HeavyFormats,
    ) -> Vec<PlannedOp> {
        let graph = self.graph;
        let mut ops = Vec::new();
        let mut entry_inserted = false;
        for op_id in graph.op_ids() {
            let op = graph.op(op_id);
            if let Some(repeat) = &graph.repeat
                && op.region == Region::Body
                && !entry_inserted
            {
                entry_inserted = true;
                ops.push(self.rearrange_op(
                    "repeat.entry",
                    PlannedValueId(repeat.initial.0),
                    PlannedValueId(repeat.carried_input.0),
                    RearrangeReason::RepeatEntry,
                    Region::Prologue,
                ));
            }
            let inputs = self.operands(op_id, op, &heavy.required, &mut ops);
            ops.push(PlannedOp {
                name: op.name.clone(),
                graph_op: Some(op_id),
                kind: op.kind.clone(),
                plan: op_plan(plans, op_id, op),
                inputs,
                output: PlannedValueId(op.output.0),
                region: op.region,
            });
            let next_region = graph.ops.get(op_id.0 as usize + 1).map(|next| next.region);
            if let Some(repeat) = &graph.repeat
                && op.region == Region::Body
                && next_region != Some(Region::Body)
            {
                ops.push(self.rearrange_op(
                    "repeat.carry",
                    PlannedValueId(repeat.carried_output.0),
                    PlannedValueId(repeat.carried_input.0),
                    RearrangeReason::RepeatCarry,
                    Region::Body,
                ));
            }
        }
        ops
    }

    /// The planned operands of `op`, each in the format the op wants: a
    /// weight is stored so (broadcast when replicated), an activation in
    /// another format is rearranged. The rearranges go to `ops`.
    fn operands(
        &mut self,
        op_id: OpId,
        op: &Op,
        required: &HashMap<(OpId, usize), TensorFormat>,
        ops: &mut Vec<PlannedOp>,
    ) -> Vec<PlannedValueId> {
        let output_format = self.values[op.output.0 as usize].format.clone();
        let mut inputs = Vec::with_capacity(op.inputs.len());
        for (slot, &input) in op.inputs.iter().enumerate() {
            let input_value = self.graph.value(input);
            let wanted = match (&op.kind, slot) {
                (OpKind::MatMul { .. } | OpKind::Attention { .. }, _) => {
                    required.get(&(op_id, slot)).cloned()
                }
                (OpKind::View(_), _) => None,
                (OpKind::LayerNorm { .. }, 1 | 2) => Some(broadcast_vector_format(
                    &output_format,
                    input_value.precision,
                    self.settings.tiles,
                )),
                _ => Some(with_precision(&output_format, input_value.precision)),
            };
            let planned_input = PlannedValueId(input.0);
            inputs.push(match wanted {
                None => planned_input,
                Some(wanted) => self.operand_in(op, slot, input, wanted, ops),
            });
        }
        inputs
    }

    /// Operand `slot` of `op` (graph value `input`) in the format `wanted`.
    fn operand_in(
        &mut self,
        op: &Op,
        slot: usize,
        input: ValueId,
        wanted: TensorFormat,
        ops: &mut Vec<PlannedOp>,
    ) -> PlannedValueId {
        let input_value = self.graph.value(input);
        let planned_input = PlannedValueId(input.0);
        if let ValueKind::Weight { .. } = input_value.kind {
            let storage = storage_format(
                &wanted,
                name_rotation(&input_value.name),
                self.settings.tiles,
            );
            self.values[input.0 as usize].format = storage;
            if wanted.replicas == 1 {
                return planned_input;
            }
            self.rearranged_operand(
                op,
                slot,
                planned_input,
                wanted,
                ("broadcast", RearrangeReason::WeightBroadcast),
                ops,
            )
        } else if self.values[input.0 as usize].format == wanted {
            planned_input
        } else {
            self.rearranged_operand(
                op,
                slot,
                planned_input,
                wanted,
                ("rearrange", RearrangeReason::OperandFormat),
                ops,
            )
        }
    }

    /// A new value `OP.SLOT` in `format`, made from `input` by a rearrange
    /// `OP.SLOT.SUFFIX` pushed to `ops`.
    fn rearranged_operand(
        &mut self,
        op: &Op,
        slot: usize,
        input: PlannedValueId,
        format: TensorFormat,
        (suffix, reason): (&str, RearrangeReason),
        ops: &mut Vec<PlannedOp>,
    ) -> PlannedValueId {
        let operand = self.new_value(
            format!("{}.{}", op.name, slot_name(&op.kind, slot)),
            format,
            op.region,
        );
        ops.push(self.rearrange_op(
            &format!("{}.{}.{suffix}", op.name, slot_name(&op.kind, slot)),
            input,
            operand,
            reason,
            op.region,
        ));
        operand
    }
}
