//! Prices of the compiler's composite kernels, built from the measured
//! families: a matrix product of FP16 activations and FP8 weights (the
//! weights widened to FP16 on the tile, then the product at the FP16 rate:
//! CALIBRATION.md, there is no FP16 x FP8 mode), and attention (its `QK^T`
//! product at FP16 and its `PV` product at FP16 or, its value block cast
//! on the tile, at FP8, one call per head, and one softmax call over every
//! head's rows). The estimate and the layout planner both price
//! through these, so the plan is chosen on the costs it is charged.

use super::formulas::{CastInto, KernelCall, MatrixInputs, ProductOutput, call_cycles};
use super::table::{Constant, CostTable};

/// One product of an FP16 `rows x reduction` block and an FP8
/// `reduction x cols` weight block: the weight block widened into FP16
/// panels (priced as the measured cast into matrix-unit panels, the same
/// elements and layout in the other direction: a modelling choice), the
/// product at the FP16 rate, and `bias_elements` bias additions in its
/// epilogue at the measured add rate (no call of their own).
pub fn widened_weight_product(
    rows: u64,
    reduction: u64,
    cols: u64,
    bias_elements: u64,
    table: &CostTable,
) -> u64 {
    native_product(rows, reduction, cols, MatrixInputs::Fp16, table)
        + weight_widening(reduction, cols, table)
        + bias_epilogue(bias_elements, table)
}

/// One product of a `rows x reduction` activation block and an FP8
/// `reduction x cols` weight block at `inputs`: with FP16 inputs as
/// [`widened_weight_product`]; with FP8 inputs the activation block is cast
/// into FP8 panels on the tile (the measured cast into matrix-unit panels)
/// and the product runs at the FP8 rate, plus the bias epilogue.
pub fn product(
    rows: u64,
    reduction: u64,
    cols: u64,
    bias_elements: u64,
    inputs: MatrixInputs,
    table: &CostTable,
) -> u64 {
    match inputs {
        MatrixInputs::Fp16 => widened_weight_product(rows, reduction, cols, bias_elements, table),
        MatrixInputs::Fp8 => {
            let cast = call_cycles(
                KernelCall::Cast {
                    rows,
                    cols: reduction,
                    into: CastInto::Panels,
                },
                table,
            );
            cast + native_product(rows, reduction, cols, MatrixInputs::Fp8, table)
                + bias_epilogue(bias_elements, table)
        }
    }
}

/// One product of a `rows x reduction` activation block its producer
/// already stored in FP8 (the cast fused into the producer) and an FP8
/// weight block: the FP8-rate product and the bias epilogue, no cast.
pub fn product_of_fp8_activations(
    rows: u64,
    reduction: u64,
    cols: u64,
    bias_elements: u64,
    table: &CostTable,
) -> u64 {
    native_product(rows, reduction, cols, MatrixInputs::Fp8, table)
        + bias_epilogue(bias_elements, table)
}

/// The cast of `elements` FP16 values to FP8 fused into the output loop
/// of the kernel that produces them: the measured row-major cast's
/// per-element work, without a call of its own (a modelling choice: the
/// conversion instructions run in the producer's loop; CALIBRATION.md has
/// no fused measurement).
pub fn fused_cast(elements: u64, table: &CostTable) -> u64 {
    (elements as f64 * table.get(Constant::CastRowMajorPerElement)).round() as u64
}

/// One matrix-unit call writing its native output.
fn native_product(
    rows: u64,
    reduction: u64,
    cols: u64,
    inputs: MatrixInputs,
    table: &CostTable,
) -> u64 {
    call_cycles(
        KernelCall::MatMul {
            rows,
            reduction,
            cols,
            inputs,
            output: ProductOutput::Native,
        },
        table,
    )
}

/// Widening an FP8 `reduction x cols` weight block into FP16 panels.
pub fn weight_widening(reduction: u64, cols: u64, table: &CostTable) -> u64 {
    call_cycles(
        KernelCall::Cast {
            rows: reduction,
            cols,
            into: CastInto::Panels,
        },
        table,
    )
}

/// `elements` bias additions fused into a product's epilogue.
pub fn bias_epilogue(elements: u64, table: &CostTable) -> u64 {
    (elements as f64 * table.get(Constant::AddPerElement)).round() as u64
}

/// Cycles to arithmetically patch `words` exchange words on one tile before
/// an iteration: the supervisor loop below the bulk threshold (IPU21.md,
/// "Repeat and patching"), the six-worker bulk patcher from it on, priced
/// by the shipped table (CALIBRATION.md: 24, 78 and 1,024 words).
pub fn patch_cycles(words: u64) -> u64 {
    call_cycles(KernelCall::Patch { words }, &CostTable::shipped())
}

/// Attention of `groups` heads, `queries` against `keys` of width
/// `dimension`: per head a `QK^T` product at FP16 and a `PV` product at
/// `value_inputs`, and one softmax over all heads' rows. With FP8 `PV`
/// inputs the kernel also casts its `groups x keys x dimension` value
/// block into FP8 panels (one call of the measured cast into matrix-unit
/// panels) and the softmax writes its probabilities in FP8 (the fused
/// cast's per-element work: CALIBRATION.md, "Softmax writes PV's FP8
/// probabilities directly").
pub fn attention(
    groups: u64,
    queries: u64,
    keys: u64,
    dimension: u64,
    value_inputs: MatrixInputs,
    table: &CostTable,
) -> u64 {
    let scores = native_product(queries, dimension, keys, MatrixInputs::Fp16, table);
    let weighted = native_product(queries, keys, dimension, value_inputs, table);
    let softmax = call_cycles(
        KernelCall::Softmax {
            rows: groups * queries,
            keys,
        },
        table,
    );
    let casts = match value_inputs {
        MatrixInputs::Fp16 => 0,
        MatrixInputs::Fp8 => {
            call_cycles(
                KernelCall::Cast {
                    rows: groups * keys,
                    cols: dimension,
                    into: CastInto::Panels,
                },
                table,
            ) + fused_cast(groups * queries * keys, table)
        }
    };
    groups * (scores + weighted) + softmax + casts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_widened_product_costs_more_than_the_fp8_product_of_its_shape() {
        let table = CostTable::shipped();
        // The SDK rows of CALIBRATION.md: widening FP8 weights costs 1.73x
        // to 1.85x the all-FP8 product; the model's widened product of the
        // MLP-up calibration shape is in that neighbourhood.
        let fp8 = call_cycles(
            KernelCall::MatMul {
                rows: 82,
                reduction: 192,
                cols: 160,
                inputs: MatrixInputs::Fp8,
                output: ProductOutput::Native,
            },
            &table,
        );
        let widened = widened_weight_product(82, 192, 160, 0, &table);
        let ratio = widened as f64 / fp8 as f64;
        assert!((1.6..2.4).contains(&ratio), "ratio {ratio}");
    }

    #[test]
    fn patches_switch_to_the_measured_bulk_patcher_at_twenty_four_words() {
        assert_eq!(patch_cycles(23), 23 * 54);
        // CALIBRATION.md: the bulk patcher's 24 and 1,024 words.
        assert_eq!(patch_cycles(24), 450);
        assert!((patch_cycles(1024) as f64 - 9468.0).abs() <= 9468.0 * 0.05);
        assert!(patch_cycles(24) < patch_cycles(23));
    }

    #[test]
    fn an_fp8_value_product_costs_less_than_the_fp16_one_and_pays_its_casts() {
        let table = CostTable::shipped();
        // SigLIP's heads (729 keys of 72) and vit-tiny's (17 of 64), with
        // query blocks of a few rows to a whole head.
        for (groups, queries, keys, dimension) in [
            (1, 57, 729, 72),
            (4, 16, 729, 72),
            (16, 729, 729, 72),
            (3, 17, 17, 64),
        ] {
            let fp16 = attention(groups, queries, keys, dimension, MatrixInputs::Fp16, &table);
            let fp8 = attention(groups, queries, keys, dimension, MatrixInputs::Fp8, &table);
            let product = |inputs| {
                call_cycles(
                    KernelCall::MatMul {
                        rows: queries,
                        reduction: keys,
                        cols: dimension,
                        inputs,
                        output: ProductOutput::Native,
                    },
                    &table,
                )
            };
            let saved = groups * (product(MatrixInputs::Fp16) - product(MatrixInputs::Fp8));
            let casts = call_cycles(
                KernelCall::Cast {
                    rows: groups * keys,
                    cols: dimension,
                    into: CastInto::Panels,
                },
                &table,
            ) + fused_cast(groups * queries * keys, &table);
            assert_eq!(
                fp16 as i64 - fp8 as i64,
                saved as i64 - casts as i64,
                "{groups}x{queries}x{keys}x{dimension}"
            );
            if keys >= 64 {
                assert!(
                    fp8 < fp16,
                    "{groups}x{queries}x{keys}x{dimension}: {fp8} vs {fp16}"
                );
            }
        }
    }

    #[test]
    fn attention_is_two_products_per_head_and_one_softmax() {
        let table = CostTable::shipped();
        let one = attention(1, 81, 80, 80, MatrixInputs::Fp16, &table);
        let two = attention(2, 81, 80, 80, MatrixInputs::Fp16, &table);
        let product = call_cycles(
            KernelCall::MatMul {
                rows: 81,
                reduction: 80,
                cols: 80,
                inputs: MatrixInputs::Fp16,
                output: ProductOutput::Native,
            },
            &table,
        );
        assert!(two - one >= 2 * product);
        assert!(one > 2 * product);
    }
}
