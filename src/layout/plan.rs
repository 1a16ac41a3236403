//! The layout stage's result: every value (graph values plus the operand
//! and storage values layouts introduce) with its `TensorFormat`, and every
//! op in execution order with its operator plan. Explicit `Rearrange` ops
//! appear wherever a consumer needs a different format than its producer
//! gives, and `Cast` ops wherever precision changes.
//!
//! Owns the data types only; `planner` builds them.

use serde::Serialize;

use super::cost::{AttentionPlan, MatMulPlan};
use super::format::TensorFormat;
use super::overrides::Partition;
use crate::model::graph::{OpId, OpKind, Region, ValueId, ValueKind, ViewKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PlannedValueId(pub u32);

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct PlannedValue {
    pub name: String,
    /// The graph value this is, when it is one (operand copies are not).
    pub graph_value: Option<ValueId>,
    pub kind: ValueKind,
    pub region: Region,
    pub format: TensorFormat,
    /// Instances held in storage: the layer count for iterated weights.
    pub iterations: u32,
}

/// Why a `Rearrange` exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RearrangeReason {
    /// A graph view (head split/merge, row selection).
    View,
    /// A consumer needs another format than its producer gives.
    OperandFormat,
    /// A stored weight is replicated to the tiles that use it.
    WeightBroadcast,
    /// The Repeat's carried value is initialised before the loop.
    RepeatEntry,
    /// The Repeat's carried value is updated at the end of the body.
    RepeatCarry,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum OpPlan {
    MatMul(MatMulPlan),
    Attention(AttentionPlan),
    /// Row-wise or element-wise work on the output format's blocks.
    Blockwise,
    Rearrange {
        view: ViewKind,
        reason: RearrangeReason,
    },
}

impl OpPlan {
    /// The partition of a matrix product or attention plan, as a layout
    /// override would write it.
    pub fn partition(&self) -> Option<Partition> {
        match self {
            OpPlan::MatMul(plan) => Some(Partition::MatMul {
                rows: plan.row_parts,
                cols: plan.col_parts,
                reduction: plan.reduction_parts,
                order: plan.order,
            }),
            OpPlan::Attention(plan) => Some(Partition::Attention {
                queries: plan.query_parts,
                keys: plan.key_parts,
                order: plan.order,
            }),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannedOp {
    /// Stable provenance path (`layer.mlp.up`, `layer.mlp.up.a`).
    pub name: String,
    /// The graph op this implements (inserted rearranges have none).
    pub graph_op: Option<OpId>,
    /// The graph op's kind, or `View(Identity)` for inserted rearranges.
    pub kind: OpKind,
    pub plan: OpPlan,
    pub inputs: Vec<PlannedValueId>,
    pub output: PlannedValueId,
    pub region: Region,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct PlannedRepeat {
    pub iterations: u32,
    pub carried_input: PlannedValueId,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Layouts {
    pub values: Vec<PlannedValue>,
    pub ops: Vec<PlannedOp>,
    pub repeat: Option<PlannedRepeat>,
    pub output: PlannedValueId,
    /// Resident weight bytes on the most loaded tile, and that tile.
    pub resident_weight_bytes_max: u64,
    pub resident_weight_tile: u32,
}

impl Layouts {
    pub fn value(&self, id: PlannedValueId) -> &PlannedValue {
        &self.values[id.0 as usize]
    }

    pub fn rearrange_count(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| matches!(op.plan, OpPlan::Rearrange { .. }))
            .count()
    }
}
