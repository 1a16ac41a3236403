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
use crate::incremental::sweep::PointFigures;

/// The default window of rule (b), in bytes.
pub const DEFAULT_WINDOW_BYTES: u64 = 256;

/// Which points a selection may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

    fn admits(self, phase: &SweepPhase, figures: &PointFigures) -> bool {
        match self {
            SelectionRule::NoStorageGrowth => {
                figures.max_row_bytes <= phase.built.max_row_bytes
                    && figures.total_row_bytes <= phase.built.total_row_bytes
            }
            SelectionRule::MaxRowWindow { bytes } => {
                figures.max_row_bytes <= phase.built.max_row_bytes + bytes
            }
        }
    }
}

/// The point a phase takes instead of its built schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseSelection {
    pub index: usize,
    pub key: String,
    pub executions: u64,
    /// `None`: the phase keeps its built schedule.
    pub chosen: Option<ChosenPoint>,
}

/// A selection over every phase.
#[derive(Clone, Debug, PartialEq, Eq)]
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
                key: phase.key.clone(),
                executions: phase.executions,
                chosen,
            }
        })
        .collect();
    Selection { rule, phases }
}
