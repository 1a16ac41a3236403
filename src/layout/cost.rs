//! The operator cost model: candidate partitions for matrix products and
//! attention, each costed in cycles from the target's rates (matrix-unit
//! MACs, exchange words per cycle, vector rates, sync) and checked against
//! the tile's SRAM working budget.
//!
//! Pure functions of shapes and machine facts, so the query layer can memoize
//! one costing per distinct problem. It does not build formats or know about
//! the graph.

use std::sync::Arc;

use serde::Serialize;

use super::format::{balanced_start, ceil_div, round_up};
use crate::numerics::dot::{Accumulation, ActivationStore, ProductInputs};
use crate::target::costs;
use crate::target::kernel_cost::{CostTable, KernelCall, MatrixInputs, call_cycles, composite};

/// A matrix product `[m, k] x [k, n]` to be distributed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MatMulProblem {
    pub m: u32,
    pub k: u32,
    pub n: u32,
    pub tiles: u32,
    /// Bytes of SRAM per tile available to this operator's working set.
    pub working_budget: u32,
    pub accumulation: Accumulation,
    /// What the matrix unit multiplies (`planning.matrix_inputs`).
    pub inputs: ProductInputs,
    /// How the activation operand arrives: FP8 when its producer stores
    /// it so (`crate::layout::fp8_activations`), then the product casts
    /// nothing and its operand moves half the words.
    pub activations: ActivationStore,
    /// The kernel cost model's constants the plan is priced with.
    #[serde(skip)]
    pub cost_table: CostTable,
    /// How many row partitions (`1..=limit`) the search considers.
    pub candidate_limit: u32,
}

/// Which partition coordinate varies slowest and which fastest when the
/// coordinates of a plan are numbered onto consecutive logical tiles. The
/// innermost axis decides which peers share a physical tile pair (logical
/// tiles `2i` and `2i + 1`), and so which peers read the same multicast
/// payload through one pair's receive resources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum TileOrder {
    /// Row blocks outermost, reduction (or key) blocks innermost: the
    /// cost model's default.
    #[default]
    RowsColumnsReduction,
    RowsReductionColumns,
    ColumnsRowsReduction,
    ColumnsReductionRows,
    ReductionRowsColumns,
    ReductionColumnsRows,
}

impl TileOrder {
    pub const ALL: [TileOrder; 6] = [
        TileOrder::RowsColumnsReduction,
        TileOrder::RowsReductionColumns,
        TileOrder::ColumnsRowsReduction,
        TileOrder::ColumnsReductionRows,
        TileOrder::ReductionRowsColumns,
        TileOrder::ReductionColumnsRows,
    ];

    /// The axes (0 rows, 1 columns, 2 reduction) from outermost to innermost.
    pub fn axes(self) -> [usize; 3] {
        match self {
            TileOrder::RowsColumnsReduction => [0, 1, 2],
            TileOrder::RowsReductionColumns => [0, 2, 1],
            TileOrder::ColumnsRowsReduction => [1, 0, 2],
            TileOrder::ColumnsReductionRows => [1, 2, 0],
            TileOrder::ReductionRowsColumns => [2, 0, 1],
            TileOrder::ReductionColumnsRows => [2, 1, 0],
        }
    }

    /// The build-file spelling: the axes' initials, outermost first
    /// (`rck`: rows, columns, reduction; for attention `q` and `k` stand for
    /// queries and keys, read as rows and reduction, groups outermost).
    pub fn name(self) -> &'static str {
        match self {
            TileOrder::RowsColumnsReduction => "rck",
            TileOrder::RowsReductionColumns => "rkc",
            TileOrder::ColumnsRowsReduction => "crk",
            TileOrder::ColumnsReductionRows => "ckr",
            TileOrder::ReductionRowsColumns => "krc",
            TileOrder::ReductionColumnsRows => "kcr",
        }
    }

    pub fn parse(text: &str) -> Option<TileOrder> {
        TileOrder::ALL
            .into_iter()
            .find(|order| order.name() == text)
    }

    /// The linear index of `coordinate` (rows, columns, reduction) in a grid
    /// of `parts` (the same axes) under this order.
    pub fn linear(self, coordinate: [u32; 3], parts: [u32; 3]) -> u32 {
        let [outer, middle, inner] = self.axes();
        (coordinate[outer] * parts[middle] + coordinate[middle]) * parts[inner] + coordinate[inner]
    }
}

/// The chosen partition of a matrix product: tile `(i, j, k)` computes the
/// partial product of row block `i`, column block `j` over reduction block
/// `k`; partial sums are reduce-scattered over the `k` tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MatMulPlan {
    pub row_parts: u32,
    pub col_parts: u32,
    pub reduction_parts: u32,
    pub block_rows: u32,
    pub block_reduction: u32,
    pub block_cols: u32,
    pub accumulation: Accumulation,
    /// What the matrix unit multiplies (`planning.matrix_inputs`).
    pub inputs: ProductInputs,
    pub cycles: u64,
    pub working_bytes: u32,
    /// How partition coordinates are numbered onto tiles.
    pub order: TileOrder,
}

impl MatMulPlan {
    pub fn tiles_used(&self) -> u32 {
        self.row_parts * self.col_parts * self.reduction_parts
    }

    /// Linear tile of partition coordinate `(i, j, k)`.
    pub fn tile(&self, row: u32, col: u32, reduction: u32) -> u32 {
        self.order.linear(
            [row, col, reduction],
            [self.row_parts, self.col_parts, self.reduction_parts],
        )
    }

    /// The tile order the planner gives the plan: the reduction blocks
    /// outermost, and innermost the axis that lets one of the plan's
    /// replicated operands move as paired 64-bit transfers. A replicated
    /// block multicast to whole partner pairs (logical tiles `2i` and
    /// `2i + 1`) takes half the events (IPU21.md), and a block's replicas
    /// are whole pairs when the axis it is replicated along is innermost
    /// with an even number of parts. The weight block (`block_reduction x
    /// block_cols` FP8 words, replicated over the row parts) pairs under
    /// `kcr`, and is taken whenever it can pair, even when the activation
    /// block is larger: a weight whose replicas are not whole pairs is
    /// stored on one of them (`operand_formats::storage_format`), which
    /// then copies its block locally, a copy call and, in the Repeat, patch
    /// words every layer. Otherwise the activation block (`block_rows x
    /// block_reduction` FP16, over the column parts) pairs under `krc`;
    /// neither even, `krc` too. Why the reduction outermost: the full
    /// searches of the three shipped models (2026-12-07) moved the
    /// products of the layer from `rkc`, `ckr` and `rck` to the orders
    /// that put it outermost, and the default builds of all three came
    /// closer to their searches with it on every product than with the
    /// earlier orders (docs/measurements.md, "The reduction outermost").
    pub fn pairing_order(&self) -> TileOrder {
        self.pairing().0
    }

    /// The order the planner falls back to where [`MatMulPlan::pairing_order`]
    /// crowds a tile's resident weights past its memory: the same paired
    /// axis innermost, the reduction blocks next to it (`ckr` for the
    /// weight, `rkc` for the activation block, the default `rck` where
    /// neither pairs). Which tiles a block's replicas occupy decides where
    /// its storage pieces are homed (`operand_formats::storage_format`),
    /// so the two orders spread the weights differently.
    pub fn fallback_order(&self) -> TileOrder {
        match self.pairing().0 {
            TileOrder::ReductionColumnsRows => TileOrder::ColumnsReductionRows,
            TileOrder::ReductionRowsColumns if self.pairing().1 > 0 => {
                TileOrder::RowsReductionColumns
            }
            _ => TileOrder::default(),
        }
    }

    /// `cycles` with the operand [`MatMulPlan::pairing_order`] pairs
    /// received at half its words: what the plan may cost in that order
    /// (the cost model itself prices the default order). The search ranks
    /// candidates by it too, so that a partition whose only merit is a
    /// pairable block is tried.
    pub fn paired_cycles(&self) -> u64 {
        self.cycles
            .saturating_sub(exchange_cycles(self.pairing().1.div_ceil(2)))
    }

    /// The pairing order and the words of the block it pairs.
    fn pairing(&self) -> (TileOrder, u64) {
        let pairs = |parts: u32| parts > 1 && parts.is_multiple_of(2);
        let weight_words = if pairs(self.row_parts) {
            u64::from(self.block_reduction) * u64::from(self.block_cols) / 4
        } else {
            0
        };
        let operand_words = if pairs(self.col_parts) {
            u64::from(self.block_rows) * u64::from(self.block_reduction) / 2
        } else {
            0
        };
        match (weight_words, operand_words) {
            (0, 0) => (TileOrder::ReductionRowsColumns, 0),
            (weight, _) if weight > 0 => (TileOrder::ReductionColumnsRows, weight),
            (_, operand) => (TileOrder::ReductionRowsColumns, operand),
        }
    }

    /// The partition as the build file writes it: `ROWSxCOLSxREDUCTION`.
    pub fn partition(&self) -> String {
        format!(
            "{}x{}x{}",
            self.row_parts, self.col_parts, self.reduction_parts
        )
    }

    /// Whether the reduced slices are ragged: the row blocks are not a
    /// multiple of `reduction_parts` rows, so each block's rows are dealt
    /// into balanced slices (the output format's `row_starts`).
    pub fn ragged_slices(&self) -> bool {
        self.reduction_parts > 1 && !self.block_rows.is_multiple_of(self.reduction_parts)
    }

    /// The most rows one reduced slice holds.
    pub fn slice_rows(&self) -> u32 {
        ceil_div(self.block_rows, self.reduction_parts)
    }

    /// Reduced slice `slice` of row block `row_block` of an `m`-row product:
    /// its first row inside the block and its row count. Even slices are
    /// `slice_rows` each (the output's edge clips the last); ragged ones
    /// deal the block's rows out balanced, the first ones a row longer.
    pub fn slice(&self, m: u32, row_block: u32, slice: u32) -> (u32, u32) {
        let parts = self.reduction_parts;
        if !self.ragged_slices() {
            let rows = self.slice_rows();
            return (slice * rows, rows);
        }
        let block_rows = self
            .block_rows
            .min(m.saturating_sub(row_block * self.block_rows));
        let start = balanced_start(block_rows, parts, slice);
        (start, balanced_start(block_rows, parts, slice + 1) - start)
    }

    /// The first row of every reduced slice of an `m`-row product, then
    /// `m`, when the slices are ragged (`None` when they are even).
    pub fn output_row_starts(&self, m: u32) -> Option<Arc<[u32]>> {
        if !self.ragged_slices() {
            return None;
        }
        let mut starts = Vec::with_capacity((self.row_parts * self.reduction_parts + 1) as usize);
        for row_block in 0..self.row_parts {
            for slice in 0..self.reduction_parts {
                starts.push(row_block * self.block_rows + self.slice(m, row_block, slice).0);
            }
        }
        starts.push(m);
        Some(Arc::from(starts))
    }

    pub fn partial_bytes(&self) -> u32 {
        match self.accumulation {
            Accumulation::F32 => 4,
            Accumulation::F16 => 2,
        }
    }

    /// What one tile holds while the product runs, by part (bytes); their
    /// sum is `working_bytes`.
    pub fn working_parts(&self) -> Vec<(&'static str, u64)> {
        let (rows, reduction, cols, parts) = (
            u64::from(self.block_rows),
            u64::from(self.block_reduction),
            u64::from(self.block_cols),
            u64::from(self.reduction_parts),
        );
        let partial = u64::from(self.partial_bytes());
        let slice_rows = u64::from(self.slice_rows());
        vec![
            ("input block (FP16)", rows * reduction * 2),
            (
                "received weight block (FP8)",
                if self.row_parts > 1 {
                    reduction * cols
                } else {
                    0
                },
            ),
            ("partial sums", rows * cols * partial),
            (
                "received partial sums",
                (parts - 1) * slice_rows * cols * partial,
            ),
            ("output slice (FP16)", slice_rows * cols * 2),
            ("bias (FP16)", cols * 2),
        ]
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    #[error(
        "no partition of the {m} x {k} x {n} matrix product fits in {budget} bytes of working SRAM per tile on {tiles} tiles; \
         the smallest working set found needs {smallest} bytes"
    )]
    MatMulDoesNotFit {
        m: u32,
        k: u32,
        n: u32,
        tiles: u32,
        budget: u32,
        smallest: u32,
        /// The partition with the smallest working set, to say what fills it.
        smallest_plan: Option<MatMulPlan>,
    },
    #[error(
        "attention with {groups} groups of {queries} queries over {keys} keys (dimension {dimension}) needs {needed} bytes per tile, \
         more than the {budget} bytes of working SRAM available"
    )]
    AttentionDoesNotFit {
        groups: u32,
        queries: u32,
        keys: u32,
        dimension: u32,
        needed: u32,
        budget: u32,
        /// The plan with the smallest working set, to say what fills it.
        smallest_plan: Option<AttentionPlan>,
    },
}

/// Events to move `words` over one tile's exchange port.
pub(super) fn exchange_cycles(words: u64) -> u64 {
    words.div_ceil(costs::EXCHANGE_WORDS_PER_EVENT_PER_DIRECTION)
}

/// Cost of one partition, or `None` when its blocks do not make sense.
fn matmul_candidate(
    problem: &MatMulProblem,
    row_parts: u32,
    reduction_parts: u32,
) -> Option<MatMulPlan> {
    let tiles_for_columns = problem.tiles / (row_parts * reduction_parts);
    if tiles_for_columns == 0 {
        return None;
    }
    let col_parts_wanted = tiles_for_columns.min(ceil_div(problem.n, 2));
    matmul_partition(problem, row_parts, col_parts_wanted, reduction_parts)
}

/// Cost of the partition into (about) `row_parts x col_parts_wanted x
/// reduction_parts` blocks, or `None` when its blocks do not make sense or
/// it needs more tiles than the problem has.
pub fn matmul_partition(
    problem: &MatMulProblem,
    row_parts: u32,
    col_parts_wanted: u32,
    reduction_parts: u32,
) -> Option<MatMulPlan> {
    if row_parts == 0 || reduction_parts == 0 || col_parts_wanted == 0 {
        return None;
    }
    if u64::from(row_parts) * u64::from(col_parts_wanted) * u64::from(reduction_parts)
        > u64::from(problem.tiles)
    {
        return None;
    }
    // Row blocks of `ceil(m / row_parts)` rows; each is reduce-scattered
    // in `reduction_parts` balanced slices (`MatMulPlan::slice`) when every
    // block has a row per slice, else (a short last block) the blocks are
    // padded to a multiple of `reduction_parts` rows and sliced evenly.
    let even_rows = ceil_div(problem.m, row_parts);
    let last_rows = problem.m - (ceil_div(problem.m, even_rows) - 1) * even_rows;
    let block_rows = if last_rows >= reduction_parts {
        even_rows
    } else {
        round_up(even_rows, reduction_parts)
    };
    // FP8 weight columns are exchanged as whole 32-bit words.
    let block_reduction = round_up(ceil_div(problem.k, reduction_parts), 4);
    let block_cols = round_up(ceil_div(problem.n, col_parts_wanted), 2);
    let row_parts = ceil_div(problem.m, block_rows);
    let reduction_parts_real = ceil_div(problem.k, block_reduction);
    if reduction_parts_real != reduction_parts {
        return None;
    }
    let col_parts = ceil_div(problem.n, block_cols);
    let partial_bytes = match problem.accumulation {
        Accumulation::F32 => 4u64,
        Accumulation::F16 => 2,
    };
    let (bm, bk, bn, pk) = (
        block_rows as u64,
        block_reduction as u64,
        block_cols as u64,
        reduction_parts as u64,
    );
    let slice_rows = bm.div_ceil(pk);
    // Priced as the estimate prices the kernel it becomes (the fitted
    // kernel cost model: weights widened, the product at the FP16 rate).
    let table = problem.cost_table;
    let bias = if pk > 1 { 0 } else { bm * bn };
    let inputs = match problem.inputs {
        ProductInputs::Fp16 => MatrixInputs::Fp16,
        ProductInputs::Fp8 { .. } => MatrixInputs::Fp8,
    };
    let compute = if problem.activations.is_fp8() {
        composite::product_of_fp8_activations(bm, bk, bn, bias, &table)
    } else {
        composite::product(bm, bk, bn, bias, inputs, &table)
    };
    let operand_words = bm * bk * u64::from(problem.activations.bytes()) / 4;
    let weight_words = if row_parts > 1 { bk * bn / 4 } else { 0 };
    let partial_words = (pk - 1) * slice_rows * bn * partial_bytes / 4;
    // The reduction streams every partial and writes FP16 (priced as the
    // estimate prices the reduce-bias kernel); unsplit, only the bias add.
    let reduce = if pk > 1 {
        call_cycles(
            KernelCall::Reduce {
                elements: slice_rows * bn,
                parts: pk,
            },
            &table,
        )
    } else {
        0
    };
    let phases = 1 + u64::from(row_parts > 1) + u64::from(pk > 1);
    let cycles = compute
        + exchange_cycles(operand_words + weight_words + partial_words)
        + reduce
        + phases * costs::GLOBAL_SYNC_CYCLES_PER_PHASE;
    let mut plan = MatMulPlan {
        row_parts,
        col_parts,
        reduction_parts,
        block_rows,
        block_reduction,
        block_cols,
        accumulation: problem.accumulation,
        inputs: problem.inputs,
        cycles,
        working_bytes: 0,
        order: TileOrder::default(),
    };
    let working: u64 = plan.working_parts().iter().map(|(_, bytes)| bytes).sum();
    plan.working_bytes = u32::try_from(working).unwrap_or(u32::MAX);
    Some(plan)
}

/// The most reduction parts a product is split into (model choice: more
/// parts add partial-sum traffic faster than they save matrix work).
pub const MAX_REDUCTION_PARTS: u32 = 16;

/// The cheapest feasible partition (ties broken by fewer tiles, then by the
/// partition's coordinates, so the choice is deterministic), in its
/// [`MatMulPlan::pairing_order`].
pub fn plan_matmul(problem: &MatMulProblem) -> Result<MatMulPlan, CostError> {
    let mut best: Option<MatMulPlan> = None;
    let mut smallest = u32::MAX;
    let mut smallest_plan = None;
    let mut compared = 0;
    let max_rows = problem
        .m
        .min(problem.candidate_limit.max(1))
        .min(problem.tiles);
    let max_reduction = (problem.k / 2).clamp(1, MAX_REDUCTION_PARTS);
    for row_parts in 1..=max_rows {
        for reduction_parts in 1..=max_reduction {
            if row_parts * reduction_parts > problem.tiles {
                break;
            }
            let Some(candidate) = matmul_candidate(problem, row_parts, reduction_parts) else {
                continue;
            };
            compared += 1;
            if candidate.working_bytes < smallest {
                smallest = candidate.working_bytes;
                smallest_plan = Some(candidate);
            }
            if candidate.working_bytes > problem.working_budget {
                continue;
            }
            let key = |plan: &MatMulPlan| {
                (
                    plan.cycles,
                    plan.tiles_used(),
                    plan.row_parts,
                    plan.reduction_parts,
                )
            };
            if best
                .as_ref()
                .is_none_or(|current| key(&candidate) < key(current))
            {
                best = Some(candidate);
            }
        }
    }
    match best {
        Some(mut plan) if compared > 0 => {
            plan.order = plan.pairing_order();
            Ok(plan)
        }
        _ => Err(CostError::MatMulDoesNotFit {
            m: problem.m,
            k: problem.k,
            n: problem.n,
            tiles: problem.tiles,
            budget: problem.working_budget,
            smallest,
            smallest_plan,
        }),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AttentionMethod {
    /// Scores of a tile's queries against all keys are formed, soft-maxed
    /// and multiplied by the values.
    Materialized,
    /// Online softmax over key blocks of `key_block` keys.
    Flash { key_block: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct AttentionProblem {
    pub groups: u32,
    pub queries: u32,
    pub keys: u32,
    pub dimension: u32,
    pub tiles: u32,
    pub working_budget: u32,
    /// `None` chooses by cost; otherwise the method is forced.
    pub forced_flash: Option<bool>,
    /// How the output is stored: FP8 when the products reading it take
    /// FP8 activations (the cast fused into the attention's output).
    pub output: ActivationStore,
    /// What the matrix unit multiplies in the `PV` product
    /// (`planning.matrix_inputs` or the op's override; the activation
    /// scale is the values').
    pub value_product: ProductInputs,
    /// The kernel cost model's constants the plan is priced with.
    #[serde(skip)]
    pub cost_table: CostTable,
}

/// Attention distributed over `(group block, query block, key block)`
/// tiles. Each tile holds its query block and one block of keys and values;
/// with more than one key block, every tile produces partial softmax
/// statistics `(max, sum, weighted values)` for its keys and the partials
/// are reduce-scattered over the key tiles and combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct AttentionPlan {
    pub block_groups: u32,
    pub query_parts: u32,
    pub block_queries: u32,
    pub key_parts: u32,
    pub block_keys: u32,
    pub method: AttentionMethod,
    pub cycles: u64,
    pub working_bytes: u32,
    /// Whether key blocks (the default) or query blocks are numbered
    /// fastest inside each group block.
    pub order: AttentionOrder,
    /// What the matrix unit multiplies in the `PV` product (the problem's).
    pub value_product: ProductInputs,
}

/// Which attention coordinate varies fastest on consecutive logical tiles
/// (group blocks are always outermost).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum AttentionOrder {
    /// Key blocks innermost: the key tiles that combine one query block's
    /// partial statistics are neighbours.
    #[default]
    KeysInner,
    /// Query blocks innermost: the tiles that read one key block are neighbours.
    QueriesInner,
}

impl AttentionOrder {
    pub const ALL: [AttentionOrder; 2] = [AttentionOrder::KeysInner, AttentionOrder::QueriesInner];

    /// The order the planner gives attention: key blocks outermost, as the
    /// reduction blocks of a matrix product are ([`MatMulPlan::pairing_order`];
    /// keys are what softmax and the `PV` product reduce over). A build
    /// file's partition without an order still means [`AttentionOrder::default`].
    pub const PLANNED: AttentionOrder = AttentionOrder::QueriesInner;

    /// The build-file spelling, outermost axis first: `qk` or `kq`.
    pub fn name(self) -> &'static str {
        match self {
            AttentionOrder::KeysInner => "qk",
            AttentionOrder::QueriesInner => "kq",
        }
    }

    pub fn parse(text: &str) -> Option<AttentionOrder> {
        AttentionOrder::ALL
            .into_iter()
            .find(|order| order.name() == text)
    }
}

impl AttentionPlan {
    /// Linear tile of `(group block, query block, key block)`.
    pub fn tile(&self, group_block: u32, query_block: u32, key_block: u32) -> u32 {
        match self.order {
            AttentionOrder::KeysInner => {
                (group_block * self.query_parts + query_block) * self.key_parts + key_block
            }
            AttentionOrder::QueriesInner => {
                (group_block * self.key_parts + key_block) * self.query_parts + query_block
            }
        }
    }

    /// The partition as the build file writes it: `QUERIESxKEYS`.
    pub fn partition(&self) -> String {
        format!("{}x{}", self.query_parts, self.key_parts)
    }

    /// Bytes of one query row's partial statistics: max, sum and `dimension` weighted sums.
    pub fn partial_row_bytes(dimension: u32) -> u32 {
        (dimension + 2) * 4
    }

    /// What one tile holds while attention runs, by part (bytes), for heads
    /// of `dimension`; their sum is `working_bytes`.
    pub fn working_parts(&self, dimension: u32) -> Vec<(&'static str, u64)> {
        let (groups, queries, keys, parts) = (
            u64::from(self.block_groups),
            u64::from(self.block_queries),
            u64::from(self.block_keys),
            u64::from(self.key_parts),
        );
        let line = u64::from(round_up(dimension * 2, 4));
        let partial_row = u64::from(Self::partial_row_bytes(dimension));
        let (own_partials, received_partials) = if parts > 1 {
            (
                groups * queries * partial_row,
                (parts - 1) * groups * (queries / parts) * partial_row,
            )
        } else {
            (0, 0)
        };
        let scratch = match self.method {
            AttentionMethod::Materialized => groups * queries * keys * 4,
            AttentionMethod::Flash { key_block } => {
                queries * (u64::from(key_block) + u64::from(dimension) + 2) * 4
            }
        };
        // With FP8 inputs the kernel casts its value block into FP8 panels
        // of its own (the probabilities go to FP8 within the scores).
        let value_cast = Self::fp8_value_bytes(self.value_product, groups, keys, dimension);
        let mut held = vec![
            ("query block (FP16)", groups * queries * line),
            ("key and value blocks (FP16)", groups * 2 * keys * line),
            ("output slice (FP16)", groups * (queries / parts) * line),
            ("partial statistics", own_partials),
            ("received partial statistics", received_partials),
            ("scores (FP32)", scratch),
        ];
        if value_cast > 0 {
            held.push(("value block cast (FP8)", value_cast));
        }
        held
    }

    /// Bytes of the FP8 copy of `groups x keys` value rows of `dimension`
    /// an FP8 `PV` product casts on the tile (rows of whole words); 0 with
    /// FP16 inputs.
    pub fn fp8_value_bytes(inputs: ProductInputs, groups: u64, keys: u64, dimension: u32) -> u64 {
        match inputs {
            ProductInputs::Fp16 => 0,
            ProductInputs::Fp8 { .. } => groups * keys * u64::from(round_up(dimension, 4)),
        }
    }
}
