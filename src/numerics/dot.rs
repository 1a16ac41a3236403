//! Matrix-product accumulation semantics: how a block product
//! `out[i][j] = sum_p a[i][p] * b[p][j]` is accumulated, bit for bit, under
//! each accumulation mode a plan can choose. It owns the summation order and
//! the rounding points; it must not know about tiles, plans or tensors beyond
//! strided row-major blocks.
//!
//! Accumulation models (both add in increasing `p` order, starting from 0):
//!
//! - [`Accumulation::F32`]: each product is rounded to f32 and added to an
//!   f32 running sum.
//! - [`Accumulation::F16`]: as F32 within chunks of
//!   [`F16_ACCUMULATION_CHUNK`] consecutive `p` (the last chunk may be
//!   shorter), and after each chunk the running sum is rounded to f16
//!   (saturating, see [`round_f16`]). This models a matrix unit that
//!   accumulates partial dot products of length 16 in f32 and writes the
//!   accumulator back at half precision; products of f16 inputs are exact in
//!   f32. Inputs are not rounded: callers pass f16-representable values.

use serde::{Deserialize, Serialize};

use crate::numerics::NumericsError;
use crate::numerics::half_float::round_f16;

/// How a matrix product accumulates; see the module documentation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Accumulation {
    F32,
    F16,
}

/// What the matrix unit multiplies in a product of activations and FP8
/// weights: it takes both operands at one precision (CALIBRATION.md: there
/// is no FP16 x FP8 mode). For an attention op it is what the `PV`
/// product multiplies: FP16 probabilities and values, or both rounded to
/// FP8 F143, the probabilities at [`PROBABILITY_SCALE`] and the values at
/// `activation_scale` (the `QK^T` product stays FP16 either way).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProductInputs {
    /// FP16 activations times the FP8 weights widened to FP16 on the tile
    /// (exact: every F143 value is an FP16 value): the FP16 rate.
    Fp16,
    /// The activations rounded to FP8 F143 at scale `2^activation_scale`
    /// (round to nearest even, saturating at +-240 x 2^scale) times the FP8
    /// weights: the FP8 rate.
    Fp8 { activation_scale: i8 },
}

impl ProductInputs {
    /// `fp16` or `fp8`.
    pub fn name(self) -> &'static str {
        match self {
            ProductInputs::Fp16 => "fp16",
            ProductInputs::Fp8 { .. } => "fp8",
        }
    }
}

/// The FP8 scale of attention probabilities in an FP8 `PV` product:
/// `2^-7`. Probabilities (softmax outputs, and the flash method's block
/// weights `exp(score - running maximum)`) lie in `[0, 1]`, so no
/// calibration is needed: the least scale whose range (`240 x 2^scale`)
/// holds 1.0 is `-7` (range 1.875; at `-8` the range, 0.9375, would
/// saturate 1.0). The least such scale keeps the most precision: 1.0 is
/// exactly the code `2^7`, every probability from `2^-14` up keeps F143's
/// three mantissa bits, and subnormals reach down to `2^-17`.
pub const PROBABILITY_SCALE: i32 = -7;

/// How an activation operand is stored: FP16, or FP8 F143 at a scale
/// (code `c` means `decode(c) x 2^scale`), its producer having rounded it
/// (FP16 first, then to F143 nearest even, saturating) for the FP8
/// products that read it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ActivationStore {
    F16,
    Fp8 { scale: i8 },
}

impl ActivationStore {
    /// Whether the activation is stored in FP8 (a product reading it casts
    /// nothing).
    pub fn is_fp8(self) -> bool {
        matches!(self, ActivationStore::Fp8 { .. })
    }

    /// Bytes of one stored element.
    pub fn bytes(self) -> u32 {
        match self {
            ActivationStore::F16 => 2,
            ActivationStore::Fp8 { .. } => 1,
        }
    }
}

/// What the matrix unit multiplies in each product, by the product's op
/// name (`layer.mlp.up`): the per-product choices of a build (a
/// `planning.matrix_inputs.OP` override, a calibrated activation scale),
/// over `default` for the products it does not name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProductRecipe {
    pub default: ProductInputs,
    pub by_op: std::collections::BTreeMap<String, ProductInputs>,
}

impl ProductRecipe {
    /// Every product takes `default`.
    pub fn uniform(default: ProductInputs) -> ProductRecipe {
        ProductRecipe {
            default,
            by_op: std::collections::BTreeMap::new(),
        }
    }

    /// The inputs of the product `op`.
    pub fn inputs_of(&self, op: &str) -> ProductInputs {
        self.by_op.get(op).copied().unwrap_or(self.default)
    }
}

/// Number of consecutive products summed in f32 before the running sum is
/// rounded to f16 under [`Accumulation::F16`].
pub const F16_ACCUMULATION_CHUNK: usize = 16;

/// Output columns processed per tile (the accumulator rows stay in L1).
const TILE_WIDTH: usize = 256;
/// Output rows sharing each loaded row of `b`.
const ROW_GROUP: usize = 4;

/// A strided row-major matrix operand.
#[derive(Copy, Clone)]
struct Strided<'a> {
    data: &'a [f32],
    row_stride: usize,
}

/// `out[i][j] = sum_p a[i][p] * b[p][j]` for `a` (`m x k`, row stride
/// `a_row_stride`) and `b` (`k x n`, row stride `b_row_stride`), writing the
/// `m x n` block of `out` (row stride `out_row_stride`).
#[allow(clippy::too_many_arguments)] // the argument list mirrors a BLAS-style block call
pub fn matmul_block(
    a: &[f32],
    a_row_stride: usize,
    b: &[f32],
    b_row_stride: usize,
    m: usize,
    k: usize,
    n: usize,
    accumulation: Accumulation,
    out: &mut [f32],
    out_row_stride: usize,
) -> Result<(), NumericsError> {
    check_matrix("a", a.len(), m, k, a_row_stride)?;
    check_matrix("b", b.len(), k, n, b_row_stride)?;
    check_matrix("out", out.len(), m, n, out_row_stride)?;
    if handle_degenerate(m, k, n, out, out_row_stride) {
        return Ok(());
    }
    let left = Strided {
        data: a,
        row_stride: a_row_stride,
    };
    let mut column_start = 0;
    while column_start < n {
        let width = TILE_WIDTH.min(n - column_start);
        let right = Strided {
            data: &b[column_start..],
            row_stride: b_row_stride,
        };
        multiply_tile(
            left,
            right,
            m,
            k,
            width,
            accumulation,
            out,
            out_row_stride,
            column_start,
        );
        column_start += width;
    }
    Ok(())
}

/// As [`matmul_block`], but `b` is given transposed: `n x k` with row `j`
/// holding column `j` (row stride `b_row_stride`). Same summation order and
/// rounding, so the result is bit-identical to [`matmul_block`] on the
/// transposed matrix.
#[allow(clippy::too_many_arguments)] // the argument list mirrors a BLAS-style block call
pub fn matmul_block_transposed_b(
    a: &[f32],
    a_row_stride: usize,
    b: &[f32],
    b_row_stride: usize,
    m: usize,
    k: usize,
    n: usize,
    accumulation: Accumulation,
    out: &mut [f32],
    out_row_stride: usize,
) -> Result<(), NumericsError> {
    check_matrix("a", a.len(), m, k, a_row_stride)?;
    check_matrix("b (transposed)", b.len(), n, k, b_row_stride)?;
    check_matrix("out", out.len(), m, n, out_row_stride)?;
    if handle_degenerate(m, k, n, out, out_row_stride) {
        return Ok(());
    }
    let left = Strided {
        data: a,
        row_stride: a_row_stride,
    };
    let mut tile = vec![0.0f32; k * TILE_WIDTH.min(n)];
    let mut column_start = 0;
    while column_start < n {
        let width = TILE_WIDTH.min(n - column_start);
        // Transpose columns column_start..column_start+width into a k x width tile.
        for column in 0..width {
            let source = &b[(column_start + column) * b_row_stride..][..k];
            for (destination, &value) in tile[column..].iter_mut().step_by(width).zip(source) {
                *destination = value;
            }
        }
        let right = Strided {
            data: &tile,
            row_stride: width,
        };
        multiply_tile(
            left,
            right,
            m,
            k,
            width,
            accumulation,
            out,
            out_row_stride,
            column_start,
        );
        column_start += width;
    }
    Ok(())
}

/// Handles empty products: nothing to do when `m` or `n` is 0, zeros when
/// `k` is 0. Returns whether the product was degenerate.
fn handle_degenerate(m: usize, k: usize, n: usize, out: &mut [f32], out_row_stride: usize) -> bool {
    if m == 0 || n == 0 {
        return true;
    }
    if k == 0 {
        for row in 0..m {
            out[row * out_row_stride..][..n].fill(0.0);
        }
        return true;
    }
    false
}

/// Computes output columns `out_column_start..out_column_start + width` for
/// all `m` rows; `right` already starts at the tile's first column. Shapes
/// were validated by the caller.
#[allow(clippy::too_many_arguments)] // internal kernel; every argument is a loop bound or operand
fn multiply_tile(
    left: Strided<'_>,
    right: Strided<'_>,
    m: usize,
    k: usize,
    width: usize,
    accumulation: Accumulation,
    out: &mut [f32],
    out_row_stride: usize,
    out_column_start: usize,
) {
    let mut accumulators = [[0.0f32; TILE_WIDTH]; ROW_GROUP];
    let mut row_start = 0;
    while row_start < m {
        let rows = ROW_GROUP.min(m - row_start);
        for accumulator in accumulators.iter_mut().take(rows) {
            accumulator[..width].fill(0.0);
        }
        for p in 0..k {
            let right_row = &right.data[p * right.row_stride..][..width];
            for (row, accumulator) in accumulators.iter_mut().enumerate().take(rows) {
                let left_value = left.data[(row_start + row) * left.row_stride + p];
                for (sum, &right_value) in accumulator[..width].iter_mut().zip(right_row) {
                    *sum += left_value * right_value;
                }
            }
            let chunk_ends = (p + 1) % F16_ACCUMULATION_CHUNK == 0 || p + 1 == k;
            if accumulation == Accumulation::F16 && chunk_ends {
                for accumulator in accumulators.iter_mut().take(rows) {
                    for sum in accumulator[..width].iter_mut() {
                        *sum = round_f16(*sum);
                    }
                }
            }
        }
        for (row, accumulator) in accumulators.iter().enumerate().take(rows) {
            let start = (row_start + row) * out_row_stride + out_column_start;
            out[start..][..width].copy_from_slice(&accumulator[..width]);
        }
        row_start += rows;
    }
}

/// Checks that a `rows x columns` matrix with `row_stride` fits `length`
/// elements and that its rows do not overlap.
fn check_matrix(
    matrix: &'static str,
    length: usize,
    rows: usize,
    columns: usize,
    row_stride: usize,
) -> Result<(), NumericsError> {
    if rows == 0 || columns == 0 {
        return Ok(());
    }
    if rows > 1 && row_stride < columns {
        return Err(NumericsError::StrideTooSmall {
            matrix,
            columns,
            row_stride,
        });
    }
    let needed = (rows - 1)
        .checked_mul(row_stride)
        .and_then(|offset| offset.checked_add(columns));
    match needed {
        Some(needed) if needed <= length => Ok(()),
        _ => Err(NumericsError::MatrixOutOfBounds {
            matrix,
            rows,
            columns,
            row_stride,
            slice_length: length,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numerics::test_random::TestRandom;

    struct Case {
        m: usize,
        k: usize,
        n: usize,
        a_row_stride: usize,
        b_row_stride: usize,
        bt_row_stride: usize,
        out_row_stride: usize,
        a: Vec<f32>,
        b: Vec<f32>,
        /// `b` transposed, `n x k` with stride `bt_row_stride`.
        bt: Vec<f32>,
    }

    fn random_case(
        random: &mut TestRandom,
        m: usize,
        k: usize,
        n: usize,
        half_inputs: bool,
    ) -> Case {
        let a_row_stride = k + random.between(0, 3);
        let b_row_stride = n + random.between(0, 3);
        let bt_row_stride = k + random.between(0, 3);
        let out_row_stride = n + random.between(0, 3);
        let mut draw = |length: usize| -> Vec<f32> {
            let values = random.vector(length, -1.0, 1.0);
            if half_inputs {
                values.into_iter().map(round_f16).collect()
            } else {
                values
            }
        };
        let a = draw(m * a_row_stride);
        let b = draw(k * b_row_stride);
        let mut bt = vec![0.0; n * bt_row_stride];
        for p in 0..k {
            for j in 0..n {
                bt[j * bt_row_stride + p] = b[p * b_row_stride + j];
            }
        }
        Case {
            m,
            k,
            n,
            a_row_stride,
            b_row_stride,
            bt_row_stride,
            out_row_stride,
            a,
            b,
            bt,
        }
    }

    fn run(case: &Case, accumulation: Accumulation, transposed: bool) -> Vec<f32> {
        let mut out = vec![f32::NAN; case.m * case.out_row_stride];
        if transposed {
            matmul_block_transposed_b(
                &case.a,
                case.a_row_stride,
                &case.bt,
                case.bt_row_stride,
                case.m,
                case.k,
                case.n,
                accumulation,
                &mut out,
                case.out_row_stride,
            )
            .unwrap();
        } else {
            matmul_block(
                &case.a,
                case.a_row_stride,
                &case.b,
                case.b_row_stride,
                case.m,
                case.k,
                case.n,
                accumulation,
                &mut out,
                case.out_row_stride,
            )
            .unwrap();
        }
        out
    }

    /// The documented model, written as plainly as possible.
    fn naive_model(case: &Case, accumulation: Accumulation, i: usize, j: usize) -> f32 {
        let mut sum = 0.0f32;
        for p in 0..case.k {
            sum += case.a[i * case.a_row_stride + p] * case.b[p * case.b_row_stride + j];
            let chunk_ends = (p + 1) % F16_ACCUMULATION_CHUNK == 0 || p + 1 == case.k;
            if accumulation == Accumulation::F16 && chunk_ends {
                sum = round_f16(sum);
            }
        }
        sum
    }

    fn shapes() -> Vec<(usize, usize, usize)> {
        vec![
            (1, 1, 1),
            (3, 17, 5),
            (5, 33, 300),
            (9, 64, 257),
            (2, 200, 513),
            (7, 15, 16),
        ]
    }

    #[test]
    fn f32_accumulation_is_close_to_f64_reference() {
        let mut random = TestRandom::new(1);
        for (m, k, n) in shapes() {
            let case = random_case(&mut random, m, k, n, false);
            for transposed in [false, true] {
                let out = run(&case, Accumulation::F32, transposed);
                for i in 0..m {
                    for j in 0..n {
                        let mut exact = 0.0f64;
                        let mut magnitude = 0.0f64;
                        for p in 0..k {
                            let product = f64::from(case.a[i * case.a_row_stride + p])
                                * f64::from(case.b[p * case.b_row_stride + j]);
                            exact += product;
                            magnitude += product.abs();
                        }
                        let error = (f64::from(out[i * case.out_row_stride + j]) - exact).abs();
                        assert!(error <= 1e-6 * magnitude * k as f64 + 1e-30);
                    }
                }
            }
        }
    }

    #[test]
    fn results_match_the_documented_model_bit_for_bit() {
        let mut random = TestRandom::new(2);
        for (m, k, n) in shapes() {
            let case = random_case(&mut random, m, k, n, true);
            for accumulation in [Accumulation::F32, Accumulation::F16] {
                let direct = run(&case, accumulation, false);
                let transposed = run(&case, accumulation, true);
                for i in 0..m {
                    for j in 0..n {
                        let expected = naive_model(&case, accumulation, i, j);
                        let index = i * case.out_row_stride + j;
                        assert_eq!(
                            direct[index].to_bits(),
                            expected.to_bits(),
                            "{accumulation:?} ({i}, {j})"
                        );
                        assert_eq!(transposed[index].to_bits(), expected.to_bits());
                    }
                    // Padding between rows is untouched.
                    for j in n..case.out_row_stride {
                        if i + 1 < m {
                            assert!(direct[i * case.out_row_stride + j].is_nan());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn f16_accumulation_differs_on_adversarial_input_but_within_f16_tolerance() {
        // One large product followed by many small ones: in f16 the running
        // sum near 2048 has spacing 2, so each chunk's small additions are
        // rounded away in part.
        let k = 256;
        let a = vec![1.0f32; k];
        let mut b = vec![0.1f32; k];
        b[0] = 2048.0;
        let b: Vec<f32> = b.into_iter().map(round_f16).collect();
        let mut out_f32 = [0.0f32];
        let mut out_f16 = [0.0f32];
        matmul_block(&a, k, &b, 1, 1, k, 1, Accumulation::F32, &mut out_f32, 1).unwrap();
        matmul_block(&a, k, &b, 1, 1, k, 1, Accumulation::F16, &mut out_f16, 1).unwrap();
        assert_ne!(out_f32[0], out_f16[0]);
        assert_eq!(round_f16(out_f16[0]), out_f16[0]);
        // Each of the k/16 chunk roundings errs by at most half an f16 ulp
        // (ulp 2 in [2048, 4096)).
        let chunks = (k / F16_ACCUMULATION_CHUNK) as f32;
        assert!(
            (out_f32[0] - out_f16[0]).abs() <= chunks * 1.0,
            "{} vs {}",
            out_f32[0],
            out_f16[0]
        );
        assert!(((out_f32[0] - out_f16[0]) / out_f32[0]).abs() < 1e-2);
    }

    #[test]
    fn degenerate_shapes() {
        let mut out = [5.0f32; 6];
        matmul_block(&[], 0, &[], 3, 2, 0, 3, Accumulation::F32, &mut out, 3).unwrap();
        assert_eq!(out, [0.0; 6]);
        let mut untouched = [5.0f32; 2];
        matmul_block(
            &[],
            4,
            &[1.0; 8],
            2,
            0,
            4,
            2,
            Accumulation::F16,
            &mut untouched,
            2,
        )
        .unwrap();
        assert_eq!(untouched, [5.0; 2]);
    }

    #[test]
    fn shape_errors_are_reported() {
        let mut out = [0.0f32; 4];
        assert_eq!(
            matmul_block(
                &[1.0; 3],
                2,
                &[1.0; 4],
                2,
                2,
                2,
                2,
                Accumulation::F32,
                &mut out,
                2
            ),
            Err(NumericsError::MatrixOutOfBounds {
                matrix: "a",
                rows: 2,
                columns: 2,
                row_stride: 2,
                slice_length: 3
            })
        );
        assert_eq!(
            matmul_block(
                &[1.0; 4],
                2,
                &[1.0; 4],
                1,
                2,
                2,
                2,
                Accumulation::F32,
                &mut out,
                2
            ),
            Err(NumericsError::StrideTooSmall {
                matrix: "b",
                columns: 2,
                row_stride: 1
            })
        );
        assert!(
            matmul_block(
                &[1.0; 4],
                2,
                &[1.0; 4],
                2,
                2,
                2,
                2,
                Accumulation::F32,
                &mut out[..3],
                2
            )
            .is_err()
        );
        assert!(
            matmul_block_transposed_b(
                &[1.0; 4],
                2,
                &[1.0; 3],
                2,
                2,
                2,
                2,
                Accumulation::F16,
                &mut out,
                2
            )
            .is_err()
        );
        assert!(
            matmul_block(
                &[1.0; 4],
                usize::MAX,
                &[1.0; 4],
                2,
                2,
                2,
                2,
                Accumulation::F32,
                &mut out,
                2
            )
            .is_err()
        );
    }

    #[test]
    fn the_probability_scale_holds_one_with_the_most_precision() {
        use crate::numerics::fp8::{decode, encode, unsaturated_scale};
        let stored = |value: f32, scale: i32| decode(encode(value, scale), scale);
        // The least scale at which 1.0 does not saturate: 1.0 is a code.
        assert_eq!(PROBABILITY_SCALE, unsaturated_scale(1.0));
        assert_eq!(stored(1.0, PROBABILITY_SCALE), 1.0);
        assert!(stored(1.0, PROBABILITY_SCALE - 1) < 1.0);
        // Probabilities down to 2^-14 keep three mantissa bits; one scale
        // up, 1.125 x 2^-14 would already be subnormal and lose one.
        let small = 1.125 * 2f32.powi(-14);
        assert_eq!(stored(small, PROBABILITY_SCALE), small);
        assert_ne!(stored(small, PROBABILITY_SCALE + 1), small);
    }

    #[test]
    fn accumulation_serialises_by_name() {
        assert_eq!(
            serde_json::to_string(&Accumulation::F16).unwrap(),
            "\"F16\""
        );
        let parsed: Accumulation = serde_json::from_str("\"F32\"").unwrap();
        assert_eq!(parsed, Accumulation::F32);
    }
}
