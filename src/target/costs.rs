//! Cost figures of one tile and the chip clock: matrix-unit and vector-unit
//! throughput, sync and launch overheads, local copies, exchange bandwidth and
//! Repeat patching. This module owns these numbers and the small formulas that
//! turn work into cycles. It must not decide what work exists or schedule it;
//! figures marked "model" are modelling choices, not hardware facts.

/// Matrix-unit multiply-accumulates per cycle per tile with FP16 inputs (IPU21.md, "Chip": AMP).
pub const MATRIX_FP16_MACS_PER_CYCLE: u64 = 64;

/// Matrix-unit multiply-accumulates per cycle per tile with FP8 inputs (IPU21.md, "Chip": AMP, IPU21 only).
pub const MATRIX_FP8_MACS_PER_CYCLE: u64 = 128;

/// Global sync cost per exchange phase in cycles (IPU21.md, "Chip": about 600).
pub const GLOBAL_SYNC_CYCLES_PER_PHASE: u64 = 600;

/// Setup and sync cycles above the scheduled horizon per phase (CALIBRATION.md, "Exchange phases":
/// 230-280 cycles measured above the horizon; the midpoint).
pub const PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES: u64 = 255;

/// Cycles to launch a kernel (IPU21.md, "Chip": kernel launch about 11).
pub const KERNEL_LAUNCH_CYCLES: u64 = 11;

/// Bytes a local copy moves per cycle (IPU21.md, "Chip": about 8).
pub const LOCAL_COPY_BYTES_PER_CYCLE: u64 = 8;

/// Fixed cycles of one local copy call using six workers (CALIBRATION.md: the smallest
/// six-worker call measured, an add of 4 values, 378 cycles).
pub const LOCAL_COPY_CALL_CYCLES: u64 = 378;

/// 32-bit words the exchange moves per event per direction per tile (IPU21.md, "Chip": exchange).
pub const EXCHANGE_WORDS_PER_EVENT_PER_DIRECTION: u64 = 1;

/// Bytes in one exchange word (IPU21.md, "Chip": one 32-bit word).
pub const EXCHANGE_WORD_BYTES: u64 = 4;

/// Fabric directions per tile (IPU21.md, "Exchange instructions": send-control bits 0-1).
pub const EXCHANGE_DIRECTIONS: u64 = 2;

/// Clock used to convert cycles to time in reports (IPU21.md, "Chip": 1.5 GHz).
pub const CLOCK_HERTZ: f64 = 1.5e9;

/// Cycles per millisecond at the report clock (IPU21.md, "Chip": 1.5 GHz).
pub const CYCLES_PER_MILLISECOND: f64 = CLOCK_HERTZ / 1_000.0;

/// Worker contexts per tile (IPU21.md, "Chip": 6 workers).
pub const WORKERS_PER_TILE: u32 = 6;

/// Supervisor contexts per tile (IPU21.md, "Chip": 1 supervisor).
pub const SUPERVISORS_PER_TILE: u32 = 1;

/// Supervisor instructions per arithmetic patch of one word (IPU21.md, "Repeat and patching": about nine).
pub const ARITHMETIC_PATCH_INSTRUCTIONS_PER_WORD: u64 = 9;

/// Tile cycles per arithmetically patched word (IPU21.md, "Repeat and patching": roughly 54).
pub const ARITHMETIC_PATCH_CYCLES_PER_WORD: u64 = 54;

/// Patch lists at least this long use the six-worker bulk patcher (IPU21.md, "Repeat and patching").
pub const BULK_PATCHER_THRESHOLD_WORDS: u64 = 24;

/// FP32 vector operations per cycle per tile across all workers (model: 4 lanes x 6 workers / 6-cycle barrel).
pub const VECTOR_F32_OPS_PER_CYCLE: u64 = 4;

/// FP16 vector operations per cycle per tile across all workers (model: twice the FP32 rate).
pub const VECTOR_F16_OPS_PER_CYCLE: u64 = 8;

/// FP32 transcendental operations (exp, log, tanh) per cycle per tile (model: one per cycle).
pub const VECTOR_TRANSCENDENTAL_OPS_PER_CYCLE: u64 = 1;

/// Bytes an elementwise kernel streams in and out per cycle per tile (model: same as a local copy).
pub const VECTOR_BYTES_PER_CYCLE: u64 = LOCAL_COPY_BYTES_PER_CYCLE;

/// Input precision of the matrix unit (IPU21.md, "Chip": AMP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixPrecision {
    /// FP16 inputs: 64 multiply-accumulates per cycle per tile.
    Float16,
    /// FP8 inputs: 128 multiply-accumulates per cycle per tile.
    Float8,
}

impl MatrixPrecision {
    /// Multiply-accumulates per cycle per tile for this precision (IPU21.md, "Chip": AMP).
    pub fn macs_per_cycle(self) -> u64 {
        match self {
            MatrixPrecision::Float16 => MATRIX_FP16_MACS_PER_CYCLE,
            MatrixPrecision::Float8 => MATRIX_FP8_MACS_PER_CYCLE,
        }
    }
}

/// Arithmetic precision of vector-unit (elementwise) work (model).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VectorPrecision {
    /// FP32 arithmetic.
    Float32,
    /// FP16 arithmetic.
    Float16,
}

impl VectorPrecision {
    /// Vector operations per cycle per tile for this precision (model).
    pub fn operations_per_cycle(self) -> u64 {
        match self {
            VectorPrecision::Float32 => VECTOR_F32_OPS_PER_CYCLE,
            VectorPrecision::Float16 => VECTOR_F16_OPS_PER_CYCLE,
        }
    }
}

/// Milliseconds that `cycles` take at the report clock (IPU21.md, "Chip": 1.5 GHz).
pub fn cycles_to_ms(cycles: u64) -> f64 {
    cycles as f64 / CYCLES_PER_MILLISECOND
}

/// Cycles of matrix-unit work on one tile, rounded up (IPU21.md, "Chip": AMP rates).
pub fn matrix_cycles(multiply_accumulates: u64, precision: MatrixPrecision) -> u64 {
    multiply_accumulates.div_ceil(precision.macs_per_cycle())
}

/// Reduction depth the matrix unit consumes per pass with FP16 inputs
/// (model: a product's reduction is padded to a multiple of this; it is the
/// chunk of `numerics::dot`'s F16 accumulation model).
pub const MATRIX_FP16_REDUCTION_DEPTH: u64 = 16;

/// Multiply-accumulates the matrix unit performs for attention's `QK^T` and
/// `AV` products of `queries` queries against `keys` keys of width
/// `dimension` (per group), each product's reduction padded to
/// [`MATRIX_FP16_REDUCTION_DEPTH`] (model).
pub fn attention_matrix_macs(queries: u64, keys: u64, dimension: u64) -> u64 {
    let depth = MATRIX_FP16_REDUCTION_DEPTH;
    let scores = queries * keys * dimension.next_multiple_of(depth);
    let weighted = queries * keys.next_multiple_of(depth) * dimension;
    scores + weighted
}

/// Cycles of elementwise work on one tile: the slower of arithmetic and streaming (model).
pub fn elementwise_cycles(operations: u64, bytes_streamed: u64, precision: VectorPrecision) -> u64 {
    let arithmetic = operations.div_ceil(precision.operations_per_cycle());
    let streaming = bytes_streamed.div_ceil(VECTOR_BYTES_PER_CYCLE);
    KERNEL_LAUNCH_CYCLES + arithmetic.max(streaming)
}

/// Cycles of one local copy call moving `bytes` (model: call overhead plus 8 bytes per cycle).
pub fn local_copy_cycles(bytes: u64) -> u64 {
    LOCAL_COPY_CALL_CYCLES + bytes.div_ceil(LOCAL_COPY_BYTES_PER_CYCLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_cycles_convert_to_milliseconds() {
        let milliseconds = cycles_to_ms(13_291_890);
        assert!((milliseconds - 8.861260).abs() < 1e-6, "{milliseconds}");
    }

    #[test]
    fn matrix_and_elementwise_cycles() {
        assert_eq!(matrix_cycles(640, MatrixPrecision::Float16), 10);
        assert_eq!(matrix_cycles(641, MatrixPrecision::Float16), 11);
        assert_eq!(matrix_cycles(1280, MatrixPrecision::Float8), 10);
        assert_eq!(
            elementwise_cycles(400, 80, VectorPrecision::Float32),
            11 + 100
        );
        assert_eq!(
            elementwise_cycles(8, 800, VectorPrecision::Float16),
            11 + 100
        );
    }

    #[test]
    fn attention_products_pad_their_reductions() {
        // QK^T reduces over 72 (padded to 80), AV over 183 keys (padded to 192).
        assert_eq!(
            attention_matrix_macs(32, 183, 72),
            32 * 183 * 80 + 32 * 192 * 72
        );
        assert_eq!(attention_matrix_macs(4, 16, 16), 2 * 4 * 16 * 16);
        assert_eq!(
            matrix_cycles(attention_matrix_macs(32, 183, 72), MatrixPrecision::Float16),
            (32 * 183 * 80 + 32 * 192 * 72) / 64
        );
    }

    #[test]
    fn copies_and_patches() {
        assert_eq!(local_copy_cycles(0), 378);
        assert_eq!(local_copy_cycles(80), 388);
    }
}
