//! Assembly of the low program from per-op expansions: one allocation per
//! value block-replica (iterated weights hold one instance per layer), each
//! op's scratch, provenance names, and the step sequence: prologue, a
//! checkpoint, the Repeat with the body expanded once, a checkpoint, and the
//! epilogue. When the layer's output has the carried value's format, it is
//! written straight into the carried value's allocations (by then the
//! carried value has been read for the last time in the iteration), so the
//! carry moves nothing: its expansion, all local copies, is left out.

use std::collections::HashMap;

use super::expansion::{AllocationRef, OUTPUT_OPERAND, OpExpansion};
use super::program::{
    Allocation, AllocationId, LowProgram, Provenance, Reason, Step, ValueBinding,
};
use super::visit::step_locations_mut;
use crate::layout::format::MemoryClass;
use crate::layout::plan::{Layouts, OpPlan, PlannedOp, RearrangeReason};
use crate::model::graph::Region;

#[derive(Default)]
struct Names {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        id
    }
}

/// Alignment of a value block in bytes: 8 for data of either class, since a
/// paired 64-bit transfer needs 8-byte aligned source and destination
/// (IPU21.md) and a 4-aligned block would keep every transfer out of or into
/// it at 32 bits; 4 for code, and for a Repeat-bound block whose instance
/// size is no multiple of 8 (its instances follow each other, so the
/// second would lose the alignment; `place::check` refuses that).
fn alignment(class: MemoryClass, bytes: u32, iterations: u32) -> u32 {
    match class {
        MemoryClass::Code => 4,
        MemoryClass::Interleaved | MemoryClass::Standard
            if iterations > 1 && !bytes.is_multiple_of(8) =>
        {
            4
        }
        MemoryClass::Interleaved | MemoryClass::Standard => 8,
    }
}

fn set_provenance(step: &mut Step, op: u32, value: Option<u32>) {
    match step {
        Step::Kernels { provenance, .. }
        | Step::Copies { provenance, .. }
        | Step::Fills { provenance, .. }
        | Step::Exchange { provenance, .. } => {
            provenance.op = op;
            provenance.value = value;
        }
        Step::Repeat { body, .. } => body
            .iter_mut()
            .for_each(|inner| set_provenance(inner, op, value)),
        Step::Checkpoint { .. } => {}
    }
}

/// The Repeat's carry when it converts nothing: the op's index and the
/// carried output it reads (same format and instances as the carried input
/// it writes).
fn aliased_carry(layouts: &Layouts) -> Option<(usize, usize)> {
    let is_carry = |op: &PlannedOp| {
        matches!(
            op.plan,
            OpPlan::Rearrange {
                reason: RearrangeReason::RepeatCarry,
                ..
            }
        )
    };
    let index = layouts.ops.iter().position(is_carry)?;
    let carry = &layouts.ops[index];
    let (from, to) = (layouts.value(carry.inputs[0]), layouts.value(carry.output));
    (from.format == to.format && from.iterations == to.iterations)
        .then_some((index, carry.inputs[0].0 as usize))
}

/// Builds the low program. `expansions[i]` is the expansion of `layouts.ops[i]`.
pub fn assemble(layouts: &Layouts, expansions: &[&OpExpansion], tiles: u32) -> LowProgram {
    let carry = aliased_carry(layouts);
    let mut names = Names::default();
    let mut allocations = Vec::new();
    let mut producers: HashMap<u32, u32> = HashMap::new();
    for op in &layouts.ops {
        producers
            .entry(op.output.0)
            .or_insert_with(|| names.intern(&op.name));
    }
    let mut values = Vec::with_capacity(layouts.values.len());
    for (index, value) in layouts.values.iter().enumerate() {
        let value_name = names.intern(&value.name);
        let op_name = producers
            .get(&(index as u32))
            .copied()
            .unwrap_or(value_name);
        if carry.is_some_and(|(_, carried_output)| carried_output == index) {
            // Bound to the carried input's allocations below.
            values.push(ValueBinding {
                name: value_name,
                planned_value: index as u32,
                allocations: Vec::new(),
            });
            continue;
        }
        let format = &value.format;
        let mut ids = Vec::with_capacity(format.tiles.len());
        for &tile in format.tiles.iter() {
            let id = allocations.len() as u32;
            ids.push(AllocationId(id));
            allocations.push(Allocation {
                tile,
                bytes: format.block_bytes(),
                alignment: alignment(format.class, format.block_bytes(), value.iterations),
                class: format.class,
                alias_group: id,
                iterations: value.iterations,
                provenance: Provenance {
                    op: op_name,
                    value: Some(value_name),
                    reason: Reason::ValueBlock,
                },
            });
        }
        values.push(ValueBinding {
            name: value_name,
            planned_value: index as u32,
            allocations: ids,
        });
    }
    if let Some((carry_op, carried_output)) = carry {
        let carried_input = layouts.ops[carry_op].output.0 as usize;
        values[carried_output].allocations = values[carried_input].allocations.clone();
    }
    let mut prologue = Vec::new();
    let mut body = Vec::new();
    let mut epilogue = Vec::new();
    for (index, (op, expansion)) in layouts.ops.iter().zip(expansions).enumerate() {
        if carry.is_some_and(|(carry_op, _)| carry_op == index) {
            continue;
        }
        let op_name = names.intern(&op.name);
        let value_name = names.intern(&layouts.value(op.output).name);
        let scratch_base = allocations.len() as u32;
        for scratch in &expansion.scratch {
            let id = allocations.len() as u32;
            allocations.push(Allocation {
                tile: scratch.tile,
                bytes: scratch.bytes,
                alignment: scratch.alignment,
                class: scratch.class,
                alias_group: id,
                iterations: 1,
                provenance: Provenance {
                    op: op_name,
                    value: Some(value_name),
                    reason: scratch.reason,
                },
            });
        }
        let table: Vec<AllocationId> = expansion
            .references
            .iter()
            .map(|reference| match *reference {
                AllocationRef::Value { operand, slot } => {
                    let value = if operand == OUTPUT_OPERAND {
                        op.output
                    } else {
                        op.inputs[operand as usize]
                    };
                    values[value.0 as usize].allocations[slot as usize]
                }
                AllocationRef::Scratch { index } => AllocationId(scratch_base + index),
            })
            .collect();
        let target = match op.region {
            Region::Prologue => &mut prologue,
            Region::Body => &mut body,
            Region::Epilogue => &mut epilogue,
        };
        for step in &expansion.steps {
            let mut step = step.clone();
            step_locations_mut(&mut step, &mut |location| {
                location.allocation = table[location.allocation.0 as usize];
            });
            set_provenance(&mut step, op_name, Some(value_name));
            target.push(step);
        }
    }
    let mut steps = prologue;
    if let Some(repeat) = &layouts.repeat {
        steps.push(Step::Checkpoint {
            name: names.intern("checkpoint.before_repeat"),
        });
        steps.push(Step::Repeat {
            iterations: repeat.iterations,
            body,
        });
        steps.push(Step::Checkpoint {
            name: names.intern("checkpoint.after_repeat"),
        });
    } else {
        steps.extend(body);
    }
    steps.extend(epilogue);
    LowProgram {
        tiles,
        names: names.names,
        allocations,
        steps,
        values,
    }
}
