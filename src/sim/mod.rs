//! Functional simulation: the low-program interpreter, the package
//! simulator (`package`: the finished per-tile images, decoded rows,
//! patches and an ownership map of memory), the FP32 reference evaluation
//! of the graph (its matrix products in `reference_product`) and the
//! activation calibration run on it, the kernel
//! semantics the executors share, per-phase replay of decoded rows, the
//! comparison of outputs, and the interpreter's written-byte record
//! (`written`).

pub mod calibration;
pub mod compare;
pub mod host;
pub mod interpreter;
pub mod kernels;
pub mod memory;
pub mod package;
pub mod reference;
mod reference_product;
pub mod replay;

pub mod weight_scales;
pub mod written;
