//! Comparison of a computed output with the FP32 reference: cosine
//! similarity and maximum absolute error (the seed notes' figures of merit).

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Agreement {
    pub cosine: f64,
    pub max_abs_error: f64,
    pub elements: usize,
    /// Non-finite elements in the computed output.
    pub non_finite: usize,
}

/// `output N elements: cosine C, max abs error E` (and the non-finite
/// count, when there are any), as `run` and `simulate` print it.
impl std::fmt::Display for Agreement {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "output {} elements: cosine {:.9}, max abs error {:.6}",
            self.elements, self.cosine, self.max_abs_error
        )?;
        if self.non_finite > 0 {
            write!(formatter, ", {} non-finite", self.non_finite)?;
        }
        Ok(())
    }
}

pub fn compare(computed: &[f32], reference: &[f32]) -> Agreement {
    let (mut dot, mut norm_computed, mut norm_reference, mut max_abs_error) =
        (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let mut non_finite = 0;
    for (&a, &b) in computed.iter().zip(reference) {
        if !a.is_finite() || !b.is_finite() {
            non_finite += 1;
            continue;
        }
        let (a, b) = (a as f64, b as f64);
        dot += a * b;
        norm_computed += a * a;
        norm_reference += b * b;
        max_abs_error = max_abs_error.max((a - b).abs());
    }
    let denominator = (norm_computed * norm_reference).sqrt();
    Agreement {
        cosine: if denominator > 0.0 {
            dot / denominator
        } else {
            0.0
        },
        max_abs_error,
        elements: computed.len().min(reference.len()),
        non_finite,
    }
}
