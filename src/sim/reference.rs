//! The FP32 reference: evaluates the graph itself (no layouts, no tiles) on
//! whole tensors in FP32, with the same quantised weights and input as the
//! compiled program, and the same kernel definitions (`numerics`) for
//! everything but the matrix products, which are FP32 general matrix
//! products (`matrixmultiply`; a projection split by columns over the
//! cores, attention's products one job per head, the heads over the cores:
//! every element sums over the reduction in one order on any thread count).
//! Operands are read where they are held, not copied.
//!
//! The parameters come through [`ReferenceParameters`]: a loaded
//! [`Weights`], or a source that makes each layer's tensors when they are
//! read (activation calibration streams the weights one layer at a time).
//! An observer may watch every op's operands as they are read.

use std::borrow::Cow;

use super::kernels::{RotaryPlace, rotate_row};
use super::memory::SimError;
use crate::model::graph::GeluKind;
use crate::model::graph::{Graph, Op, OpKind, Region, ValueId, ValueKind, ViewKind};
use crate::model::weights::Weights;
use crate::numerics::activation::{gelu_erf, gelu_tanh};
use crate::numerics::rows::{layer_norm_row, softmax_row_in_place};

/// Where the reference reads parameter values and the host input.
pub trait ReferenceParameters: Sync {
    /// Instance `instance` of weight `id` (instance 0 for a weight outside
    /// the repeated layers), as the program stores it.
    fn weight(&self, graph: &Graph, id: ValueId, instance: u32)
    -> Result<Cow<'_, [f32]>, SimError>;
    /// The image patches, FP16-rounded.
    fn input(&self) -> &[f32];
}

impl ReferenceParameters for Weights {
    fn weight(
        &self,
        graph: &Graph,
        id: ValueId,
        instance: u32,
    ) -> Result<Cow<'_, [f32]>, SimError> {
        let data = self
            .tensors
            .get(&id)
            .ok_or_else(|| SimError::MissingValue(graph.value(id).name.clone()))?;
        Ok(Cow::Borrowed(data.instance(instance)))
    }

    fn input(&self) -> &[f32] {
        &self.input
    }
}

impl ReferenceParameters for crate::model::weights::StreamedSeededWeights<'_> {
    fn weight(&self, _: &Graph, id: ValueId, instance: u32) -> Result<Cow<'_, [f32]>, SimError> {
        Ok(Cow::Owned(self.instance(id, instance)))
    }

    fn input(&self) -> &[f32] {
        crate::model::weights::StreamedSeededWeights::input(self)
    }
}

/// Watches the reference: called with every op and the values of its
/// inputs before the op runs (once per layer for an op of the Repeat).
pub type OperandObserver<'observer> = dyn FnMut(&Op, &[&[f32]]) + 'observer;

struct Evaluator<'graph, 'observer> {
    graph: &'graph Graph,
    parameters: &'graph dyn ReferenceParameters,
    values: Vec<Option<Vec<f32>>>,
    observer: Option<&'observer mut OperandObserver<'observer>>,
}

/// The values of `id` (instance `instance` of a weight of the Repeat),
/// borrowed where the evaluation or the parameters hold them.
fn operand<'values>(
    graph: &Graph,
    parameters: &'values dyn ReferenceParameters,
    values: &'values [Option<Vec<f32>>],
    id: ValueId,
    instance: u32,
) -> Result<Cow<'values, [f32]>, SimError> {
    let value = graph.value(id);
    match value.kind {
        ValueKind::Weight { iterated } => {
            parameters.weight(graph, id, if iterated { instance } else { 0 })
        }
        ValueKind::Input => Ok(Cow::Borrowed(parameters.input())),
        ValueKind::Activation => values[id.0 as usize]
            .as_deref()
            .map(Cow::Borrowed)
            .ok_or_else(|| SimError::MissingValue(value.name.clone())),
    }
}

impl Evaluator<'_, '_> {
    fn get(&self, id: ValueId, instance: u32) -> Result<Vec<f32>, SimError> {
        Ok(operand(self.graph, self.parameters, &self.values, id, instance)?.into_owned())
    }

    fn run_op(&mut self, index: usize, instance: u32) -> Result<(), SimError> {
        let op = &self.graph.ops[index];
        let result = {
            let inputs: Vec<Cow<'_, [f32]>> = {
                let _span = tracing::debug_span!("reference_operands", op = %op.name).entered();
                op.inputs
                    .iter()
                    .map(|&input| {
                        operand(self.graph, self.parameters, &self.values, input, instance)
                    })
                    .collect::<Result<_, _>>()?
            };
            if let Some(observer) = self.observer.as_mut() {
                let _span = tracing::debug_span!("reference_observer", op = %op.name).entered();
                let borrowed: Vec<&[f32]> = inputs.iter().map(|input| &**input).collect();
                observer(op, &borrowed);
            }
            let _span = tracing::debug_span!("reference_op", op = %op.name).entered();
            compute(self.graph, op, &inputs)?
        };
        self.values[op.output.0 as usize] = Some(result);
        Ok(())
    }
}

/// The values of `op`'s output from its inputs' values.
fn compute(graph: &Graph, op: &Op, inputs: &[Cow<'_, [f32]>]) -> Result<Vec<f32>, SimError> {
    let output_shape = graph.value(op.output).shape;
    let input_shape = |slot: usize| graph.value(op.inputs[slot]).shape;
    let result = match &op.kind {
        OpKind::MatMul { bias } => {
            let (m, k, n) = (
                output_shape.rows as usize,
                input_shape(0).cols as usize,
                output_shape.cols as usize,
            );
            let mut out = vec![0.0f32; m * n];
            check_product(&inputs[0], &inputs[1], m, k, n)?;
            product(
                Operand::rows(&inputs[0], k),
                Operand::rows(&inputs[1], n),
                (m, k, n),
                &mut out,
                Split::Columns,
            );
            if *bias {
                for row in out.chunks_exact_mut(n) {
                    row.iter_mut()
                        .zip(inputs[2].iter())
                        .for_each(|(value, bias)| *value += bias);
                }
            }
            out
        }
        OpKind::LayerNorm { epsilon } => {
            use rayon::prelude::*;
            let cols = output_shape.cols as usize;
            let mut out = vec![0.0f32; inputs[0].len()];
            inputs[0]
                .par_chunks_exact(cols)
                .zip(out.par_chunks_exact_mut(cols))
                .try_for_each(|(row, target)| {
                    layer_norm_row(row, &inputs[1], &inputs[2], *epsilon, target)
                })?;
            out
        }
        OpKind::Gelu { kind } => {
            use rayon::prelude::*;
            inputs[0]
                .par_iter()
                .map(|&x| match kind {
                    GeluKind::Tanh => gelu_tanh(x),
                    GeluKind::Erf => gelu_erf(x),
                })
                .collect()
        }
        OpKind::Add => inputs[0]
            .iter()
            .zip(inputs[1].iter())
            .map(|(a, b)| a + b)
            .collect(),
        OpKind::Cast => inputs[0].to_vec(),
        OpKind::Rotary { grid, class_token } => {
            let mut out = inputs[0].to_vec();
            let (rows, cols) = (output_shape.rows as usize, output_shape.cols as usize);
            for (row_index, row) in out.chunks_exact_mut(cols).enumerate() {
                let place = RotaryPlace {
                    token: (row_index % rows) as u32,
                    first_pair: 0,
                    head_dim: cols as u32,
                    grid: *grid,
                    class_token: *class_token,
                };
                rotate_row(row, place)?;
            }
            out
        }
        OpKind::Attention { scale } => {
            let q_shape = input_shape(0);
            let keys = input_shape(1).rows as usize;
            let (queries, d) = (q_shape.rows as usize, q_shape.cols as usize);
            let mut out = vec![0.0f32; inputs[0].len()];
            let groups = q_shape.groups as usize;
            if inputs[0].len() != groups * queries * d
                || inputs[1].len() != groups * keys * d
                || inputs[2].len() != groups * keys * d
            {
                return Err(SimError::MissingValue(format!(
                    "attention `{}`: operands do not have the shapes the graph gives",
                    op.name
                )));
            }
            use rayon::prelude::*;
            out.par_chunks_mut((queries * d).max(1))
                .enumerate()
                .try_for_each(|(group, out)| -> Result<(), SimError> {
                    let q = &inputs[0][group * queries * d..(group + 1) * queries * d];
                    let k = &inputs[1][group * keys * d..(group + 1) * keys * d];
                    let v = &inputs[2][group * keys * d..(group + 1) * keys * d];
                    let mut scores = vec![0.0f32; queries * keys];
                    product(
                        Operand::rows(q, d),
                        Operand::columns(k, d),
                        (queries, d, keys),
                        &mut scores,
                        Split::Whole,
                    );
                    for row in scores.chunks_exact_mut(keys.max(1)) {
                        softmax_row_in_place(row, *scale)?;
                    }
                    product(
                        Operand::rows(&scores, keys),
                        Operand::rows(v, d),
                        (queries, keys, d),
                        out,
                        Split::Whole,
                    );
                    Ok(())
                })?;
            out
        }
        OpKind::View(view) => {
            let shapes: Vec<_> = (0..op.inputs.len()).map(input_shape).collect();
            let mut out = vec![0.0f32; output_shape.elements() as usize];
            let (rows, cols) = (output_shape.rows, output_shape.cols);
            let mut piece_starts = Vec::new();
            if let ViewKind::Rows { pieces } = view {
                let mut start = 0;
                for piece in pieces {
                    piece_starts.push(start);
                    start += piece.rows;
                }
            }
            use rayon::prelude::*;
            let line_of = |line: usize| (line as u32 / rows.max(1), line as u32 % rows.max(1));
            out.par_chunks_mut(cols.max(1) as usize)
                .enumerate()
                .for_each(|(line, target)| {
                    let (group, row) = line_of(line);
                    for col in 0..cols {
                        let (input, g, r, c) = match view {
                            ViewKind::Identity => (0, group, row, col),
                            ViewKind::SplitHeads {
                                heads,
                                head_dim,
                                tokens,
                                column_offset,
                            } => (
                                0,
                                0,
                                (group / heads) * tokens + row,
                                column_offset + (group % heads) * head_dim + col,
                            ),
                            ViewKind::MergeHeads {
                                heads,
                                head_dim,
                                tokens,
                            } => (
                                0,
                                (row / tokens) * heads + col / head_dim,
                                row % tokens,
                                col % head_dim,
                            ),
                            ViewKind::Rows { pieces } => {
                                let index = piece_starts.partition_point(|&start| start <= row) - 1;
                                let piece = pieces[index];
                                (
                                    piece.input as usize,
                                    0,
                                    piece.first_row + row - piece_starts[index],
                                    col,
                                )
                            }
                        };
                        let shape = shapes[input];
                        target[col as usize] =
                            inputs[input][((g * shape.rows + r) * shape.cols + c) as usize];
                    }
                });
            out
        }
    };
    Ok(result)
}

/// A matrix operand: its values with the strides of its rows and columns.
#[derive(Clone, Copy)]
struct Operand<'a> {
    values: &'a [f32],
    row_stride: usize,
    column_stride: usize,
}

impl<'a> Operand<'a> {
    /// Row-major, `columns` to a row.
    fn rows(values: &'a [f32], columns: usize) -> Operand<'a> {
        Operand {
            values,
            row_stride: columns,
            column_stride: 1,
        }
    }

    /// The transpose of a row-major matrix of `rows` x `columns` rows:
    /// element (i, j) is `values[j * columns + i]`.
    fn columns(values: &'a [f32], columns: usize) -> Operand<'a> {
        Operand {
            values,
            row_stride: 1,
            column_stride: columns,
        }
    }
}

/// `Err` unless `a` is `m x k` and `b` is `k x n`, both row-major.
fn check_product(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Result<(), SimError> {
    if a.len() != m * k || b.len() != k * n {
        return Err(SimError::MissingValue(format!(
            "a matrix product of {m} x {k} by {k} x {n} read {} and {} values",
            a.len(),
            b.len()
        )));
    }
    Ok(())
}

/// Output columns per parallel job of a product, at least: each job packs
/// all of `a` again, so a product is cut into about two jobs per thread
/// (fewer for narrow products), in multiples of the kernel's 16 columns.
const COLUMN_BLOCK: usize = 64;

/// The columns of one job of a product with `n` output columns.
fn column_block(n: usize, split: Split) -> usize {
    match split {
        Split::Columns => {
            let jobs = 2 * rayon::current_num_threads().max(1);
            n.div_ceil(jobs).next_multiple_of(16).max(COLUMN_BLOCK)
        }
        Split::Whole => n,
    }
}

/// Whether a product is cut into column jobs over the cores, or made as
/// one job: attention's products, made per head in parallel already (one
/// job per head passes over the probabilities once for the few columns
/// of the values `V`, instead of packing them again for every job).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Split {
    Columns,
    Whole,
}

/// `out = a x b` in FP32 for `a` (`m x k`) and `b` (`k x n`), `out`
/// row-major `m x n`, its columns in blocks over the cores. Each element is
/// one FP32 dot product whose summation order depends only on `k` (the
/// library's fixed blocking), so the result is the same on any number of
/// threads. The callers check the operands' extents.
fn product(
    a: Operand,
    b: Operand,
    (m, k, n): (usize, usize, usize),
    out: &mut [f32],
    split: Split,
) {
    use rayon::prelude::*;
    debug_assert_eq!(out.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        return;
    }
    let block_columns = column_block(n, split);
    let blocks = n.div_ceil(block_columns);
    // Each job writes only its own columns of `out`: the pointer is shared
    // as an address and every write lands in a disjoint set of elements.
    let out_address = out.as_mut_ptr() as usize;
    (0..blocks).into_par_iter().for_each(|block| {
        let first = block * block_columns;
        let width = block_columns.min(n - first);
        // SAFETY: `a` holds element (i, p) at `i * row_stride + p *
        // column_stride` for i < m, p < k, and `b` element (p, j) for
        // p < k, j < n (checked by the callers against the shapes); `out`
        // is `m x n` row-major and this job writes columns
        // `first..first + width` only, which no other job writes.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                width,
                1.0,
                a.values.as_ptr(),
                a.row_stride as isize,
                a.column_stride as isize,
                b.values.as_ptr().add(first * b.column_stride),
                b.row_stride as isize,
                b.column_stride as isize,
                0.0,
                (out_address as *mut f32).add(first),
                n as isize,
                1,
            );
        }
    });
}

/// Evaluates the graph's output in FP32.
pub fn evaluate_reference(graph: &Graph, weights: &Weights) -> Result<Vec<f32>, SimError> {
    evaluate_reference_observed(graph, weights, None)
}

/// Evaluates the graph's output in FP32 from `parameters`, showing
/// `observer` every op's operands (the same evaluation as
/// [`evaluate_reference`], which is this without an observer).
pub fn evaluate_reference_observed<'observer>(
    graph: &Graph,
    parameters: &dyn ReferenceParameters,
    observer: Option<&'observer mut OperandObserver<'observer>>,
) -> Result<Vec<f32>, SimError> {
    let mut evaluator = Evaluator {
        graph,
        parameters,
        values: vec![None; graph.values.len()],
        observer,
    };
    for (index, op) in graph.ops.iter().enumerate() {
        if op.region == Region::Prologue {
            evaluator.run_op(index, 0)?;
        }
    }
    if let Some(repeat) = &graph.repeat {
        let mut carried = evaluator.get(repeat.initial, 0)?;
        for iteration in 0..repeat.iterations {
            evaluator.values[repeat.carried_input.0 as usize] = Some(carried);
            for (index, op) in graph.ops.iter().enumerate() {
                if op.region == Region::Body {
                    evaluator.run_op(index, iteration)?;
                }
            }
            carried = evaluator.get(repeat.carried_output, iteration)?;
        }
        evaluator.values[repeat.carried_input.0 as usize] = Some(carried);
    }
    for (index, op) in graph.ops.iter().enumerate() {
        if op.region == Region::Epilogue {
            evaluator.run_op(index, 0)?;
        }
    }
    let output = graph
        .output
        .ok_or_else(|| SimError::MissingValue("graph output".to_string()))?;
    evaluator.get(output, 0)
}
