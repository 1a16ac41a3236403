//! The FP8 "F143" weight format: 1 sign, 4 exponent and 3 mantissa bits,
//! exponent bias 8, subnormals when the exponent field is 0, no infinities,
//! and the single NaN `0x80` (the would-be negative zero). A tensor-wide
//! power-of-two scale exponent `scale` makes code `c` mean
//! `decode_unscaled(c) * 2^scale`. This module owns the exact encode
//! (round to nearest, ties to even, saturating) and decode; it must not know
//! about tensors, layouts or files, and must never produce NaN from a number.

/// Largest finite magnitude: `2^(15 - 8) * 1.875`.
pub const F143_MAX: f32 = 240.0;
/// The single NaN code (the bit pattern of negative zero).
pub const F143_NAN: u8 = 0x80;
/// The code of `+F143_MAX`; `F143_MAX_CODE | 0x80` is `-F143_MAX`.
pub const F143_MAX_CODE: u8 = 0x7F;

const SIGN_BIT: u8 = 0x80;
const EXPONENT_BIAS: i32 = 8;
const MANTISSA_BITS: i32 = 3;
const MANTISSA_MASK: u8 = 0x07;
const EXPONENT_MASK: u8 = 0x0F;
/// Exponent of the smallest normal magnitude, `2^(1 - bias)`.
const MINIMUM_NORMAL_EXPONENT: i32 = 1 - EXPONENT_BIAS;
/// Exponent of the spacing between subnormals, `2^(1 - bias - 3)`.
const SUBNORMAL_QUANTUM_EXPONENT: i32 = MINIMUM_NORMAL_EXPONENT - MANTISSA_BITS;

/// Value of `code` without the tensor scale; NaN for [`F143_NAN`].
pub fn decode_unscaled(code: u8) -> f32 {
    if code == F143_NAN {
        return f32::NAN;
    }
    let exponent_field = i32::from((code >> MANTISSA_BITS) & EXPONENT_MASK);
    let mantissa = f32::from(code & MANTISSA_MASK);
    let magnitude = if exponent_field == 0 {
        mantissa * power_of_two_f32(SUBNORMAL_QUANTUM_EXPONENT)
    } else {
        (8.0 + mantissa) * power_of_two_f32(exponent_field - EXPONENT_BIAS - MANTISSA_BITS)
    };
    if code & SIGN_BIT != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// Value of `code` under the tensor scale: `decode_unscaled(code) * 2^scale`,
/// rounded once to f32 (so it is exact whenever the result is a normal f32;
/// scales beyond the f32 range give infinity or zero).
pub fn decode(code: u8, scale: i32) -> f32 {
    let unscaled = decode_unscaled(code);
    if scale == 0 || unscaled.is_nan() {
        return unscaled;
    }
    scale_by_power_of_two(f64::from(unscaled), scale) as f32
}

/// All 256 decoded values under `scale`, for table-driven decoding.
pub fn decode_table(scale: i32) -> [f32; 256] {
    std::array::from_fn(|index| decode(index as u8, scale))
}

/// The scales [`quantise_in_place`] rounds by arithmetic: every quantity it
/// forms (the smallest subnormal step `2^(scale - 10)`, the rounding
/// shifter `2^(scale + 13)`, `240 x 2^scale`) is then a normal, finite
/// f32.
const ARITHMETIC_SCALES: std::ops::RangeInclusive<i32> = -100..=100;

/// Replaces every value by the one F143 at `scale` stores for it,
/// `decode(encode(value, scale), scale)`, bit for bit: by arithmetic lane
/// by lane, without branches or a table, so that the loop vectorises (run
/// it under [`super::wide::with_wide_vectors`]); scales outside
/// [`ARITHMETIC_SCALES`] go through the encoder.
#[inline(always)]
pub fn quantise_in_place(values: &mut [f32], scale: i32) {
    if !ARITHMETIC_SCALES.contains(&scale) {
        let table = decode_table(scale);
        for value in values {
            *value = table[usize::from(encode(*value, scale))];
        }
        return;
    }
    const DROPPED_BITS: u32 = 23 - MANTISSA_BITS as u32;
    const HALF_BELOW: u32 = (1 << (DROPPED_BITS - 1)) - 1;
    const KEPT: u32 = !((1 << DROPPED_BITS) - 1);
    const MAGNITUDE: u32 = 0x7FFF_FFFF;
    let smallest_normal = power_of_two_f32(scale + MINIMUM_NORMAL_EXPONENT);
    // Its last place is the subnormal step: adding it to a magnitude below
    // the smallest normal rounds that to a multiple of the step, ties to
    // even, and subtracting it again is exact.
    let shifter = power_of_two_f32(scale + SUBNORMAL_QUANTUM_EXPONENT + 23);
    let largest = F143_MAX * power_of_two_f32(scale);
    for value in values {
        let bits = value.to_bits();
        let magnitude_bits = bits & MAGNITUDE;
        let magnitude = f32::from_bits(magnitude_bits);
        // Normal binades: the mantissa rounded to three bits, ties to even
        // (a carry moves into the next binade; an infinity stays one).
        let normal = f32::from_bits(
            (magnitude_bits + HALF_BELOW + ((magnitude_bits >> DROPPED_BITS) & 1)) & KEPT,
        );
        let subnormal = (magnitude + shifter) - shifter;
        let rounded = if magnitude < smallest_normal {
            subnormal
        } else {
            normal
        };
        let stored = if rounded < largest { rounded } else { largest };
        // A zero is +0 (code 0x00); the sign goes on anything else.
        let sign = (bits & !MAGNITUDE) * u32::from(stored != 0.0);
        let signed = f32::from_bits(stored.to_bits() | sign);
        *value = if magnitude.is_nan() { f32::NAN } else { signed };
    }
}

/// The smallest scale under which a tensor whose largest magnitude is
/// `largest` does not saturate: the least `s` with `largest <= 240 * 2^s`,
/// so the tensor uses F143's whole range and keeps the most precision its
/// largest element allows. A zero (or non-finite, or negative) `largest`
/// has no such scale to find and gives 0.
pub fn unsaturated_scale(largest: f32) -> i32 {
    if !(largest.is_finite() && largest > 0.0) {
        return 0;
    }
    let limit = |scale: i32| scale_by_power_of_two(f64::from(F143_MAX), scale);
    let largest = f64::from(largest);
    let mut scale = (largest / f64::from(F143_MAX)).log2().ceil() as i32;
    // The logarithm is within one of the answer; step to it exactly.
    while limit(scale) < largest {
        scale += 1;
    }
    while limit(scale - 1) >= largest {
        scale -= 1;
    }
    scale
}

/// Encodes `value / 2^scale` (the division is exact): round to nearest, ties
/// to even; magnitudes at or above 240 after rounding (including infinities)
/// saturate to ±240; results that round to zero (including `-0.0`) give
/// `+0` (`0x00`); only a NaN input gives [`F143_NAN`].
pub fn encode(value: f32, scale: i32) -> u8 {
    match encode_normal(value, scale) {
        Some(code) => code,
        None => encode_in_f64(value, scale),
    }
}

/// Largest exponent of a binade holding F143 values (`2^7 x 1.875 = 240`).
const MAXIMUM_NORMAL_EXPONENT: i32 = (EXPONENT_MASK as i32) - EXPONENT_BIAS;

/// [`encode`] from the f32's bits, for a normal `value` whose unscaled
/// magnitude lies in one of F143's normal binades (`2^-7 .. 2^8`): its
/// 23 mantissa bits rounded to 3, to nearest with ties to even (a carry
/// moves to the next binade's code), saturating at 240. `None` for every
/// other value (zero, subnormals, F143's subnormal range, beyond 2^8,
/// infinities, NaN), which [`encode_in_f64`] encodes. The same codes as
/// that general path wherever this one answers.
fn encode_normal(value: f32, scale: i32) -> Option<u8> {
    const DROPPED_BITS: u32 = 23 - MANTISSA_BITS as u32;
    let bits = value.to_bits();
    let biased = ((bits >> 23) & 0xFF) as i32;
    if biased == 0 || biased == 0xFF {
        return None;
    }
    let exponent = (biased - 127).checked_sub(scale)?;
    if !(MINIMUM_NORMAL_EXPONENT..=MAXIMUM_NORMAL_EXPONENT).contains(&exponent) {
        return None;
    }
    let mantissa = bits & 0x7F_FFFF;
    let kept = mantissa >> DROPPED_BITS;
    let low = mantissa & ((1 << DROPPED_BITS) - 1);
    let half = 1 << (DROPPED_BITS - 1);
    let rounds_up = low > half || (low == half && kept & 1 == 1);
    // Steps of the binade's quantum: 8 + kept (+1), as the f64 path counts.
    let steps = 8 + kept as i32 + i32::from(rounds_up);
    let code = (((exponent + EXPONENT_BIAS) << MANTISSA_BITS) + steps - 8)
        .min(i32::from(F143_MAX_CODE)) as u8;
    Some(if bits >> 31 == 1 {
        code | SIGN_BIT
    } else {
        code
    })
}

/// [`encode`] for any value: scaled exactly in f64 and rounded there.
fn encode_in_f64(value: f32, scale: i32) -> u8 {
    if value.is_nan() {
        return F143_NAN;
    }
    let unscaled = scale_by_power_of_two(f64::from(value), scale.saturating_neg());
    let code = round_magnitude(unscaled.abs());
    if code == 0 || unscaled.is_sign_positive() {
        code
    } else {
        code | SIGN_BIT
    }
}

/// Nearest code (ties to even) for a non-negative, non-NaN magnitude;
/// saturates at [`F143_MAX_CODE`].
fn round_magnitude(magnitude: f64) -> u8 {
    if magnitude >= f64::from(F143_MAX) {
        return F143_MAX_CODE;
    }
    let binade_exponent = if magnitude < power_of_two_f64(MINIMUM_NORMAL_EXPONENT) {
        None
    } else {
        Some(floor_log2(magnitude))
    };
    let quantum_exponent = match binade_exponent {
        None => SUBNORMAL_QUANTUM_EXPONENT,
        Some(exponent) => exponent - MANTISSA_BITS,
    };
    // Exact: multiplying by a power of two within the f64 range.
    let steps = (magnitude * power_of_two_f64(-quantum_exponent)).round_ties_even() as i32;
    let code = match binade_exponent {
        // Subnormal steps 0..=8; step 8 is the smallest normal code 0x08.
        None => steps,
        // Normal steps 8..=16; step 16 carries into the next exponent field.
        Some(exponent) => ((exponent + EXPONENT_BIAS) << MANTISSA_BITS) + steps - 8,
    };
    code.clamp(0, i32::from(F143_MAX_CODE)) as u8
}

/// Exponent of the binade of a positive normal f64.
fn floor_log2(value: f64) -> i32 {
    ((value.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

/// `2^exponent` for exponents in the normal f32 range.
fn power_of_two_f32(exponent: i32) -> f32 {
    f32::from_bits(((exponent + 127) as u32) << 23)
}

/// `2^exponent` for exponents in the normal f64 range.
fn power_of_two_f64(exponent: i32) -> f64 {
    f64::from_bits(((exponent + 1023) as u64) << 52)
}

/// `value * 2^exponent` in steps that are each exact powers of two, so the
/// product is exact unless it leaves the f64 range (where every f32 result is
/// zero or infinity anyway).
fn scale_by_power_of_two(value: f64, exponent: i32) -> f64 {
    const STEP: i32 = 1000;
    let mut remaining = exponent.clamp(-4 * STEP, 4 * STEP);
    let mut result = value;
    while remaining > STEP {
        result *= power_of_two_f64(STEP);
        remaining -= STEP;
    }
    while remaining < -STEP {
        result *= power_of_two_f64(-STEP);
        remaining += STEP;
    }
    result * power_of_two_f64(remaining)
}

#[cfg(test)]
mod tests {

    use super::*;

    /// The arithmetic rounding against the encoder and the decoder: every
    /// 1009th f32 bit pattern (NaNs, infinities, zeros, subnormals and both
    /// signs among them) and the edges of every binade, at scales across
    /// the arithmetic range and beyond it.
    #[test]
    fn arithmetic_rounding_is_the_encoders_bit_for_bit() {
        let mut values: Vec<f32> = (0..u32::MAX / 1009)
            .map(|i| f32::from_bits(i * 1009))
            .collect();
        for exponent in -140..=140 {
            let power = 2f64.powi(exponent);
            for steps in 0..=32u32 {
                for nudge in [-1i32, 0, 1] {
                    let base = (power * (1.0 + f64::from(steps) / 32.0)) as f32;
                    let value = f32::from_bits(base.to_bits().wrapping_add_signed(nudge));
                    values.extend([value, -value]);
                }
            }
        }
        values.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            0.0,
            -0.0,
        ]);
        for scale in [-120, -101, -100, -20, -9, -4, 0, 3, 17, 100, 101, 119] {
            let table = decode_table(scale);
            let mut rounded = values.clone();
            quantise_in_place(&mut rounded, scale);
            let mut wide = values.clone();
            crate::numerics::wide::with_wide_vectors(|| quantise_in_place(&mut wide, scale));
            assert!(
                rounded
                    .iter()
                    .zip(&wide)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
            for (value, got) in values.iter().zip(&rounded) {
                let expected = table[usize::from(encode(*value, scale))];
                assert_eq!(
                    got.to_bits(),
                    expected.to_bits(),
                    "scale {scale}: {value:e} ({:#010x}) gave {got:e}, the encoder {expected:e}",
                    value.to_bits()
                );
            }
        }
    }

    fn numeric_codes() -> impl Iterator<Item = u8> {
        (0..=u8::MAX).filter(|&code| code != F143_NAN)
    }

    #[test]
    fn every_numeric_code_round_trips() {
        for scale in -20..=20 {
            for code in numeric_codes() {
                assert_eq!(
                    encode(decode(code, scale), scale),
                    code,
                    "code {code:#04x} scale {scale}"
                );
            }
        }
    }

    #[test]
    fn the_bit_path_encodes_as_the_f64_path() {
        // Every binade from below F143's subnormals to beyond saturation,
        // every kept mantissa, and the dropped bits at and around the tie.
        let lows = [
            0u32, 1, 0x4_0000, 0x7_FFFF, 0x8_0000, 0x8_0001, 0xC_0000, 0xF_FFFF,
        ];
        let mut checked = 0;
        for scale in -12..=12 {
            for exponent in -14..=12 {
                let biased = (exponent + scale + 127) as u32;
                for kept in 0..8u32 {
                    for &low in &lows {
                        for sign in [0u32, 1] {
                            let bits = sign << 31 | biased << 23 | kept << 20 | low;
                            let value = f32::from_bits(bits);
                            let expected = encode_in_f64(value, scale);
                            if let Some(code) = encode_normal(value, scale) {
                                assert_eq!(code, expected, "{value:e} at scale {scale}");
                                checked += 1;
                            }
                            assert_eq!(encode(value, scale), expected);
                        }
                    }
                }
            }
        }
        assert!(checked > 25_000, "the bit path answered {checked} times");
    }

    #[test]
    fn nan_code_and_nan_input() {
        assert!(decode(F143_NAN, 0).is_nan());
        assert!(decode(F143_NAN, -4).is_nan());
        assert_eq!(encode(f32::NAN, 0), F143_NAN);
        assert_eq!(encode(-f32::NAN, 3), F143_NAN);
    }

    #[test]
    fn known_values() {
        assert_eq!(decode_unscaled(0x00), 0.0);
        assert_eq!(decode_unscaled(0x01), 2f32.powi(-10));
        assert_eq!(decode_unscaled(0x07), 7.0 * 2f32.powi(-10));
        assert_eq!(decode_unscaled(0x08), 2f32.powi(-7));
        assert_eq!(decode_unscaled(0x40), 1.0);
        assert_eq!(decode_unscaled(0x41), 1.125);
        assert_eq!(decode_unscaled(0x7F), F143_MAX);
        assert_eq!(decode_unscaled(0xFF), -F143_MAX);
        assert_eq!(decode_unscaled(0xC0), -1.0);
        assert_eq!(decode_unscaled(0x81), -(2f32.powi(-10)));
    }

    #[test]
    fn decode_is_strictly_monotonic_and_symmetric() {
        for code in 0..F143_MAX_CODE {
            assert!(decode(code, 0) < decode(code + 1, 0), "code {code:#04x}");
        }
        for code in 1..=F143_MAX_CODE {
            assert_eq!(decode(code | SIGN_BIT, 0), -decode(code, 0));
        }
    }

    #[test]
    fn midpoints_round_to_even_and_neighbours_to_nearest() {
        for code in 0..F143_MAX_CODE {
            let low = decode(code, 0);
            let high = decode(code + 1, 0);
            let midpoint = (low + high) / 2.0; // exact: 5 significant bits
            assert_eq!(
                f64::from(midpoint),
                (f64::from(low) + f64::from(high)) / 2.0
            );
            let even = if code % 2 == 0 { code } else { code + 1 };
            assert_eq!(encode(midpoint, 0), even, "midpoint after {code:#04x}");
            let negative_even = if even == 0 { 0 } else { even | SIGN_BIT };
            assert_eq!(
                encode(-midpoint, 0),
                negative_even,
                "negative midpoint after {code:#04x}"
            );
            let above = f32::from_bits(midpoint.to_bits() + 1);
            let below = f32::from_bits(midpoint.to_bits() - 1);
            assert_eq!(encode(above, 0), code + 1);
            assert_eq!(encode(below, 0), code);
        }
    }

    #[test]
    fn zeros_and_tiny_values_encode_to_positive_zero() {
        assert_eq!(encode(0.0, 0), 0x00);
        assert_eq!(encode(-0.0, 0), 0x00);
        assert_eq!(encode(-(2f32.powi(-11)), 0), 0x00);
        assert_eq!(encode(-1e-30, 0), 0x00);
        assert_eq!(encode(f32::from_bits(1), 0), 0x00);
        assert_eq!(encode(-(2f32.powi(-11)) * 1.001, 0), 0x81);
    }

    #[test]
    fn saturation() {
        assert_eq!(encode(240.0, 0), F143_MAX_CODE);
        assert_eq!(encode(247.9, 0), F143_MAX_CODE);
        assert_eq!(encode(248.0, 0), F143_MAX_CODE);
        assert_eq!(encode(1e30, 0), F143_MAX_CODE);
        assert_eq!(encode(f32::MAX, 0), F143_MAX_CODE);
        assert_eq!(encode(f32::INFINITY, 0), F143_MAX_CODE);
        assert_eq!(encode(-1e30, 0), F143_MAX_CODE | SIGN_BIT);
        assert_eq!(encode(f32::NEG_INFINITY, 0), 0xFF);
        assert_eq!(encode(f32::NEG_INFINITY, -100), 0xFF);
        // 232 is the tie between 224 (even mantissa 6) and 240 (odd mantissa 7).
        assert_eq!(encode(232.0, 0), 0x7E);
        assert_eq!(encode(232.5, 0), 0x7F);
    }

    #[test]
    fn scale_is_an_exact_power_of_two() {
        assert_eq!(encode(1.0, -4), 0x60);
        assert_eq!(decode(0x60, -4), 1.0);
        assert_eq!(decode(0x7F, -4), 15.0);
        assert_eq!(encode(15.0, -4), F143_MAX_CODE);
        assert_eq!(encode(16.0, -4), F143_MAX_CODE);
        assert_eq!(encode(240.0 * 1024.0, 10), F143_MAX_CODE);
        for scale in -30..=30 {
            for code in numeric_codes() {
                let expected = f64::from(decode_unscaled(code)) * 2f64.powi(scale);
                assert_eq!(f64::from(decode(code, scale)), expected);
            }
        }
    }

    #[test]
    fn unsaturated_scale_is_the_least_that_does_not_saturate() {
        assert_eq!(unsaturated_scale(240.0), 0);
        assert_eq!(unsaturated_scale(240.5), 1);
        assert_eq!(unsaturated_scale(15.0), -4);
        assert_eq!(unsaturated_scale(15.01), -3);
        assert_eq!(unsaturated_scale(0.0), 0);
        assert_eq!(unsaturated_scale(f32::NAN), 0);
        let mut largest = 1.0e-30f32;
        while largest < 1.0e30 {
            let scale = unsaturated_scale(largest);
            let limit = |scale: i32| f64::from(F143_MAX) * 2f64.powi(scale);
            assert!(f64::from(largest) <= limit(scale), "{largest} at {scale}");
            assert!(
                f64::from(largest) > limit(scale - 1),
                "{largest} at {scale}"
            );
            // Encoded at its scale, the largest element keeps its value to
            // within half a step of three mantissa bits.
            let decoded = decode(encode(largest, scale), scale);
            assert!(
                (decoded - largest).abs() <= largest / 16.0,
                "{largest}: {decoded}"
            );
            largest *= 1.37;
        }
    }

    #[test]
    fn extreme_scales_do_not_panic() {
        assert_eq!(encode(1.0, i32::MAX), 0x00);
        assert_eq!(encode(1.0, i32::MIN), F143_MAX_CODE);
        assert_eq!(encode(-1.0, i32::MIN), 0xFF);
        assert_eq!(decode(0x01, i32::MIN), 0.0);
        assert_eq!(decode(0x01, -200), 0.0);
        assert_eq!(decode(0x7F, i32::MAX), f32::INFINITY);
        assert_eq!(decode(0xFF, 200), f32::NEG_INFINITY);
        // 2^-10 * 2^-139 = 2^-149, the smallest f32 subnormal.
        assert_eq!(decode(0x01, -139), f32::from_bits(1));
    }

    #[test]
    fn table_matches_decode() {
        for scale in [-7, -4, 0, 3] {
            let table = decode_table(scale);
            for code in 0..=u8::MAX {
                let expected = decode(code, scale);
                let actual = table[usize::from(code)];
                assert!(
                    expected.to_bits() == actual.to_bits(),
                    "code {code:#04x} scale {scale}"
                );
            }
        }
    }

    #[derive(serde::Serialize)]
    struct CodeEntry {
        code: String,
        fields: String,
        value: String,
    }

    #[test]
    fn code_table_snapshot() {
        let entries: Vec<CodeEntry> = (0..=u8::MAX)
            .map(|code| CodeEntry {
                code: format!("{code:#04x}"),
                fields: format!(
                    "{} {:04b} {:03b}",
                    code >> 7,
                    (code >> 3) & 0x0F,
                    code & 0x07
                ),
                value: format!("{}", decode_unscaled(code)),
            })
            .collect();
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
            prepend_module_to_snapshot => false,
        }, {
            insta::assert_yaml_snapshot!("fp8_f143_codes", entries);
        });
    }
}
