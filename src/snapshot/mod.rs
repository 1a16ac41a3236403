//! Exchange snapshots: capture a build's exchange phases in the seed
//! system's schema-4 JSON format, import snapshots back into exchange
//! problems, and benchmark the scheduler on them.
//!
//! # Representation of an imported phase
//!
//! A snapshot names absolute tile addresses; our scheduler works on
//! [`ExchangeProblem`]s with symbolic addresses `(local allocation, byte
//! offset)`, placed later. An imported phase is therefore a
//! [`PhaseSnapshot`]: an ordinary `ExchangeProblem` plus the absolute
//! address of each of its local allocations (`base`), the width each piece
//! was captured with, and the phase's provenance. Everything downstream
//! (dependencies, policies, scheduler, validator, row encoder, checker,
//! replay) runs unchanged on it.
//!
//! Addresses alone cannot reproduce a build's problem exactly: the build
//! schedules before placement, so it treats two allocations that placement
//! happened to put side by side as *not* contiguous (a receive into the
//! second needs a pointer write), and it decides paired eligibility from an
//! allocation's declared alignment, not from where it landed. Captures of
//! our builds therefore carry optional symbolic provenance (the phase's
//! local allocations with their placed addresses, and the local allocation
//! of every address; `format`). The importer uses it when present and then
//! rebuilds the build's problem exactly. Without it (seed-system snapshots,
//! or provenance stripped) it reconstructs allocations from the address
//! pattern: per tile, the byte ranges touched under every Repeat binding
//! (an arithmetic source progression covers its whole span) are merged
//! into one root per contiguous run, aligned down to 8 bytes; a constant
//! source address is an offset in its root; an increasing arithmetic
//! progression of stride `s` is an iterated alias member of that root with
//! `s` bytes per instance; any other pattern (decreasing, irregular, a
//! table of layer bases) is an alias member with explicit per-iteration
//! bindings (`ExchangeProblem::explicit_bindings`, which only imports
//! have). A moving source's root covers the span of all its bindings.
//! Dependencies then come from byte ranges over every Repeat address of one
//! storage per run, exactly as for a build; contiguity and alignment are
//! judged on absolute addresses (which is what the hardware does).
//!
//! # Identical problems, exact round trip
//!
//! Two problems are *identical* when they are equal as `ExchangeProblem`s:
//! the same tile count and Repeat iterations, the same local allocations
//! (tile, bytes, iterations, alignment, alias root) in the same order, and
//! the same pieces in the same order with the same source tiles, symbolic
//! source addresses, words and (tile, symbolic address) destinations. The
//! scheduler is a deterministic function of the problem, policy and width,
//! so identical problems get identical schedules (every piece's start and
//! every receive's events). The round trip guaranteed (and tested) is:
//! capture a build, import it, and every phase's problem is identical to
//! the one the build scheduled, its schedule equal to the build's, and
//! capturing the imported phases again gives byte-identical JSON.
//!
//! This module must not change how builds schedule; it reads them.

pub mod bench;
pub mod capture;
pub mod format;
pub mod import;
pub mod locate;
pub mod packing;

pub use bench::{BenchOptions, BenchRecord, bench_phase};
pub use capture::{CaptureError, capture_session, phase_record, snapshot_of, snapshot_of_build};
pub use format::{SCHEMA_VERSION, Snapshot, SnapshotPhase, SnapshotTransfer, SnapshotWidth};
pub use import::{
    ImportError, UnknownSnapshotPhase, import_phases, import_snapshot, select_phases,
};

use crate::schedule::ExchangeProblem;

/// Where a phase comes from (all optional: older snapshots lack them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhaseProvenance {
    /// Stable phase key, `op#ordinal`.
    pub key: Option<String>,
    pub operator: Option<String>,
    pub reason: Option<String>,
    pub executions: Option<u32>,
}

/// One exchange phase with absolute addresses: a symbolic problem and the
/// placed address of each of its local allocations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseSnapshot {
    /// The phase's integer id in the snapshot.
    pub phase: u32,
    pub provenance: PhaseProvenance,
    pub problem: ExchangeProblem,
    /// The snapshot transfer of each piece, when the import split a
    /// transfer (empty: one piece per transfer).
    pub piece_transfers: Vec<u32>,
    /// Absolute byte address of each local allocation (alias members share
    /// their root's).
    pub base: Vec<u32>,
    /// Per piece: whether it was captured as a paired 64-bit transfer.
    pub paired: Vec<bool>,
    /// Whether the snapshot carries symbolic provenance for this phase
    /// (written back on capture only when it did).
    pub symbolic: bool,
}

#[cfg(test)]
mod tests;
