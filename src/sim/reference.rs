//! The FP32 reference: evaluates the graph itself (no layouts, no tiles) on
//! whole tensors in FP32, with the same quantised weights and input as the
//! compiled program, and the same kernel definitions (`numerics`) for
//! everything but the matrix products, which are FP32 general matrix
//! products ([`super::reference_product`]: the same bits on any thread
//! count).
//! Operands are read where they are held, not copied.
//!
//! The parameters come through [`ReferenceParameters`]: a loaded
//! [`Weights`], or a source that makes each layer's tensors when they are
//! read (activation calibration streams the weights one layer at a time).
//! An observer may watch every op's operands as they are read.

use std::borrow::Cow;

use super::kernels::{RotaryPlace, rotate_row};
use super::memory::SimError;
use super::reference_product::{Operand, Split, check_product, product};
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
                Split::Cores,
            );
            if *bias {
                use rayon::prelude::*;
                out.par_chunks_exact_mut(n.max(1)).for_each(|row| {
                    row.iter_mut()
                        .zip(inputs[2].iter())
                        .for_each(|(value, bias)| *value += bias);
                });
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
            // Each line is copied in runs that are contiguous in their
            // input: a whole line, or one head's columns of a merge.
            let source = |line: usize, col: u32| {
                let (group, row) = line_of(line);
                match view {
                    ViewKind::Identity => (0, group, row, col, cols - col),
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
                        cols - col,
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
                        head_dim - col % head_dim,
                    ),
                    ViewKind::Rows { pieces } => {
                        let index = piece_starts.partition_point(|&start| start <= row) - 1;
                        let piece = pieces[index];
                        (
                            piece.input as usize,
                            0,
                            piece.first_row + row - piece_starts[index],
                            col,
                            cols - col,
                        )
                    }
                }
            };
            out.par_chunks_mut(cols.max(1) as usize)
                .enumerate()
                .for_each(|(line, target)| {
                    let mut col = 0;
                    while col < cols {
                        let (input, g, r, c, run) = source(line, col);
                        let shape = shapes[input];
                        let run = run.min(shape.cols.saturating_sub(c)).min(cols - col).max(1);
                        let first = ((g * shape.rows + r) * shape.cols + c) as usize;
                        target[col as usize..(col + run) as usize]
                            .copy_from_slice(&inputs[input][first..first + run as usize]);
                        col += run;
                    }
                });
            out
        }
    };
    Ok(result)
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
