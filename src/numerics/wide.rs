//! Runs a loop body compiled for the CPU's widest vectors: AVX-512 (with
//! its 64-bit lane multiplies) where the processor has it, as detected when
//! called, else the baseline instructions. The body is the same code either
//! way and uses only exactly rounded operations (integer arithmetic, single
//! IEEE additions and multiplications, which Rust never fuses), so both
//! give the same bits; only the speed differs. Seeded weight generation
//! and FP8 rounding, made for every weight a cold build calibrates on, run
//! through it: their loops vectorise eight or sixteen lanes wide instead
//! of not at all (SplitMix's 64-bit multiplies have no baseline vector
//! form).

/// Runs `body`, compiled with AVX-512 when this CPU has it.
#[inline(always)]
pub fn with_wide_vectors<T>(body: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_available() {
            // SAFETY: the features `wide` is compiled for were detected on
            // this CPU just above.
            return unsafe { wide(body) };
        }
    }
    body()
}

#[cfg(target_arch = "x86_64")]
fn avx512_available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

/// `body` inlined into a function compiled for AVX-512.
///
/// # Safety
/// The CPU must have AVX-512 F, DQ, VL and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw")]
unsafe fn wide<T>(body: impl FnOnce() -> T) -> T {
    body()
}

#[cfg(test)]
mod tests {
    use super::with_wide_vectors;

    #[test]
    fn the_wide_body_gives_the_bits_of_the_plain_one() {
        let draw = |index: u64| {
            let z = index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 0.37 - 0.11
        };
        let plain: Vec<f32> = (0..100_000u64).map(draw).collect();
        let wide: Vec<f32> = with_wide_vectors(|| (0..100_000u64).map(draw).collect());
        assert!(
            plain
                .iter()
                .zip(&wide)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
    }
}
