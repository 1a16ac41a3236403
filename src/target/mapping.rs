//! Logical-to-physical tile mapping of the C600. Programs name logical tiles
//! `0..1472`; the exchange fabric's timing and pairing are defined on physical
//! ids. This module owns that permutation, its inverse, tile partners and
//! physical rows. It must not know about timing or memory; callers that accept
//! tile ids from users validate them with the `checked_` forms.

use std::sync::OnceLock;

/// Tiles on a C600 (IPU21.md, "Chip").
pub const C600_TILES: u32 = 1472;

/// Physical rows of tiles (IPU21.md, "Chip": 23 physical rows).
pub const PHYSICAL_ROWS: u32 = 23;

/// Physical columns of tiles (IPU21.md, "Chip": 64 physical columns).
pub const PHYSICAL_COLUMNS: u32 = 64;

/// Logical tiles per pair (IPU21.md, "Logical and physical tiles": `lane = logical % 2`).
pub const TILES_PER_PAIR: u32 = 2;

/// Bit that is flipped to get a tile's partner (IPU21.md: partner is `physical XOR 2`).
pub const PARTNER_PHYSICAL_BIT: u32 = 2;

/// Shift from a physical id to its physical row (IPU21.md: row is `physical >> 6`).
pub const PHYSICAL_ROW_SHIFT: u32 = 6;

/// Physical id of a logical tile (IPU21.md, "Logical and physical tiles").
///
/// The formula is only meaningful for `logical < C600_TILES`; larger inputs
/// yield a number that is not a valid answer (it may even collide with a real
/// tile). Use [`checked_physical_tile`] for ids that come from users.
pub fn physical_tile(logical: u32) -> u32 {
    let pair = logical / TILES_PER_PAIR;
    let lane = logical % TILES_PER_PAIR;
    let block = pair / PHYSICAL_ROWS;
    let row_in_block = pair % PHYSICAL_ROWS;
    let row = if block % 2 == 1 {
        (PHYSICAL_ROWS - 1) - row_in_block
    } else {
        row_in_block
    };
    let column = (block / 2) * 4 + (block % 2);
    row * PHYSICAL_COLUMNS + column + 2 * lane
}

/// Physical id of a logical tile, or `None` outside `0..C600_TILES`.
pub fn checked_physical_tile(logical: u32) -> Option<u32> {
    (logical < C600_TILES).then(|| physical_tile(logical))
}

/// Inverse table, built once: entry `physical` holds its logical id (model: lazily built cache).
fn inverse_table() -> &'static [u32] {
    static TABLE: OnceLock<Vec<u32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![u32::MAX; C600_TILES as usize];
        for logical in 0..C600_TILES {
            if let Some(slot) = table.get_mut(physical_tile(logical) as usize) {
                *slot = logical;
            }
        }
        table
    })
}

/// Logical id of a physical tile, or `None` outside `0..C600_TILES` (inverse of [`physical_tile`]).
pub fn logical_tile(physical: u32) -> Option<u32> {
    inverse_table()
        .get(physical as usize)
        .copied()
        .filter(|&logical| logical < C600_TILES)
}

/// Partner of a logical tile, or `None` outside `0..C600_TILES`
/// (IPU21.md: the logical tile whose physical id is `physical XOR 2`).
pub fn checked_partner(logical: u32) -> Option<u32> {
    checked_physical_tile(logical)
        .and_then(|physical| logical_tile(physical ^ PARTNER_PHYSICAL_BIT))
}

/// Partner of a logical tile (IPU21.md, "Logical and physical tiles").
///
/// A tile outside the C600 has no partner and is returned unchanged; use
/// [`checked_partner`] to detect that case.
pub fn partner(logical: u32) -> u32 {
    checked_partner(logical).unwrap_or(logical)
}

/// Physical row of a physical tile (IPU21.md: `physical >> 6`).
pub fn physical_row(physical: u32) -> u32 {
    physical >> PHYSICAL_ROW_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_is_a_permutation() {
        let mut seen = vec![false; C600_TILES as usize];
        for logical in 0..C600_TILES {
            let physical = physical_tile(logical);
            assert!(physical < C600_TILES, "logical {logical} -> {physical}");
            assert!(!seen[physical as usize], "physical {physical} hit twice");
            seen[physical as usize] = true;
            assert_eq!(logical_tile(physical), Some(logical));
        }
        assert!(seen.iter().all(|&hit| hit));
    }

    #[test]
    fn partner_is_an_involution_and_never_itself() {
        for logical in 0..C600_TILES {
            let other = partner(logical);
            assert_ne!(other, logical);
            assert_eq!(partner(other), logical);
            assert_eq!(physical_tile(other), physical_tile(logical) ^ 2);
            // Partners are always the two lanes of one pair.
            assert_eq!(other, logical ^ 1);
        }
    }

    #[test]
    fn hand_computed_values() {
        // logical 0: pair 0, lane 0, block 0, row 0, column 0.
        assert_eq!(physical_tile(0), 0);
        // logical 1: lane 1 adds 2.
        assert_eq!(physical_tile(1), 2);
        // logical 2: pair 1, row 1.
        assert_eq!(physical_tile(2), 64);
        // logical 45: pair 22, lane 1, block 0, row 22.
        assert_eq!(physical_tile(45), 22 * 64 + 2);
        // logical 46: pair 23, block 1 (odd: row reversed to 22), column 1.
        assert_eq!(physical_tile(46), 22 * 64 + 1);
        // logical 92: pair 46, block 2, row 0, column 4.
        assert_eq!(physical_tile(92), 4);
        // logical 1471: pair 735, lane 1, block 31, row 22 reversed to 0, column 61.
        assert_eq!(physical_tile(1471), 63);
        assert_eq!(partner(46), 47);
        assert_eq!(physical_row(1409), 22);
        assert_eq!(physical_row(63), 0);
    }

    #[test]
    fn out_of_range_ids_are_rejected_by_checked_forms() {
        assert_eq!(checked_physical_tile(C600_TILES), None);
        assert_eq!(logical_tile(C600_TILES), None);
        assert_eq!(logical_tile(u32::MAX), None);
        assert_eq!(checked_partner(C600_TILES), None);
        assert_eq!(partner(C600_TILES), C600_TILES);
    }
}
