//! The 2D rotary embedding: the angle of every (token, pair) from the
//! patch's grid row and column (a class token does not turn), and the kernel
//! that turns each row's pairs by them.

use super::operands::{other_kind, read, round_all, write};
use crate::expand::program::{ElementType, Kernel};
use crate::numerics::rows::rotary_pair_in_place;
use crate::sim::memory::{KernelRead, KernelWrite, SimError};

/// Rotary base frequency (model: the common 10,000 of RoPE).
pub const ROTARY_BASE: f32 = 10_000.0;

/// The angle by which rotary pair `pair` of token `token` turns: pairs in
/// the first half follow the patch's grid row, the second half its column;
/// a class token (token 0 when present) does not turn.
pub fn rotary_angle(token: u32, pair: u32, head_dim: u32, grid: u32, class_token: bool) -> f32 {
    if class_token && token == 0 {
        return 0.0;
    }
    let patch = token - u32::from(class_token);
    let (grid_row, grid_col) = (patch / grid.max(1), patch % grid.max(1));
    let quarter = (head_dim / 4).max(1);
    let (position, index) = if pair < quarter {
        (grid_row, pair)
    } else {
        (grid_col, pair - quarter)
    };
    let frequency = ROTARY_BASE.powf(-(index as f32) / quarter as f32);
    position as f32 * frequency
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
    let pairs = (cols / 2) as usize;
    let mut cosines = vec![0.0f32; pairs];
    let mut sines = vec![0.0f32; pairs];
    for (row_index, row) in values.chunks_exact_mut(cols as usize).enumerate() {
        let token = first_row + (row_index as u32 % rows);
        for pair in 0..pairs {
            let angle = rotary_angle(
                token,
                first_col / 2 + pair as u32,
                head_dim,
                grid,
                class_token,
            );
            cosines[pair] = angle.cos();
            sines[pair] = angle.sin();
        }
        rotary_pair_in_place(row, &cosines, &sines)?;
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
