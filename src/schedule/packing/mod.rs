//! Packing counterfactuals of one exchange phase (seed 002's study): what
//! the phase would become if its fragmented endpoints were packed by local
//! copies before or after the exchange, or if its independent transfers
//! were merely reordered so that contiguous runs coalesce.
//!
//! Four alternatives, each preserving every piece's source tile, multicast
//! recipient set and payload bytes:
//!
//! - **source packing**: each source tile gathers what it sends into one
//!   staging buffer (grouped by route, ordered by destination), so
//!   consecutive pieces read contiguous bytes;
//! - **receiver staging**: each receiver takes its pieces into one staging
//!   buffer (grouped by route, ordered by source) and scatters them to their
//!   final places afterwards;
//! - **both**: both ends staged, so every route is one contiguous run;
//! - **coalesced independent prefix**: no copies and no staging; the
//!   pieces before the first one that depends on an earlier piece of the
//!   phase are sorted by route and source, the dependent tail keeps its
//!   order after them, every address stays.
//!
//! The transformed problem is coalesced with the problem's own rule
//! ([`ExchangeProblem::append_piece`]), so it is scheduled and encoded by
//! the real scheduler and row encoder like any phase. The staging
//! alternatives reorder the whole phase and redirect where data lands or is
//! read from, which is wrong as soon as one piece reads, overwrites or is
//! overwritten by what an earlier piece of the same phase touches (under
//! any Repeat binding: `dependence`); such phases are refused them.
//! Every transformation is checked by `check`, independently of how it was
//! made. This module owns the transformations and their copy figures; it
//! must not schedule or encode.

pub mod check;
pub mod copies;
pub mod dependence;
pub mod study;
pub mod transform;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use check::{PackingCheckError, check_packed};
pub use copies::{CopyFigures, CopyRun, copy_figures};
pub use dependence::{Conflict, Independence, independence};
pub use study::{
    AlternativeOutcome, AlternativeStudy, ExchangeMeasure, MeasureError, PackingStudy, study,
};
pub use transform::pack;

use super::problem::ExchangeProblem;

/// One packing counterfactual.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Alternative {
    SourcePacking,
    ReceiverStaging,
    Both,
    CoalescedPrefix,
}

impl Alternative {
    /// Every alternative, in report order.
    pub const ALL: [Alternative; 4] = [
        Alternative::SourcePacking,
        Alternative::ReceiverStaging,
        Alternative::Both,
        Alternative::CoalescedPrefix,
    ];

    /// The alternative's name in tables, JSON and flags.
    pub fn name(self) -> &'static str {
        match self {
            Alternative::SourcePacking => "source-packing",
            Alternative::ReceiverStaging => "receiver-staging",
            Alternative::Both => "both",
            Alternative::CoalescedPrefix => "coalesced-prefix",
        }
    }

    /// Whether the alternative stages payloads (and so reorders the whole
    /// phase and moves where bytes land or are read from).
    pub fn stages(self) -> bool {
        !matches!(self, Alternative::CoalescedPrefix)
    }

    /// Whether the source end is packed into a staging buffer.
    pub fn packs_sources(self) -> bool {
        matches!(self, Alternative::SourcePacking | Alternative::Both)
    }

    /// Whether the receiving end lands in a staging buffer.
    pub fn stages_receivers(self) -> bool {
        matches!(self, Alternative::ReceiverStaging | Alternative::Both)
    }
}

impl std::fmt::Display for Alternative {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A transformed phase: the problem the exchange would solve, and the local
/// copies around it. Allocations `0..original_allocations` are the
/// original problem's (same indices); the rest are staging buffers, one
/// per tile that stages, not iterated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    pub alternative: Alternative,
    pub problem: ExchangeProblem,
    pub original_allocations: u32,
    /// Copies before the exchange (original source bytes into source
    /// staging), per tile in staging order, one per original piece.
    pub gathers: Vec<CopyRun>,
    /// Copies after the exchange (receiver staging into final
    /// destinations), per tile in staging order, one per original receive.
    pub scatters: Vec<CopyRun>,
    /// For the coalesced prefix: how many pieces of `problem` are the
    /// reordered independent prefix (the rest is the original tail).
    pub prefix_pieces: u32,
}

/// Why an alternative was not made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Refusal {
    #[error(
        "refused: {dependent} of {pieces} pieces depend on an earlier piece of the phase \
         ({forwarding} read what an earlier one writes); the first, piece {}, {} piece {} \
         on tile {}; staging would reorder them and redirect the bytes",
        first.later, first.kind_text(), first.earlier, first.tile
    )]
    Dependent {
        pieces: u32,
        dependent: u32,
        forwarding: u32,
        first: Conflict,
    },
}

/// The phase's endpoint fragmentation: the most piece endpoints (pieces
/// sent plus receives) on one tile, and that tile (the lowest on a tie).
/// What ranks phases for `superstep packing --top`.
pub fn endpoint_fragments(problem: &ExchangeProblem) -> (u64, u32) {
    let mut endpoints = vec![0u64; problem.tiles as usize];
    for piece in 0..problem.pieces() {
        endpoints[problem.source_tile[piece] as usize] += 1;
        for receive in problem.receives_of(piece) {
            endpoints[problem.destination_tile[receive] as usize] += 1;
        }
    }
    endpoints
        .iter()
        .enumerate()
        .max_by_key(|&(tile, &count)| (count, std::cmp::Reverse(tile)))
        .map_or((0, 0), |(tile, &count)| (count, tile as u32))
}
