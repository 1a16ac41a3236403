//! The scheduling model of one transfer piece under IPU21.md's fabric timing:
//! events per piece (one word per event, or one 64-bit item per event when
//! paired), the select offset (point-to-point `c = 2`, multicast `c = 0`),
//! payload starts, guards, paired eligibility and the dependency slack. Owns
//! these definitions for the scheduler; it must not place anything. The
//! validator re-derives them from `crate::target::timing` on purpose.

use super::problem::{ExchangeProblem, WORD_BYTES};
use crate::target::mapping::{partner, physical_tile};
use crate::target::timing::{
    PAIRED_ALIGNMENT_BYTES, PAIRED_MINIMUM_ITEMS, PAYLOAD_DELAY_BASE, POINT_TO_POINT_SELECT_OFFSET,
    TIME_TO_MUX_MINIMUM, paired_payload_start, payload_start,
};

/// Words per paired 64-bit item.
pub const PAIRED_ITEM_WORDS: u32 = 2;

/// Events between a predecessor's readiness and a dependent's send start, so
/// that the dependent's earliest possible payload (select `t + min
/// time_to_mux`, multicast `c = 0`, payload `+ 52` in row 0) still lands
/// after the predecessor finished (model: derived from IPU21.md's formulas).
pub const DEPENDENCY_SLACK: i64 = {
    let earliest = TIME_TO_MUX_MINIMUM as i64 + PAYLOAD_DELAY_BASE;
    if earliest < 0 { -earliest } else { 0 }
};

/// Events a piece of `words` occupies on the sender's stream.
pub fn piece_events(words: u32, paired: bool) -> u32 {
    if paired {
        words / PAIRED_ITEM_WORDS
    } else {
        words
    }
}

/// Select offset `c`: point-to-point rows use 2, multicasts 0 (IPU21.md).
pub fn select_offset(receivers: usize) -> i64 {
    if receivers == 1 {
        POINT_TO_POINT_SELECT_OFFSET
    } else {
        0
    }
}

/// First payload event of a receive selected at `select` on logical `tile`.
pub fn receive_payload_start(select: i64, tile: u32, paired: bool) -> i64 {
    let physical = physical_tile(tile);
    if paired {
        paired_payload_start(select, physical)
    } else {
        payload_start(select, physical)
    }
}

/// Whether a piece may move as paired 64-bit items (IPU21.md: at least 64
/// items, 8-byte alignment, complete receiver pairs; the sender's partner
/// must exist because its stream is blocked).
pub fn paired_eligible(problem: &ExchangeProblem, piece: usize) -> bool {
    pairing_refusal(problem, piece).is_none()
}

/// Why a piece may not move as paired 64-bit items (the first rule of
/// [`paired_eligible`] it breaks, in words a user can act on), or `None`
/// when it may.
pub fn pairing_refusal(problem: &ExchangeProblem, piece: usize) -> Option<&'static str> {
    let words = problem.words[piece];
    if !words.is_multiple_of(PAIRED_ITEM_WORDS) || words / PAIRED_ITEM_WORDS < PAIRED_MINIMUM_ITEMS
    {
        return Some("fewer than 64 whole 64-bit items");
    }
    let aligned = |address: super::problem::SymbolicAddress| {
        let allocation = problem.allocations[address.allocation as usize];
        address.offset.is_multiple_of(PAIRED_ALIGNMENT_BYTES)
            && allocation.alignment.is_multiple_of(PAIRED_ALIGNMENT_BYTES)
            && problem.bindings_keep_alignment(address.allocation, PAIRED_ALIGNMENT_BYTES)
    };
    let sender = problem.source_tile[piece];
    if partner(sender) == sender || partner(sender) >= problem.tiles {
        return Some("sender without a partner tile");
    }
    if !aligned(problem.source[piece]) {
        return Some("source not 8-byte aligned");
    }
    let receives = problem.receives_of(piece);
    if !receives
        .clone()
        .all(|receive| aligned(problem.destination[receive]))
    {
        return Some("destination not 8-byte aligned");
    }
    let mut tiles = problem.destination_tile[receives].to_vec();
    tiles.sort_unstable();
    let whole_pairs = tiles.iter().all(|&tile| {
        let other = partner(tile);
        other != tile && tiles.binary_search(&other).is_ok()
    });
    (!whole_pairs).then_some("receivers not whole partner pairs")
}

impl ExchangeProblem {
    /// [`pairing_refusal`] of `piece`.
    pub fn pairing_refusal(&self, piece: usize) -> Option<&'static str> {
        pairing_refusal(self, piece)
    }
}

/// Bytes a piece moves per receive.
pub fn piece_bytes(words: u32) -> u64 {
    u64::from(words) * u64::from(WORD_BYTES)
}
