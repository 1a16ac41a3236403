//! FP16 (and BF16) conversions over the `half` crate: scalar rounding, bit
//! access and little-endian bulk byte converters. Rounding to f16 is round to
//! nearest, ties to even, and SATURATING: any value whose rounded magnitude
//! would exceed the f16 range (including ±infinity) becomes ±65504, the way
//! the target stores activations; NaN stays NaN. This module owns those
//! conversions; it must not know about tensors or files.

use half::{bf16, f16};

use crate::numerics::NumericsError;

/// Largest finite f16 magnitude.
pub const F16_MAX: f32 = 65504.0;

/// Smallest normal f16 magnitude, 2^-14.
const F16_SMALLEST_NORMAL: f32 = 6.103_515_6e-5;
/// Adding and subtracting this rounds magnitudes below 0.25 to multiples of
/// 2^-24 (the f16 subnormal spacing): its binade [0.5, 1) has that spacing.
const SUBNORMAL_SHIFTER: f32 = 0.75;
/// f32 mantissa bits dropped when rounding to the 10-bit f16 mantissa.
const DROPPED_MANTISSA_MASK: u32 = 0x1FFF;

/// Rounds to the nearest f16 (ties to even) and back; saturates to ±65504
/// instead of overflowing to infinity (infinite inputs saturate too); NaN
/// stays NaN. Branch-free so that loops over it vectorise; bit-identical to
/// converting through `half::f16` and saturating (tested).
#[inline]
pub fn round_f16(value: f32) -> f32 {
    let bits = value.to_bits();
    // Round to nearest even on the f32 pattern: a carry out of the mantissa
    // correctly increments the exponent.
    let round_bit = (bits >> 13) & 1;
    let normal = f32::from_bits(bits.wrapping_add(0x0FFF + round_bit) & !DROPPED_MANTISSA_MASK);
    let subnormal = ((value + SUBNORMAL_SHIFTER) - SUBNORMAL_SHIFTER).copysign(value);
    let rounded = if value.abs() < F16_SMALLEST_NORMAL {
        subnormal
    } else {
        normal
    };
    if value.is_nan() {
        value
    } else {
        rounded.clamp(-F16_MAX, F16_MAX)
    }
}

/// Bits of the f16 that [`round_f16`] produces.
pub fn to_f16_bits(value: f32) -> u16 {
    saturating_f16(value).to_bits()
}

/// Exact value of an f16 bit pattern.
pub fn from_f16_bits(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

/// Exact value of a bf16 bit pattern.
pub fn from_bf16_bits(bits: u16) -> f32 {
    bf16::from_bits(bits).to_f32()
}

fn saturating_f16(value: f32) -> f16 {
    let rounded = f16::from_f32(value);
    if rounded.is_infinite() {
        if value.is_sign_negative() {
            -f16::MAX
        } else {
            f16::MAX
        }
    } else {
        rounded
    }
}

/// Decodes little-endian f16 bytes; `bytes.len()` must be `2 * out.len()`.
pub fn f16_bytes_to_f32(bytes: &[u8], out: &mut [f32]) -> Result<(), NumericsError> {
    check_byte_length(bytes.len(), out.len(), 2)?;
    for (pair, value) in bytes.chunks_exact(2).zip(out.iter_mut()) {
        *value = from_f16_bits(u16::from_le_bytes([pair[0], pair[1]]));
    }
    Ok(())
}

/// Decodes little-endian bf16 bytes; `bytes.len()` must be `2 * out.len()`.
pub fn bf16_bytes_to_f32(bytes: &[u8], out: &mut [f32]) -> Result<(), NumericsError> {
    check_byte_length(bytes.len(), out.len(), 2)?;
    for (pair, value) in bytes.chunks_exact(2).zip(out.iter_mut()) {
        *value = from_bf16_bits(u16::from_le_bytes([pair[0], pair[1]]));
    }
    Ok(())
}

/// Encodes to little-endian f16 bytes with [`round_f16`] semantics;
/// `out.len()` must be `2 * values.len()`.
pub fn f32_to_f16_bytes(values: &[f32], out: &mut [u8]) -> Result<(), NumericsError> {
    check_byte_length(out.len(), values.len(), 2)?;
    for (value, pair) in values.iter().zip(out.chunks_exact_mut(2)) {
        pair.copy_from_slice(&to_f16_bits(*value).to_le_bytes());
    }
    Ok(())
}

/// Decodes little-endian f32 bytes; `bytes.len()` must be `4 * out.len()`.
pub fn f32_bytes_to_f32(bytes: &[u8], out: &mut [f32]) -> Result<(), NumericsError> {
    check_byte_length(bytes.len(), out.len(), 4)?;
    for (quad, value) in bytes.chunks_exact(4).zip(out.iter_mut()) {
        *value = f32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
    }
    Ok(())
}

/// Encodes to little-endian f32 bytes; `out.len()` must be `4 * values.len()`.
pub fn f32_to_bytes(values: &[f32], out: &mut [u8]) -> Result<(), NumericsError> {
    check_byte_length(out.len(), values.len(), 4)?;
    for (value, quad) in values.iter().zip(out.chunks_exact_mut(4)) {
        quad.copy_from_slice(&value.to_le_bytes());
    }
    Ok(())
}

fn check_byte_length(
    byte_length: usize,
    element_count: usize,
    element_bytes: usize,
) -> Result<(), NumericsError> {
    if element_count.checked_mul(element_bytes) == Some(byte_length) {
        Ok(())
    } else {
        Err(NumericsError::ByteLength {
            element_bytes,
            byte_length,
            element_count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(round_f16(1.0), 1.0);
        // f16 spacing at 1.0 is 2^-10; the midpoint 1 + 2^-11 ties to 1.0.
        assert_eq!(round_f16(1.0 + 2f32.powi(-11)), 1.0);
        assert_eq!(
            round_f16(1.0 + 3.0 * 2f32.powi(-11)),
            1.0 + 2.0 * 2f32.powi(-10)
        );
        assert_eq!(
            round_f16(1.0 + 2f32.powi(-11) + 2f32.powi(-20)),
            1.0 + 2f32.powi(-10)
        );
        // Smallest subnormal.
        assert_eq!(round_f16(2f32.powi(-24)), 2f32.powi(-24));
        assert_eq!(round_f16(2f32.powi(-26)), 0.0);
    }

    #[test]
    fn rounding_saturates_instead_of_overflowing() {
        assert_eq!(round_f16(65504.0), F16_MAX);
        assert_eq!(round_f16(65519.0), F16_MAX);
        assert_eq!(round_f16(65520.0), F16_MAX);
        assert_eq!(round_f16(1e9), F16_MAX);
        assert_eq!(round_f16(-1e9), -F16_MAX);
        assert_eq!(round_f16(f32::INFINITY), F16_MAX);
        assert_eq!(round_f16(f32::NEG_INFINITY), -F16_MAX);
        assert!(round_f16(f32::NAN).is_nan());
        assert_eq!(to_f16_bits(1e9), 0x7BFF);
        assert_eq!(to_f16_bits(-1e9), 0xFBFF);
    }

    #[test]
    fn fast_rounding_matches_the_half_crate() {
        let check = |value: f32| {
            let expected = saturating_f16(value).to_f32();
            let actual = round_f16(value);
            assert!(
                actual.to_bits() == expected.to_bits() || (actual.is_nan() && expected.is_nan()),
                "{value:e} ({:#010x}): {actual:e} vs {expected:e}",
                value.to_bits()
            );
        };
        // Every f16 value, its neighbours and the midpoints to the next one.
        for bits in 0..=u16::MAX {
            let value = from_f16_bits(bits);
            let next = from_f16_bits(bits.wrapping_add(1));
            for candidate in [value, (value + next) / 2.0] {
                check(candidate);
                check(f32::from_bits(candidate.to_bits().wrapping_add(1)));
                check(f32::from_bits(candidate.to_bits().wrapping_sub(1)));
            }
        }
        // A stride through all f32 patterns.
        for bits in (0..=u32::MAX).step_by(4099) {
            check(f32::from_bits(bits));
        }
        for value in [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            65520.0,
            -65520.0,
        ] {
            check(value);
        }
    }

    #[test]
    fn bits_round_trip_for_every_finite_f16() {
        for bits in 0..=u16::MAX {
            let value = from_f16_bits(bits);
            if value.is_finite() {
                assert_eq!(to_f16_bits(value), bits, "bits {bits:#06x}");
            }
        }
    }

    #[test]
    fn bulk_converters_round_trip_little_endian() {
        let values = [0.0f32, -1.5, 3.140625, 65504.0, -2f32.powi(-24)];
        let mut f16_bytes = vec![0u8; values.len() * 2];
        f32_to_f16_bytes(&values, &mut f16_bytes).unwrap();
        assert_eq!(&f16_bytes[2..4], &[0x00, 0xBE]); // -1.5 = 0xBE00
        let mut back = vec![0f32; values.len()];
        f16_bytes_to_f32(&f16_bytes, &mut back).unwrap();
        assert_eq!(back, values);

        let mut f32_bytes = vec![0u8; values.len() * 4];
        f32_to_bytes(&values, &mut f32_bytes).unwrap();
        assert_eq!(&f32_bytes[4..8], &(-1.5f32).to_le_bytes());
        let mut back = vec![0f32; values.len()];
        f32_bytes_to_f32(&f32_bytes, &mut back).unwrap();
        assert_eq!(back, values);

        let bf16_bytes = [0x80, 0x3F, 0xC0, 0xBF]; // 1.0, -1.5
        let mut back = [0f32; 2];
        bf16_bytes_to_f32(&bf16_bytes, &mut back).unwrap();
        assert_eq!(back, [1.0, -1.5]);
    }

    #[test]
    fn bulk_converters_reject_length_mismatch() {
        let mut out = [0f32; 2];
        assert_eq!(
            f16_bytes_to_f32(&[0u8; 5], &mut out),
            Err(NumericsError::ByteLength {
                element_bytes: 2,
                byte_length: 5,
                element_count: 2
            })
        );
        assert!(f32_bytes_to_f32(&[0u8; 4], &mut out).is_err());
        assert!(f32_to_bytes(&[1.0], &mut [0u8; 3]).is_err());
        assert!(f32_to_f16_bytes(&[1.0], &mut [0u8; 4]).is_err());
    }
}
