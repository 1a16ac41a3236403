//! The target model: every fact about the IPU21 (C600-class) tile machine that
//! the compiler relies on, as named constants and pure functions, each with a
//! note on where it comes from (`design/IPU21.md` or a modelling choice).
//! This module owns the tile mapping, exchange timing, SRAM geometry, cost
//! figures, the machine description and the exchange instruction encodings.
//! It must not schedule, place or plan anything, must not hold compiler state,
//! and must not depend on any other part of the compiler.

pub mod costs;
pub mod encoding;
pub mod kernel_cost;
pub mod machine;
pub mod mapping;
pub mod memory;
pub mod timing;

pub use costs::{MatrixPrecision, VectorPrecision, cycles_to_ms};
pub use encoding::{DecodeError, EncodeError, EncodedWords, Instruction, decode, decode_sequence};
pub use machine::{Machine, MachineError};
pub use mapping::{C600_TILES, logical_tile, partner, physical_row, physical_tile};
pub use memory::{MemoryClass, Region, element_of, region_of};
pub use timing::{direction, payload_start, time_to_mux};
