//! Deterministic pseudo-random numbers for tests (SplitMix64). It owns test
//! data generation only; it must not be used outside `#[cfg(test)]` code.

pub(crate) struct TestRandom {
    state: u64,
}

impl TestRandom {
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// Uniform in `[low, high)`.
    pub(crate) fn uniform(&mut self, low: f32, high: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        low + (high - low) * unit
    }

    /// Uniform integer in `[low, high]`.
    pub(crate) fn between(&mut self, low: usize, high: usize) -> usize {
        let span = (high - low + 1) as u64;
        low + (self.next_u64() % span) as usize
    }

    pub(crate) fn vector(&mut self, length: usize, low: f32, high: f32) -> Vec<f32> {
        (0..length).map(|_| self.uniform(low, high)).collect()
    }
}
