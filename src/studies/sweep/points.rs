//! What a sweep measured: every exchange phase as built and under each
//! configuration that applies to it.

use super::config::SweepConfig;
use crate::schedule::SchedulePolicy;
use crate::schedule::vocabulary::policy_text;
use crate::session::{PhaseError, PointFigures};

/// A phase as the build made it (its effective policy, or `auto`'s
/// winner), per execution: the policy asked for and the figures a sweep
/// point has, written as one flat record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BuiltPoint {
    /// The phase's policy (`auto`, or an override's).
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    #[serde(flatten)]
    pub figures: PointFigures,
}

impl BuiltPoint {
    /// Horizon plus Repeat patching: what the phase costs per execution.
    pub fn cycles(&self) -> u64 {
        u64::from(self.figures.horizon) + self.figures.repeat_patch_cycles
    }
}

/// One phase under one configuration: its figures, or why it has none
/// (scheduling failed, or the schedule validator or row checker rejected it).
/// Written as `{"config": "S64/word32", "figures": {...}}`, or with
/// `"error": "why"` in place of the figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPoint {
    pub config: SweepConfig,
    pub outcome: Result<PointFigures, PhaseError>,
}

impl serde::Serialize for SweepPoint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut point = serializer.serialize_struct("SweepPoint", 2)?;
        point.serialize_field("config", &self.config.to_string())?;
        match &self.outcome {
            Ok(figures) => point.serialize_field("figures", figures)?,
            Err(error) => point.serialize_field("error", &error.to_string())?,
        }
        point.end()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::TransferWidth;

    fn figures() -> PointFigures {
        PointFigures {
            chosen: SchedulePolicy::Stream { words: 64 },
            width: TransferWidth::Paired64,
            horizon: 508,
            endpoint_bound: 360,
            max_row_bytes: 92,
            total_row_bytes: 1444,
            repeat_patch_words: 0,
            repeat_patch_cycles: 0,
        }
    }

    /// A point writes its configuration and policies as the build file
    /// does, and its figures or its error under their own names; the
    /// phase as built is the same figures beside its policy, flat.
    #[test]
    fn points_and_the_built_phase_are_written_as_the_build_file_writes_them() {
        let config = SweepConfig {
            policy: SchedulePolicy::Stream { words: 64 },
            width: TransferWidth::Paired64,
        };
        let measured = SweepPoint {
            config,
            outcome: Ok(figures()),
        };
        let value = serde_json::to_value(&measured).expect("json");
        assert_eq!(value["config"], "S64/paired64");
        assert_eq!(value["figures"]["chosen"], "S64");
        assert_eq!(value["figures"]["width"], "paired64");
        assert_eq!(value["figures"]["horizon"], 508);
        let failed = SweepPoint {
            config,
            outcome: Err(PhaseError::Stage("no schedule".into())),
        };
        let value = serde_json::to_value(&failed).expect("json");
        assert_eq!(value["error"], "no schedule");
        assert!(value.get("figures").is_none(), "{value}");
        let built = BuiltPoint {
            policy: SchedulePolicy::Auto,
            figures: figures(),
        };
        let value = serde_json::to_value(&built).expect("json");
        assert_eq!(value["policy"], "auto");
        assert_eq!(value["chosen"], "S64");
        assert_eq!(value["endpoint_bound"], 360);
        assert_eq!(built.cycles(), 508);
    }
}
