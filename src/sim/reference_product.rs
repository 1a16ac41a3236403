//! The FP32 reference's matrix products: `out = a x b` for strided
//! operands, by the `gemm-f32` crate's blocked kernels (AVX-512 where the CPU
//! has it, chosen when the process starts).
//!
//! A projection is one product spread over the cores by the library; an
//! attention head's products are one job each, as the heads are already
//! spread over the cores. Either way every output element is one FP32 sum
//! over the reduction in blocks whose size depends on the reduction length
//! and the CPU's cache sizes only, never on the number of threads: the
//! reference gives the same bits on any thread count.

use super::memory::SimError;

/// A matrix operand: its values with the strides of its rows and columns.
#[derive(Clone, Copy)]
pub(super) struct Operand<'a> {
    values: &'a [f32],
    row_stride: usize,
    column_stride: usize,
}

impl<'a> Operand<'a> {
    /// Row-major, `columns` to a row.
    pub(super) fn rows(values: &'a [f32], columns: usize) -> Operand<'a> {
        Operand {
            values,
            row_stride: columns,
            column_stride: 1,
        }
    }

    /// The transpose of a row-major matrix of `rows` x `columns` rows:
    /// element (i, j) is `values[j * columns + i]`.
    pub(super) fn columns(values: &'a [f32], columns: usize) -> Operand<'a> {
        Operand {
            values,
            row_stride: 1,
            column_stride: columns,
        }
    }

    /// The same values read as the transpose: element (i, j) is this
    /// operand's (j, i).
    fn transposed(self) -> Operand<'a> {
        Operand {
            values: self.values,
            row_stride: self.column_stride,
            column_stride: self.row_stride,
        }
    }

    /// The index one past the last element an `rows x columns` matrix
    /// with these strides reads.
    fn extent(&self, rows: usize, columns: usize) -> usize {
        if rows == 0 || columns == 0 {
            return 0;
        }
        (rows - 1) * self.row_stride + (columns - 1) * self.column_stride + 1
    }
}

/// `Err` unless `a` is `m x k` and `b` is `k x n`, both row-major.
pub(super) fn check_product(
    a: &[f32],
    b: &[f32],
    m: usize,
    k: usize,
    n: usize,
) -> Result<(), SimError> {
    if a.len() != m * k || b.len() != k * n {
        return Err(SimError::MissingValue(format!(
            "a matrix product of {m} x {k} by {k} x {n} read {} and {} values",
            a.len(),
            b.len()
        )));
    }
    Ok(())
}

/// Whether a product is spread over the cores or made as one job:
/// attention's products are made per head, the heads already in parallel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Split {
    /// Over every thread of the current pool.
    Cores,
    /// On the calling thread.
    Whole,
}

/// `out = a x b` in FP32 for `a` (`m x k`) and `b` (`k x n`), `out`
/// row-major `m x n`.
///
/// # Panics
/// When an operand's strides reach past its values or `out` is not
/// `m x n`: the callers check the shapes first ([`check_product`]).
pub(super) fn product(
    a: Operand,
    b: Operand,
    (m, k, n): (usize, usize, usize),
    out: &mut [f32],
    split: Split,
) {
    assert_eq!(out.len(), m * n, "a product's output is m x n");
    assert!(
        a.extent(m, k) <= a.values.len(),
        "the left operand holds m x k"
    );
    assert!(
        b.extent(k, n) <= b.values.len(),
        "the right operand holds k x n"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        return;
    }
    let parallelism = match split {
        Split::Cores => gemm_common::Parallelism::Rayon(rayon::current_num_threads().max(1)),
        Split::Whole => gemm_common::Parallelism::None,
    };
    // The kernels prefer a column-major destination: a row-major `out`
    // (more than one column) is made as its transpose, `out^T = b^T x a^T`,
    // as the family's `gemm` entry point arranges it before it dispatches.
    let transposed = n > 1;
    let (rows, columns, left, right) = if transposed {
        (n, m, b.transposed(), a.transposed())
    } else {
        (m, n, a, b)
    };
    let (out_column_stride, out_row_stride) = if transposed { (n, 1) } else { (1, n) };
    // SAFETY: the assertions above show that `a` holds element (i, p) at
    // `i * row_stride + p * column_stride` for i < m, p < k, that `b` holds
    // (p, j) likewise for p < k, j < n, and that `out` is `m x n`
    // row-major (row stride n, column stride 1); transposing swaps both
    // operands' strides and the output's, so `left` is `rows x k`, `right`
    // `k x columns` and `out` `rows x columns` at the strides given. `out`
    // does not alias the operands, which are shared borrows. With
    // `read_dst` false the kernel writes `out = 1 x (left x right)` without
    // reading it (its `alpha` scales the old destination, its `beta` the
    // product); no operand is conjugated (they are real).
    unsafe {
        gemm_f32::gemm::f32::get_gemm_fn()(
            rows,
            columns,
            k,
            out.as_mut_ptr(),
            out_column_stride as isize,
            out_row_stride as isize,
            false,
            left.values.as_ptr(),
            left.column_stride as isize,
            left.row_stride as isize,
            right.values.as_ptr(),
            right.column_stride as isize,
            right.row_stride as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(count: usize, salt: usize) -> Vec<f32> {
        (0..count)
            .map(|index| (((index * 7919 + salt * 104_729) % 2003) as f32 - 1001.0) / 997.0)
            .collect()
    }

    /// The product in f64, one plain dot product per element.
    fn plain(a: Operand, b: Operand, (m, k, n): (usize, usize, usize)) -> Vec<f64> {
        let mut out = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k)
                    .map(|p| {
                        f64::from(a.values[i * a.row_stride + p * a.column_stride])
                            * f64::from(b.values[p * b.row_stride + j * b.column_stride])
                    })
                    .sum();
            }
        }
        out
    }

    #[test]
    fn products_match_plain_dot_products_for_rows_and_transposed_operands() {
        let (m, k, n) = (37, 300, 53);
        let a = values(m * k, 1);
        let b = values(k * n, 2);
        let transposed_b = values(n * k, 3);
        for (left, right) in [
            (Operand::rows(&a, k), Operand::rows(&b, n)),
            (Operand::rows(&a, k), Operand::columns(&transposed_b, k)),
        ] {
            let expected = plain(left, right, (m, k, n));
            for split in [Split::Cores, Split::Whole] {
                let mut out = vec![f32::NAN; m * n];
                product(left, right, (m, k, n), &mut out, split);
                for (index, (&got, &want)) in out.iter().zip(&expected).enumerate() {
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{split:?} element {index}: {got} against {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_product_gives_the_same_bits_on_any_thread_count() {
        let (m, k, n) = (131, 1152, 700);
        let a = values(m * k, 4);
        let b = values(k * n, 5);
        // The product's bits, made as `split` says on the calling thread.
        let bits = |split: Split| -> Vec<u32> {
            let mut out = vec![0.0f32; m * n];
            product(
                Operand::rows(&a, k),
                Operand::rows(&b, n),
                (m, k, n),
                &mut out,
                split,
            );
            out.iter().map(|value| value.to_bits()).collect()
        };
        let on_threads = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool")
                .install(|| bits(Split::Cores))
        };
        let one = on_threads(1);
        for threads in [2, 3, 5] {
            assert!(
                one == on_threads(threads),
                "{threads} threads changed the product's bits"
            );
        }
        let whole = bits(Split::Whole);
        assert!(one == whole, "one job and the spread product differ");
    }

    #[test]
    fn an_empty_reduction_gives_zeros() {
        let mut out = vec![f32::NAN; 6];
        product(
            Operand::rows(&[], 0),
            Operand::rows(&[], 3),
            (2, 0, 3),
            &mut out,
            Split::Cores,
        );
        assert_eq!(out, vec![0.0; 6]);
    }
}
