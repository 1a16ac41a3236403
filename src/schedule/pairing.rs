//! Paired width per piece. A paired piece moves two words per event, which
//! halves its time on the sender and on every receiver, but it blocks the
//! sender partner's outgoing stream for that time (IPU21.md). Pairing every
//! eligible piece therefore helps where partners are idle and hurts where
//! the partner is itself a busy sender.
//!
//! The selection here works on endpoint loads (events per tile): eligible
//! pieces, longest first, are paired when the partner's stream load after
//! pairing stays within the busiest load among the piece's own endpoints
//! after pairing, so pairing never creates a new bottleneck above the one it
//! relieves. The scheduler then places the chosen mix and `candidates`
//! keeps it only when its measured horizon is better.

use super::problem::ExchangeProblem;
use super::timing::{PAIRED_ITEM_WORDS, piece_events};
use crate::target::mapping::partner;

/// How a candidate pairs its pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pairing {
    /// Every piece as 32-bit words.
    None,
    /// Every eligible piece paired.
    All,
    /// The eligible pieces `pairing` selects.
    Selected,
}

/// The pairings every order is placed under at width `auto` (by `auto`'s
/// candidates, and by a concrete order an override gives a phase), in
/// order: none; every eligible piece; and [`select_paired`]'s selection
/// when it pairs something and differs from every eligible piece. Only
/// none when no piece may pair.
pub fn auto_pairings(problem: &ExchangeProblem, eligible: &[bool]) -> Vec<(Pairing, Vec<bool>)> {
    let none = vec![false; problem.pieces()];
    if !eligible.contains(&true) {
        return vec![(Pairing::None, none)];
    }
    let selected = select_paired(problem, eligible);
    let mut pairings = vec![(Pairing::None, none), (Pairing::All, eligible.to_vec())];
    if selected != eligible && selected.contains(&true) {
        pairings.push((Pairing::Selected, selected));
    }
    pairings
}

/// Which pieces to pair, given each piece's eligibility.
pub fn select_paired(problem: &ExchangeProblem, eligible: &[bool]) -> Vec<bool> {
    let tiles = problem.tiles as usize;
    let mut send_load = vec![0u64; tiles];
    let mut receive_load = vec![0u64; tiles];
    for piece in 0..problem.pieces() {
        let events = u64::from(piece_events(problem.words[piece], false));
        send_load[problem.source_tile[piece] as usize] += events;
        for receive in problem.receives_of(piece) {
            receive_load[problem.destination_tile[receive] as usize] += events;
        }
    }
    let mut candidates: Vec<usize> = (0..problem.pieces())
        .filter(|&piece| eligible[piece])
        .collect();
    candidates.sort_by_key(|&piece| (std::cmp::Reverse(problem.words[piece]), piece));
    let mut paired = vec![false; problem.pieces()];
    for piece in candidates {
        let words = u64::from(problem.words[piece]);
        let saved = words - words / u64::from(PAIRED_ITEM_WORDS);
        let blocked = words / u64::from(PAIRED_ITEM_WORDS);
        let sender = problem.source_tile[piece] as usize;
        let other = partner(sender as u32) as usize;
        if other >= tiles {
            continue;
        }
        let busiest_after = problem
            .receives_of(piece)
            .map(|receive| receive_load[problem.destination_tile[receive] as usize] - saved)
            .fold(send_load[sender] - saved, u64::max);
        if send_load[other] + blocked > busiest_after {
            continue;
        }
        paired[piece] = true;
        send_load[sender] -= saved;
        send_load[other] += blocked;
        for receive in problem.receives_of(piece) {
            receive_load[problem.destination_tile[receive] as usize] -= saved;
        }
    }
    paired
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::tests::random_problem;
    use crate::schedule::timing::paired_eligible;

    #[test]
    fn selection_pairs_only_eligible_pieces_and_never_overloads_a_partner() {
        let mut paired_some = false;
        for seed in 0..30 {
            let problem = random_problem(seed, 16, 60);
            let eligible: Vec<bool> = (0..problem.pieces())
                .map(|piece| paired_eligible(&problem, piece))
                .collect();
            let selected = select_paired(&problem, &eligible);
            let mut send = vec![0u64; 16];
            let mut receive = vec![0u64; 16];
            for piece in 0..problem.pieces() {
                assert!(
                    !selected[piece] || eligible[piece],
                    "seed {seed} piece {piece}"
                );
                paired_some |= selected[piece];
                let words = u64::from(problem.words[piece]);
                let events = if selected[piece] { words / 2 } else { words };
                send[problem.source_tile[piece] as usize] += events;
                if selected[piece] {
                    send[partner(problem.source_tile[piece]) as usize] += events;
                }
                for receive_index in problem.receives_of(piece) {
                    receive[problem.destination_tile[receive_index] as usize] += events;
                }
            }
            // Pairing may not raise the busiest endpoint above the unpaired one.
            let (mut plain_send, mut plain_receive) = (vec![0u64; 16], vec![0u64; 16]);
            for piece in 0..problem.pieces() {
                let words = u64::from(problem.words[piece]);
                plain_send[problem.source_tile[piece] as usize] += words;
                for receive_index in problem.receives_of(piece) {
                    plain_receive[problem.destination_tile[receive_index] as usize] += words;
                }
            }
            let busiest = |a: &[u64], b: &[u64]| a.iter().chain(b).copied().max().unwrap_or(0);
            assert!(
                busiest(&send, &receive) <= busiest(&plain_send, &plain_receive),
                "seed {seed}"
            );
        }
        assert!(paired_some, "some pieces are paired");
    }
}
