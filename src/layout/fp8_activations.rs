//! Which activations are stored in FP8, and so where an FP8 product's cast
//! happens.
//!
//! An FP8-input matrix product needs its activation operand in FP8 F143 at
//! its activation scale. When that activation is produced by a LayerNorm, a
//! GELU or attention, and every reader of it (directly, or through views
//! such as the head merge) is an FP8-input product taking it as its
//! activation at one scale, the cast is fused into the producer: the
//! producer writes FP8 (`Precision::F8Activation`), every conversion between
//! it and the products moves half the bytes, and each product reads FP8
//! codes instead of casting its whole (replicated) block on every tile. The
//! rounding is the same (FP16, then F143 at the scale, nearest even,
//! saturating), so the numbers computed do not change, only where and how
//! often the cast runs. Any other activation keeps FP16 and is cast by the
//! product that reads it.
//!
//! Pure: a graph and each product's inputs in, the graph with those
//! values' precisions changed out.

use std::borrow::Cow;

use crate::model::graph::{Graph, OpId, OpKind, Precision, ValueId};
use crate::numerics::dot::ProductInputs;

/// Where FP8 activations are cast (`planning.fp8_cast`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Fp8Cast {
    /// Fused into the producer wherever this module allows (the default).
    #[default]
    Producer,
    /// In every product, on its own FP16 block.
    Product,
}

impl Fp8Cast {
    /// `producer` or `product`, as the build file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Fp8Cast::Producer => "producer",
            Fp8Cast::Product => "product",
        }
    }
}

/// Whether `kind` can write its output in FP8 itself (the cast fused into
/// its output loop).
fn writes_fp8(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::LayerNorm { .. } | OpKind::Gelu { .. } | OpKind::Attention { .. }
    )
}

/// `graph` with every activation whose cast fuses into its producer stored
/// in FP8 at its readers' scale (the view values between them too).
/// `inputs` gives each matrix product's matrix inputs.
pub fn with_fp8_activations(
    graph: &Graph,
    cast: Fp8Cast,
    inputs: impl Fn(OpId) -> ProductInputs,
) -> Cow<'_, Graph> {
    if cast == Fp8Cast::Product {
        return Cow::Borrowed(graph);
    }
    let producers = graph.producers();
    let mut readers: Vec<Vec<(OpId, usize)>> = vec![Vec::new(); graph.values.len()];
    for op_id in graph.op_ids() {
        for (slot, input) in graph.op(op_id).inputs.iter().enumerate() {
            readers[input.0 as usize].push((op_id, slot));
        }
    }
    let carried = graph
        .repeat
        .as_ref()
        .map(|repeat| [repeat.carried_output, repeat.initial]);
    let search = Search {
        graph,
        readers: &readers,
        inputs: &inputs,
        carried: carried.as_ref().map_or(&[][..], |values| &values[..]),
    };
    let mut changed: Vec<(ValueId, i8)> = Vec::new();
    for value in graph.value_ids() {
        let Some(producer) = producers[value.0 as usize] else {
            continue;
        };
        // Rows of whole 32-bit words, so that exchange pieces are words.
        if !writes_fp8(&graph.op(producer).kind) || !graph.value(value).shape.cols.is_multiple_of(4)
        {
            continue;
        }
        if let Some(scale) = search.fp8_scale(value) {
            search.mark(value, scale, &mut changed);
        }
    }
    if changed.is_empty() {
        return Cow::Borrowed(graph);
    }
    let mut rewritten = graph.clone();
    for (value, scale) in changed {
        rewritten.values[value.0 as usize].precision = Precision::F8Activation { scale };
    }
    Cow::Owned(rewritten)
}

struct Search<'a, F: Fn(OpId) -> ProductInputs> {
    graph: &'a Graph,
    readers: &'a [Vec<(OpId, usize)>],
    inputs: &'a F,
    /// Values the Repeat copies (never stored in FP8).
    carried: &'a [ValueId],
}

impl<F: Fn(OpId) -> ProductInputs> Search<'_, F> {
    /// The one activation scale at which every reader of `value` (through
    /// views) multiplies it as an FP8 product's activation; `None` when any
    /// reader wants it otherwise, or it has none, or the graph's output or
    /// the Repeat's copies are among them.
    fn fp8_scale(&self, value: ValueId) -> Option<i8> {
        if self.graph.output == Some(value) || self.carried.contains(&value) {
            return None;
        }
        let readers = &self.readers[value.0 as usize];
        let mut scale = None;
        for &(op_id, slot) in readers {
            let op = self.graph.op(op_id);
            let reader_scale = match (&op.kind, slot) {
                (OpKind::MatMul { .. }, 0) => match (self.inputs)(op_id) {
                    ProductInputs::Fp8 { activation_scale } => activation_scale,
                    ProductInputs::Fp16 => return None,
                },
                (OpKind::View(_), _) => self.fp8_scale(op.output)?,
                _ => return None,
            };
            if scale.is_some_and(|scale| scale != reader_scale) {
                return None;
            }
            scale = Some(reader_scale);
        }
        scale
    }

    /// Marks `value` and the views' values between it and its products.
    fn mark(&self, value: ValueId, scale: i8, changed: &mut Vec<(ValueId, i8)>) {
        changed.push((value, scale));
        for &(op_id, _) in &self.readers[value.0 as usize] {
            let op = self.graph.op(op_id);
            if let OpKind::View(_) = op.kind {
                self.mark(op.output, scale, changed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::builder::{GraphKnobs, build_graph};
    use crate::model::config::ModelConfig;

    fn output_precision(graph: &Graph, op: &str) -> Precision {
        let op = graph
            .op_ids()
            .map(|id| graph.op(id))
            .find(|candidate| candidate.name == op)
            .unwrap_or_else(|| panic!("no op {op}"));
        graph.value(op.output).precision
    }

    fn graph() -> Graph {
        let knobs = GraphKnobs {
            batch: 1,
            fuse_qkv: true,
        };
        build_graph(&ModelConfig::vit_b16(), knobs)
    }

    #[test]
    fn norm_gelu_and_attention_outputs_feeding_fp8_products_are_stored_in_fp8() {
        let graph = graph();
        let fp8 = ProductInputs::Fp8 {
            activation_scale: -3,
        };
        let rewritten = with_fp8_activations(&graph, Fp8Cast::Producer, |_| fp8);
        let scaled = Precision::F8Activation { scale: -3 };
        for op in [
            "layer.ln1",
            "layer.ln2",
            "layer.mlp.gelu",
            "layer.attn.core",
            "layer.attn.merge",
        ] {
            assert_eq!(output_precision(&rewritten, op), scaled, "{op}");
        }
        // The residual stream, the products' outputs and the attention's
        // FP16 QK operands stay FP16.
        for op in ["layer.attn.residual", "layer.mlp.up", "layer.attn.qkv"] {
            assert_eq!(output_precision(&rewritten, op), Precision::F16, "{op}");
        }
        // Every FP8 value is read only by FP8 products' activations or by
        // views leading to them.
        for op_id in rewritten.op_ids() {
            let op = rewritten.op(op_id);
            for (slot, &input) in op.inputs.iter().enumerate() {
                if rewritten.value(input).precision == scaled {
                    assert!(
                        matches!(
                            (&op.kind, slot),
                            (OpKind::MatMul { .. }, 0) | (OpKind::View(_), _)
                        ),
                        "{} read by {}",
                        rewritten.value(input).name,
                        op.name
                    );
                }
            }
        }
    }

    #[test]
    fn a_reader_at_another_precision_or_scale_keeps_the_value_fp16() {
        let graph = graph();
        let unchanged = with_fp8_activations(&graph, Fp8Cast::Producer, |_| ProductInputs::Fp16);
        assert!(matches!(unchanged, Cow::Borrowed(_)));
        // MLP up at FP16: its LayerNorm keeps FP16, the others still fuse.
        let up = graph
            .op_ids()
            .find(|&id| graph.op(id).name == "layer.mlp.up")
            .expect("mlp up");
        let mixed = with_fp8_activations(&graph, Fp8Cast::Producer, |op| {
            if op == up {
                ProductInputs::Fp16
            } else {
                ProductInputs::Fp8 {
                    activation_scale: -4,
                }
            }
        });
        assert_eq!(output_precision(&mixed, "layer.ln2"), Precision::F16);
        assert_eq!(
            output_precision(&mixed, "layer.ln1"),
            Precision::F8Activation { scale: -4 }
        );
    }
}
