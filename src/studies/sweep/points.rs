//! What a sweep measured: every exchange phase as built and under each
//! configuration that applies to it.

use super::config::SweepConfig;
use crate::schedule::vocabulary::policy_text;
use crate::schedule::{SchedulePolicy, TransferWidth};
use crate::session::{PhaseError, PointFigures};

/// A phase as the build made it (its effective policy, or `auto`'s
/// winner), per execution.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BuiltPoint {
    /// The phase's policy (`auto`, or an override's).
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    /// The order that made the schedule.
    #[serde(with = "policy_text")]
    pub chosen: SchedulePolicy,
    /// The schedule's width (`word32` or `paired64`).
    pub width: TransferWidth,
    pub horizon: u64,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    pub endpoint_bound: u32,
    pub max_row_bytes: u64,
    pub total_row_bytes: u64,
    pub repeat_patch_words: u64,
    pub repeat_patch_cycles: u64,
}

impl BuiltPoint {
    /// Horizon plus Repeat patching: what the phase costs per execution.
    pub fn cycles(&self) -> u64 {
        self.horizon + self.repeat_patch_cycles
    }
}

/// One phase under one configuration: its figures, or why it has none
/// (scheduling failed, or the schedule validator or row checker rejected it).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SweepPoint {
    pub config: SweepConfig,
    /// Written as serde writes a `Result`, the error as its text.
    #[serde(serialize_with = "outcome_text")]
    pub outcome: Result<PointFigures, PhaseError>,
}

/// A point's outcome as `{"Ok": figures}` or `{"Err": "why"}`.
fn outcome_text<S: serde::Serializer>(
    outcome: &Result<PointFigures, PhaseError>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match outcome {
        Ok(figures) => serializer.serialize_newtype_variant("Result", 0, "Ok", figures),
        Err(error) => serializer.serialize_newtype_variant("Result", 1, "Err", &error.to_string()),
    }
}

impl SweepPoint {
    /// The figures of a validated point.
    pub fn figures(&self) -> Option<&PointFigures> {
        self.outcome.as_ref().ok()
    }

    /// Horizon plus Repeat patching per execution, for a validated point.
    pub fn cycles(&self) -> Option<u64> {
        self.figures()
            .map(|figures| u64::from(figures.horizon) + figures.repeat_patch_cycles)
    }

    /// (horizon, max row bytes, total row bytes): the frontier's axes.
    pub fn objectives(&self) -> Option<(u64, u64, u64)> {
        self.figures().map(|figures| {
            (
                u64::from(figures.horizon),
                figures.max_row_bytes,
                figures.total_row_bytes,
            )
        })
    }
}

/// One exchange phase of the sweep.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SweepPhase {
    /// Position among the exchange phases (an internal lookup).
    #[serde(skip)]
    pub index: usize,
    /// The phase's step: its position in program order among every exchange
    /// phase and compute step, the index `superstep phases` shows.
    pub step: usize,
    pub key: String,
    pub executions: u64,
    /// Whether some piece may move paired (so `paired64` points exist).
    pub pairing_eligible: bool,
    pub built: BuiltPoint,
    /// One per configuration that applies, in the sweep's configuration order.
    pub points: Vec<SweepPoint>,
}

/// Every phase of a build under every configuration that applies to it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Sweep {
    pub configs: Vec<SweepConfig>,
    pub phases: Vec<SweepPhase>,
}

impl Sweep {
    /// Points measured in all.
    pub fn point_count(&self) -> usize {
        self.phases.iter().map(|phase| phase.points.len()).sum()
    }

    /// Points the validators accepted.
    pub fn validated_count(&self) -> usize {
        self.phases
            .iter()
            .flat_map(|phase| &phase.points)
            .filter(|point| point.outcome.is_ok())
            .count()
    }
}
