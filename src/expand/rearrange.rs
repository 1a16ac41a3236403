//! Expansion of data movement between formats: a view (head split/merge,
//! row pieces, identity) from one or more input formats into an output
//! format becomes a transfer list (remote pieces, multicast to every replica
//! that lacks a local source) and affine local copies (pieces whose source
//! replica is already on the destination tile).
//!
//! Pieces are generated per destination row and merged on the fly: a piece
//! continuing the previous transfer (same source and destinations, both
//! contiguous) extends it, and local copies grow into strided row
//! descriptors. Blocks with identical geometry move as whole blocks. Nothing
//! is ever expanded into words.

use super::ExpandError;
use super::expansion::{ExpansionBuilder, OUTPUT_OPERAND, local_provenance};
use super::program::{Destination, LocalCopy, Location, Reason, Step, TransferList};
use crate::hashing::FastMap;
use crate::layout::format::{ElementOrder, TensorFormat};
use crate::model::graph::ViewKind;

/// A contiguous run of one source row feeding output columns `[dst_col, dst_col + len)`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    input: usize,
    group: u32,
    row: u32,
    col: u32,
    len: u32,
    dst_col: u32,
}

struct ViewMapper<'view> {
    view: &'view ViewKind,
    /// Output row where each `Rows` piece starts.
    piece_starts: Vec<u32>,
}

impl<'view> ViewMapper<'view> {
    fn new(view: &'view ViewKind) -> ViewMapper<'view> {
        let mut piece_starts = Vec::new();
        if let ViewKind::Rows { pieces } = view {
            let mut start = 0;
            for piece in pieces {
                piece_starts.push(start);
                start += piece.rows;
            }
        }
        ViewMapper { view, piece_starts }
    }

    fn segments(&self, group: u32, row: u32, first_col: u32, end_col: u32, out: &mut Vec<Segment>) {
        out.clear();
        match self.view {
            ViewKind::Identity => out.push(Segment {
                input: 0,
                group,
                row,
                col: first_col,
                len: end_col - first_col,
                dst_col: first_col,
            }),
            ViewKind::SplitHeads {
                heads,
                head_dim,
                tokens,
                column_offset,
            } => {
                let image = group / heads;
                let head = group % heads;
                out.push(Segment {
                    input: 0,
                    group: 0,
                    row: image * tokens + row,
                    col: column_offset + head * head_dim + first_col,
                    len: end_col - first_col,
                    dst_col: first_col,
                });
            }
            ViewKind::MergeHeads {
                heads,
                head_dim,
                tokens,
            } => {
                let image = row / tokens;
                let token = row % tokens;
                let mut col = first_col;
                while col < end_col {
                    let head = col / head_dim;
                    let end = end_col.min((head + 1) * head_dim);
                    out.push(Segment {
                        input: 0,
                        group: image * heads + head,
                        row: token,
                        col: col - head * head_dim,
                        len: end - col,
                        dst_col: col,
                    });
                    col = end;
                }
            }
            ViewKind::Rows { pieces } => {
                let index = self.piece_starts.partition_point(|&start| start <= row) - 1;
                let piece = pieces[index];
                out.push(Segment {
                    input: piece.input as usize,
                    group: 0,
                    row: piece.first_row + row - self.piece_starts[index],
                    col: first_col,
                    len: end_col - first_col,
                    dst_col: first_col,
                });
            }
        }
    }
}

/// Accumulates transfers and copies, merging continuations. A copy extends
/// the latest copy between the same two allocations on its tile (copies of
/// one step touch disjoint bytes, so their order within the step does not
/// matter), so a tile's pieces interleaved with other tiles' and other
/// allocations' still coalesce into one affine call per run.
struct MovementAccumulator {
    transfers: TransferList,
    copies: Vec<LocalCopy>,
    /// The latest copy per (tile, source allocation, destination allocation).
    latest_copy: FastMap<(u32, u32, u32), usize>,
    remote: Vec<Destination>,
}

impl MovementAccumulator {
    fn add_transfer(&mut self, source_tile: u32, source: Location, bytes: u32) {
        let words = bytes / 4;
        let count = self.transfers.len();
        if count > 0 {
            let last = count - 1;
            let last_source = self.transfers.source_location[last];
            let last_words = self.transfers.words[last];
            let continues = self.transfers.source_tile[last] == source_tile
                && last_source.allocation == source.allocation
                && last_source.offset + last_words * 4 == source.offset
                && {
                    let previous = self.transfers.destinations_of(last);
                    previous.len() == self.remote.len()
                        && previous.iter().zip(&self.remote).all(|(before, now)| {
                            before.tile == now.tile
                                && before.location.allocation == now.location.allocation
                                && before.location.offset + last_words * 4 == now.location.offset
                        })
                };
            if continues {
                self.transfers.words[last] += words;
                return;
            }
        }
        let remote = std::mem::take(&mut self.remote);
        self.transfers.push(source_tile, source, words, &remote);
        self.remote = remote;
    }

    fn add_copy(&mut self, tile: u32, source: Location, destination: Location, bytes: u32) {
        let key = (tile, source.allocation.0, destination.allocation.0);
        if let Some(&index) = self.latest_copy.get(&key) {
            let last = &mut self.copies[index];
            if last.rows == 1
                && last.source.offset + last.row_bytes == source.offset
                && last.destination.offset + last.row_bytes == destination.offset
            {
                last.row_bytes += bytes;
                return;
            }
            if last.row_bytes == bytes {
                if last.rows == 1
                    && source.offset >= last.source.offset + bytes
                    && destination.offset >= last.destination.offset + bytes
                {
                    last.source_stride = source.offset - last.source.offset;
                    last.destination_stride = destination.offset - last.destination.offset;
                    last.rows = 2;
                    return;
                }
                if last.rows > 1
                    && last.source.offset + last.rows * last.source_stride == source.offset
                    && last.destination.offset + last.rows * last.destination_stride
                        == destination.offset
                {
                    last.rows += 1;
                    return;
                }
            }
        }
        self.latest_copy.insert(key, self.copies.len());
        self.copies.push(LocalCopy {
            tile,
            source,
            destination,
            row_bytes: bytes,
            rows: 1,
            source_stride: bytes,
            destination_stride: bytes,
        });
    }
}

/// One piece of the move: `bytes` from `source_offset` of block
/// `source_block` of input `input` to `destination_offset` of the output
/// block (of every replica).
#[derive(Clone, Copy, Debug)]
struct Piece {
    input: usize,
    source_block: u32,
    source_offset: u32,
    destination_offset: u32,
    bytes: u32,
}

/// The movement into one output block: each replica's tile, and per
/// (input, source block) the source replica on each of those tiles, if any
/// (looked up once, not once per run).
struct BlockMovement<'run> {
    op_name: &'run str,
    inputs: &'run [&'run TensorFormat],
    output: &'run TensorFormat,
    accumulator: &'run mut MovementAccumulator,
    block: u32,
    destination_tiles: Vec<u32>,
    local_replicas: FastMap<(usize, u32), Vec<Option<u32>>>,
}

impl BlockMovement<'_> {
    /// Exchanges and copies move whole words: `piece`'s size and both its
    /// offsets must be multiples of four bytes.
    fn check_aligned(&self, piece: Piece) -> Result<(), ExpandError> {
        if !piece.bytes.is_multiple_of(4)
            || !piece.source_offset.is_multiple_of(4)
            || !piece.destination_offset.is_multiple_of(4)
        {
            return Err(ExpandError::Misaligned {
                op: self.op_name.to_string(),
                bytes: piece.bytes,
                source_offset: piece.source_offset,
                destination_offset: piece.destination_offset,
            });
        }
        Ok(())
    }

    /// Moves `piece` to every replica of the block: a local copy where the
    /// source has a replica on the tile, else one transfer multicast to the
    /// rest.
    fn emit(&mut self, builder: &mut ExpansionBuilder, piece: Piece) -> Result<(), ExpandError> {
        self.check_aligned(piece)?;
        let Piece {
            input,
            source_block,
            source_offset,
            destination_offset,
            bytes,
        } = piece;
        let (block, output) = (self.block, self.output);
        let source = self.inputs[input];
        let source_replicas = source.replicas;
        let destination_tiles = &self.destination_tiles;
        let local = self
            .local_replicas
            .entry((input, source_block))
            .or_insert_with(|| {
                destination_tiles
                    .iter()
                    .map(|&tile| {
                        (0..source_replicas)
                            .find(|&replica| source.tile(source_block, replica) == tile)
                    })
                    .collect()
            });
        self.accumulator.remote.clear();
        for (replica, &tile) in destination_tiles.iter().enumerate() {
            let destination = builder.value(
                OUTPUT_OPERAND,
                block * output.replicas + replica as u32,
                destination_offset,
            );
            match local[replica] {
                Some(source_replica) => {
                    let from = builder.value(
                        input as u8,
                        source_block * source_replicas + source_replica,
                        source_offset,
                    );
                    self.accumulator.add_copy(tile, from, destination, bytes);
                }
                None => self.accumulator.remote.push(Destination {
                    tile,
                    location: destination,
                }),
            }
        }
        if !self.accumulator.remote.is_empty() {
            let replica = block % source_replicas;
            let source_tile = source.tile(source_block, replica);
            let from = builder.value(
                input as u8,
                source_block * source_replicas + replica,
                source_offset,
            );
            self.accumulator.add_transfer(source_tile, from, bytes);
        }
        Ok(())
    }

    /// A column-major block: columns are the contiguous lines, so runs go
    /// down a column, cut where the source's blocks are.
    fn column_runs(&mut self, builder: &mut ExpansionBuilder) -> Result<(), ExpandError> {
        let (output, source) = (self.output, self.inputs[0]);
        let element_bytes = output.element_bytes();
        let position = output.block_position(self.block);
        let valid = output.valid_extent(self.block);
        for group in 0..valid[0] {
            for col in 0..valid[2] {
                let global_group = position[0] * output.block[0] + group;
                let global_col = position[2] * output.block[2] + col;
                let mut row = output.block_start(1, position[1]);
                let end = row + valid[1];
                while row < end {
                    let piece_end = end.min(source.row_block_end(row));
                    let located = source.locate(global_group, row, global_col);
                    let destination_offset = output.locate(global_group, row, global_col).offset;
                    let mut bytes = (piece_end - row) * element_bytes;
                    if piece_end == output.shape.rows {
                        // The tensor's last rows: both lines end in
                        // zeroed word padding, which travels along.
                        bytes = bytes.next_multiple_of(4);
                    }
                    self.emit(
                        builder,
                        Piece {
                            input: 0,
                            source_block: located.block_index,
                            source_offset: located.offset,
                            destination_offset,
                            bytes,
                        },
                    )?;
                    row = piece_end;
                }
            }
        }
        Ok(())
    }

    /// A row-major block: each destination row's segments through the
    /// view, cut where their source's blocks are. `segments` is scratch.
    fn row_runs(
        &mut self,
        builder: &mut ExpansionBuilder,
        mapper: &ViewMapper,
        segments: &mut Vec<Segment>,
    ) -> Result<(), ExpandError> {
        let output = self.output;
        let element_bytes = output.element_bytes();
        let position = output.block_position(self.block);
        let valid = output.valid_extent(self.block);
        for group in 0..valid[0] {
            for row in 0..valid[1] {
                let global_group = position[0] * output.block[0] + group;
                let global_row = output.block_start(1, position[1]) + row;
                let first_col = position[2] * output.block[2];
                let end_col = first_col + valid[2];
                let row_offset = output.locate(global_group, global_row, first_col).offset;
                mapper.segments(global_group, global_row, first_col, end_col, segments);
                for segment in segments.iter() {
                    let source = self.inputs[segment.input];
                    let mut col = segment.col;
                    let end = segment.col + segment.len;
                    while col < end {
                        let piece_end = end.min((col / source.block[2] + 1) * source.block[2]);
                        let located = source.locate(segment.group, segment.row, col);
                        let destination_offset = row_offset
                            + (segment.dst_col + (col - segment.col) - first_col) * element_bytes;
                        self.emit(
                            builder,
                            Piece {
                                input: segment.input,
                                source_block: located.block_index,
                                source_offset: located.offset,
                                destination_offset,
                                bytes: (piece_end - col) * element_bytes,
                            },
                        )?;
                        col = piece_end;
                    }
                }
            }
        }
        Ok(())
    }
}

/// How a rearrange moves its output blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runs {
    /// An identity between formats of the same blocking: block by block.
    WholeBlocks,
    /// Column-major (an identity only): runs down each column.
    Columns,
    /// Row-major: runs along each destination row, through the view.
    Rows,
}

/// How `view` moves from `inputs` into `output`: whole blocks when it can,
/// else element runs, which need formats of one element order (and
/// column-major ones move only unchanged).
fn runs_of(
    op_name: &str,
    view: &ViewKind,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) -> Result<Runs, ExpandError> {
    let identity = matches!(view, ViewKind::Identity);
    let whole_blocks = identity && inputs[0].same_blocking(output);
    let column_major = output.order == ElementOrder::ColumnMajor;
    let orders_agree = inputs.iter().all(|format| format.order == output.order);
    if !whole_blocks && (!orders_agree || (column_major && !identity)) {
        return Err(ExpandError::UnsupportedRearrange {
            op: op_name.to_string(),
            reason: "element runs need formats of one element order, and column-major ones only move unchanged"
                .to_string(),
        });
    }
    Ok(if whole_blocks {
        Runs::WholeBlocks
    } else if column_major {
        Runs::Columns
    } else {
        Runs::Rows
    })
}

/// Expands `view` from `inputs` into `output`.
pub fn expand_rearrange(
    builder: &mut ExpansionBuilder,
    op_name: &str,
    view: &ViewKind,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) -> Result<(), ExpandError> {
    let mapper = ViewMapper::new(view);
    let mut accumulator = MovementAccumulator {
        transfers: TransferList::default(),
        copies: Vec::new(),
        latest_copy: FastMap::default(),
        remote: Vec::new(),
    };
    let runs = runs_of(op_name, view, inputs, output)?;
    let mut segments = Vec::new();
    for block in 0..output.block_count() {
        let mut movement = BlockMovement {
            op_name,
            inputs,
            output,
            accumulator: &mut accumulator,
            block,
            destination_tiles: (0..output.replicas)
                .map(|replica| output.tile(block, replica))
                .collect(),
            local_replicas: FastMap::default(),
        };
        match runs {
            Runs::WholeBlocks => movement.emit(
                builder,
                Piece {
                    input: 0,
                    source_block: block,
                    source_offset: 0,
                    destination_offset: 0,
                    bytes: output.block_bytes(),
                },
            )?,
            Runs::Columns => movement.column_runs(builder)?,
            Runs::Rows => movement.row_runs(builder, &mapper, &mut segments)?,
        }
    }
    builder.exchange(Reason::Rearrange, accumulator.transfers);
    builder.push(Step::Copies {
        provenance: local_provenance(Reason::Rearrange),
        copies: accumulator.copies,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::program::AllocationId;

    fn at(allocation: u32, offset: u32) -> Location {
        Location {
            allocation: AllocationId(allocation),
            offset,
        }
    }

    /// Rows of two tiles and two source allocations, interleaved as a
    /// head split emits them, coalesce into one affine call per tile and
    /// allocation pair, moving exactly the same bytes.
    #[test]
    fn interleaved_runs_coalesce_per_tile_and_allocation_pair() {
        let mut accumulator = MovementAccumulator {
            transfers: TransferList::default(),
            copies: Vec::new(),
            latest_copy: FastMap::default(),
            remote: Vec::new(),
        };
        let mut expected = Vec::new();
        for row in 0..17u32 {
            for tile in 0..2u32 {
                // Piece A from allocation 10 + tile, piece B from 20 + tile.
                let a = (at(10 + tile, row * 212), at(30 + tile, row * 144), 100);
                let b = (at(20 + tile, row * 212), at(30 + tile, row * 144 + 100), 44);
                for (source, destination, bytes) in [a, b] {
                    accumulator.add_copy(tile, source, destination, bytes);
                    expected.push((tile, source, destination, bytes));
                }
            }
        }
        assert_eq!(accumulator.copies.len(), 4);
        let mut moved = Vec::new();
        for copy in &accumulator.copies {
            assert_eq!(copy.rows, 17);
            for row in 0..copy.rows {
                moved.push((
                    copy.tile,
                    at(
                        copy.source.allocation.0,
                        copy.source.offset + row * copy.source_stride,
                    ),
                    at(
                        copy.destination.allocation.0,
                        copy.destination.offset + row * copy.destination_stride,
                    ),
                    copy.row_bytes,
                ));
            }
        }
        let key = |entry: &(u32, Location, Location, u32)| {
            (
                entry.0,
                entry.1.allocation.0,
                entry.1.offset,
                entry.2.offset,
            )
        };
        moved.sort_by_key(key);
        expected.sort_by_key(key);
        assert_eq!(moved, expected);
    }
}
