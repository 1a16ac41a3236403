//! The FP32 reference: evaluates the graph itself (no layouts, no tiles) on
//! whole tensors in FP32, with the same quantised weights and input as the
//! compiled program, and the same kernel definitions (`numerics`).

use super::kernels::{RotaryPlace, rotate_row};
use super::memory::SimError;
use crate::model::graph::GeluKind;
use crate::model::graph::{Graph, OpKind, Region, ValueId, ValueKind, ViewKind};
use crate::model::weights::Weights;
use crate::numerics::activation::{gelu_erf, gelu_tanh};
use crate::numerics::dot::{Accumulation, matmul_block, matmul_block_transposed_b};
use crate::numerics::rows::{layer_norm_row, softmax_row_in_place};

struct Evaluator<'graph> {
    graph: &'graph Graph,
    weights: &'graph Weights,
    values: Vec<Option<Vec<f32>>>,
}

impl Evaluator<'_> {
    fn get(&self, id: ValueId, instance: u32) -> Result<Vec<f32>, SimError> {
        let value = self.graph.value(id);
        match value.kind {
            ValueKind::Weight { iterated } => {
                let data = self
                    .weights
                    .tensors
                    .get(&id)
                    .ok_or_else(|| SimError::MissingValue(value.name.clone()))?;
                Ok(data.instance(if iterated { instance } else { 0 }).to_vec())
            }
            ValueKind::Input => Ok(self.weights.input.clone()),
            ValueKind::Activation => self.values[id.0 as usize]
                .clone()
                .ok_or_else(|| SimError::MissingValue(value.name.clone())),
        }
    }

    fn run_op(&mut self, index: usize, instance: u32) -> Result<(), SimError> {
        let op = &self.graph.ops[index];
        let output_shape = self.graph.value(op.output).shape;
        let inputs: Vec<Vec<f32>> = op
            .inputs
            .iter()
            .map(|&input| self.get(input, instance))
            .collect::<Result<_, _>>()?;
        let input_shape = |slot: usize| self.graph.value(op.inputs[slot]).shape;
        let result = match &op.kind {
            OpKind::MatMul { bias } => {
                let (m, k, n) = (
                    output_shape.rows as usize,
                    input_shape(0).cols as usize,
                    output_shape.cols as usize,
                );
                let mut out = vec![0.0f32; m * n];
                parallel_matmul(&inputs[0], &inputs[1], k, n, &mut out)?;
                if *bias {
                    for row in out.chunks_exact_mut(n) {
                        row.iter_mut()
                            .zip(&inputs[2])
                            .for_each(|(value, bias)| *value += bias);
                    }
                }
                out
            }
            OpKind::LayerNorm { epsilon } => {
                let cols = output_shape.cols as usize;
                let mut out = vec![0.0f32; inputs[0].len()];
                for (row, target) in inputs[0].chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
                    layer_norm_row(row, &inputs[1], &inputs[2], *epsilon, target)?;
                }
                out
            }
            OpKind::Gelu { kind } => inputs[0]
                .iter()
                .map(|&x| match kind {
                    GeluKind::Tanh => gelu_tanh(x),
                    GeluKind::Erf => gelu_erf(x),
                })
                .collect(),
            OpKind::Add => inputs[0]
                .iter()
                .zip(&inputs[1])
                .map(|(a, b)| a + b)
                .collect(),
            OpKind::Cast => inputs[0].clone(),
            OpKind::Rotary { grid, class_token } => {
                let mut out = inputs[0].clone();
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
                for group in 0..q_shape.groups as usize {
                    let q = &inputs[0][group * queries * d..(group + 1) * queries * d];
                    let k = &inputs[1][group * keys * d..(group + 1) * keys * d];
                    let v = &inputs[2][group * keys * d..(group + 1) * keys * d];
                    let mut scores = vec![0.0f32; queries * keys];
                    matmul_block_transposed_b(
                        q,
                        d,
                        k,
                        d,
                        queries,
                        d,
                        keys,
                        Accumulation::F32,
                        &mut scores,
                        keys,
                    )?;
                    for row in scores.chunks_exact_mut(keys) {
                        softmax_row_in_place(row, *scale)?;
                    }
                    matmul_block(
                        &scores,
                        keys,
                        v,
                        d,
                        queries,
                        keys,
                        d,
                        Accumulation::F32,
                        &mut out[group * queries * d..(group + 1) * queries * d],
                        d,
                    )?;
                }
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
                for group in 0..output_shape.groups {
                    for row in 0..rows {
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
                                    let index =
                                        piece_starts.partition_point(|&start| start <= row) - 1;
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
                            out[((group * rows + row) * cols + col) as usize] =
                                inputs[input][((g * shape.rows + r) * shape.cols + c) as usize];
                        }
                    }
                }
                out
            }
        };
        self.values[op.output.0 as usize] = Some(result);
        Ok(())
    }
}

/// Rows of the reference's FP32 products computed per bands of rows in
/// parallel; every element accumulates over `k` in the same order as one
/// call would, so the result is identical on any thread count.
fn parallel_matmul(
    a: &[f32],
    b: &[f32],
    k: usize,
    n: usize,
    out: &mut [f32],
) -> Result<(), crate::numerics::NumericsError> {
    use rayon::prelude::*;
    const BAND_ROWS: usize = 16;
    if n == 0 || k == 0 {
        let m = out.len() / n.max(1);
        return matmul_block(a, k, b, n, m, k, n, Accumulation::F32, out, n);
    }
    out.par_chunks_mut(BAND_ROWS * n)
        .enumerate()
        .try_for_each(|(band, rows)| {
            let count = rows.len() / n;
            let first = band * BAND_ROWS;
            matmul_block(
                &a[first * k..(first + count) * k],
                k,
                b,
                n,
                count,
                k,
                n,
                Accumulation::F32,
                rows,
                n,
            )
        })
}

/// Evaluates the graph's output in FP32.
pub fn evaluate_reference(graph: &Graph, weights: &Weights) -> Result<Vec<f32>, SimError> {
    let mut evaluator = Evaluator {
        graph,
        weights,
        values: vec![None; graph.values.len()],
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
