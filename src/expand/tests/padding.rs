//! The zero fills of partial attention's query padding: which bytes they
//! cover, checked against the block geometry written down by hand.

use super::super::compute::query_padding_fills;
use super::super::program::{AllocationId, Location, Operand, ZeroFill};

fn query_operand(line: u32, matrix: u32) -> Operand {
    Operand {
        location: Location {
            allocation: AllocationId(7),
            offset: 16,
        },
        line,
        matrix,
    }
}

#[test]
fn padding_rows_of_every_group_are_one_fill_when_rows_are_one_line() {
    // 2 groups of 45 rows of 72 FP16 values (144-byte lines), 43 valid.
    let fills = query_padding_fills(3, query_operand(144, 45 * 144), (2, 43, 45), 72);
    assert_eq!(
        fills,
        vec![ZeroFill {
            tile: 3,
            destination: Location {
                allocation: AllocationId(7),
                offset: 16 + 43 * 144,
            },
            row_bytes: 2 * 144,
            rows: 2,
            stride: 45 * 144,
        }]
    );
}

#[test]
fn padding_rows_are_filled_per_group_when_lines_are_longer_than_rows() {
    // Lines of 160 bytes holding 72 FP16 values (144 bytes) each.
    let fills = query_padding_fills(1, query_operand(160, 10 * 160), (2, 8, 10), 72);
    let covered: Vec<(u32, u32, u32, u32)> = fills
        .iter()
        .map(|fill| {
            (
                fill.destination.offset,
                fill.row_bytes,
                fill.rows,
                fill.stride,
            )
        })
        .collect();
    assert_eq!(
        covered,
        vec![
            (16 + 8 * 160, 144, 2, 160),
            (16 + 10 * 160 + 8 * 160, 144, 2, 160)
        ]
    );
}

#[test]
fn a_full_query_block_needs_no_fill() {
    assert!(query_padding_fills(0, query_operand(144, 45 * 144), (2, 45, 45), 72).is_empty());
    assert!(query_padding_fills(0, query_operand(144, 45 * 144), (0, 40, 45), 72).is_empty());
}
