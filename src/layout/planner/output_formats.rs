//! Pass 2 of the layout planner: output formats, forward. Who reads every
//! value, and the format a single-consumer view/rotary chain ends in, so
//! that views and rotary take the format their consumer wants and a head
//! split and its redistribution are one exchange.

use std::collections::HashMap;

use super::Planner;
use super::operator_plans::HeavyFormats;
use crate::layout::format::{ElementOrder, TensorFormat};
use crate::layout::operand_formats::{canonical_format, with_precision};
use crate::model::graph::{Graph, Op, OpId, OpKind, ValueId, ValueKind};

/// Who reads a value: `(op, slot)` pairs, with `CARRY_CONSUMER` for the
/// repeat's carry rearrange.
pub(super) type Consumers = Vec<Vec<(OpId, usize)>>;

/// The consumer standing for the carry rearrange.
const CARRY_CONSUMER: OpId = OpId(u32::MAX);

/// The readers of every value.
pub(super) fn consumers(graph: &Graph) -> Consumers {
    let mut consumers: Consumers = vec![Vec::new(); graph.values.len()];
    for op_id in graph.op_ids() {
        for (slot, input) in graph.op(op_id).inputs.iter().enumerate() {
            consumers[input.0 as usize].push((op_id, slot));
        }
    }
    if let Some(repeat) = &graph.repeat {
        // The carried output is also read by the carry rearrange.
        consumers[repeat.carried_output.0 as usize].push((CARRY_CONSUMER, 0));
    }
    consumers
}

/// The format a single-consumer view/rotary chain from `value` ends in, if a
/// heavy op. Through a rotary, a replicated target is not taken: rotating
/// every replica of a block costs each tile the whole block.
fn chain_target(
    graph: &Graph,
    consumers: &Consumers,
    required: &HashMap<(OpId, usize), TensorFormat>,
    value: ValueId,
) -> Option<TensorFormat> {
    let mut current = value;
    let mut through_rotary = false;
    loop {
        let users = &consumers[current.0 as usize];
        if users.len() != 1 || users[0].0 == CARRY_CONSUMER {
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
}

impl Planner<'_> {
    /// Pass 2: output formats, forward. Inputs and the carried input start
    /// canonical; heavy ops give their plan's output format; views take the
    /// format their single-consumer chain ends in; rotary keeps its input's
    /// format, and norms and element-wise ops keep it when they can.
    pub(super) fn plan_output_formats(&mut self, consumers: &Consumers, heavy: &HeavyFormats) {
        let (graph, tiles) = (self.graph, self.settings.tiles);
        for id in graph.value_ids() {
            let value = graph.value(id);
            if matches!(value.kind, ValueKind::Input)
                || graph
                    .repeat
                    .as_ref()
                    .is_some_and(|repeat| repeat.carried_input == id)
            {
                self.formats[id.0 as usize] =
                    Some(canonical_format(value.shape, value.precision, tiles));
            }
        }
        for op_id in graph.op_ids() {
            let op = graph.op(op_id);
            let format = self.output_format(op_id, op, consumers, heavy);
            self.formats[op.output.0 as usize] = Some(format);
        }
    }

    /// The format of `op`'s output, its inputs' formats known.
    fn output_format(
        &self,
        op_id: OpId,
        op: &Op,
        consumers: &Consumers,
        heavy: &HeavyFormats,
    ) -> TensorFormat {
        let (graph, tiles) = (self.graph, self.settings.tiles);
        let output = graph.value(op.output);
        let input_format = |slot: usize| self.formats[op.inputs[slot].0 as usize].clone();
        match &op.kind {
            OpKind::MatMul { .. } | OpKind::Attention { .. } => heavy.outputs[&op_id].clone(),
            OpKind::View(_) => chain_target(graph, consumers, &heavy.required, op.output)
                .unwrap_or_else(|| canonical_format(output.shape, output.precision, tiles)),
            OpKind::Rotary { .. } => match input_format(0) {
                Some(format) => format,
                None => canonical_format(output.shape, output.precision, tiles),
            },
            OpKind::LayerNorm { .. } => match input_format(0) {
                Some(format) if format.rows_complete() && format.replicas == 1 => {
                    with_precision(&format, output.precision)
                }
                _ => canonical_format(output.shape, output.precision, tiles),
            },
            OpKind::Gelu { .. } | OpKind::Add | OpKind::Cast => match input_format(0) {
                // FP8 blocks must start on whole words, so that every
                // exchange piece of them is whole words too.
                Some(format)
                    if format.order == ElementOrder::RowMajor
                        && (format.block[2] * output.precision.bytes()).is_multiple_of(4) =>
                {
                    with_precision(&format, output.precision)
                }
                _ => canonical_format(output.shape, output.precision, tiles),
            },
        }
    }
}
