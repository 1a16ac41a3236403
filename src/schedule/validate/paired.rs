//! The validator's reading of IPU21.md's paired (64-bit) rules: which
//! pieces may pair at all, and each receive's part in the paired receive
//! protocol as the chip runs it (pair route time, the member that selects).
//! Written from the document with the validator's own fabric formulas; it
//! owns these decisions for the validator only and must not be used by the
//! scheduler.

use rustc_hash::FxHashMap as HashMap;

use super::fabric::{
    FORMAT_TO_PAYLOAD, PAIRED_ALIGNMENT, PAIRED_ITEMS_AT_LEAST, format_on, pair_member, route_time,
};
use crate::schedule::problem::{ExchangeProblem, SymbolicAddress};
use crate::target::mapping::{partner, physical_tile};

/// A receive's part in the paired receive protocol.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Part {
    /// An ordinary 32-bit receive: selects, deselects, may skip its pointer.
    Ordinary,
    /// The pair member with the smaller `time_to_mux`: issues the select
    /// and the return to neutral, and the format and pointer controls.
    Selecting,
    /// The other member: format and pointer controls only.
    Following,
}

/// The route time a receive selects by (the pair's later `time_to_mux`
/// when paired) and its part, for physical sender and receiver ids.
pub fn route_and_part(sender: u32, receiver: u32, paired: bool) -> (i64, Part) {
    let own = route_time(sender, receiver);
    if !paired {
        return (own, Part::Ordinary);
    }
    let other = pair_member(receiver);
    let theirs = route_time(sender, other);
    let selects = own < theirs || (own == theirs && receiver < other);
    let part = if selects {
        Part::Selecting
    } else {
        Part::Following
    };
    (own.max(theirs), part)
}

/// Why `piece` may not move as paired 64-bit items (IPU21.md), or `None`
/// when it may. Written from the machine facts, apart from the scheduler's
/// own eligibility test.
pub fn pairing_refusal(problem: &ExchangeProblem, piece: usize) -> Option<&'static str> {
    let tile = problem.source_tile[piece];
    let words = problem.words[piece];
    if !words.is_multiple_of(2) || words / 2 < PAIRED_ITEMS_AT_LEAST {
        return Some("fewer than 64 whole items");
    }
    let aligned = |address: SymbolicAddress| {
        let allocation = problem.allocations[address.allocation as usize];
        address.offset.is_multiple_of(PAIRED_ALIGNMENT)
            && allocation.alignment.is_multiple_of(PAIRED_ALIGNMENT)
            && problem.bindings_keep_alignment(address.allocation, PAIRED_ALIGNMENT)
    };
    if !aligned(problem.source[piece]) {
        return Some("source not 8-byte aligned");
    }
    if partner(tile) == tile || partner(tile) >= problem.tiles {
        return Some("sender has no partner");
    }
    let range = problem.receives_of(piece);
    let offsets: HashMap<u32, u32> = range
        .clone()
        .map(|receive| {
            (
                problem.destination_tile[receive],
                problem.destination[receive].offset,
            )
        })
        .collect();
    if offsets.contains_key(&tile) || offsets.contains_key(&partner(tile)) {
        return Some("own-pair self-delivery");
    }
    let items = i64::from(words / 2);
    for receive in range {
        if !aligned(problem.destination[receive]) {
            return Some("destination not 8-byte aligned");
        }
        let receiver = problem.destination_tile[receive];
        // The selecting member's return to neutral (`items` after the
        // select) may not share an event with its format-on or pointer.
        let format = format_on(0, physical_tile(receiver));
        if items == format || items == format + FORMAT_TO_PAYLOAD {
            return Some("return to neutral on the format-on or pointer event");
        }
        match offsets.get(&partner(receiver)) {
            None => return Some("incomplete receiver pair"),
            Some(&offset) if offset != problem.destination[receive].offset => {
                return Some("pair members receive at different addresses");
            }
            Some(_) => {}
        }
    }
    None
}
