//! Which FP8 decode table a matrix product uses for its weight operand:
//! the scale its weight tensor instance was quantised with (one scale for
//! every tensor under a fixed `fp8_scale`, one per tensor and layer under
//! `"auto"`). The scales are host data, loaded with the weights; a kernel
//! finds its own through the allocation holding its weight block: every
//! block-replica allocation of a weight value, and of every copy of it the
//! plan makes (a weight broadcast to the tiles that use it, a rearrange to
//! another format), bound per layer inside the repeat. Both simulators use
//! this; a weight block that belongs to no weight tensor, or a layer the
//! tensor does not have, is an error, never a default scale.

use std::collections::BTreeMap;

use crate::expand::program::{Kernel, LowProgram};
use crate::layout::plan::{Layouts, OpPlan};
use crate::model::graph::{Precision, ValueKind};
use crate::model::weights::Weights;
use crate::numerics::fp8;

/// The decode tables of every scale in use and, per allocation, the scales
/// of the weight tensor it holds.
pub struct WeightScales {
    /// Per allocation: index into `instance_scales`, for weight blocks.
    tensor_of_allocation: Vec<Option<u32>>,
    /// Per FP8 weight tensor: the scale of every instance.
    instance_scales: Vec<Vec<i32>>,
    /// The names of the weight tensors, for messages.
    names: Vec<String>,
    tables: BTreeMap<i32, Box<[f32; 256]>>,
    /// Handed to kernels that decode no weights.
    unused: Box<[f32; 256]>,
}

impl WeightScales {
    /// The scales of `weights` as `program` (expanded from `layouts`)
    /// places its weight tensors.
    pub fn new(program: &LowProgram, layouts: &Layouts, weights: &Weights) -> WeightScales {
        let mut scales = WeightScales {
            tensor_of_allocation: vec![None; program.allocations.len()],
            instance_scales: Vec::new(),
            names: Vec::new(),
            tables: BTreeMap::new(),
            unused: Box::new([0.0; 256]),
        };
        for (index, value) in layouts.values.iter().enumerate() {
            let (Some(graph_value), ValueKind::Weight { .. }, Precision::F8) =
                (value.graph_value, value.kind, value.format.precision)
            else {
                continue;
            };
            let (Some(data), Some(binding)) =
                (weights.tensors.get(&graph_value), program.values.get(index))
            else {
                // The host load reports a missing tensor by name.
                continue;
            };
            let tensor = scales.instance_scales.len() as u32;
            for allocation in &binding.allocations {
                if let Some(slot) = scales.tensor_of_allocation.get_mut(allocation.0 as usize) {
                    *slot = Some(tensor);
                }
            }
            for &scale in &data.scales {
                scales
                    .tables
                    .entry(scale)
                    .or_insert_with(|| Box::new(fp8::decode_table(scale)));
            }
            scales.instance_scales.push(data.scales.clone());
            scales.names.push(value.name.clone());
        }
        // Copies of a weight hold its blocks in another place or format:
        // they decode with its scales. Ops are in execution order, so a
        // copy of a copy follows its source.
        for op in &layouts.ops {
            let (OpPlan::Rearrange { .. }, [input]) = (&op.plan, op.inputs.as_slice()) else {
                continue;
            };
            let source = program.values.get(input.0 as usize).and_then(|binding| {
                binding
                    .allocations
                    .iter()
                    .find_map(|allocation| scales.allocation_tensor(allocation.0))
            });
            let (Some(tensor), Some(binding)) = (source, program.values.get(op.output.0 as usize))
            else {
                continue;
            };
            for allocation in &binding.allocations {
                if let Some(slot) = scales.tensor_of_allocation.get_mut(allocation.0 as usize) {
                    slot.get_or_insert(tensor);
                }
            }
        }
        scales
    }

    fn allocation_tensor(&self, allocation: u32) -> Option<u32> {
        self.tensor_of_allocation
            .get(allocation as usize)
            .copied()
            .flatten()
    }

    /// The decode table of `kernel`'s weight operand in `iteration` of the
    /// enclosing repeat: a weight with one instance per layer is read at
    /// the layer the iteration runs, whichever copy of it the kernel reads.
    pub fn table(&self, kernel: &Kernel, iteration: u32) -> Result<&[f32; 256], String> {
        let Kernel::MatMul { weight, .. } = kernel else {
            return Ok(&self.unused);
        };
        let allocation = weight.location.allocation.0;
        let tensor = self.allocation_tensor(allocation).ok_or_else(|| {
            format!(
                "the matrix product's weight operand (allocation {allocation}) holds no \
                     FP8 weight tensor, so its scale is unknown"
            )
        })? as usize;
        let instance = if self.instance_scales[tensor].len() > 1 {
            iteration
        } else {
            0
        };
        let scale = self.instance_scales[tensor]
            .get(instance as usize)
            .ok_or_else(|| {
                format!(
                    "weight `{}` has {} quantised instances, but layer {instance} reads it",
                    self.names[tensor],
                    self.instance_scales[tensor].len()
                )
            })?;
        Ok(&self.tables[scale])
    }
}
