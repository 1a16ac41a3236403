//! `[planning.matrix_inputs_by_op]`: the build file's table of per-product
//! matrix inputs, merged with `--set planning.matrix_inputs.OP=...` (which
//! wins for its op); an unknown op or a bad value points at itself.

use std::collections::BTreeMap;

use super::*;
use crate::target::kernel_cost::MatrixInputs;

/// vit-tiny with FP8 matrix inputs and `entries` under the table.
fn with_table(entries: &str) -> String {
    let text = edit(
        VIT_TINY,
        "[planning]\n",
        "[planning]\nmatrix_inputs = \"fp8\"\n",
    );
    format!("{text}\n[planning.matrix_inputs_by_op]\n{entries}\n")
}

fn overrides(query: &BuildQuery) -> Vec<(&str, MatrixInputs)> {
    query
        .planning
        .matrix_input_overrides
        .iter()
        .map(|(op, inputs)| (op.as_str(), *inputs))
        .collect()
}

#[test]
fn the_files_table_names_products_and_their_inputs() {
    let query = parse(
        &with_table("\"layer.attn.qkv\" = \"fp16\"\n\"layer.mlp.down\" = \"fp8\""),
        &[],
    )
    .expect("parses");
    assert_eq!(query.planning.matrix_inputs, MatrixInputs::Fp8);
    assert_eq!(
        overrides(&query),
        [
            ("layer.attn.qkv", MatrixInputs::Fp16),
            ("layer.mlp.down", MatrixInputs::Fp8)
        ]
    );
    // Without the table, nothing differs.
    let plain = parse(VIT_TINY, &[]).expect("parses");
    assert_eq!(plain.planning.matrix_input_overrides, BTreeMap::new());
}

#[test]
fn a_set_wins_over_the_files_entry_for_its_op_only() {
    let text = with_table("\"layer.attn.qkv\" = \"fp16\"\n\"layer.mlp.up\" = \"fp16\"");
    let query = parse(
        &text,
        &[
            "planning.matrix_inputs.layer.attn.qkv=fp8",
            "planning.matrix_inputs_by_op.layer.mlp.down=fp16",
        ],
    )
    .expect("parses");
    assert_eq!(
        overrides(&query),
        [
            ("layer.attn.qkv", MatrixInputs::Fp8),
            ("layer.mlp.down", MatrixInputs::Fp16),
            ("layer.mlp.up", MatrixInputs::Fp16)
        ]
    );
}

#[test]
fn an_unknown_op_in_the_table_points_at_it_and_names_the_nearest_products() {
    let text = with_table("\"layer.attn.qvk\" = \"fp16\"");
    let message = expect_file_error(
        &text,
        "planning.matrix_inputs_by_op.\"layer.attn.qvk\"",
        "\"layer.attn.qvk\"",
    );
    assert!(message.contains("is not a matrix product"), "{message}");
    assert!(
        message.contains("did you mean `layer.attn.qkv`"),
        "{message}"
    );
    assert!(
        message.contains("layer.mlp.down, layer.mlp.up"),
        "{message}"
    );
    // Nothing near: the help says where the names come from.
    let text = with_table("\"classifier\" = \"fp16\"");
    let message = expect_file_error(
        &text,
        "planning.matrix_inputs_by_op.\"classifier\"",
        "\"classifier\"",
    );
    assert!(message.contains("superstep build --ops"), "{message}");
}

#[test]
fn a_bad_value_in_the_table_points_at_it() {
    let text = with_table("\"layer.mlp.up\" = \"fp4\"");
    let message = expect_file_error(
        &text,
        "planning.matrix_inputs_by_op.\"layer.mlp.up\"",
        "\"fp4\"",
    );
    assert!(
        message.contains("neither \"fp8\" nor \"fp16\""),
        "{message}"
    );
    let text = with_table("\"layer.mlp.up\" = 8");
    let message = expect_file_error(&text, "planning.matrix_inputs_by_op", "8");
    assert!(message.contains("must be a string"), "{message}");
}

#[test]
fn the_table_is_set_one_product_at_a_time() {
    let message = expect_set_error(
        VIT_TINY,
        &["planning.matrix_inputs_by_op=fp16"],
        "planning.matrix_inputs_by_op=fp16",
        Some("planning.matrix_inputs_by_op"),
    );
    assert!(message.contains("one product at a time"), "{message}");
    let message = expect_set_error(
        VIT_TINY,
        &["planning.matrix_inputs.layer.mlp.upp=fp16"],
        "planning.matrix_inputs.layer.mlp.upp=fp16",
        Some("planning.matrix_inputs.layer.mlp.upp"),
    );
    assert!(message.contains("is not a matrix product"), "{message}");
}
