//! Expansion: from layouts to the low program. Each op expands on its own
//! (`expand_op`) into kernel runs, local copies, fills and transfer lists
//! over local allocation references; `assemble` numbers allocations and
//! splices the ops into the prologue, the Repeat body (expanded once) and the
//! epilogue.
//!
//! Pure core: no salsa here. The per-op and whole-program queries live in
//! `crate::incremental`.

pub mod access;
pub mod assemble;
pub mod compute;
pub mod expansion;
mod partial_exchange;
pub mod program;
pub mod rearrange;
pub mod summary;
pub mod validate;
pub mod visit;

#[cfg(test)]
mod tests;

use crate::layout::format::TensorFormat;
use crate::layout::plan::{OpPlan, PlannedOp};
use crate::model::graph::OpKind;
use expansion::{ExpansionBuilder, OpExpansion};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "op `{op}`: a piece of {bytes} bytes at source offset {source_offset} / destination offset {destination_offset} is not whole 32-bit words; exchanges move words"
    )]
    Misaligned {
        op: String,
        bytes: u32,
        source_offset: u32,
        destination_offset: u32,
    },
    #[error("op `{op}`: cannot rearrange: {reason}")]
    UnsupportedRearrange { op: String, reason: String },
    #[error("op `{op}`: plan {plan} does not fit op kind {kind}")]
    PlanMismatch {
        op: String,
        plan: String,
        kind: String,
    },
}

/// Expands one planned op given its input and output formats.
pub fn expand_op(
    op: &PlannedOp,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) -> Result<OpExpansion, ExpandError> {
    let mut builder = ExpansionBuilder::default();
    match (&op.plan, &op.kind) {
        (OpPlan::Rearrange { view, .. }, _) => {
            rearrange::expand_rearrange(&mut builder, &op.name, view, inputs, output)?;
        }
        (OpPlan::MatMul(plan), OpKind::MatMul { .. }) => {
            compute::expand_matmul(&mut builder, plan, inputs, output)
        }
        (OpPlan::Attention(plan), OpKind::Attention { scale }) => {
            compute::expand_attention(&mut builder, plan, *scale, inputs, output)
        }
        (
            OpPlan::Blockwise,
            kind @ (OpKind::LayerNorm { .. }
            | OpKind::Gelu { .. }
            | OpKind::Add
            | OpKind::Rotary { .. }
            | OpKind::Cast),
        ) => compute::expand_blockwise(&mut builder, kind, inputs, output),
        (plan, kind) => {
            return Err(ExpandError::PlanMismatch {
                op: op.name.clone(),
                plan: format!("{plan:?}"),
                kind: format!("{kind:?}"),
            });
        }
    }
    Ok(builder.finish())
}
