//! Kernel operand access on a tile image: the package simulator's
//! implementation of the shared kernels' `KernelRead`/`KernelWrite`.
//!
//! Package locations hold absolute tile addresses; an allocation with
//! `iterations > 1` is bound in Repeat iteration `i` at `address + i * bytes`.
//! Every access must stay inside the instance of the allocation it names
//! (as placed in the package) and on that allocation's tile; reads must hit
//! written bytes that no other allocation overwrote since the reader wrote
//! them (`super::ownership`). Strict runs also fail on reads of bytes the
//! reader never wrote: never-written memory, or bytes another allocation
//! wrote (whose value depends on placement); other runs count both.
//! Written allocations are taken out of the image while a kernel runs (as
//! the interpreter does), so reads never see a run's own writes.

use std::borrow::Cow;

use crate::expand::program::{AllocationId, Kernel, Location, LowProgram};
use crate::package::{Package, PlacedAllocation};
use crate::sim::memory::{KernelRead, KernelWrite, SimError, describe_read};

use super::image::TileImage;
use super::ownership::{ForeignReads, Owners};

/// An access the package's placement does not allow (the text reads after
/// what made the access: "transfer source names unknown allocation 7").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("names unknown allocation {0}")]
    UnknownAllocation(u32),
    #[error("names allocation {allocation} of tile {owner}")]
    OtherTile { allocation: u32, owner: u32 },
    #[error(
        "accesses {length} bytes at {address:#x}, outside allocation {allocation} placed at \
         {start:#x}..{end:#x}"
    )]
    Outside {
        length: usize,
        address: u64,
        allocation: u32,
        start: u64,
        end: u64,
    },
}

/// Absolute address of `location` in `iteration`, checked against the
/// placed instance of its allocation on `tile`.
pub fn bind(
    package: &Package,
    tile: u32,
    location: Location,
    length: usize,
    iteration: u32,
) -> Result<u64, BindError> {
    let allocation: &PlacedAllocation = package
        .allocations
        .get(location.allocation.0 as usize)
        .ok_or(BindError::UnknownAllocation(location.allocation.0))?;
    if allocation.tile != tile {
        return Err(BindError::OtherTile {
            allocation: location.allocation.0,
            owner: allocation.tile,
        });
    }
    let instance = if allocation.iterations > 1 {
        u64::from(iteration) * u64::from(allocation.bytes)
    } else {
        0
    };
    let start = u64::from(allocation.address) + instance;
    let end = start + u64::from(allocation.bytes);
    let address = u64::from(location.offset) + instance;
    if address < start || address + length as u64 > end {
        return Err(BindError::Outside {
            length,
            address,
            allocation: location.allocation.0,
            start,
            end,
        });
    }
    Ok(address)
}

pub struct TileReader<'a> {
    pub package: &'a Package,
    pub tile: u32,
    pub image: &'a TileImage,
    pub iteration: u32,
    /// Allocations taken for writing by the running kernel.
    pub taken: &'a [AllocationId],
    /// Fail on reads of never-written bytes; otherwise count them here.
    pub strict: bool,
    pub unwritten_reads: &'a std::sync::atomic::AtomicU64,
    pub owners: Owners<'a>,
    /// Reads of bytes another allocation wrote (non-strict runs).
    pub foreign_reads: &'a ForeignReads,
    /// Poisoned runs read those bytes as the poison pattern (what stale
    /// memory may hold), so results that depend on them show.
    pub poisoned: bool,
    /// The running kernel, its op's name path and the program (to name
    /// the kernel, operand and value of a refused read).
    pub kernel: &'a Kernel,
    pub op: &'a str,
    pub program: &'a LowProgram,
}

impl KernelRead for TileReader<'_> {
    fn bytes(&self, location: Location, length: usize) -> Result<Cow<'_, [u8]>, SimError> {
        let check = |message: String| SimError::Weights(format!("read {message}"));
        if self.taken.contains(&location.allocation) {
            return Err(SimError::Conflict {
                tile: self.tile,
                allocation: location.allocation.0,
            });
        }
        let address = bind(self.package, self.tile, location, length, self.iteration)
            .map_err(|error| check(error.to_string()))?;
        let start = TileImage::index(address, length)
            .ok_or_else(|| check(format!("at {address:#x} outside the tile's memory")))?;
        self.owners
            .check(&self.image.ownership, start, length, location.allocation.0)
            .map_err(|clobber| SimError::Clobbered(clobber.to_string()))?;
        let reader = || describe_read(self.program, self.kernel, self.op, location.allocation);
        if let Some((byte, owner)) =
            self.owners
                .foreign_byte(&self.image.ownership, start, length, location.allocation.0)
        {
            let message = format!(
                "{} at {:#x}, a byte its producer never wrote (allocation {owner} wrote it): \
                 the program leaves this padding undefined",
                reader(),
                byte as u64 + address - start as u64,
            );
            if self.strict {
                return Err(SimError::Undefined(message));
            }
            self.foreign_reads
                .record(self.tile, self.owners.step, message);
            if self.poisoned {
                let mut bytes = self.image.bytes[start..start + length].to_vec();
                self.image.ownership.poison_foreign(
                    start,
                    &mut bytes,
                    self.owners.root(location.allocation.0),
                );
                return Ok(Cow::Owned(bytes));
            }
        }
        if let Some(unwritten) = self.image.first_unwritten(start, length) {
            if !self.strict {
                self.unwritten_reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(Cow::Borrowed(&self.image.bytes[start..start + length]));
            }
            return Err(SimError::Undefined(format!(
                "{} at {:#x}, a byte nothing ever wrote: the program leaves this padding \
                 undefined",
                reader(),
                unwritten as u64 + address - start as u64,
            )));
        }
        Ok(Cow::Borrowed(&self.image.bytes[start..start + length]))
    }
}

/// One written allocation instance, taken out of the image for a run.
pub struct Taken {
    pub allocation: AllocationId,
    /// Image index of the instance's first byte.
    pub start: usize,
    pub bytes: Vec<u8>,
    /// Written `(offset, length)` ranges within the instance.
    pub written: Vec<(usize, usize)>,
}

pub struct TileWriter<'a> {
    pub package: &'a Package,
    pub tile: u32,
    pub iteration: u32,
    pub taken: Vec<Taken>,
}

impl KernelWrite for TileWriter<'_> {
    fn bytes_mut(&mut self, location: Location, length: usize) -> Result<&mut [u8], SimError> {
        let check = |message: String| SimError::Weights(format!("write {message}"));
        let address = bind(self.package, self.tile, location, length, self.iteration)
            .map_err(|error| check(error.to_string()))?;
        let start = TileImage::index(address, length)
            .ok_or_else(|| check(format!("at {address:#x} outside the tile's memory")))?;
        let taken = self
            .taken
            .iter_mut()
            .find(|taken| taken.allocation == location.allocation)
            .ok_or(SimError::Conflict {
                tile: self.tile,
                allocation: location.allocation.0,
            })?;
        let offset = start - taken.start;
        taken.written.push((offset, length));
        Ok(&mut taken.bytes[offset..offset + length])
    }
}
