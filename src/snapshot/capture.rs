//! Capture: a build's exchange phases as a schema-4 snapshot.
//!
//! Each phase of the build (in phase order, each phase's id its step: its
//! position in program order among every exchange phase and compute step,
//! the index `superstep phases` shows) becomes the problem
//! the build scheduled, the placed address of each of its local allocations
//! (from the build's placement) and the width of each piece in the build's
//! schedule, with provenance (phase key, operator, executions) and the
//! symbolic provenance that makes the import exact. One transfer per piece:
//! source addresses are every Repeat binding of the source, destinations
//! their iteration-0 binding (the format has a single destination address).
//! `phase_record` is the one writer of phases, shared by captures of builds
//! and of imports, so that capturing an import reproduces its file byte for
//! byte. This module must not schedule anything itself.

use crate::schedule::SymbolicAddress;
use crate::session::BackendError;
use crate::session::PhaseError;
use crate::session::Session;

use super::format::{
    AllocationRecord, SCHEMA_VERSION, Snapshot, SnapshotPhase, SnapshotTransfer, SnapshotWidth,
};
use super::{PhaseProvenance, PhaseSnapshot};

/// Why a build could not be captured.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Phase(#[from] PhaseError),
    #[error("phase `{phase}`: allocation {allocation} has no placed address")]
    Unplaced { phase: String, allocation: u32 },
    #[error("phase `{phase}`: piece {piece} has an address beyond 32 bits")]
    AddressOverflow { phase: String, piece: usize },
}

/// Every exchange phase of a built session, with absolute addresses
/// (phases captured in parallel, reported as the stage "capture").
pub fn capture_session(session: &Session) -> Result<Vec<PhaseSnapshot>, CaptureError> {
    let placed = session.placement()?;
    session
        .map_phases_reporting("capture", |phase| capture_phase(&phase, &placed))
        .into_iter()
        .collect()
}

fn capture_phase(
    phase: &crate::session::Phase<'_>,
    placed: &crate::place::Placement,
) -> Result<PhaseSnapshot, CaptureError> {
    {
        let record = phase.record()?;
        let schedule = phase.schedule()?;
        let problem = phase.problem()?;
        let name = phase.key().to_string();
        let base = record
            .allocations
            .iter()
            .enumerate()
            .map(|(local, global)| {
                placed
                    .base
                    .get(global.0 as usize)
                    .copied()
                    .ok_or(CaptureError::Unplaced {
                        phase: name.clone(),
                        allocation: local as u32,
                    })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        let operator = name
            .rsplit_once('#')
            .map_or(name.as_str(), |(operator, _)| operator)
            .to_string();
        Ok(PhaseSnapshot {
            phase: u32::try_from(phase.step()).unwrap_or(u32::MAX),
            provenance: PhaseProvenance {
                key: Some(name.clone()),
                operator: Some(operator),
                reason: None,
                executions: Some(record.executions),
            },
            problem: (**problem).clone(),
            piece_transfers: Vec::new(),
            base,
            paired: schedule.paired.clone(),
            symbolic: true,
        })
    }
}

/// A snapshot of phases (tile count from the first phase; 0 without any).
pub fn snapshot_of(phases: &[PhaseSnapshot]) -> Result<Snapshot, CaptureError> {
    snapshot_of_build(
        phases,
        phases.first().map_or(0, |phase| phase.problem.tiles),
    )
}

/// A snapshot of a build's phases on its `tiles` tiles (a build without
/// exchange phases, such as one on a single tile, still names its tiles).
pub fn snapshot_of_build(
    phases: &[PhaseSnapshot],
    tile_count: u32,
) -> Result<Snapshot, CaptureError> {
    Ok(Snapshot {
        schema_version: SCHEMA_VERSION,
        tile_count,
        phases: phases.iter().map(phase_record).collect::<Result<_, _>>()?,
    })
}

/// Absolute address of binding `iteration` of `address`.
fn absolute(
    phase: &PhaseSnapshot,
    address: SymbolicAddress,
    iteration: u32,
    piece: usize,
) -> Result<u32, CaptureError> {
    let problem = &phase.problem;
    let binding = iteration.min(problem.bindings(address.allocation) - 1);
    let base =
        phase
            .base
            .get(address.allocation as usize)
            .copied()
            .ok_or(CaptureError::Unplaced {
                phase: phase_name(phase),
                allocation: address.allocation,
            })?;
    u32::try_from(u64::from(base) + problem.bound_offset(address, binding)).map_err(|_| {
        CaptureError::AddressOverflow {
            phase: phase_name(phase),
            piece,
        }
    })
}

fn phase_name(phase: &PhaseSnapshot) -> String {
    phase
        .provenance
        .key
        .clone()
        .unwrap_or_else(|| phase.phase.to_string())
}

/// Pieces that form one snapshot transfer: consecutive pieces with the same
/// transfer when the phase records them, else one per piece.
fn transfer_runs(phase: &PhaseSnapshot) -> Vec<std::ops::Range<usize>> {
    let origins = &phase.piece_transfers;
    let pieces = phase.problem.pieces();
    let mut runs = Vec::with_capacity(pieces);
    let mut start = 0;
    for piece in 1..=pieces {
        let split = piece == pieces || origins.len() != pieces || origins[piece] != origins[start];
        if split {
            runs.push(start..piece);
            start = piece;
        }
    }
    runs
}

/// The snapshot record of one phase.
pub fn phase_record(phase: &PhaseSnapshot) -> Result<SnapshotPhase, CaptureError> {
    let problem = &phase.problem;
    let iterations = problem.iterations.max(1);
    let mut transfers = Vec::with_capacity(problem.pieces());
    let mut segment_starts = Vec::with_capacity(problem.segment_starts.len());
    for run in transfer_runs(phase) {
        let piece = run.start;
        if problem.segment_starts.contains(&(piece as u32)) {
            segment_starts.push(transfers.len() as u32);
        }
        let source = problem.source[piece];
        let source_addresses = (0..iterations)
            .map(|iteration| absolute(phase, source, iteration, piece))
            .collect::<Result<Vec<u32>, _>>()?;
        let receives = problem.receives_of(piece);
        let destinations = receives
            .clone()
            .map(|receive| {
                Ok((
                    problem.destination_tile[receive],
                    absolute(phase, problem.destination[receive], 0, piece)?,
                ))
            })
            .collect::<Result<Vec<(u32, u32)>, CaptureError>>()?;
        let words = run.clone().map(|piece| problem.words[piece]).sum();
        let paired = phase.paired.get(piece).copied().unwrap_or(false);
        transfers.push(SnapshotTransfer {
            source: problem.source_tile[piece],
            source_addresses,
            destinations,
            words,
            width: SnapshotWidth::from_paired(paired),
            source_allocation: phase.symbolic.then_some(source.allocation),
            destination_allocations: phase.symbolic.then(|| {
                receives
                    .map(|receive| problem.destination[receive].allocation)
                    .collect()
            }),
        });
    }
    // A local allocation without a placed base is a broken invariant: an
    // error, never address 0 written into the snapshot.
    let allocations =
        if phase.symbolic {
            let records =
                problem
                    .allocations
                    .iter()
                    .enumerate()
                    .map(|(local, allocation)| {
                        let address = phase.base.get(local).copied().ok_or_else(|| {
                            CaptureError::Unplaced {
                                phase: phase.provenance.key.clone().unwrap_or_default(),
                                allocation: local as u32,
                            }
                        })?;
                        Ok(AllocationRecord {
                            tile: allocation.tile,
                            address,
                            bytes: allocation.bytes,
                            iterations: allocation.iterations,
                            alignment: allocation.alignment,
                            alias_root: allocation.alias_root,
                        })
                    })
                    .collect::<Result<Vec<_>, CaptureError>>()?;
            Some(records)
        } else {
            None
        };
    Ok(SnapshotPhase {
        phase: phase.phase,
        key: phase.provenance.key.clone(),
        operator: phase.provenance.operator.clone(),
        reason: phase.provenance.reason.clone(),
        executions: phase.provenance.executions,
        allocations,
        transfers,
        segment_starts,
    })
}
