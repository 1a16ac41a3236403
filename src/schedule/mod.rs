//! Exchange scheduling: from one phase's transfers to an event-timed schedule.
//!
//! `problem` turns a transfer list into symbolic pieces, `dependencies` finds
//! the memory hazards between them, `policy` and `matching` order pieces
//! (latency, S(W), B(W), matching waves), `list` picks them in time order,
//! `placer` places each under the IPU21 fabric model of `timing`,
//! `candidates` compares orders for the `auto` policy, `pairing` chooses
//! paired width per piece, `elements` keeps sends and receives of one
//! allocation out of one memory element's events, `event_set` holds a tile's
//! taken control events, `bound` gives the lower bounds, `scheduler` is the
//! entry point, and `validate` re-checks every invariant independently. Pure
//! cores: plain data in, plain data out; no salsa, no placement, no
//! instruction words (those are `crate::rows`).

pub mod bound;
pub mod candidates;
pub mod dependencies;
pub mod elements;
pub mod event_set;
pub mod figures;
pub mod list;
pub mod matching;
pub mod packing;
pub mod pairing;
pub mod placer;
pub mod policy;
pub mod prepared;
pub mod problem;
pub mod scheduler;
pub mod timing;
pub mod validate;
pub mod vocabulary;
pub mod windows;

#[cfg(test)]
pub(crate) mod tests;

pub use bound::{dependency_bound, latency_bound, phase_bound};
pub use candidates::{AutoSettings, CandidateOutcome};
pub use dependencies::{Dependencies, dependencies};
pub use figures::ScheduleFigures;
pub use problem::{
    ExchangeProblem, ExplicitBinding, LocalAllocation, ProblemError, ProblemOrigin, SymbolicAddress,
};
pub use scheduler::{schedule, schedule_below, schedule_with};
pub use validate::{ValidationError, validate};

pub use vocabulary::{SchedulePolicy, TransferWidth};

/// An event that does not happen (no pointer write, no deselect).
pub const NO_EVENT: u32 = u32::MAX;

/// An event-timed schedule of one [`ExchangeProblem`]. Per piece: its send
/// start and width; per receive (same indexing as the problem's
/// destinations): select, payload start, pointer write and deselect events.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Schedule {
    /// The policy asked for (possibly `auto`).
    pub policy: SchedulePolicy,
    /// The concrete policy whose order produced this schedule (the winning
    /// candidate under `auto`, else `policy`).
    pub chosen: SchedulePolicy,
    /// Under `auto`: every candidate tried, in the order tried; else empty.
    pub candidates: Vec<CandidateOutcome>,
    /// `paired64` when some piece moves paired, else `word32` (never `auto`).
    pub width: TransferWidth,
    pub send_start: Vec<u32>,
    /// Whether the piece moves as paired 64-bit items.
    pub paired: Vec<bool>,
    /// XPIC select event of each receive.
    pub select: Vec<u32>,
    /// First payload event of each receive.
    pub payload_start: Vec<u32>,
    /// Event of the PIC write before the receive, or [`NO_EVENT`] when the
    /// receive continues exactly where the tile's previous one ended.
    pub pointer_write: Vec<u32>,
    /// Event the receiver returns to the neutral source, or [`NO_EVENT`] when
    /// the tile's next receive selects at that very event.
    pub deselect: Vec<u32>,
    /// Per tile: last event of its row (sends, and receives plus guard).
    pub tile_end: Vec<u32>,
    /// Largest `tile_end`.
    pub horizon: u32,
    /// The endpoint bound, in cycles: max over tiles of the events it
    /// sends and the events it receives, a piece that may pair counted at
    /// its paired events (half its words), whether or not this schedule
    /// paired it; so no schedule of the problem is shorter.
    pub endpoint_bound: u32,
    /// The latency-aware lower bound ([`bound::latency_bound`]).
    pub latency_bound: u32,
    pub send_words: Vec<u32>,
    pub receive_words: Vec<u32>,
}

/// Why a problem could not be scheduled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("piece {piece}: tile {tile} appears twice among its destinations")]
    DuplicateReceiver { piece: usize, tile: u32 },
    #[error("piece {piece}: event {event} does not fit the 32-bit event counter")]
    EventOverflow { piece: usize, event: i64 },
    #[error(
        "piece {piece}: tile {tile} receives its own send, but its select or deselect would land \
         on the first two events of that send"
    )]
    SelfReceiveOnOwnSend { piece: usize, tile: u32 },
    #[error("piece {piece}: no feasible start within the search window after event {from}")]
    NoFeasibleEvent { piece: usize, from: i64 },
    #[error("piece {piece}: tile {tile} is outside the {tiles} tiles of the problem")]
    TileOutOfRange { piece: usize, tile: u32, tiles: u32 },
    /// Not a failure: a placement given a cutoff stopped because its
    /// horizon is bound to reach it (`Placer::set_cutoff`).
    #[error("the horizon is at least {bound} events, not below the cutoff of {cutoff}")]
    AboveCutoff { bound: i64, cutoff: i64 },
}
