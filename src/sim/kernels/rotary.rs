//! The 2D rotary embedding: the angle of every (token, pair) from the
//! patch's grid column and row (a class token does not turn), and the kernel
//! that turns each row's pairs by them.
//!
//! The definition is timm's `vit_pe_core_large_patch14_336` (rope type
//! `cat`, `rope_grid_indexing='xy'`, `rope_grid_offset=1`, `ref_feat_shape`
//! equal to the grid), which is Meta's PE `Rope2D`; checked against timm's
//! own output by `tests/fidelity/pe_core.rs`. Each head's `head_dim / 2`
//! pairs are adjacent elements `(2i, 2i + 1)` (interleaved, not half-split);
//! the first `head_dim / 4` pairs follow the patch's column (x), the rest its
//! row (y); positions count from 1 (the class token holds position 0 and is
//! not rotated); pair `i` of either half turns at frequency
//! `ROTARY_BASE^(-i / (head_dim / 4))`.

use super::operands::{other_kind, read, round_all, write};
use crate::expand::program::{ElementType, Kernel};
use crate::numerics::rows::rotary_pair_in_place;
use crate::sim::memory::{KernelRead, KernelWrite, SimError};

/// Rotary base frequency (timm's `rope_temperature`, RoPE's 10,000).
pub const ROTARY_BASE: f32 = 10_000.0;

/// Grid positions count from this (timm's `rope_grid_offset`, PE's class
/// token offset): the patch at grid column 0 sits at x = 1.
pub const ROTARY_GRID_OFFSET: u32 = 1;

/// The angle by which rotary pair `pair` of token `token` turns: pairs in
/// the first half follow the patch's grid column, the second half its row,
/// both counted from [`ROTARY_GRID_OFFSET`]; a class token (token 0 when
/// present) does not turn.
pub fn rotary_angle(token: u32, pair: u32, head_dim: u32, grid: u32, class_token: bool) -> f32 {
    if class_token && token == 0 {
        return 0.0;
    }
    let patch = token - u32::from(class_token);
    let (grid_row, grid_column) = (patch / grid.max(1), patch % grid.max(1));
    let quarter = (head_dim / 4).max(1);
    let (position, index) = if pair < quarter {
        (grid_column, pair)
    } else {
        (grid_row, pair - quarter)
    };
    let frequency = ROTARY_BASE.powf(-(index as f32) / quarter as f32);
    (position + ROTARY_GRID_OFFSET) as f32 * frequency
}

/// Where a row of rotary pairs sits: its token, the head-relative index of
/// its first pair, and the shape that gives positions meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RotaryPlace {
    pub token: u32,
    pub first_pair: u32,
    pub head_dim: u32,
    pub grid: u32,
    pub class_token: bool,
}

/// Turns every pair of `row` (adjacent elements, starting at head pair
/// `place.first_pair`) by its [`rotary_angle`]: the one rotation the
/// kernel and the FP32 reference share.
pub fn rotate_row(row: &mut [f32], place: RotaryPlace) -> Result<(), SimError> {
    let (cosines, sines): (Vec<f32>, Vec<f32>) = (0..(row.len() / 2) as u32)
        .map(|pair| {
            let angle = rotary_angle(
                place.token,
                place.first_pair + pair,
                place.head_dim,
                place.grid,
                place.class_token,
            );
            (angle.cos(), angle.sin())
        })
        .unzip();
    rotary_pair_in_place(row, &cosines, &sines)?;
    Ok(())
}

/// `Kernel::Rotary`.
pub(super) fn rotary(
    kernel: &Kernel,
    reader: &impl KernelRead,
    writer: &mut impl KernelWrite,
) -> Result<(), SimError> {
    let Kernel::Rotary {
        input,
        output,
        groups,
        rows,
        cols,
        first_row,
        first_col,
        head_dim,
        grid,
        class_token,
    } = *kernel
    else {
        return Err(other_kind("rotary"));
    };
    let mut values = read(reader, input, ElementType::F16, groups, rows, cols)?;
    for (row_index, row) in values.chunks_exact_mut(cols as usize).enumerate() {
        let place = RotaryPlace {
            token: first_row + (row_index as u32 % rows),
            first_pair: first_col / 2,
            head_dim,
            grid,
            class_token,
        };
        rotate_row(row, place)?;
    }
    round_all(&mut values);
    write(
        writer,
        output,
        ElementType::F16,
        groups,
        rows,
        cols,
        &values,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The patch at grid row 2, column 5 of PE-Core's 24 x 24 grid (token
    /// 1 + 2 * 24 + 5 after the class token): x = 6 drives the first half of
    /// the pairs, y = 3 the second, both counted from 1.
    #[test]
    fn first_half_follows_the_column_and_positions_count_from_one() {
        let token = 1 + 2 * 24 + 5;
        let angle = |pair| rotary_angle(token, pair, 64, 24, true);
        assert_eq!(angle(0), 6.0);
        assert_eq!(angle(16), 3.0);
        let band = ROTARY_BASE.powf(-1.0 / 16.0);
        assert_eq!(angle(1), 6.0 * band);
        assert_eq!(angle(17), 3.0 * band);
        assert_eq!(rotary_angle(0, 0, 64, 24, true), 0.0);
        assert_eq!(rotary_angle(1, 0, 64, 24, true), 1.0);
        // Without a class token, token 0 is the first patch, at (1, 1).
        assert_eq!(rotary_angle(0, 16, 64, 24, false), 1.0);
    }

    #[test]
    fn rotate_row_turns_adjacent_pairs() {
        // Token 1 is the patch at (x, y) = (1, 1): pair 0 turns by 1 radian.
        let mut row = vec![1.0, 0.0, 0.0, 1.0];
        let place = RotaryPlace {
            token: 1,
            first_pair: 0,
            head_dim: 4,
            grid: 2,
            class_token: true,
        };
        rotate_row(&mut row, place).unwrap();
        let (cosine, sine) = (1.0f32.cos(), 1.0f32.sin());
        assert_eq!(row, vec![cosine, sine, -sine, cosine]);
    }
}
