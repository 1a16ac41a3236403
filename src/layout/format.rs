//! `TensorFormat`: how one value is laid out over the machine's tiles.
//!
//! A value of shape `[groups, rows, cols]` is cut into equal blocks of
//! `block = [groups, rows, cols]` (edge blocks are padded to the full block
//! size). Each block lives on one or more tiles (`replicas`), listed in an
//! explicit tile table, so any partition/replication pattern an operator plan
//! wants can be expressed without a closed-form mapping. Inside a block the
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
    /// `tiles[block_index * replicas + replica]`; `block_index` is
    /// `(group_block * row_parts + row_block) * col_parts + col_block`.
    #[serde(skip)]
    pub tiles: Arc<[u32]>,
}

pub fn ceil_div(value: u32, divisor: u32) -> u32 {
    value.div_ceil(divisor.max(1))
}

pub fn round_up(value: u32, multiple: u32) -> u32 {
    value.div_ceil(multiple) * multiple
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
            tiles,
        }
    }

    pub fn parts(&self) -> [u32; 3] {
        [
            ceil_div(self.shape.groups, self.block[0]),
            ceil_div(self.shape.rows, self.block[1]),
            ceil_div(self.shape.cols, self.block[2]),
        ]
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
            let start = position[axis] * self.block[axis];
            valid[axis] = self.block[axis].min(extents[axis].saturating_sub(start));
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
                        position[1] * self.block[1] + row,
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
        let block_index = self.block_index(
            group / self.block[0],
            row / self.block[1],
            col / self.block[2],
        );
        let (local_group, local_row, local_col) = (
            group % self.block[0],
            row % self.block[1],
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
