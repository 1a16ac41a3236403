//! The exchange rows of a package checked against its transfer lists,
//! without executing it: what `superstep verify` adds to
//! `crate::package::verify` so that every package it passes has exchange
//! phases the package simulator executes.
//!
//! First the phases are checked against the steps as the simulator's
//! admission does (`super::admission::phase_problems`: every step path names
//! an exchange step, no stored row for a tile without a row). Then the
//! steps are walked in program order, every Repeat body once per
//! iteration. Before each exchange phase its sharing patches rewrite the
//! stored rows (`super::sharing`, as the simulator does); then every tile's
//! row is Repeat-patched for the iteration, decoded, its receives matched
//! to sends and checked against the phase's transfer list
//! (`super::exchange::match_phase`, the simulator's own check). No tile
//! memory is allocated and no byte moves. The walk also binds every copy's
//! and fill's first and last row as the simulator does (on its tile,
//! inside one instance of the allocation it names, inside memory).
//!
//! The walk costs one row replay per phase execution, so it is bounded:
//! a package whose Repeats run the exchange phases more than
//! [`EXECUTIONS_CHECKED`] times in all is refused before any row is
//! decoded (a real build runs each phase once per layer).

use std::collections::HashMap;
use std::fmt;

use crate::expand::program::{Location, Step};
use crate::package::Package;

use super::PackageFault;
use super::access::{BindError, bind};
use super::admission::{phase_problems, render};
use super::exchange::{PhaseExecution, TileFault, match_phase};
use super::image::{PlacedIntervals, TileImage};
use super::sharing::SharedRows;

/// The most exchange-phase executions a package's Repeats may ask for.
pub const EXECUTIONS_CHECKED: u64 = 1 << 20;

/// What the row check replayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowsCheck {
    /// Exchange phase executions (Repeat iterations counted).
    pub executions: u64,
    /// Receives matched to sends and found in the transfer lists.
    pub deliveries: u64,
    pub words_received: u64,
    pub sharing_patched_words: u64,
    pub repeat_patched_words: u64,
}

impl fmt::Display for RowsCheck {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{} exchange phase executions replayed from their rows ({} receives, {} words, \
             {} sharing-patched and {} Repeat-patched words), each delivering exactly its \
             transfer list",
            self.executions,
            self.deliveries,
            self.words_received,
            self.sharing_patched_words,
            self.repeat_patched_words
        )
    }
}

/// How many exchange-step executions `steps` make, saturating.
fn exchange_executions(steps: &[Step]) -> u64 {
    steps
        .iter()
        .map(|step| match step {
            Step::Exchange { .. } => 1,
            Step::Repeat { iterations, body } => {
                u64::from(*iterations).saturating_mul(exchange_executions(body))
            }
            _ => 0,
        })
        .fold(0u64, u64::saturating_add)
}

struct Walk<'a> {
    package: &'a Package,
    placed: PlacedIntervals,
    phase_of_path: HashMap<&'a [u32], usize>,
    shared_rows: SharedRows,
    check: RowsCheck,
    /// The last exchange phase walked (`-` before the first).
    last_phase: String,
}

/// A row of a strided copy or fill that does not bind (the text follows
/// the copy or fill it names).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum StridedError {
    #[error("row {row} starts at {offset:#x}, beyond any address")]
    BeyondAddresses { row: u32, offset: u64 },
    #[error("row {row} {error}")]
    Unbound { row: u32, error: BindError },
    #[error("row {row} at {address:#x} is outside the tile's memory")]
    OutsideMemory { row: u32, address: u64 },
}

/// Rows `0` and `rows - 1` of a strided access of `row_bytes` per row,
/// bound as the simulator binds them: inside one instance of the named
/// allocation, on `tile`, inside the tile's memory (every row between lies
/// between those two).
fn check_strided(
    package: &Package,
    tile: u32,
    location: Location,
    row_bytes: u32,
    rows: u32,
    stride: u32,
    iteration: u32,
) -> Result<(), StridedError> {
    let Some(last) = rows.checked_sub(1) else {
        return Ok(());
    };
    for row in [0, last] {
        let offset = u64::from(location.offset) + u64::from(row) * u64::from(stride);
        let mut at = location;
        at.offset =
            u32::try_from(offset).map_err(|_| StridedError::BeyondAddresses { row, offset })?;
        let address = bind(package, tile, at, row_bytes as usize, iteration)
            .map_err(|error| StridedError::Unbound { row, error })?;
        TileImage::index(address, row_bytes as usize)
            .ok_or(StridedError::OutsideMemory { row, address })?;
    }
    Ok(())
}

fn path_text(path: &[u32]) -> String {
    path.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join("/")
}

impl Walk<'_> {
    fn fault(&self, path: &[u32], iteration: u32, tile: u32, message: String) -> PackageFault {
        PackageFault {
            tile: Some(tile),
            step: path_text(path),
            iteration,
            phase: self.last_phase.clone(),
            message,
        }
    }

    fn steps(
        &mut self,
        steps: &[Step],
        path: &mut Vec<u32>,
        iteration: u32,
    ) -> Result<(), PackageFault> {
        let package = self.package;
        for (index, step) in steps.iter().enumerate() {
            path.push(index as u32);
            match step {
                Step::Exchange { transfers, .. } => {
                    let phase_index = self.phase_of_path.get(path.as_slice()).copied();
                    let key = phase_index.map_or("-", |index| package.phases[index].key.as_str());
                    let fail = |fault: TileFault| PackageFault {
                        tile: fault.tile,
                        step: path_text(path),
                        iteration,
                        phase: key.to_string(),
                        message: fault.message,
                    };
                    let phase_index = phase_index.ok_or_else(|| {
                        fail(TileFault {
                            tile: None,
                            message: "exchange step without a package phase".into(),
                        })
                    })?;
                    let phase = &package.phases[phase_index];
                    self.last_phase = phase.key.clone();
                    let (rows, sharing_words) = self
                        .shared_rows
                        .rows_for(phase, phase_index)
                        .map_err(fail)?;
                    let execution = PhaseExecution {
                        phase,
                        transfers,
                        iteration,
                        rows: &rows,
                    };
                    let matched = match_phase(package, execution, &self.placed).map_err(fail)?;
                    self.check.executions += 1;
                    self.check.deliveries += matched.run.deliveries;
                    self.check.words_received += matched.run.words_received;
                    self.check.sharing_patched_words += sharing_words;
                    self.check.repeat_patched_words += matched.run.patched_words;
                }
                Step::Repeat { iterations, body } => {
                    for inner in 0..*iterations {
                        self.steps(body, path, inner)?;
                    }
                }
                Step::Copies { copies, .. } => {
                    for (index, copy) in copies.iter().enumerate() {
                        let bound = |location, stride, what| {
                            check_strided(
                                package,
                                copy.tile,
                                location,
                                copy.row_bytes,
                                copy.rows,
                                stride,
                                iteration,
                            )
                            .map_err(|message| format!("copy {index} {what}: {message}"))
                        };
                        bound(copy.source, copy.source_stride, "source")
                            .and_then(|()| {
                                bound(copy.destination, copy.destination_stride, "destination")
                            })
                            .map_err(|message| self.fault(path, iteration, copy.tile, message))?;
                    }
                }
                Step::Fills { fills, .. } => {
                    for (index, fill) in fills.iter().enumerate() {
                        check_strided(
                            package,
                            fill.tile,
                            fill.destination,
                            fill.row_bytes,
                            fill.rows,
                            fill.stride,
                            iteration,
                        )
                        .map_err(|message| {
                            self.fault(
                                path,
                                iteration,
                                fill.tile,
                                format!("fill {index}: {message}"),
                            )
                        })?;
                    }
                }
                Step::Kernels { .. } | Step::Checkpoint { .. } => {}
            }
            path.pop();
        }
        Ok(())
    }
}

/// Replays every exchange phase execution of `package` from its rows and
/// checks each delivers exactly its transfer list. `package` must have
/// passed `crate::package::verify::verify_package` (every index and
/// address inside the geometry it declares). The first failure is
/// returned with its step, Repeat iteration, phase and tile.
pub fn check_exchange_rows(package: &Package) -> Result<RowsCheck, PackageFault> {
    let problems = phase_problems(package);
    if !problems.is_empty() {
        return Err(PackageFault {
            tile: None,
            step: "-".into(),
            iteration: 0,
            phase: "-".into(),
            message: render(&problems),
        });
    }
    let executions = exchange_executions(&package.steps);
    if executions > EXECUTIONS_CHECKED {
        return Err(PackageFault {
            tile: None,
            step: "-".into(),
            iteration: 0,
            phase: "-".into(),
            message: format!(
                "the Repeats run exchange phases {executions} times; a package may run them \
                 at most {EXECUTIONS_CHECKED} times (a Repeat's iteration count is wrong)"
            ),
        });
    }
    let mut walk = Walk {
        package,
        placed: PlacedIntervals::new(package),
        phase_of_path: package
            .phases
            .iter()
            .enumerate()
            .map(|(index, phase)| (phase.step_path.as_slice(), index))
            .collect(),
        shared_rows: SharedRows::new(package),
        check: RowsCheck::default(),
        last_phase: "-".into(),
    };
    walk.steps(&package.steps, &mut Vec::new(), 0)?;
    Ok(walk.check)
}
