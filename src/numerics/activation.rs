//! Reference activation functions: the two GELU variants and the error
//! function behind the exact one. Everything is evaluated in f64 and rounded
//! once to f32, so these are reference values (error well below 1e-7), not a
//! model of any device approximation. It owns scalar activations only; it
//! must not know about tensors or layouts.

use std::f64::consts::{FRAC_2_SQRT_PI, SQRT_2};

/// Below this magnitude `erf` uses its Maclaurin series; above, the
/// continued fraction of `erfc`. Both agree to about 1e-15 at the switch.
const SERIES_LIMIT: f64 = 2.0;
/// Beyond this magnitude `erf` is ±1 to well below f64 precision.
const SATURATION_LIMIT: f64 = 6.0;
/// Depth of the backward-evaluated `erfc` continued fraction (converged to
/// below 1e-15 for arguments of at least [`SERIES_LIMIT`]).
const CONTINUED_FRACTION_DEPTH: u32 = 40;

/// GELU, tanh approximation: `0.5 x (1 + tanh(u))` with
/// `u = sqrt(2/pi) (x + 0.044715 x^3)`, evaluated as `x / (1 + exp(-2u))`
/// (`1 + tanh(u) = 2 / (1 + exp(-2u))`): one exponential instead of a
/// hyperbolic tangent (a third of the time), and no cancellation where
/// `tanh(u)` nears -1.
pub fn gelu_tanh(x: f32) -> f32 {
    let x = f64::from(x);
    let inner = (FRAC_2_SQRT_PI / SQRT_2) * (x + 0.044715 * x * x * x);
    (x / (1.0 + (-2.0 * inner).exp())) as f32
}

/// GELU, exact form: `0.5 x (1 + erf(x / sqrt(2)))`.
pub fn gelu_erf(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * (1.0 + erf_f64(x / SQRT_2))) as f32
}

/// The error function, absolute error below 1e-7 (about 1e-15 before the
/// final rounding to f32).
pub fn erf(x: f32) -> f32 {
    erf_f64(f64::from(x)) as f32
}

fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let magnitude = x.abs();
    let value = if magnitude < SERIES_LIMIT {
        erf_series(magnitude)
    } else if magnitude < SATURATION_LIMIT {
        1.0 - erfc_continued_fraction(magnitude)
    } else {
        1.0
    };
    value.copysign(x)
}

/// `erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))`, summed until
/// the terms no longer change the sum.
fn erf_series(x: f64) -> f64 {
    let square = x * x;
    let mut power_over_factorial = x;
    let mut sum = x;
    let mut index = 1.0;
    while index < 200.0 {
        power_over_factorial *= -square / index;
        let term = power_over_factorial / (2.0 * index + 1.0);
        sum += term;
        if term.abs() <= 1e-17 * sum.abs() {
            break;
        }
        index += 1.0;
    }
    sum * FRAC_2_SQRT_PI
}

/// `erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`,
/// evaluated backwards from a fixed depth; for `x >= 2`.
fn erfc_continued_fraction(x: f64) -> f64 {
    let mut denominator = x;
    for index in (1..=CONTINUED_FRACTION_DEPTH).rev() {
        denominator = x + (f64::from(index) * 0.5) / denominator;
    }
    (-x * x).exp() * (0.5 * FRAC_2_SQRT_PI) / denominator
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(actual: f32, expected: f64, tolerance: f64) {
        assert!(
            (f64::from(actual) - expected).abs() <= tolerance,
            "actual {actual}, expected {expected}"
        );
    }

    /// The exponential form is the tanh form: within one f32 step of the
    /// f64 tanh formula over [-4, 12) and equal in at least 99.9% of the
    /// points. Below -4, where `1 + tanh(u)` cancels in f64, it matches
    /// `x e^(2u) / (1 + e^(2u))` to a relative 1e-6; alike at the ends.
    #[test]
    fn gelu_tanh_is_the_tanh_formula() {
        let inner = |x: f64| (FRAC_2_SQRT_PI / SQRT_2) * (x + 0.044715 * x * x * x);
        let tanh_form = |x: f32| {
            let x = f64::from(x);
            (0.5 * x * (1.0 + inner(x).tanh())) as f32
        };
        let (mut points, mut equal) = (0u32, 0u32);
        for step in -40_000..120_000 {
            let x = step as f32 * 1e-4;
            let (ours, expected) = (gelu_tanh(x), tanh_form(x));
            let apart =
                (i64::from(ours.to_bits() as i32) - i64::from(expected.to_bits() as i32)).abs();
            assert!(apart <= 1, "x = {x}: {ours} against {expected}");
            points += 1;
            equal += u32::from(ours == expected);
        }
        assert!(equal * 1000 >= points * 999, "{equal} of {points} equal");
        for step in -120_000..-40_000 {
            let x = step as f32 * 1e-4;
            let growth = (2.0 * inner(f64::from(x))).exp();
            let expected = f64::from(x) * growth / (1.0 + growth);
            let ours = f64::from(gelu_tanh(x));
            assert!(
                (ours - expected).abs() <= 1e-6 * expected.abs() + 1e-44,
                "x = {x}: {ours} against {expected}"
            );
        }
        assert_eq!(gelu_tanh(0.0), 0.0);
        assert_eq!(gelu_tanh(-100.0), 0.0);
        assert_eq!(gelu_tanh(f32::INFINITY), f32::INFINITY);
        assert!(gelu_tanh(f32::NAN).is_nan());
        assert_close(gelu_tanh(1.0), 0.8411919906082768, 1e-7);
    }

    #[test]
    fn erf_matches_tabulated_values() {
        let table = [
            (0.0, 0.0),
            (0.1, 0.1124629160182849),
            (0.25, 0.2763263901682369),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (1.5, 0.9661051464753108),
            (2.0, 0.9953222650189527),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.9999779095030014),
            (4.0, 0.9999999845827421),
        ];
        for (x, expected) in table {
            assert_close(erf(x as f32), expected, 1e-7);
            assert_close(erf(-x as f32), -expected, 1e-7);
            assert!((erf_f64(x) - expected).abs() < 1e-14, "x = {x}");
        }
        assert_eq!(erf(10.0), 1.0);
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert!(erf(f32::NAN).is_nan());
    }

    #[test]
    fn series_and_continued_fraction_agree_at_the_switch() {
        for step in 0..=20 {
            let x = 1.8 + 0.02 * f64::from(step);
            let difference = erf_series(x) - (1.0 - erfc_continued_fraction(x));
            assert!(difference.abs() < 1e-14, "x = {x}: {difference:e}");
        }
    }

    #[test]
    fn gelu_matches_known_values() {
        assert_close(gelu_erf(1.0), 0.8413447460685429, 1e-7);
        assert_close(gelu_erf(-1.0), -0.15865525393145707, 1e-7);
        assert_close(gelu_erf(2.0), 1.9544997361036416, 1e-7);
        assert_close(gelu_erf(0.0), 0.0, 0.0);
        assert_close(gelu_tanh(1.0), 0.8411919906082768, 1e-7);
        assert_close(gelu_tanh(-1.0), -0.1588080093917232, 1e-7);
        for x in [0.5f32, 1.0, 2.0, 3.0] {
            // The tanh form satisfies gelu(-x) = gelu(x) - x.
            assert_close(gelu_tanh(-x), f64::from(gelu_tanh(x)) - f64::from(x), 1e-6);
        }
        assert_eq!(gelu_tanh(-20.0), 0.0);
        assert_eq!(gelu_erf(20.0), 20.0);
        assert_eq!(gelu_erf(-40.0), 0.0);
    }
}
