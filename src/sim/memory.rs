//! Allocation-relative memory for the low-program interpreter: one byte
//! buffer per allocation (all instances of an iterated allocation), with
//! Repeat bindings resolved on access, and split read/write views so kernels
//! on different tiles can run in parallel.

use std::borrow::Cow;

use crate::expand::program::{Allocation, AllocationId, Kernel, Location, LowProgram};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error(
        "tile {tile}: access of {length} bytes at offset {offset} of allocation {allocation} ({bytes} bytes) is out of bounds"
    )]
    OutOfBounds {
        tile: u32,
        allocation: u32,
        offset: u64,
        length: usize,
        bytes: usize,
    },
    #[error(
        "tile {tile}: allocation {allocation} is written by one kernel and read by another in the same step"
    )]
    Conflict { tile: u32, allocation: u32 },
    #[error("kernel arithmetic: {0}")]
    Numerics(#[from] crate::numerics::NumericsError),
    #[error("the program has no value named `{0}`")]
    MissingValue(String),
    #[error("reading weights: {0}")]
    Weights(String),
    /// A read of bytes another allocation overwrote while the reader's
    /// value was live (found by the package simulator's ownership check).
    #[error("{0}")]
    Clobbered(String),
    /// A kernel operand read of bytes the value's producer never wrote
    /// (padding the program leaves undefined), naming the kernel, operand,
    /// value and byte.
    #[error("{0}")]
    Undefined(String),
    /// A kernel handed to the semantics of another kind (`kernels::execute`
    /// dispatches by kind, so this is never seen).
    #[error("the {0} kernel semantics were given another kind of kernel")]
    KernelKind(&'static str),
}

/// Names the kernel run reading `allocation`: kind, op, operand and value.
pub fn describe_read(
    program: &LowProgram,
    kernel: &Kernel,
    op: &str,
    allocation: AllocationId,
) -> String {
    let value = program
        .allocations
        .get(allocation.0 as usize)
        .and_then(|record| record.provenance.value)
        .and_then(|name| program.names.get(name as usize))
        .map_or("-", String::as_str);
    format!(
        "the {} kernel of `{op}` reads operand `{}` (value `{value}`, allocation {})",
        kernel.kind_name(),
        kernel.read_operand(allocation).unwrap_or("?"),
        allocation.0
    )
}

/// Byte offset of `location` in its allocation's buffer during `iteration`.
pub fn resolve(allocations: &[Allocation], location: Location, iteration: u32) -> u64 {
    let allocation = &allocations[location.allocation.0 as usize];
    let instance = if allocation.iterations > 1 {
        iteration as u64
    } else {
        0
    };
    instance * allocation.bytes as u64 + location.offset as u64
}

pub struct Memory {
    pub buffers: Vec<Vec<u8>>,
}

impl Memory {
    pub fn new(allocations: &[Allocation]) -> Memory {
        Memory {
            buffers: allocations
                .iter()
                .map(|allocation| {
                    vec![0u8; allocation.bytes as usize * allocation.iterations as usize]
                })
                .collect(),
        }
    }
}

/// Byte reads of kernel operands (allocation-relative here; absolute tile
/// addresses in the package simulator, which may hand out a poisoned copy).
pub trait KernelRead {
    fn bytes(&self, location: Location, length: usize) -> Result<Cow<'_, [u8]>, SimError>;
}

/// Byte writes of kernel results.
pub trait KernelWrite {
    fn bytes_mut(&mut self, location: Location, length: usize) -> Result<&mut [u8], SimError>;
}

impl KernelRead for Reader<'_> {
    fn bytes(&self, location: Location, length: usize) -> Result<Cow<'_, [u8]>, SimError> {
        Reader::bytes(self, location, length).map(Cow::Borrowed)
    }
}

impl KernelWrite for Writer<'_> {
    fn bytes_mut(&mut self, location: Location, length: usize) -> Result<&mut [u8], SimError> {
        Writer::bytes_mut(self, location, length)
    }
}

/// Read access to every buffer not taken for writing.
pub struct Reader<'memory> {
    pub buffers: &'memory [Vec<u8>],
    pub allocations: &'memory [Allocation],
    pub iteration: u32,
}

impl Reader<'_> {
    pub fn bytes(&self, location: Location, length: usize) -> Result<&[u8], SimError> {
        let start = resolve(self.allocations, location, self.iteration);
        let buffer = &self.buffers[location.allocation.0 as usize];
        let allocation = &self.allocations[location.allocation.0 as usize];
        if buffer.is_empty() && length > 0 {
            return Err(SimError::Conflict {
                tile: allocation.tile,
                allocation: location.allocation.0,
            });
        }
        buffer
            .get(start as usize..start as usize + length)
            .ok_or(SimError::OutOfBounds {
                tile: allocation.tile,
                allocation: location.allocation.0,
                offset: start,
                length,
                bytes: buffer.len(),
            })
    }
}

/// The buffers one kernel run writes, taken out of the memory for the run.
pub struct Writer<'memory> {
    pub outputs: Vec<(AllocationId, Vec<u8>)>,
    pub allocations: &'memory [Allocation],
    pub iteration: u32,
    /// Buffer ranges `(allocation, start, length)` the run wrote.
    pub written: Vec<(AllocationId, usize, usize)>,
}

impl Writer<'_> {
    pub fn bytes_mut(&mut self, location: Location, length: usize) -> Result<&mut [u8], SimError> {
        let start = resolve(self.allocations, location, self.iteration) as usize;
        let allocation = &self.allocations[location.allocation.0 as usize];
        let (_, buffer) = self
            .outputs
            .iter_mut()
            .find(|(id, _)| *id == location.allocation)
            .ok_or(SimError::Conflict {
                tile: allocation.tile,
                allocation: location.allocation.0,
            })?;
        let size = buffer.len();
        let bytes = buffer
            .get_mut(start..start + length)
            .ok_or(SimError::OutOfBounds {
                tile: allocation.tile,
                allocation: location.allocation.0,
                offset: start as u64,
                length,
                bytes: size,
            })?;
        self.written.push((location.allocation, start, length));
        Ok(bytes)
    }
}
