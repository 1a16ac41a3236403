//! The reduce-scatter of partial results that split matrix products and
//! split attention share: a grid of `outer x middle` blocks, each computed
//! in `parts` partial results on as many tiles; tile `part` of a block
//! receives row slice `part` of every other part's partial result (into one
//! buffer, the senders in part order) and reduces them.

use super::expansion::ExpansionBuilder;
use super::program::{Destination, Location, Reason, TransferList};
use crate::layout::format::MemoryClass;

/// The blocks of a split operator: `outer x middle` blocks of `parts`
/// partial results each, numbered part-fastest.
#[derive(Clone, Copy)]
pub(super) struct PartialGrid {
    pub outer: u32,
    pub middle: u32,
    pub parts: u32,
}

impl PartialGrid {
    /// The index of partial result `part` of block `(outer, middle)`.
    pub fn index(self, outer: u32, middle: u32, part: u32) -> usize {
        ((outer * self.middle + middle) * self.parts + part) as usize
    }
}

/// For every partial result, in the grid's order: a buffer on its tile for
/// the `parts - 1` slices of `slice_bytes` it receives, where `receives`
/// says it does (`None` elsewhere).
pub(super) fn received_partials(
    builder: &mut ExpansionBuilder,
    grid: PartialGrid,
    tile: impl Fn(u32, u32, u32) -> u32,
    receives: impl Fn(u32, u32, u32) -> bool,
    slice_bytes: u32,
) -> Vec<Option<Location>> {
    let mut received = Vec::new();
    for outer in 0..grid.outer {
        for middle in 0..grid.middle {
            for slice in 0..grid.parts {
                let on = tile(outer, middle, slice);
                let exists = receives(outer, middle, slice);
                received.push(exists.then(|| {
                    builder.scratch(
                        on,
                        (grid.parts - 1) * slice_bytes,
                        MemoryClass::Standard,
                        Reason::ReceivedPartials,
                    )
                }));
            }
        }
    }
    received
}

/// The transfers of the reduce-scatter: part `part` of every block sends
/// its row slice `slice` (at the byte offset and of the length that
/// `span(outer, slice)` gives) to the tile of part `slice`, into the
/// buffer's slot (of `slot_bytes`) of `part` among the senders.
pub(super) fn partial_transfers(
    grid: PartialGrid,
    tile: impl Fn(u32, u32, u32) -> u32,
    partials: &[Location],
    received: &[Option<Location>],
    slot_bytes: u32,
    span: impl Fn(u32, u32) -> (u32, u32),
) -> TransferList {
    let mut transfers = TransferList::default();
    for outer in 0..grid.outer {
        for middle in 0..grid.middle {
            for part in 0..grid.parts {
                for slice in 0..grid.parts {
                    if slice == part {
                        continue;
                    }
                    let Some(buffer) = received[grid.index(outer, middle, slice)] else {
                        continue;
                    };
                    let position = if part < slice { part } else { part - 1 };
                    let source = partials[grid.index(outer, middle, part)];
                    let (offset, bytes) = span(outer, slice);
                    transfers.push(
                        tile(outer, middle, part),
                        Location { offset, ..source },
                        bytes / 4,
                        &[Destination {
                            tile: tile(outer, middle, slice),
                            location: Location {
                                offset: position * slot_bytes,
                                ..buffer
                            },
                        }],
                    );
                }
            }
        }
    }
    transfers
}
