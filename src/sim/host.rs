//! What the host writes before a program runs: every weight instance and
//! the input, with the allocations and format they go to. Shared by the
//! low-program interpreter and the package simulator, so both load exactly
//! the same data the same way.

use super::memory::SimError;
use crate::expand::program::{AllocationId, LowProgram};
use crate::layout::format::TensorFormat;
use crate::layout::plan::Layouts;
use crate::model::graph::ValueKind;
use crate::model::weights::Weights;

/// One host write: a logical tensor (and its FP8 codes, when FP8) for
/// instance `instance` of every block-replica allocation of a value.
pub struct HostWrite<'data> {
    pub allocations: &'data [AllocationId],
    pub format: &'data TensorFormat,
    pub values: &'data [f32],
    pub codes: &'data [u8],
    pub instance: u32,
}

/// Every host write of a program, in planned-value order.
pub fn host_writes<'data>(
    program: &'data LowProgram,
    layouts: &'data Layouts,
    weights: &'data Weights,
) -> Result<Vec<HostWrite<'data>>, SimError> {
    let mut writes = Vec::new();
    for (index, value) in layouts.values.iter().enumerate() {
        let Some(graph_value) = value.graph_value else {
            continue;
        };
        let allocations = program.values[index].allocations.as_slice();
        match value.kind {
            ValueKind::Weight { .. } => {
                let data = weights
                    .tensors
                    .get(&graph_value)
                    .ok_or_else(|| SimError::MissingValue(value.name.clone()))?;
                for instance in 0..data.instances {
                    writes.push(HostWrite {
                        allocations,
                        format: &value.format,
                        values: data.instance(instance),
                        codes: if data.codes.is_empty() {
                            &[]
                        } else {
                            data.instance_codes(instance)
                        },
                        instance,
                    });
                }
            }
            ValueKind::Input => writes.push(HostWrite {
                allocations,
                format: &value.format,
                values: &weights.input,
                codes: &[],
                instance: 0,
            }),
            ValueKind::Activation => {}
        }
    }
    Ok(writes)
}
