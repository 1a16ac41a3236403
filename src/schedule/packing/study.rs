//! One phase's packing study: the original and every alternative, each
//! alternative made (or refused), checked against the original, then
//! measured by a caller-supplied measurement (the query layer schedules and
//! encodes through memoized queries; a snapshot study schedules directly).
//! This module owns the study's shape and order, not the measuring.

use serde::{Deserialize, Serialize};

use super::check::PackingChecker;
use super::{Alternative, CopyFigures, Independence, Refusal, copy_figures, independence, pack};
use crate::schedule::{ExchangeProblem, ScheduleFigures, SchedulePolicy, TransferWidth};

/// One exchange problem as scheduled and encoded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeMeasure {
    pub transfers: u64,
    pub receives: u64,
    /// The order that made the schedule (`auto`'s winner).
    pub chosen: SchedulePolicy,
    pub width: TransferWidth,
    pub horizon: u32,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    pub endpoint_bound: u32,
    /// Encoded row bytes of the fullest tile, before cross-phase sharing.
    pub max_row_bytes: u64,
    /// Encoded row bytes over all tiles, before cross-phase sharing.
    pub total_row_bytes: u64,
}

impl ExchangeMeasure {
    /// The measure of `problem` scheduled with `figures` and encoded into
    /// rows of `max_row_bytes` on the fullest tile, `total_row_bytes` in all.
    pub fn of(
        problem: &ExchangeProblem,
        figures: &ScheduleFigures,
        max_row_bytes: u64,
        total_row_bytes: u64,
    ) -> ExchangeMeasure {
        ExchangeMeasure {
            transfers: problem.pieces() as u64,
            receives: problem.receives() as u64,
            chosen: figures.chosen,
            width: figures.width,
            horizon: figures.horizon,
            endpoint_bound: figures.endpoint_bound,
            max_row_bytes,
            total_row_bytes,
        }
    }
}

/// Why an exchange (a phase's original, or a counterfactual) could not be
/// measured: the stage that refused it, with what that stage said.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
pub enum MeasureError {
    /// The scheduler could not schedule it.
    #[error("scheduling: {0}")]
    Scheduling(String),
    /// Its schedule failed the validator.
    #[error("the schedule fails validation: {0}")]
    Validation(String),
    /// Its rows could not be encoded, or failed the row checker.
    #[error("rows: {0}")]
    Rows(String),
    /// The packing checker refused the packed exchange.
    #[error("the packing check: {0}")]
    Packing(String),
}

/// One counterfactual, made, checked and measured (or why not).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AlternativeOutcome {
    Measured {
        exchange: ExchangeMeasure,
        copies: CopyFigures,
    },
    /// Not made: the phase's pieces depend on one another.
    Refused(Refusal),
    /// Made, but the packing check, the scheduler's validator or the row
    /// checker rejected it (a bug, shown as FAIL).
    Failed(MeasureError),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlternativeStudy {
    pub alternative: Alternative,
    pub outcome: AlternativeOutcome,
}

/// A problem's packing study under one policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackingStudy {
    pub independence: Independence,
    pub original: ExchangeMeasure,
    pub alternatives: Vec<AlternativeStudy>,
}

/// The study of `original`: `measure_original` measures it, `measure`
/// each alternative (both schedule, validate, encode and check); `Err`
/// only when the original itself cannot be measured.
pub fn study(
    original: &ExchangeProblem,
    measure_original: impl FnOnce() -> Result<ExchangeMeasure, MeasureError>,
    measure: impl Fn(ExchangeProblem) -> Result<ExchangeMeasure, MeasureError>,
) -> Result<PackingStudy, MeasureError> {
    let measured = measure_original()?;
    let found = independence(original);
    let checker = PackingChecker::new(original);
    let alternatives = Alternative::ALL
        .iter()
        .map(|&alternative| AlternativeStudy {
            alternative,
            outcome: match pack(original, alternative, &found) {
                Err(refusal) => AlternativeOutcome::Refused(refusal),
                Ok(packed) => match checker.check(&packed) {
                    Err(error) => {
                        AlternativeOutcome::Failed(MeasureError::Packing(error.to_string()))
                    }
                    Ok(()) => {
                        let copies =
                            copy_figures(original.tiles, &packed.gathers, &packed.scatters);
                        match measure(packed.problem) {
                            Ok(exchange) => AlternativeOutcome::Measured { exchange, copies },
                            Err(error) => AlternativeOutcome::Failed(error),
                        }
                    }
                },
            },
        })
        .collect();
    Ok(PackingStudy {
        independence: found,
        original: measured,
        alternatives,
    })
}
