//! The formats operators need and values are stored in: the canonical
//! format, the operand and result formats of a matrix-product or attention
//! plan, broadcast vectors, and the spread storage of resident weights.
//! Pure functions of shapes, plans and tile counts; the planner (`planner`)
//! decides which to use where.

use std::sync::Arc;

use super::cost::{AttentionPlan, MatMulPlan};
use super::format::{ElementOrder, MemoryClass, TensorFormat, ceil_div, round_up};
use crate::model::graph::{Precision, Shape};

/// Canonical format: whole rows, groups and row blocks spread over the tiles.
pub fn canonical_format(shape: Shape, precision: Precision, tiles: u32) -> TensorFormat {
    let block = if shape.groups >= tiles {
        [ceil_div(shape.groups, tiles), shape.rows, shape.cols]
    } else {
        let row_parts = (tiles / shape.groups).clamp(1, shape.rows.max(1));
        [1, ceil_div(shape.rows, row_parts), shape.cols]
    };
    TensorFormat::sequential(
        shape,
        precision,
        ElementOrder::RowMajor,
        block,
        1,
        MemoryClass::Standard,
        tiles,
    )
}

/// Operand and output formats of a planned matrix product.
pub struct MatMulFormats {
    pub a: TensorFormat,
    pub weight: TensorFormat,
    pub bias: TensorFormat,
    pub output: TensorFormat,
}

pub fn matmul_formats(plan: &MatMulPlan, m: u32, k: u32, n: u32) -> MatMulFormats {
    let (pm, pn, pk) = (plan.row_parts, plan.col_parts, plan.reduction_parts);
    let mut a_tiles = Vec::with_capacity((pm * pk * pn) as usize);
    for i in 0..pm {
        for kk in 0..pk {
            for j in 0..pn {
                a_tiles.push(plan.tile(i, j, kk));
            }
        }
    }
    let mut weight_tiles = Vec::with_capacity((pk * pn * pm) as usize);
    for kk in 0..pk {
        for j in 0..pn {
            for i in 0..pm {
                weight_tiles.push(plan.tile(i, j, kk));
            }
        }
    }
    let mut bias_tiles = Vec::with_capacity((pn * pm * pk) as usize);
    for j in 0..pn {
        for i in 0..pm {
            for s in 0..pk {
                bias_tiles.push(plan.tile(i, j, s));
            }
        }
    }
    let slice_rows = plan.block_rows / pk;
    let output_row_parts = ceil_div(m, slice_rows);
    let mut output_tiles = Vec::with_capacity((output_row_parts * pn) as usize);
    for row_block in 0..output_row_parts {
        for j in 0..pn {
            output_tiles.push(plan.tile(row_block / pk, j, row_block % pk));
        }
    }
    MatMulFormats {
        a: TensorFormat {
            shape: Shape::matrix(m, k),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, plan.block_rows, plan.block_reduction],
            replicas: pn,
            class: MemoryClass::Interleaved,
            tiles: Arc::from(a_tiles),
        },
        weight: TensorFormat {
            shape: Shape::matrix(k, n),
            precision: Precision::F8,
            order: ElementOrder::ColumnMajor,
            block: [1, plan.block_reduction, plan.block_cols],
            replicas: pm,
            class: MemoryClass::Interleaved,
            tiles: Arc::from(weight_tiles),
        },
        bias: TensorFormat {
            shape: Shape::matrix(1, n),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, 1, plan.block_cols],
            replicas: pm * pk,
            class: MemoryClass::Standard,
            tiles: Arc::from(bias_tiles),
        },
        output: TensorFormat {
            shape: Shape::matrix(m, n),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, slice_rows, plan.block_cols],
            replicas: 1,
            class: MemoryClass::Standard,
            tiles: Arc::from(output_tiles),
        },
    }
}

/// Query, key/value and output formats of planned attention.
pub struct AttentionFormats {
    /// Query blocks, replicated over the key tiles.
    pub query: TensorFormat,
    /// Key and value blocks, replicated over the query tiles.
    pub key_value: TensorFormat,
    /// Output rows, split over the key tiles that combine them.
    pub output: TensorFormat,
}

pub fn attention_formats(
    plan: &AttentionPlan,
    query_shape: Shape,
    key_shape: Shape,
) -> AttentionFormats {
    let group_blocks = ceil_div(query_shape.groups, plan.block_groups);
    let (query_parts, key_parts) = (plan.query_parts, plan.key_parts);
    let mut query_tiles = Vec::with_capacity((group_blocks * query_parts * key_parts) as usize);
    let mut key_tiles = Vec::with_capacity((group_blocks * key_parts * query_parts) as usize);
    for group_block in 0..group_blocks {
        for query_block in 0..query_parts {
            for key_block in 0..key_parts {
                query_tiles.push(plan.tile(group_block, query_block, key_block));
            }
        }
        for key_block in 0..key_parts {
            for query_block in 0..query_parts {
                key_tiles.push(plan.tile(group_block, query_block, key_block));
            }
        }
    }
    let slice_rows = plan.block_queries / key_parts;
    let output_row_parts = ceil_div(query_shape.rows, slice_rows);
    let mut output_tiles = Vec::with_capacity((group_blocks * output_row_parts) as usize);
    for group_block in 0..group_blocks {
        for row_block in 0..output_row_parts {
            output_tiles.push(plan.tile(group_block, row_block / key_parts, row_block % key_parts));
        }
    }
    let format = |shape: Shape, block: [u32; 3], replicas: u32, tiles: Vec<u32>| TensorFormat {
        shape,
        precision: Precision::F16,
        order: ElementOrder::RowMajor,
        block,
        replicas,
        class: MemoryClass::Standard,
        tiles: Arc::from(tiles),
    };
    AttentionFormats {
        query: format(
            query_shape,
            [plan.block_groups, plan.block_queries, query_shape.cols],
            key_parts,
            query_tiles,
        ),
        key_value: format(
            key_shape,
            [plan.block_groups, plan.block_keys, key_shape.cols],
            query_parts,
            key_tiles,
        ),
        output: format(
            query_shape,
            [plan.block_groups, slice_rows, query_shape.cols],
            1,
            output_tiles,
        ),
    }
}

/// A `[1, 1, cols]` vector replicated next to every block of `output`.
pub(super) fn broadcast_vector_format(output: &TensorFormat, precision: Precision) -> TensorFormat {
    let parts = output.parts();
    let replicas = parts[0] * parts[1] * output.replicas;
    let mut tiles = Vec::with_capacity((parts[2] * replicas) as usize);
    for col_block in 0..parts[2] {
        for group_block in 0..parts[0] {
            for row_block in 0..parts[1] {
                for replica in 0..output.replicas {
                    tiles.push(output.tile(
                        output.block_index(group_block, row_block, col_block),
                        replica,
                    ));
                }
            }
        }
    }
    TensorFormat {
        shape: Shape::matrix(1, output.shape.cols),
        precision,
        order: ElementOrder::RowMajor,
        block: [1, 1, output.block[2]],
        replicas,
        class: MemoryClass::Standard,
        tiles: Arc::from(tiles),
    }
}

pub(super) fn with_precision(format: &TensorFormat, precision: Precision) -> TensorFormat {
    TensorFormat {
        precision,
        ..format.clone()
    }
}

/// Storage of a weight. A replicated weight is stored split by columns over
/// its replicas, so the tiles that use it keep equal shares and the
/// per-iteration broadcast is an all-gather: matrix-unit weights split into
/// one piece per replica, vectors (biases, norm parameters) into pieces of
/// at least `VECTOR_STORAGE_PIECE` elements homed at replicas spread by
/// `rotation`. Unreplicated weights are stored in the operand's format.
pub(super) fn storage_format(required: &TensorFormat, rotation: u32) -> TensorFormat {
    if required.replicas <= 1 {
        return required.clone();
    }
    let replicas = required.replicas;
    let block_cols = required.block[2];
    let (pieces, alignment) = match required.order {
        ElementOrder::ColumnMajor => (replicas, 1),
        ElementOrder::RowMajor => (
            replicas
                .min(ceil_div(block_cols, VECTOR_STORAGE_PIECE))
                .max(1),
            // Pieces of whole 32-bit words.
            4 / required.precision.bytes().min(4),
        ),
    };
    let sub_cols = round_up(ceil_div(block_cols, pieces), alignment.max(1))
        .min(block_cols)
        .max(1);
    let pieces_per_block = ceil_div(block_cols, sub_cols);
    let parts = required.parts();
    let storage_col_parts = ceil_div(required.shape.cols, sub_cols);
    let mut tiles = Vec::with_capacity((parts[0] * parts[1] * storage_col_parts) as usize);
    for group_block in 0..parts[0] {
        for row_block in 0..parts[1] {
            for storage_col in 0..storage_col_parts {
                let first_col = storage_col * sub_cols;
                let col_block = (first_col / block_cols).min(parts[2] - 1);
                let piece = (first_col - col_block * block_cols) / sub_cols;
                let replica = match required.order {
                    ElementOrder::ColumnMajor => piece.min(replicas - 1),
                    ElementOrder::RowMajor => {
                        let spread = (replicas / pieces_per_block).max(1);
                        rotation
                            .wrapping_add(piece * spread)
                            .wrapping_add(col_block)
                            % replicas
                    }
                };
                tiles.push(required.tile(
                    required.block_index(group_block, row_block, col_block),
                    replica,
                ));
            }
        }
    }
    TensorFormat {
        block: [required.block[0], required.block[1], sub_cols],
        replicas: 1,
        // Read only by the broadcast (exchange sends and local copies),
        // never by a kernel: ordinary memory, leaving the interleaved
        // region to matrix-unit operands.
        class: MemoryClass::Standard,
        tiles: Arc::from(tiles),
        ..required.clone()
    }
}

/// Smallest piece (elements) a replicated vector weight is stored in.
pub const VECTOR_STORAGE_PIECE: u32 = 64;

/// A well-mixed rotation from a weight's name (FNV-1a), so that the homes
/// of small weights spread over the tiles instead of piling onto the first.
pub(super) fn name_rotation(name: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= byte as u32;
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}
