//! `TensorFormat`: how one value is laid out over the machine's tiles.
//!
//! A value of shape `[groups, rows, cols]` is cut into equal blocks of
//! `block = [groups, rows, cols]` (edge blocks are padded to the full block
//! size), or, along rows, at explicit `row_starts` (ragged row blocks of at
//! most `block[1]` rows: a split product's reduced slices, which need not
//! divide its row blocks evenly). Each block lives on one or more tiles
//! (`replicas`), listed in an explicit tile table, so any
//! partition/replication pattern an operator plan wants can be expressed
//! without a closed-form mapping. Inside a block the
//! elements are stored row-major or column-major, with each row (or column)
//! padded to a 32-bit word so that exchange pieces are word-aligned.
//!
//! Owns the geometry (which tile holds which element, at which byte offset).
//! It does not choose formats: that is the planner's job.

use std::sync::Arc;

use serde::Serialize;

use crate::model::graph::{Precision, Shape};
pub use crate::target::memory::MemoryClass;

/// Element order within a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ElementOrder {
    /// Rows are contiguous (activations).
    RowMajor,
    /// Columns are contiguous: the matrix-unit weight order, where each
    /// output column's reduction vector is read as one stream.
    ColumnMajor,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TensorFormat {
    pub shape: Shape,
    pub precision: Precision,
    pub order: ElementOrder,
    /// Block size along `[groups, rows, cols]`.
    pub block: [u32; 3],
    pub replicas: u32,
    pub class: MemoryClass,
    /// The first row of every row block, then `shape.rows`, when row blocks
    /// are ragged; `None` when they are `block[1]` rows each. A ragged block
    /// holds at most `block[1]` rows and is padded to that size.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_row_starts"
    )]
    pub row_starts: Option<Arc<[u32]>>,
    /// `tiles[block_index * replicas + replica]`; `block_index` is
    /// `(group_block * row_parts + row_block) * col_parts + col_block`.
    #[serde(skip)]
    pub tiles: Arc<[u32]>,
}

fn serialize_row_starts<S: serde::Serializer>(
    starts: &Option<Arc<[u32]>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    starts.as_deref().serialize(serializer)
}

pub fn ceil_div(value: u32, divisor: u32) -> u32 {
    value.div_ceil(divisor.max(1))
}

pub fn round_up(value: u32, multiple: u32) -> u32 {
    value.div_ceil(multiple) * multiple
}

/// The first of `total` items that part `index` of `parts` balanced parts
/// holds: the first `total % parts` parts hold one item more.
pub fn balanced_start(total: u32, parts: u32, index: u32) -> u32 {
    let parts = parts.max(1);
    index * (total / parts) + index.min(total % parts)
}

/// Where one element run of a block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockCoordinate {
    pub block_index: u32,
    /// Byte offset of the element inside the block's allocation.
    pub offset: u32,
}

impl TensorFormat {
    /// A format with tiles assigned in order `0, 1, 2, ...` (wrapping at
    /// `machine_tiles`) for every (block, replica).
    pub fn sequential(
        shape: Shape,
        precision: Precision,
        order: ElementOrder,
        block: [u32; 3],
        replicas: u32,
        class: MemoryClass,
        machine_tiles: u32,
    ) -> TensorFormat {
        let block = [
            block[0].clamp(1, shape.groups.max(1)),
            block[1].clamp(1, shape.rows.max(1)),
            block[2].clamp(1, shape.cols.max(1)),
        ];
        let blocks = ceil_div(shape.groups, block[0])
            * ceil_div(shape.rows, block[1])
            * ceil_div(shape.cols, block[2]);
        let tiles = (0..blocks * replicas)
            .map(|index| index % machine_tiles)
            .collect();
        TensorFormat {
            shape,
            precision,
            order,
            block,
            replicas,
            class,
            row_starts: None,
            tiles,
        }
    }

    pub fn parts(&self) -> [u32; 3] {
        [
            ceil_div(self.shape.groups, self.block[0]),
            match &self.row_starts {
                Some(starts) => starts.len().saturating_sub(1) as u32,
                None => ceil_div(self.shape.rows, self.block[1]),
            },
            ceil_div(self.shape.cols, self.block[2]),
        ]
    }

    /// The first element along `axis` of block position `position` on it.
    pub fn block_start(&self, axis: usize, position: u32) -> u32 {
        match &self.row_starts {
            Some(starts) if axis == 1 => starts[position as usize],
            _ => position * self.block[axis],
        }
    }

    /// The row block holding `row`.
    pub fn row_block(&self, row: u32) -> u32 {
        match &self.row_starts {
            Some(starts) => {
                (starts.partition_point(|&start| start <= row) as u32).saturating_sub(1)
            }
            None => row / self.block[1],
        }
    }

    /// One past the last element along `axis` that block position
    /// `position` may hold (its padded end; the value's edge may clip it).
    pub fn block_end(&self, axis: usize, position: u32) -> u32 {
        match &self.row_starts {
            Some(starts) if axis == 1 => starts[position as usize + 1],
            _ => (position + 1) * self.block[axis],
        }
    }

    /// One past the last row of the row block holding `row`.
    pub fn row_block_end(&self, row: u32) -> u32 {
        self.block_end(1, self.row_block(row))
    }

    pub fn block_count(&self) -> u32 {
        let parts = self.parts();
        parts[0] * parts[1] * parts[2]
    }

    pub fn block_index(&self, group_block: u32, row_block: u32, col_block: u32) -> u32 {
        let parts = self.parts();
        (group_block * parts[1] + row_block) * parts[2] + col_block
    }

    /// `(group_block, row_block, col_block)` of a block index.
    pub fn block_position(&self, block_index: u32) -> [u32; 3] {
        let parts = self.parts();
        [
            block_index / (parts[1] * parts[2]),
            (block_index / parts[2]) % parts[1],
            block_index % parts[2],
        ]
    }

    pub fn tile(&self, block_index: u32, replica: u32) -> u32 {
        self.tiles[(block_index * self.replicas + replica) as usize]
    }

    pub fn element_bytes(&self) -> u32 {
        self.precision.bytes()
    }

    /// Bytes of one padded row (row-major) or column (column-major).
    pub fn line_bytes(&self) -> u32 {
        let elements = match self.order {
            ElementOrder::RowMajor => self.block[2],
            ElementOrder::ColumnMajor => self.block[1],
        };
        round_up(elements * self.element_bytes(), 4)
    }

    /// Bytes of one group's matrix inside a block.
    pub fn matrix_bytes(&self) -> u32 {
        let lines = match self.order {
            ElementOrder::RowMajor => self.block[1],
            ElementOrder::ColumnMajor => self.block[2],
        };
        lines * self.line_bytes()
    }

    /// Bytes of one block allocation (every block is padded to full size).
    pub fn block_bytes(&self) -> u32 {
        self.block[0] * self.matrix_bytes()
    }

    /// The valid extent `[groups, rows, cols]` of a block (edge blocks are
    /// smaller than `block`).
    pub fn valid_extent(&self, block_index: u32) -> [u32; 3] {
        let position = self.block_position(block_index);
        let extents = [self.shape.groups, self.shape.rows, self.shape.cols];
        let mut valid = [0; 3];
        for axis in 0..3 {
            let start = self.block_start(axis, position[axis]);
            let end = self.block_end(axis, position[axis]).min(extents[axis]);
            valid[axis] = end.saturating_sub(start);
        }
        valid
    }

    /// Calls `visit(byte offset in the block, row-major index in the
    /// logical value)` for every valid (unpadded) element of block
    /// `block_index`.
    pub fn for_each_element(&self, block_index: u32, mut visit: impl FnMut(usize, usize)) {
        let position = self.block_position(block_index);
        let valid = self.valid_extent(block_index);
        for group in 0..valid[0] {
            for row in 0..valid[1] {
                for col in 0..valid[2] {
                    let (g, r, c) = (
                        position[0] * self.block[0] + group,
                        self.block_start(1, position[1]) + row,
                        position[2] * self.block[2] + col,
                    );
                    let index = ((g * self.shape.rows + r) * self.shape.cols + c) as usize;
                    visit(self.locate(g, r, c).offset as usize, index);
                }
            }
        }
    }

    /// Block and byte offset of element `(group, row, col)`.
    pub fn locate(&self, group: u32, row: u32, col: u32) -> BlockCoordinate {
        let row_block = self.row_block(row);
        let block_index = self.block_index(group / self.block[0], row_block, col / self.block[2]);
        let (local_group, local_row, local_col) = (
            group % self.block[0],
            row - self.block_start(1, row_block),
            col % self.block[2],
        );
        let offset = local_group * self.matrix_bytes()
            + match self.order {
                ElementOrder::RowMajor => {
                    local_row * self.line_bytes() + local_col * self.element_bytes()
                }
                ElementOrder::ColumnMajor => {
                    local_col * self.line_bytes() + local_row * self.element_bytes()
                }
            };
        BlockCoordinate {
            block_index,
            offset,
        }
    }

    /// True when every block holds whole rows (row-wise kernels can run).
    pub fn rows_complete(&self) -> bool {
        self.block[2] >= self.shape.cols && self.order == ElementOrder::RowMajor
    }

    /// Tiles this format touches, sorted and deduplicated.
    pub fn distinct_tiles(&self) -> Vec<u32> {
        let mut tiles = self.tiles.to_vec();
        tiles.sort_unstable();
        tiles.dedup();
        tiles
    }

    /// Same geometry (so a block can be copied byte for byte).
    pub fn same_blocking(&self, other: &TensorFormat) -> bool {
        self.shape == other.shape
            && self.precision == other.precision
            && self.order == other.order
            && self.block == other.block
            && self.row_starts == other.row_starts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_row_major_pads_rows_to_words() {
        let format = TensorFormat::sequential(
            Shape::matrix(5, 7),
            Precision::F16,
            ElementOrder::RowMajor,
            [1, 2, 3],
            1,
            MemoryClass::Standard,
            64,
        );
        assert_eq!(format.parts(), [1, 3, 3]);
        assert_eq!(format.line_bytes(), 8);
        assert_eq!(format.block_bytes(), 16);
        let coordinate = format.locate(0, 3, 4);
        assert_eq!(coordinate.block_index, 4);
        assert_eq!(coordinate.offset, 8 + 2);
        assert_eq!(format.valid_extent(8), [1, 1, 1]);
    }

    /// Seven rows cut at 0, 3, 5 and 7: blocks of 3, 2 and 2 rows, each
    /// padded to three rows; every element is found in its own block.
    #[test]
    fn ragged_row_blocks_locate_and_visit_every_element_once() {
        let format = TensorFormat {
            row_starts: Some(Arc::from(vec![0, 3, 5, 7])),
            ..TensorFormat::sequential(
                Shape::matrix(7, 2),
                Precision::F16,
                ElementOrder::RowMajor,
                [1, 3, 2],
                1,
                MemoryClass::Standard,
                64,
            )
        };
        assert_eq!(format.parts(), [1, 3, 1]);
        assert_eq!(format.block_bytes(), 12);
        assert_eq!(format.valid_extent(0), [1, 3, 2]);
        assert_eq!(format.valid_extent(1), [1, 2, 2]);
        assert_eq!(format.valid_extent(2), [1, 2, 2]);
        assert_eq!(format.row_block(4), 1);
        assert_eq!(format.row_block_end(4), 5);
        let coordinate = format.locate(0, 5, 1);
        assert_eq!(coordinate.block_index, 2);
        assert_eq!(coordinate.offset, 2);
        let mut seen = vec![0u32; 14];
        for block in 0..format.block_count() {
            format.for_each_element(block, |offset, index| {
                let (row, col) = (index as u32 / 2, index as u32 % 2);
                let located = format.locate(0, row, col);
                assert_eq!(
                    (located.block_index, located.offset as usize),
                    (block, offset)
                );
                seen[index] += 1;
            });
        }
        assert!(seen.iter().all(|&count| count == 1), "{seen:?}");
        assert!(!format.same_blocking(&TensorFormat {
            row_starts: None,
            ..format.clone()
        }));
        assert_eq!(balanced_start(42, 4, 2), 22);
        assert_eq!(balanced_start(42, 4, 4), 42);
    }

    #[test]
    fn locate_column_major() {
        let format = TensorFormat::sequential(
            Shape::matrix(6, 4),
            Precision::F8,
            ElementOrder::ColumnMajor,
            [1, 6, 2],
            2,
            MemoryClass::Interleaved,
            8,
        );
        assert_eq!(format.line_bytes(), 8);
        let coordinate = format.locate(0, 5, 3);
        assert_eq!(coordinate.block_index, 1);
        assert_eq!(coordinate.offset, 8 + 5);
        assert_eq!(format.tile(1, 1), 3);
    }
}
