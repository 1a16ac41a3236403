//! The low program: what every tile allocates and runs, as compact data.
//!
//! Allocations (bytes, alignment, memory class, alias group, iterations),
//! kernel runs with operand locations, local copies and zero fills as affine
//! row descriptors (never expanded into words), exchanges as struct-of-arrays
//! transfer lists, the layer `Repeat` with its iterated bindings, and
//! checkpoints. Every allocation and step carries provenance (op, value,
//! reason); the items of a step (runs, copies, transfers) inherit their
//! step's provenance.
//!
//! Owns the data types and their invariants only: `op_expansion` and
//! `assemble` build them, `crate::sim` executes them, `access` says what
//! each kernel reads and writes.

use serde::{Deserialize, Serialize};

use crate::layout::format::MemoryClass;
use crate::numerics::dot::{Accumulation, ActivationStore, ProductInputs};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AllocationId(pub u32);

/// An `f32` stored by bits so that programs compare and hash exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Real(pub u32);

impl Real {
    pub fn new(value: f32) -> Real {
        Real(value.to_bits())
    }
    pub fn get(self) -> f32 {
        f32::from_bits(self.0)
    }
}

/// Why an allocation or step exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Reason {
    /// One block (or replica) of a value.
    ValueBlock,
    /// Partial sums of a split reduction.
    PartialSums,
    /// Partial sums received from the other reduction tiles.
    ReceivedPartials,
    /// Attention scores or online-softmax state.
    AttentionScratch,
    /// Data movement between formats.
    Rearrange,
    /// Zeroing the padding of an operand block.
    Padding,
    /// The operator's computation.
    Compute,
    /// Reduce-scatter of partial sums.
    PartialExchange,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Provenance {
    /// Index into `LowProgram::names`: the op's name path.
    pub op: u32,
    /// Index into `LowProgram::names`: the value concerned, if any.
    pub value: Option<u32>,
    pub reason: Reason,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Allocation {
    pub tile: u32,
    /// Bytes of one instance.
    pub bytes: u32,
    pub alignment: u32,
    pub class: MemoryClass,
    /// Allocations of one alias group share storage: the group's first
    /// allocation is the root. Unaliased allocations are their own group.
    pub alias_group: u32,
    /// Instances stored consecutively (the layer count for iterated
    /// weights, bound per Repeat iteration with stride `bytes`).
    pub iterations: u32,
    pub provenance: Provenance,
}

/// A byte position inside an allocation. Inside a Repeat, a location in an
/// allocation with `iterations > 1` is bound per iteration: iteration `i`
/// reads `offset + i * bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    pub allocation: AllocationId,
    pub offset: u32,
}

/// A strided operand: `line` bytes between rows (or columns), `matrix`
/// bytes between groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operand {
    pub location: Location,
    pub line: u32,
    pub matrix: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ElementType {
    F32,
    F16,
    F8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GeluForm {
    Tanh,
    Erf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttentionKind {
    Materialized,
    Flash { key_block: u32 },
}

/// Where a matrix product's result goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MatMulOutput {
    /// Partial sums (precision of the accumulation) for a later reduction.
    Partial(Operand),
    /// Final FP16 result with the bias added (`valid_rows` rows written).
    Final {
        output: Operand,
        bias: Operand,
        valid_rows: u32,
        valid_cols: u32,
    },
}

/// One kernel invocation on one tile; shapes are the block's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kernel {
    /// `a [rows, reduction]` FP16 row-major times an FP8 column-major
    /// weight block `[reduction, cols]`. The kernel honours the blocks'
    /// valid extents: it reads `a`'s first `valid_rows` rows and
    /// `valid_reduction` columns and the weight's first `valid_cols` columns
    /// of `valid_reduction` codes, and treats the rest of both blocks as
    /// zero (so block padding is never read and needs no zero fill; the
    /// matrix unit still runs the whole block).
    MatMul {
        a: Operand,
        weight: Operand,
        output: MatMulOutput,
        rows: u32,
        reduction: u32,
        cols: u32,
        valid_rows: u32,
        valid_reduction: u32,
        valid_cols: u32,
        accumulation: Accumulation,
        /// What the matrix unit multiplies: FP16 activations by widened
        /// weights, or FP8 activations (rounded at their scale) by the
        /// FP8 weights.
        inputs: ProductInputs,
        /// How `a` is stored: FP16 (rounded here when `inputs` is FP8), or
        /// FP8 at `inputs`' scale, its producer having rounded it.
        activations: ActivationStore,
    },
    /// Sum of `count` partial slices (the first local, the others received
    /// consecutively) plus bias, rounded to FP16.
    ReduceBias {
        local: Operand,
        received: Operand,
        received_slice_bytes: u32,
        count: u32,
        partial: ElementType,
        bias: Operand,
        output: Operand,
        rows: u32,
        cols: u32,
    },
    LayerNorm {
        input: Operand,
        gamma: Operand,
        beta: Operand,
        output: Operand,
        rows: u32,
        cols: u32,
        epsilon: Real,
        /// FP16, or FP8 for the FP8 products that read it.
        store: ActivationStore,
    },
    Gelu {
        input: Operand,
        output: Operand,
        groups: u32,
        rows: u32,
        cols: u32,
        form: GeluForm,
        store: ActivationStore,
    },
    Add {
        a: Operand,
        b: Operand,
        output: Operand,
        groups: u32,
        rows: u32,
        cols: u32,
    },
    /// 2D rotary embedding; `first_row` is the token index of block row 0
    /// and `first_col` the column of block column 0.
    Rotary {
        input: Operand,
        output: Operand,
        groups: u32,
        rows: u32,
        cols: u32,
        first_row: u32,
        first_col: u32,
        head_dim: u32,
        grid: u32,
        class_token: bool,
    },
    Attention {
        query: Operand,
        key: Operand,
        value: Operand,
        output: Operand,
        scratch: Location,
        groups: u32,
        queries: u32,
        keys: u32,
        dimension: u32,
        scale: Real,
        kind: AttentionKind,
        store: ActivationStore,
        /// What the matrix unit multiplies in the `PV` product: FP16
        /// probabilities and values, or both rounded to FP8 on the tile
        /// (the probabilities at `PROBABILITY_SCALE` as the softmax writes
        /// them, the value block at the activation scale); `QK^T` is FP16.
        value_product: ProductInputs,
    },
    /// Partial softmax statistics of a query block against one key block,
    /// in FP32 per (query row, group) at byte
    /// `((row * stride_groups) + group) * (dimension + 2) * 4` of `partial`:
    /// max score, sum of weights, weighted values.
    AttentionPartial {
        query: Operand,
        key: Operand,
        value: Operand,
        partial: Location,
        groups: u32,
        stride_groups: u32,
        queries: u32,
        keys: u32,
        dimension: u32,
        scale: Real,
        kind: AttentionKind,
        /// As `Kernel::Attention`'s.
        value_product: ProductInputs,
    },
    /// Combines `count` partial slices (the first local, the others received
    /// consecutively, `slice_bytes` apart) into normalised FP16 outputs.
    AttentionCombine {
        local: Location,
        received: Location,
        slice_bytes: u32,
        count: u32,
        output: Operand,
        groups: u32,
        stride_groups: u32,
        queries: u32,
        dimension: u32,
        store: ActivationStore,
    },
    Cast {
        input: Operand,
        output: Operand,
        from: ElementType,
        to: ElementType,
        groups: u32,
        rows: u32,
        cols: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelRun {
    pub tile: u32,
    pub kernel: Kernel,
}

/// `rows` rows of `row_bytes`, read every `source_stride` bytes and written
/// every `destination_stride` bytes, on one tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocalCopy {
    pub tile: u32,
    pub source: Location,
    pub destination: Location,
    pub row_bytes: u32,
    pub rows: u32,
    pub source_stride: u32,
    pub destination_stride: u32,
}

/// `rows` rows of `row_bytes` zero bytes every `stride` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ZeroFill {
    pub tile: u32,
    pub destination: Location,
    pub row_bytes: u32,
    pub rows: u32,
    pub stride: u32,
}

/// One destination of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Destination {
    pub tile: u32,
    pub location: Location,
}

/// Transfers as struct-of-arrays. Transfer `t` sends `words[t]` 32-bit words
/// from `source_location[t]` on `source_tile[t]` to every destination in
/// `destinations[destination_start[t]..destination_start[t + 1]]`. Order is
/// semantic: later transfers may depend on earlier ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct TransferList {
    pub source_tile: Vec<u32>,
    pub source_location: Vec<Location>,
    pub words: Vec<u32>,
    pub destination_start: Vec<u32>,
    pub destinations: Vec<Destination>,
    /// Where each exchange merged into this one after the first begins
    /// (transfer indices, ascending; empty for an exchange that merged
    /// nothing). A scheduling hint only: orders may place the merged
    /// exchanges one after another (`crate::schedule::matching`).
    #[serde(default)]
    pub segment_starts: Vec<u32>,
}

impl TransferList {
    /// Drops the spare capacity its vectors grew by pushes (a list lives
    /// as long as the program or expansion memo that holds it).
    pub fn shrink_to_fit(&mut self) {
        self.source_tile.shrink_to_fit();
        self.source_location.shrink_to_fit();
        self.words.shrink_to_fit();
        self.destination_start.shrink_to_fit();
        self.destinations.shrink_to_fit();
        self.segment_starts.shrink_to_fit();
    }

    /// Room for exactly `other`'s transfers and destinations more.
    pub fn reserve_exact_for(&mut self, other: &TransferList) {
        self.source_tile.reserve_exact(other.source_tile.len());
        self.source_location
            .reserve_exact(other.source_location.len());
        self.words.reserve_exact(other.words.len());
        self.destination_start
            .reserve_exact(other.destination_start.len());
        self.destinations.reserve_exact(other.destinations.len());
        self.segment_starts
            .reserve_exact(other.segment_starts.len() + 1);
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    pub fn destinations_of(&self, transfer: usize) -> &[Destination] {
        let start = self.destination_start[transfer] as usize;
        let end = self
            .destination_start
            .get(transfer + 1)
            .map_or(self.destinations.len(), |&end| end as usize);
        &self.destinations[start..end]
    }

    pub fn push(
        &mut self,
        source_tile: u32,
        source: Location,
        words: u32,
        destinations: &[Destination],
    ) {
        self.source_tile.push(source_tile);
        self.source_location.push(source);
        self.words.push(words);
        self.destination_start.push(self.destinations.len() as u32);
        self.destinations.extend_from_slice(destinations);
    }

    pub fn total_words(&self) -> u64 {
        self.words.iter().map(|&words| words as u64).sum()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Step {
    Kernels {
        provenance: Provenance,
        runs: Vec<KernelRun>,
    },
    Copies {
        provenance: Provenance,
        copies: Vec<LocalCopy>,
    },
    Fills {
        provenance: Provenance,
        fills: Vec<ZeroFill>,
    },
    Exchange {
        provenance: Provenance,
        transfers: TransferList,
    },
    /// The layer loop: `body` runs `iterations` times; allocations with
    /// `iterations > 1` are bound to instance `i` in iteration `i`.
    Repeat { iterations: u32, body: Vec<Step> },
    /// A named program point (region boundary); a barrier for motion.
    Checkpoint { name: u32 },
}

impl Step {
    /// Drops the spare capacity of every exchange's transfer list in
    /// `steps` (and in the bodies of their Repeats).
    pub fn shrink_exchanges(steps: &mut [Step]) {
        for step in steps {
            match step {
                Step::Exchange { transfers, .. } => transfers.shrink_to_fit(),
                Step::Repeat { body, .. } => Step::shrink_exchanges(body),
                _ => {}
            }
        }
    }
}

/// Where the host reads and writes values.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ValueBinding {
    /// Index into `LowProgram::names`.
    pub name: u32,
    /// The planned value's index in the layouts.
    pub planned_value: u32,
    /// Allocation of `(block * replicas + replica)`.
    pub allocations: Vec<AllocationId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct LowProgram {
    pub tiles: u32,
    pub names: Vec<String>,
    pub allocations: Vec<Allocation>,
    pub steps: Vec<Step>,
    /// Every planned value's allocations, in planned-value order.
    pub values: Vec<ValueBinding>,
}

impl LowProgram {
    pub fn allocation(&self, id: AllocationId) -> &Allocation {
        &self.allocations[id.0 as usize]
    }

    pub fn name(&self, index: u32) -> &str {
        &self.names[index as usize]
    }
}
