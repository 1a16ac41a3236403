//! The scheduling model of one transfer piece under IPU21.md's fabric timing:
//! events per piece (one word per event, or one 64-bit item per event when
//! paired), the select offset (point-to-point `c = 2`, multicast `c = 0`),
//! payload starts, guards, paired eligibility and the dependency slack. Owns
//! these definitions for the scheduler (and the paired receive protocol's
//! pair route time and selecting member); it must not place anything. The
//! validator re-derives them with its own reading of IPU21.md
//! (`validate::fabric`), on purpose.

use super::problem::{ExchangeProblem, WORD_BYTES};
use crate::target::mapping::{PARTNER_PHYSICAL_BIT, partner, physical_tile};
use crate::target::timing::{
    PAIRED_ALIGNMENT_BYTES, PAIRED_MINIMUM_ITEMS, PAIRED_PAYLOAD_AFTER_FORMAT, PAYLOAD_DELAY_BASE,
    POINT_TO_POINT_SELECT_OFFSET, TIME_TO_MUX_MINIMUM, paired_format_select, paired_payload_start,
    payload_start, time_to_mux,
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

/// The paired receive protocol's route time for a receiving pair (IPU21.md,
/// "Exchange rules confirmed on hardware"): the later of the two members'
/// `time_to_mux` from the sender. Physical ids.
pub fn pair_route_time(sender_physical: u32, member_physical: u32) -> i32 {
    let other = member_physical ^ PARTNER_PHYSICAL_BIT;
    time_to_mux(sender_physical, member_physical).max(time_to_mux(sender_physical, other))
}

/// Whether `member_physical` is the pair member that issues a paired
/// receive's source select: the one whose own `time_to_mux` is the smaller
/// (on a tie, the member without the partner bit). Physical ids.
pub fn issues_pair_select(sender_physical: u32, member_physical: u32) -> bool {
    let other = member_physical ^ PARTNER_PHYSICAL_BIT;
    let own = time_to_mux(sender_physical, member_physical);
    let theirs = time_to_mux(sender_physical, other);
    own < theirs || (own == theirs && member_physical & PARTNER_PHYSICAL_BIT == 0)
}

/// The XPIC value the selecting member writes for a paired receive
/// (IPU21.md: `sender XOR (receiver AND 2)`). Physical ids.
pub fn pair_select_value(sender_physical: u32, member_physical: u32) -> u32 {
    sender_physical ^ (member_physical & PARTNER_PHYSICAL_BIT)
}

/// Whether a piece may move as paired 64-bit items (IPU21.md: at least 64
/// items, 8-byte alignment, complete receiver pairs whose two members
/// receive at the same offset, neither the sender nor its partner among the
/// receivers; the sender's partner must exist because its stream is
/// blocked).
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
    let mut members: Vec<(u32, u32)> = receives
        .map(|receive| {
            (
                problem.destination_tile[receive],
                problem.destination[receive].offset,
            )
        })
        .collect();
    members.sort_unstable();
    if members
        .iter()
        .any(|&(tile, _)| tile == sender || tile == partner(sender))
    {
        // Paired self-delivery failed in every hardware probe (IPU21.md).
        return Some("the sender or its partner receives its own paired send");
    }
    let items = i64::from(words / PAIRED_ITEM_WORDS);
    for &(tile, offset) in &members {
        // The selecting member returns to neutral `items` after its select;
        // that may not share an event with its format-on or pointer write.
        let format = paired_format_select(0, physical_tile(tile));
        if items == format || items == format + PAIRED_PAYLOAD_AFTER_FORMAT {
            return Some("its return to neutral would fall on its format-on or pointer write");
        }
        let other = partner(tile);
        let found = members.binary_search_by_key(&other, |&(tile, _)| tile);
        match found {
            Ok(index) if other != tile => {
                if members[index].1 != offset {
                    return Some(
                        "the two members of a receiving pair receive at different offsets",
                    );
                }
            }
            _ => return Some("receivers not whole partner pairs"),
        }
    }
    None
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
