//! Compute per op: the breakdown adds up to the estimate's compute cycles,
//! counts the matrix products' and attention's multiply-accumulates (checked
//! against the model's shapes, independently of the expansion), and never
//! claims to beat the roofline.

use crate::common;

use common::{TINY_VARIANTS, query};
use superstep::session::Session;

#[test]
fn per_op_compute_adds_up_and_counts_the_model_macs() {
    for sets in TINY_VARIANTS.iter().take(4) {
        let mut session = Session::new(&query("queries/vit-tiny.toml", sets));
        let outcome = session.build().expect("build");
        let back = outcome.back.expect("back half");
        let total: u64 = back.compute_by_op.iter().map(|op| op.cycles).sum();
        assert_eq!(total, back.headline.estimate.compute_cycles, "{sets:?}");
        for op in &back.compute_by_op {
            assert_eq!(
                op.kernel_cycles + op.copy_cycles + op.fill_cycles,
                op.cycles,
                "{sets:?}: {}",
                op.op
            );
            assert!(
                op.cycles >= op.roofline_cycles,
                "{sets:?}: {} runs below its roofline",
                op.op
            );
        }
        // Attention's products: 2 x batch x heads x tokens^2 x head dimension
        // per layer, at least (blocks may pad).
        let batch = if sets.contains(&"workload.batch=2") {
            2
        } else {
            1
        };
        let (layers, heads, tokens, head_dimension) = (2u64, 4u64, 17u64, 16u64);
        let attention = back
            .compute_by_op
            .iter()
            .find(|op| op.op == "layer.attn.core")
            .expect("attention op");
        let model_macs = layers * 2 * batch * heads * tokens * tokens * head_dimension;
        // QK^T runs in FP16; PV in FP8 under the default recipe (half of
        // the products' MACs, both at least the model's).
        let attention_macs = attention.fp16_macs + attention.fp8_macs;
        assert!(
            attention_macs >= model_macs && attention_macs < 2 * model_macs,
            "{sets:?}: {attention_macs} attention MACs vs {model_macs}"
        );
        assert!(
            attention.fp8_macs >= model_macs / 2 && attention.fp16_macs >= model_macs / 2,
            "{sets:?}: PV {} and QK {} MACs vs {model_macs} in all",
            attention.fp8_macs,
            attention.fp16_macs
        );
        // The MLP's up projection: tokens x width x mlp per layer and image.
        let up = back
            .compute_by_op
            .iter()
            .find(|op| op.op == "layer.mlp.up")
            .expect("mlp up");
        // Under the default FP8 matrix inputs they run at the FP8 rate.
        let up_macs = layers * batch * tokens * 64 * 256;
        assert!(
            up.fp8_macs >= up_macs && up.fp8_macs < 2 * up_macs,
            "{sets:?}: {} up MACs vs {up_macs}",
            up.fp8_macs
        );
        assert_eq!(up.fp16_macs, 0);
    }
}

/// Under FP8 matrix inputs the projections run at the FP8 rate, and
/// attention's two products split: `QK^T` at the FP16 rate, `PV` (the same
/// multiply-accumulates) at the FP8 rate.
#[test]
fn fp8_inputs_run_attention_pv_and_the_projections_at_the_fp8_rate() {
    let sets = ["planning.matrix_inputs=fp8", "planning.activation_scale=-4"];
    let mut session = Session::new(&query("queries/vit-tiny.toml", &sets));
    let back = session.build().expect("build").back.expect("back half");
    let op = |name: &str| {
        back.compute_by_op
            .iter()
            .find(|op| op.op == name)
            .expect(name)
            .clone()
    };
    let attention = op("layer.attn.core");
    let (layers, heads, tokens, head_dimension) = (2u64, 4u64, 17u64, 16u64);
    let product_macs = layers * heads * tokens * tokens * head_dimension;
    assert!(
        attention.fp8_macs >= product_macs && attention.fp8_macs < 2 * product_macs,
        "{} PV MACs vs {product_macs}",
        attention.fp8_macs
    );
    assert_eq!(attention.fp8_macs, attention.fp16_macs);
    assert!(attention.cycles >= attention.roofline_cycles);
    let up = op("layer.mlp.up");
    assert!(up.fp8_macs > 0);
    assert_eq!(up.fp16_macs, 0);
}

/// Under FP16 matrix inputs (FP8 weights widened on the tile) every
/// product runs at the FP16 rate: no FP8 multiply-accumulates at all.
#[test]
fn fp16_inputs_run_every_product_at_the_fp16_rate() {
    let sets = ["planning.matrix_inputs=fp16"];
    let mut session = Session::new(&query("queries/vit-tiny.toml", &sets));
    let back = session.build().expect("build").back.expect("back half");
    assert!(back.compute_by_op.iter().all(|op| op.fp8_macs == 0));
    let up = back
        .compute_by_op
        .iter()
        .find(|op| op.op == "layer.mlp.up")
        .expect("mlp up");
    let up_macs = 2 * 17 * 64 * 256;
    assert!(
        up.fp16_macs >= up_macs && up.fp16_macs < 2 * up_macs,
        "{} up MACs vs {up_macs}",
        up.fp16_macs
    );
}
