//! The formats operators need and values are stored in: the canonical
//! format, the operand and result formats of a matrix-product or attention
//! plan, broadcast vectors, and the spread storage of resident weights.
//! Pure functions of shapes, plans and tile counts; the planner (`planner`)
//! decides which to use where.

use std::sync::Arc;

use super::cost::{AttentionPlan, MatMulPlan};
use super::format::{ElementOrder, MemoryClass, TensorFormat, ceil_div, round_up};
use crate::model::graph::{Precision, Shape};
use crate::target::mapping::partner;

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
    let slice_rows = plan.slice_rows();
    let output_row_starts = plan.output_row_starts(m);
    let output_row_parts = match &output_row_starts {
        Some(starts) => starts.len() as u32 - 1,
        None => ceil_div(m, slice_rows),
    };
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
            row_starts: None,
            tiles: Arc::from(a_tiles),
        },
        weight: TensorFormat {
            shape: Shape::matrix(k, n),
            precision: Precision::F8,
            order: ElementOrder::ColumnMajor,
            block: [1, plan.block_reduction, plan.block_cols],
            replicas: pm,
            class: MemoryClass::Interleaved,
            row_starts: None,
            tiles: Arc::from(weight_tiles),
        },
        bias: TensorFormat {
            shape: Shape::matrix(1, n),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, 1, plan.block_cols],
            replicas: pm * pk,
            class: MemoryClass::Standard,
            row_starts: None,
            tiles: Arc::from(bias_tiles),
        },
        output: TensorFormat {
            shape: Shape::matrix(m, n),
            precision: Precision::F16,
            order: ElementOrder::RowMajor,
            block: [1, slice_rows, plan.block_cols],
            replicas: 1,
            class: MemoryClass::Standard,
            row_starts: output_row_starts,
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
        row_starts: None,
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

/// A `[1, 1, cols]` vector replicated next to every block of `output` on a
/// machine of `machine_tiles` tiles. A vector of one column block (a norm's
/// parameters) long enough to be stored in pairable pieces also goes to the
/// partner of every replica tile whose partner
/// holds no replica, after the replicas the blocks use: such a tile reads
/// nothing of it, but with it the replicas are whole partner pairs, so the
/// broadcast's pieces may move as paired 64-bit items (half the events;
/// IPU21.md). SigLIP's norms run on 729 tiles, and tile 728's partner is
/// what lets all 729 receive paired.
pub(super) fn broadcast_vector_format(
    output: &TensorFormat,
    precision: Precision,
    machine_tiles: u32,
) -> TensorFormat {
    let parts = output.parts();
    let mut replicas = parts[0] * parts[1] * output.replicas;
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
    // Only pieces of whole pairable size may pair (`vector_pieces`).
    let pairable = output.block[2] * precision.bytes() >= 2 * PAIRABLE_VECTOR_PIECE_BYTES;
    if parts[2] == 1 && pairable {
        let mut users = tiles.clone();
        users.sort_unstable();
        users.dedup();
        let partners: Vec<u32> = users
            .iter()
            .map(|&tile| partner(tile))
            .filter(|&other| other < machine_tiles && users.binary_search(&other).is_err())
            .collect();
        replicas += partners.len() as u32;
        tiles.extend(partners);
    }
    TensorFormat {
        shape: Shape::matrix(1, output.shape.cols),
        precision,
        order: ElementOrder::RowMajor,
        block: [1, 1, output.block[2]],
        replicas,
        class: MemoryClass::Standard,
        row_starts: None,
        tiles: Arc::from(tiles),
    }
}

pub(super) fn with_precision(format: &TensorFormat, precision: Precision) -> TensorFormat {
    TensorFormat {
        precision,
        ..format.clone()
    }
}

/// Storage of a weight on a machine of `machine_tiles` tiles. A replicated
/// weight is stored split by columns, so the per-iteration broadcast is an
/// all-gather or a multicast: matrix-unit weights split into one piece per
/// replica, each homed at a tile that does not use the block (spread by
/// `rotation`), so that every piece reaches all the replicas over the
/// exchange: where the replicas come in whole partner pairs it may move
/// as paired 64-bit items (half the events; a piece homed at a replica
/// leaves that replica's partner alone in its pair), and in any case no
/// replica keeps its piece by a local copy call, which for a weight of
/// the Repeat also costs patch words every layer (homing pieces at their
/// replicas cost 3,600 to 37,000 cycles on the shipped builds:
/// docs/measurements.md, "Tile orders that pair the weight"); where every
/// tile uses the block, a piece is homed at one of its replicas. Vectors (biases,
/// norm parameters) into pieces of at least `VECTOR_STORAGE_PIECE` elements
/// homed at tiles spread by `rotation` that do *not* use that block, so
/// every replica receives its whole block over the exchange and no tile
/// needs a local copy call (288 cycles) for a few bytes; where every tile
/// uses the block, the piece is homed at one of its replicas. Unreplicated
/// weights are stored in the operand's format.
pub(super) fn storage_format(
    required: &TensorFormat,
    rotation: u32,
    machine_tiles: u32,
) -> TensorFormat {
    if required.replicas <= 1 {
        return required.clone();
    }
    let replicas = required.replicas;
    let block_cols = required.block[2];
    let (pieces, alignment) = match required.order {
        ElementOrder::ColumnMajor => (replicas, 1),
        ElementOrder::RowMajor => (
            replicas.min(vector_pieces(block_cols, required.precision)),
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
    let mut uses_block = vec![false; machine_tiles as usize];
    for group_block in 0..parts[0] {
        for row_block in 0..parts[1] {
            for storage_col in 0..storage_col_parts {
                let first_col = storage_col * sub_cols;
                let col_block = (first_col / block_cols).min(parts[2] - 1);
                let piece = (first_col - col_block * block_cols) / sub_cols;
                let block = required.block_index(group_block, row_block, col_block);
                let tile = match required.order {
                    ElementOrder::ColumnMajor => {
                        let choice = rotation.wrapping_add(block.wrapping_mul(replicas) + piece);
                        home_avoiding(required, &[block], choice, &mut uses_block)
                            .unwrap_or_else(|| required.tile(block, piece.min(replicas - 1)))
                    }
                    ElementOrder::RowMajor => {
                        let spread = (replicas / pieces_per_block).max(1);
                        let choice = rotation
                            .wrapping_add(piece * spread)
                            .wrapping_add(col_block);
                        // A piece may reach into the next column block
                        // (pieces need not divide blocks): avoid both
                        // blocks' replicas.
                        let last_col = (first_col + sub_cols).min(required.shape.cols) - 1;
                        let last_block = (last_col / block_cols).min(parts[2] - 1);
                        let blocks: Vec<u32> = (col_block..=last_block)
                            .map(|col_block| {
                                required.block_index(group_block, row_block, col_block)
                            })
                            .collect();
                        vector_piece_home(required, &blocks, choice, &mut uses_block)
                    }
                };
                tiles.push(tile);
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

/// The home of one piece of a replicated vector that lies in `blocks`
/// (the first is its own): the tile `choice` picks (modulo) among the
/// machine's tiles that hold no replica of its own block, unless that one
/// holds a replica of another of `blocks`, then among the tiles that hold
/// a replica of none of them; among the first block's replicas when every
/// tile holds one. `uses_block` is scratch space of one flag per machine
/// tile.
fn vector_piece_home(
    required: &TensorFormat,
    blocks: &[u32],
    choice: u32,
    uses_block: &mut [bool],
) -> u32 {
    let uses = |tile: u32, blocks: &[u32]| {
        blocks.iter().any(|&block| {
            (0..required.replicas).any(|replica| required.tile(block, replica) == tile)
        })
    };
    if let Some(home) = home_avoiding(required, &blocks[..1], choice, uses_block)
        && !uses(home, &blocks[1..])
    {
        return home;
    }
    home_avoiding(required, blocks, choice, uses_block)
        .unwrap_or_else(|| required.tile(blocks[0], choice % required.replicas))
}

/// The `choice % n`-th of the `n` machine tiles that hold no replica of
/// `blocks`, or `None` when every tile holds one.
fn home_avoiding(
    required: &TensorFormat,
    blocks: &[u32],
    choice: u32,
    uses_block: &mut [bool],
) -> Option<u32> {
    let replica_tiles = blocks.iter().flat_map(|&block| {
        (0..required.replicas).map(move |replica| required.tile(block, replica))
    });
    let mut users = 0u32;
    for tile in replica_tiles.clone() {
        if let Some(flag) = uses_block.get_mut(tile as usize)
            && !*flag
        {
            *flag = true;
            users += 1;
        }
    }
    let others = uses_block.len() as u32 - users;
    let home = (others > 0).then(|| {
        let wanted = (choice % others) as usize;
        uses_block
            .iter()
            .enumerate()
            .filter(|(_, uses)| !**uses)
            .nth(wanted)
            .map(|(tile, _)| tile as u32)
            .expect("`others` tiles hold no replica")
    });
    for tile in replica_tiles {
        if let Some(flag) = uses_block.get_mut(tile as usize) {
            *flag = false;
        }
    }
    home
}

/// Smallest piece (elements) a replicated vector weight is stored in.
pub const VECTOR_STORAGE_PIECE: u32 = 64;

/// Bytes of the pieces a long vector block is stored in: 64 paired 64-bit
/// items, the least that may move paired (IPU21.md).
pub const PAIRABLE_VECTOR_PIECE_BYTES: u32 = 512;

/// How many pieces a vector block of `block_cols` elements is stored in:
/// pieces of `VECTOR_STORAGE_PIECE` elements, or, for a block of at least
/// two pairable pieces, as many whole pairable pieces as fit (a norm's 1,152
/// FP16 parameters: 4 pieces of 288 instead of 18 of 64, which could not
/// pair).
fn vector_pieces(block_cols: u32, precision: Precision) -> u32 {
    let bytes = block_cols * precision.bytes();
    if bytes >= 2 * PAIRABLE_VECTOR_PIECE_BYTES {
        bytes / PAIRABLE_VECTOR_PIECE_BYTES
    } else {
        ceil_div(block_cols, VECTOR_STORAGE_PIECE).max(1)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A `[rows, cols]` FP16 value split into `rows` one-row blocks on
    /// tiles `0..rows`.
    fn rows_on_first_tiles(rows: u32, cols: u32) -> TensorFormat {
        row_blocks(rows, cols, cols, rows)
    }

    /// A `[rows, cols]` FP16 value in one-row blocks of `block_cols`
    /// columns, spread over `tiles` tiles.
    fn row_blocks(rows: u32, cols: u32, block_cols: u32, tiles: u32) -> TensorFormat {
        TensorFormat::sequential(
            Shape::matrix(rows, cols),
            Precision::F16,
            ElementOrder::RowMajor,
            [1, 1, block_cols],
            1,
            MemoryClass::Standard,
            tiles,
        )
    }

    /// Every stored column of `storage` lives on a tile that holds no
    /// replica of that column's block of `wanted`.
    fn assert_homed_off_their_users(wanted: &TensorFormat, storage: &TensorFormat, label: &str) {
        for (col, &home) in homes_by_column(storage).iter().enumerate() {
            let block = col as u32 / wanted.block[2];
            let users: Vec<u32> = (0..wanted.replicas)
                .map(|replica| wanted.tile(block, replica))
                .collect();
            assert!(
                !users.contains(&home),
                "{label}: column {col} homed at {home}, a user of block {block}: {users:?}"
            );
        }
    }

    /// Which tiles hold each stored column of `storage`.
    fn homes_by_column(storage: &TensorFormat) -> Vec<u32> {
        (0..storage.shape.cols)
            .map(|col| storage.tile(col / storage.block[2], 0))
            .collect()
    }

    /// A `[k, n]` FP8 matrix-unit weight in column-major blocks of `n /
    /// col_blocks` columns, each block wanted on `replicas` consecutive
    /// tiles.
    fn column_major_weight(k: u32, n: u32, col_blocks: u32, replicas: u32) -> TensorFormat {
        TensorFormat::sequential(
            Shape::matrix(k, n),
            Precision::F8,
            ElementOrder::ColumnMajor,
            [1, k, n / col_blocks],
            replicas,
            MemoryClass::Interleaved,
            64,
        )
    }

    #[test]
    fn weight_pieces_leave_their_users_when_the_replicas_are_whole_pairs() {
        // Replicas on tiles {0, 1, 2, 3} and {4, 5, 6, 7}: whole partner
        // pairs, so no piece is homed at a user (each reaches all four
        // replicas over the exchange, pairable) and the pieces spread.
        let paired = column_major_weight(64, 32, 2, 4);
        let storage = storage_format(&paired, 3, 64);
        assert_eq!(storage.block, [1, 64, 4]);
        assert_homed_off_their_users(&paired, &storage, "paired replicas");
        let mut distinct = storage.tiles.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), storage.tiles.len(), "{:?}", storage.tiles);
        // Three replicas ({0, 1, 2}, ...) leave tile 2 without its partner,
        // so nothing pairs; still no piece is homed at a user, which would
        // keep it by a local copy call (and Repeat patches).
        let odd = column_major_weight(64, 30, 2, 3);
        let storage = storage_format(&odd, 3, 64);
        assert_homed_off_their_users(&odd, &storage, "unpaired replicas");
    }

    #[test]
    fn a_long_norm_vector_reaches_whole_pairs_in_pairable_pieces() {
        // 1,152 FP16 parameters wanted on 9 row tiles (0..9) of 16: tile
        // 8's partner 9 joins as a tenth replica, so every tile receiving
        // the vector has its partner receiving it too, and it is stored in
        // 4 pieces of 288 (576 bytes: 72 paired items) off those tiles.
        let output = rows_on_first_tiles(9, 1152);
        let wanted = broadcast_vector_format(&output, Precision::F16, 16);
        assert_eq!(wanted.replicas, 10);
        assert_eq!(wanted.tile(0, 9), 9);
        let tiles: Vec<u32> = (0..10).map(|replica| wanted.tile(0, replica)).collect();
        assert!(tiles.iter().all(|&tile| tiles.contains(&partner(tile))));
        let storage = storage_format(&wanted, 5, 16);
        assert_eq!(storage.block, [1, 1, 288]);
        assert_eq!(storage.tiles.len(), 4);
        assert_homed_off_their_users(&wanted, &storage, "norm");
        // A short vector could not pair: no extra replica, pieces of 64.
        let short = broadcast_vector_format(&rows_on_first_tiles(9, 256), Precision::F16, 16);
        assert_eq!(short.replicas, 9);
        assert_eq!(storage_format(&short, 5, 16).block, [1, 1, 64]);
    }

    #[test]
    fn vector_pieces_are_homed_on_tiles_that_do_not_use_them() {
        // A norm's 256-wide parameter, wanted whole on each of 8 row tiles
        // of a 16-tile machine: 4 pieces of 64, none on tiles 0..8.
        let output = rows_on_first_tiles(8, 256);
        let wanted = broadcast_vector_format(&output, Precision::F16, 16);
        assert_eq!(wanted.replicas, 8);
        let storage = storage_format(&wanted, 5, 16);
        assert_eq!(storage.replicas, 1);
        assert_eq!(storage.block, [1, 1, 64]);
        assert_eq!(storage.tiles.len(), 4);
        let homes = homes_by_column(&storage);
        assert!(
            homes.iter().all(|&tile| (8..16).contains(&tile)),
            "{homes:?}"
        );
        // The pieces spread: no two on one tile.
        let mut distinct = storage.tiles.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "{:?}", storage.tiles);
    }

    #[test]
    fn vector_pieces_stay_on_replicas_when_every_tile_uses_them() {
        let output = rows_on_first_tiles(8, 256);
        let wanted = broadcast_vector_format(&output, Precision::F16, 16);
        let storage = storage_format(&wanted, 5, 8);
        assert!(storage.tiles.iter().all(|&tile| tile < 8));
        assert_eq!(storage.tiles.len(), 4);
    }

    #[test]
    fn a_bias_piece_is_homed_outside_its_column_blocks_replicas() {
        // A product 8x2x1 on 16 tiles: the bias's two column blocks are each
        // wanted on 8 tiles; each block's pieces live on the other block's.
        let wanted = broadcast_vector_format(&row_blocks(8, 128, 64, 16), Precision::F16, 16);
        assert_eq!(wanted.parts(), [1, 1, 2]);
        assert_eq!(wanted.replicas, 8);
        let storage = storage_format(&wanted, 0, 16);
        assert_homed_off_their_users(&wanted, &storage, "bias");
    }

    #[test]
    fn a_piece_reaching_into_the_next_block_avoids_both_blocks_replicas() {
        // 768 columns in blocks of 70 (the last one 68) on 4 row tiles
        // each: 44 of 64 tiles use the vector; its pieces of 36 columns
        // cross block boundaries.
        let wanted = broadcast_vector_format(&row_blocks(4, 768, 70, 64), Precision::F16, 64);
        assert_eq!(wanted.parts(), [1, 1, 11]);
        for rotation in 0..64 {
            let storage = storage_format(&wanted, rotation, 64);
            assert_eq!(storage.block[2], 36);
            assert_homed_off_their_users(&wanted, &storage, &format!("rotation {rotation}"));
        }
    }

    #[test]
    fn matrix_weight_pieces_leave_their_replicas_where_a_tile_is_free() {
        let wanted = TensorFormat {
            shape: Shape::matrix(64, 64),
            precision: Precision::F8,
            order: ElementOrder::ColumnMajor,
            block: [1, 64, 64],
            replicas: 4,
            class: MemoryClass::Interleaved,
            row_starts: None,
            tiles: Arc::from(vec![3, 5, 7, 9]),
        };
        let storage = storage_format(&wanted, 11, 16);
        assert_eq!(storage.block, [1, 64, 16]);
        assert_homed_off_their_users(&wanted, &storage, "four scattered replicas");
        // Every tile a replica: the pieces stay on the replicas.
        let everywhere = TensorFormat {
            replicas: 16,
            tiles: Arc::from((0..16).collect::<Vec<u32>>()),
            ..wanted
        };
        let storage = storage_format(&everywhere, 11, 16);
        assert_eq!(storage.block, [1, 64, 4]);
        assert_eq!(&*storage.tiles, &(0..16).collect::<Vec<u32>>()[..]);
    }
}
