//! Choosing one point per phase, and what the choice saves over the phase
//! as built, weighted by executions. Two rules: (a) neither storage metric
//! (max row bytes, total row bytes) may grow; (b) the max row may grow by
//! up to a window of bytes (the total is free). A phase keeps its built
//! schedule unless a validated point admitted by the rule costs strictly
//! fewer cycles (horizon plus Repeat patching per execution); among those
//! the cheapest wins, then the smaller max row, then the smaller total,
//! then the earlier configuration.

use super::config::SweepConfig;
use super::points::{Sweep, SweepPhase};
use crate::build_file::PhaseOverride;
use crate::session::PointFigures;
use crate::text::thousands;

/// The default window of rule (b), in bytes.
pub const DEFAULT_WINDOW_BYTES: u64 = 256;

/// Which points a selection may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SelectionRule {
    /// (a): neither max row bytes nor total row bytes grows.
    NoStorageGrowth,
    /// (b): the max row grows by at most `bytes`.
    MaxRowWindow { bytes: u64 },
}

impl SelectionRule {
    /// `a` or `b`.
    pub fn letter(self) -> &'static str {
        match self {
            SelectionRule::NoStorageGrowth => "a",
            SelectionRule::MaxRowWindow { .. } => "b",
        }
    }

    /// What the rule admits, in words.
    pub fn describe(self) -> String {
        match self {
            SelectionRule::NoStorageGrowth => {
                "(a) neither max row bytes nor total row bytes may grow".to_string()
            }
            SelectionRule::MaxRowWindow { bytes } => {
                format!("(b) each phase's max row may grow by up to {bytes} bytes")
            }
        }
    }

    /// Why the rule refuses a point of `phase`, in words (`None`: admitted).
    pub fn refusal(self, phase: &SweepPhase, figures: &PointFigures) -> Option<String> {
        if self.admits(phase, figures) {
            return None;
        }
        let built = &phase.built;
        Some(match self {
            SelectionRule::NoStorageGrowth
                if figures.max_row_bytes > built.figures.max_row_bytes =>
            {
                format!(
                    "its max row grows {} -> {} B",
                    thousands(built.figures.max_row_bytes),
                    thousands(figures.max_row_bytes)
                )
            }
            SelectionRule::NoStorageGrowth => format!(
                "its total row grows {} -> {} B",
                thousands(built.figures.total_row_bytes),
                thousands(figures.total_row_bytes)
            ),
            SelectionRule::MaxRowWindow { bytes } => format!(
                "its max row grows by {} B, beyond the window of {} B",
                thousands(figures.max_row_bytes - built.figures.max_row_bytes),
                thousands(bytes)
            ),
        })
    }

    fn admits(self, phase: &SweepPhase, figures: &PointFigures) -> bool {
        match self {
            SelectionRule::NoStorageGrowth => {
                figures.max_row_bytes <= phase.built.figures.max_row_bytes
                    && figures.total_row_bytes <= phase.built.figures.total_row_bytes
            }
            SelectionRule::MaxRowWindow { bytes } => {
                figures.max_row_bytes <= phase.built.figures.max_row_bytes + bytes
            }
        }
    }
}

/// The point a phase takes instead of its built schedule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ChosenPoint {
    pub config: SweepConfig,
    pub figures: PointFigures,
    /// Horizon plus Repeat patching per execution, as built and with the point.
    pub built_cycles: u64,
    pub cycles: u64,
    /// Built cycles minus `cycles`, times executions.
    pub saving_cycles: u64,
}

/// One phase's selection.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PhaseSelection {
    /// Position among the exchange phases (an internal lookup).
    #[serde(skip)]
    pub index: usize,
    /// The phase's step, as `superstep phases` shows it.
    pub step: usize,
    pub key: String,
    pub executions: u64,
    /// `None`: the phase keeps its built schedule.
    pub chosen: Option<ChosenPoint>,
}

/// A selection over every phase.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Selection {
    pub rule: SelectionRule,
    pub phases: Vec<PhaseSelection>,
}

impl Selection {
    /// Cycles saved over the build, weighted by executions.
    pub fn saving_cycles(&self) -> u64 {
        self.chosen().map(|(_, chosen)| chosen.saving_cycles).sum()
    }

    /// The phases that change, with their points.
    pub fn chosen(&self) -> impl Iterator<Item = (&PhaseSelection, &ChosenPoint)> {
        self.phases
            .iter()
            .filter_map(|phase| phase.chosen.as_ref().map(|chosen| (phase, chosen)))
    }

    /// The selection as per-phase overrides (policy and width).
    pub fn overrides(&self) -> Vec<PhaseOverride> {
        self.chosen()
            .map(|(phase, chosen)| PhaseOverride {
                phase: phase.key.clone(),
                policy: chosen.config.policy,
                width: Some(chosen.config.width),
            })
            .collect()
    }
}

/// The selection `rule` makes over `sweep`.
pub fn select(sweep: &Sweep, rule: SelectionRule) -> Selection {
    let phases = sweep
        .phases
        .iter()
        .map(|phase| {
            let built = phase.built.cycles();
            let chosen = phase
                .points
                .iter()
                .enumerate()
                .filter_map(|(order, point)| {
                    let figures = point.figures()?;
                    let cycles = point.cycles()?;
                    (cycles < built && rule.admits(phase, figures))
                        .then_some((order, point, figures, cycles))
                })
                .min_by_key(|(order, _, figures, cycles)| {
                    (
                        *cycles,
                        figures.max_row_bytes,
                        figures.total_row_bytes,
                        *order,
                    )
                })
                .map(|(_, point, figures, cycles)| ChosenPoint {
                    config: point.config,
                    figures: figures.clone(),
                    built_cycles: built,
                    cycles,
                    saving_cycles: (built - cycles) * phase.executions,
                });
            PhaseSelection {
                index: phase.index,
                step: phase.step,
                key: phase.key.clone(),
                executions: phase.executions,
                chosen,
            }
        })
        .collect();
    Selection { rule, phases }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{SchedulePolicy, TransferWidth};
    use crate::session::PhaseError;
    use crate::studies::sweep::points::{BuiltPoint, SweepPoint};

    fn figures(horizon: u32, max_row_bytes: u64, total_row_bytes: u64) -> PointFigures {
        PointFigures {
            chosen: SchedulePolicy::Latency,
            width: TransferWidth::Word32,
            horizon,
            endpoint_bound: 1,
            max_row_bytes,
            total_row_bytes,
            repeat_patch_words: 0,
            repeat_patch_cycles: 0,
        }
    }

    fn point(words: u32, outcome: Result<PointFigures, PhaseError>) -> SweepPoint {
        SweepPoint {
            config: SweepConfig {
                policy: SchedulePolicy::Stream { words },
                width: TransferWidth::Word32,
            },
            outcome,
        }
    }

    fn sweep() -> Sweep {
        let built = BuiltPoint {
            policy: SchedulePolicy::Balanced { words: 1024 },
            figures: PointFigures {
                chosen: SchedulePolicy::Balanced { words: 1024 },
                width: TransferWidth::Word32,
                horizon: 100,
                endpoint_bound: 1,
                max_row_bytes: 1000,
                total_row_bytes: 5000,
                repeat_patch_words: 0,
                repeat_patch_cycles: 10,
            },
        };
        Sweep {
            configs: Vec::new(),
            phases: vec![SweepPhase {
                index: 0,
                step: 0,
                key: "phase#0".into(),
                executions: 3,
                pairing_eligible: false,
                built,
                points: vec![
                    // Cheaper, but the total grows: (b) only.
                    point(1, Ok(figures(60, 1000, 5001))),
                    // Cheaper, the max row grows past any small window.
                    point(2, Ok(figures(40, 1300, 100))),
                    // Cheaper, no growth: (a).
                    point(3, Ok(figures(90, 900, 4000))),
                    // Failed points are never chosen.
                    point(4, Err(PhaseError::Stage("validation".into()))),
                ],
            }],
        }
    }

    #[test]
    fn no_growth_takes_only_points_that_grow_neither_metric() {
        let selection = select(&sweep(), SelectionRule::NoStorageGrowth);
        let chosen = selection.phases[0].chosen.as_ref().expect("a point");
        assert_eq!(chosen.config.policy, SchedulePolicy::Stream { words: 3 });
        assert_eq!(chosen.built_cycles, 110);
        assert_eq!(chosen.saving_cycles, (110 - 90) * 3);
        assert_eq!(selection.overrides().len(), 1);
    }

    #[test]
    fn the_window_bounds_only_the_max_row() {
        let small = select(&sweep(), SelectionRule::MaxRowWindow { bytes: 256 });
        let chosen = small.phases[0].chosen.as_ref().expect("a point");
        assert_eq!(chosen.config.policy, SchedulePolicy::Stream { words: 1 });
        assert_eq!(small.saving_cycles(), (110 - 60) * 3);
        let large = select(&sweep(), SelectionRule::MaxRowWindow { bytes: 300 });
        assert_eq!(large.saving_cycles(), (110 - 40) * 3);
    }

    #[test]
    fn a_phase_keeps_its_schedule_when_nothing_is_cheaper() {
        let mut sweep = sweep();
        sweep.phases[0].built.figures.horizon = 10;
        let selection = select(&sweep, SelectionRule::MaxRowWindow { bytes: 1 << 20 });
        assert!(selection.phases[0].chosen.is_none());
        assert_eq!(selection.saving_cycles(), 0);
    }
}
