//! What a kernel run noticed about its values (`KernelNotes`), in a file of
//! its own so that each kernel's file reports into it without importing the
//! dispatcher (`mod.rs`) that declares the kernels' files.

/// What a kernel run noticed about its values: how many activations it
/// rounded to FP8 for an FP8 x FP8 product (a product casting its FP16
/// block, an attention casting its value block for an FP8 `PV` product,
/// or a producer writing FP8 for such products; attention's probabilities,
/// which cannot saturate, are not counted), and how many of those were
/// beyond the format's range at their scale (saturated to +-240 x 2^scale).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelNotes {
    pub fp8_activations: u64,
    pub saturated_activations: u64,
}

impl std::ops::AddAssign for KernelNotes {
    fn add_assign(&mut self, other: KernelNotes) {
        self.fp8_activations += other.fp8_activations;
        self.saturated_activations += other.saturated_activations;
    }
}
