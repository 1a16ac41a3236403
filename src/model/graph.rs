//! The shaped SSA graph of a workload: values with shapes and precisions, and
//! the operators that produce them, with one `Repeat` region over the layers.
//!
//! Owns the graph's plain data types only. It knows nothing about tiles,
//! formats or memory: those belong to `layout` and `expand`. Every value and
//! op carries a stable name path (`layer.mlp.up`) that later stages use as
//! identity; positions in the vectors are an implementation detail.

use serde::Serialize;

use crate::numerics::dot::ActivationStore;

/// A logical tensor shape: `groups` independent matrices of `rows x cols`.
/// Activations use one group; attention operands use `batch * heads` groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Shape {
    pub groups: u32,
    pub rows: u32,
    pub cols: u32,
}

impl Shape {
    pub fn matrix(rows: u32, cols: u32) -> Shape {
        Shape {
            groups: 1,
            rows,
            cols,
        }
    }

    pub fn elements(&self) -> u64 {
        self.groups as u64 * self.rows as u64 * self.cols as u64
    }
}

/// Element precision of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Precision {
    F32,
    F16,
    /// FP8 F143 with the workload's tensor-wide power-of-two scale.
    F8,
    /// An activation stored in FP8 F143 at a power-of-two scale (code `c`
    /// means `decode(c) x 2^scale`, as the FP8 products read it): written so
    /// by its producer (the cast fused into its output) for the FP8-input
    /// matrix products that read it (`crate::layout::fp8_activations`).
    F8Activation {
        scale: i8,
    },
}

impl Precision {
    /// How an activation of this precision is stored, for the kernels that
    /// read or write it (FP16 unless its producer stores FP8).
    pub fn activation_store(self) -> ActivationStore {
        match self {
            Precision::F8Activation { scale } => ActivationStore::Fp8 { scale },
            _ => ActivationStore::F16,
        }
    }

    pub fn bytes(self) -> u32 {
        match self {
            Precision::F32 => 4,
            Precision::F16 => 2,
            Precision::F8 | Precision::F8Activation { .. } => 1,
        }
    }
}

/// Which part of the program a value or op belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Region {
    /// Before the layer `Repeat` (patch embedding, positions).
    Prologue,
    /// The `Repeat` body, compiled once and run once per layer.
    Body,
    /// After the `Repeat` (final norm, pooling head).
    Epilogue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ValueKind {
    /// The host-provided image patches.
    Input,
    /// A parameter. `iterated` weights have one instance per layer and are
    /// bound per iteration of the `Repeat`.
    Weight { iterated: bool },
    /// Computed by an op.
    Activation,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ValueId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct OpId(pub u32);

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Value {
    pub name: String,
    pub shape: Shape,
    pub precision: Precision,
    pub kind: ValueKind,
    pub region: Region,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum GeluKind {
    Tanh,
    Erf,
}

/// One contiguous run of rows taken from one input of a `Rows` view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RowPiece {
    pub input: u32,
    pub first_row: u32,
    pub rows: u32,
}

/// Pure data movement: each output element is one input element.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ViewKind {
    /// `[1, images*tokens, cols]` columns `offset + h*dim ..` become group
    /// `image*heads + h` of `[images*heads, tokens, dim]`.
    SplitHeads {
        heads: u32,
        head_dim: u32,
        tokens: u32,
        column_offset: u32,
    },
    /// The inverse of `SplitHeads` (with `column_offset = 0`).
    MergeHeads {
        heads: u32,
        head_dim: u32,
        tokens: u32,
    },
    /// Output rows are the concatenation of row pieces of the inputs (all
    /// single-group, same column count).
    Rows { pieces: Vec<RowPiece> },
    /// Identity data movement (inserted by layouts to change format).
    Identity,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum OpKind {
    /// `out = a * b (+ bias)`: `a` FP16 `[1, m, k]`, `b` an FP8 weight
    /// `[1, k, n]`, optional FP16 bias `[1, 1, n]`; FP16 output.
    MatMul {
        bias: bool,
    },
    /// Row-wise LayerNorm over columns; inputs `[x, gamma, beta]`.
    LayerNorm {
        epsilon: f32,
    },
    Gelu {
        kind: GeluKind,
    },
    /// `a + b`, element-wise, on equal shapes (broadcasts are `Rows` views).
    Add,
    /// Scaled dot-product attention per group: inputs `q [g, tq, d]`,
    /// `k [g, tk, d]`, `v [g, tk, d]`.
    Attention {
        scale: f32,
    },
    /// 2D rotary position embedding on `[g, tokens, d]`: the first half of
    /// the rotated pairs turn with the patch's grid row, the second half with
    /// its grid column; a class token (row 0) is not rotated.
    Rotary {
        grid: u32,
        class_token: bool,
    },
    View(ViewKind),
    /// Precision conversion (the final embedding leaves as FP32).
    Cast,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Op {
    pub name: String,
    pub kind: OpKind,
    pub inputs: Vec<ValueId>,
    pub output: ValueId,
    pub region: Region,
}

/// The layer loop. Before the first iteration `initial` (the prologue's
/// result) is copied into `carried_input`; the body reads `carried_input`
/// and produces `carried_output`, which is copied back into `carried_input`
/// at the end of every iteration. The epilogue reads `carried_input`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RepeatInfo {
    pub iterations: u32,
    pub initial: ValueId,
    pub carried_input: ValueId,
    pub carried_output: ValueId,
}

#[derive(Clone, Debug, PartialEq, Default, Serialize)]
pub struct Graph {
    pub values: Vec<Value>,
    pub ops: Vec<Op>,
    pub repeat: Option<RepeatInfo>,
    pub output: Option<ValueId>,
}

impl Graph {
    /// The names of the graph's matrix products and attention ops (whose
    /// `PV` product takes FP8 or FP16 inputs as a matrix product does),
    /// sorted, each once (the layers of the Repeat share an op, so a
    /// product of the layers is one name): the products a build names
    /// (`planning.matrix_inputs.OP`) and activation calibration's
    /// positions.
    pub fn product_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .ops
            .iter()
            .filter(|op| matches!(op.kind, OpKind::MatMul { .. } | OpKind::Attention { .. }))
            .map(|op| op.name.clone())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.0 as usize]
    }

    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.0 as usize]
    }

    pub fn op_ids(&self) -> impl Iterator<Item = OpId> + '_ {
        (0..self.ops.len() as u32).map(OpId)
    }

    pub fn value_ids(&self) -> impl Iterator<Item = ValueId> + '_ {
        (0..self.values.len() as u32).map(ValueId)
    }

    /// The op producing each value (`None` for inputs and weights).
    pub fn producers(&self) -> Vec<Option<OpId>> {
        let mut producers = vec![None; self.values.len()];
        for (index, op) in self.ops.iter().enumerate() {
            producers[op.output.0 as usize] = Some(OpId(index as u32));
        }
        producers
    }

    pub fn add_value(
        &mut self,
        name: impl Into<String>,
        shape: Shape,
        precision: Precision,
        kind: ValueKind,
        region: Region,
    ) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value {
            name: name.into(),
            shape,
            precision,
            kind,
            region,
        });
        id
    }

    /// Adds an op and its output activation (named after the op).
    pub fn add_op(
        &mut self,
        name: impl Into<String>,
        kind: OpKind,
        inputs: Vec<ValueId>,
        shape: Shape,
        precision: Precision,
        region: Region,
    ) -> ValueId {
        let name = name.into();
        let output = self.add_value(
            name.clone(),
            shape,
            precision,
            ValueKind::Activation,
            region,
        );
        self.ops.push(Op {
            name,
            kind,
            inputs,
            output,
            region,
        });
        output
    }

    pub fn parameter_count(&self) -> u64 {
        self.values
            .iter()
            .filter_map(|value| match value.kind {
                ValueKind::Weight { iterated } => {
                    let instances = if iterated {
                        self.repeat
                            .as_ref()
                            .map_or(1, |repeat| repeat.iterations as u64)
                    } else {
                        1
                    };
                    Some(value.shape.elements() * instances)
                }
                _ => None,
            })
            .sum()
    }
}
