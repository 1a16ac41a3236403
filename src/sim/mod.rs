//! Functional simulation: the low-program interpreter, the FP32 reference
//! evaluation of the graph, the kernel semantics they share, and the
//! comparison of their outputs.

pub mod compare;
pub mod host;
pub mod interpreter;
pub mod kernels;
pub mod memory;
pub mod package;
pub mod reference;
pub mod replay;
