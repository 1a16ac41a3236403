//! A build, stage by stage: the first half (graph, layouts, expansion,
//! low program), the phase groups with the schedule overrides checked
//! against them, and the back half (schedules, rows, row table, patches,
//! placement, estimate). Each stage is timed and what re-ran is taken from
//! salsa's log; how deep to build is the caller's one choice
//! (`build_low_program`, `build_phase_groups`, `build`), never a sequence
//! of its own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::fan_out::fan_out;
use super::phase::UnknownPhase;
use super::{Session, pricing};
use crate::estimate::Estimate;
use crate::expand::summary::ProgramSummary;
use crate::incremental::grouping::replays_grouping;
use crate::incremental::lowering::{
    StageError, graph, low_program, op_expansion, op_keys, program_summary,
};
use crate::incremental::phases::{
    PhaseFigures, phase_figures, phase_groups, phase_keys, phase_patches, phase_work,
};
use crate::incremental::schedules::scheduled;
use crate::incremental::tracked::Stage;
use crate::incremental::whole_program::{
    BackendError, build_estimate, compute_breakdown, placement, row_table,
};
use crate::incremental::{Execution, TrackedQuery};

/// Why a build stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// A schedule override names a phase the build does not have.
    #[error("schedule override of phase \"{key}\": {0}", key = .0.key)]
    UnknownOverride(UnknownPhase),
}

impl From<StageError> for BuildError {
    fn from(error: StageError) -> BuildError {
        BuildError::Backend(BackendError::Stage(error))
    }
}

/// A timed part of a build, in the order a build runs them. Finer than
/// [`Stage`] where the build times a stage's parts apart (the low program
/// and its summary), and with the check of the schedule overrides, which is
/// no query stage of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimedStage {
    Graph,
    Layouts,
    Expansion,
    LowProgram,
    Summary,
    PhaseGroups,
    Overrides,
    Schedules,
    Rows,
    Placement,
    Estimate,
}

impl TimedStage {
    /// How `stage times` shows it.
    pub fn name(self) -> &'static str {
        match self {
            TimedStage::Graph => "graph",
            TimedStage::Layouts => "layouts",
            TimedStage::Expansion => "expansion",
            TimedStage::LowProgram => "low program",
            TimedStage::Summary => "summary",
            TimedStage::PhaseGroups => "phase groups",
            TimedStage::Overrides => "overrides",
            TimedStage::Schedules => "schedules",
            TimedStage::Rows => "rows",
            TimedStage::Placement => "placement",
            TimedStage::Estimate => "estimate",
        }
    }

    /// The query stage whose work it times (the overrides' check reads
    /// the phase groups).
    pub fn stage(self) -> Stage {
        match self {
            TimedStage::Graph => Stage::Graph,
            TimedStage::Layouts => Stage::Layouts,
            TimedStage::Expansion => Stage::Expansion,
            TimedStage::LowProgram | TimedStage::Summary => Stage::Program,
            TimedStage::PhaseGroups | TimedStage::Overrides => Stage::PhaseGroups,
            TimedStage::Schedules => Stage::Schedules,
            TimedStage::Rows => Stage::RowTables,
            TimedStage::Placement => Stage::Placement,
            TimedStage::Estimate => Stage::Estimate,
        }
    }
}

impl std::fmt::Display for TimedStage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.pad(self.name())
    }
}

/// Time spent in one stage of a build.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTime {
    pub stage: TimedStage,
    pub elapsed: Duration,
}

/// What one build computed.
#[derive(Clone, Debug)]
pub struct BuildOutcome {
    pub times: Vec<StageTime>,
    pub executions: Vec<Execution>,
    pub summary: ProgramSummary,
    /// The back half's figures (absent after a first-half-only build).
    pub back: Option<BackOutcome>,
}

/// A build's headline figures: the one type the build command, report.json
/// (`back`, flattened), `diff`, `watch`, `--why` and the sweep read. The
/// names are report.json's (its documented schema).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// The estimate: cycles of the whole program and its parts, in ms at
    /// 1.5 GHz, barriers and compute steps executed (Repeat iterations
    /// unrolled); written flat, its fields beside the others.
    #[serde(flatten)]
    pub estimate: Estimate,
    /// The largest exchange table (rows and patch lists) on any tile.
    pub exchange_table_bytes_per_tile_max: u64,
    /// Peak SRAM on the fullest tile, reservations included, and that tile.
    pub peak_sram_bytes_per_tile: u64,
    pub peak_sram_tile: u32,
    /// Exchanges x tiles x elements where a tile's sends and receives
    /// share a memory element, and where they touch its exchange code's.
    pub element_conflicts: u64,
    pub fetch_conflicts: u64,
    /// Exchanges x tiles x elements where one allocation is both sent from
    /// and received into (the schedule keeps those apart in events).
    #[serde(default)]
    pub same_allocation_elements: u64,
    /// Repeat patch words per iteration (all tiles) and sharing patches.
    pub repeat_patch_words: u64,
    pub sharing_patch_words: u64,
}

/// What the back half computed: the headline figures (the estimate among
/// them), each phase's figures and the compute by op.
#[derive(Clone, Debug)]
pub struct BackOutcome {
    pub headline: Headline,
    pub phases: Vec<PhaseFigures>,
    /// Compute cycles, MACs and roofline per op (most cycles first).
    pub compute_by_op: Vec<crate::estimate::breakdown::OpCompute>,
}

impl BuildOutcome {
    /// How many times each query ran in this build.
    pub fn executions_by_query(&self) -> BTreeMap<TrackedQuery, usize> {
        let mut counts = BTreeMap::new();
        for execution in &self.executions {
            *counts.entry(execution.query).or_insert(0) += 1;
        }
        counts
    }

    pub fn total_time(&self) -> Duration {
        self.times.iter().map(|time| time.elapsed).sum()
    }
}

impl Session {
    /// Computes the whole pipeline: the first half (graph, layouts,
    /// expansion, low program), the phase groups (and checks every schedule
    /// override against them), then per-phase schedules and rows (warmed
    /// in parallel), the row table, patches, placement and the estimate.
    pub fn build(&mut self) -> Result<BuildOutcome, BuildError> {
        let mut outcome = self.build_phase_groups()?;
        self.unwind_if_cancelled();
        self.build_back(&mut outcome)?;
        outcome.executions.extend(self.db.take_executions());
        Ok(outcome)
    }

    /// The whole program's estimate without placing it: what a layout
    /// search compares trials by (the estimate reads schedules, rows and
    /// patches, never the placement), so that only a trial that would win
    /// is placed ([`Session::fits`]). The executions are the queries run.
    pub fn unplaced_estimate(&mut self) -> Result<(u64, Vec<Execution>), BuildError> {
        let outcome = self.build_phase_groups()?;
        let build = self.inputs;
        self.drop_candidate_schedules();
        let keys = phase_keys(&self.db, build).clone();
        fan_out(&self.db, &keys, |db, _, key| {
            let _ = phase_figures(db, *key);
            let _ = phase_patches(db, *key);
        });
        let estimate = build_estimate(&self.db, build)
            .clone()
            .map_err(BuildError::from)?;
        let mut executions = outcome.executions;
        executions.extend(self.db.take_executions());
        Ok((estimate.total_cycles, executions))
    }

    /// Whether the program places (its placement query; the error is
    /// why it does not).
    pub fn fits(&mut self) -> Result<(), BuildError> {
        placement(&self.db, self.inputs)
            .clone()
            .map(|_| ())
            .map_err(BuildError::from)
    }

    /// The first half and the phase groups, with every schedule override
    /// checked against the phases: what a study of the phases (packing, a
    /// sweep shard) needs, without scheduling the program.
    pub fn build_phase_groups(&mut self) -> Result<BuildOutcome, BuildError> {
        let mut outcome = self.build_low_program().map_err(BackendError::Stage)?;
        self.form_phase_groups(&mut outcome)?;
        // An override naming a phase the build does not have would
        // silently do nothing: it is refused here, for every user of the
        // session alike. Its time is shown as its own stage.
        let start = Instant::now();
        if let Some(unknown) = self.unknown_overrides().into_iter().next() {
            return Err(BuildError::UnknownOverride(unknown));
        }
        if !self.inputs.overrides(&self.db).is_empty() {
            outcome.times.push(StageTime {
                stage: TimedStage::Overrides,
                elapsed: start.elapsed(),
            });
        }
        outcome.executions.extend(self.db.take_executions());
        Ok(outcome)
    }

    /// The phase groups, after the first half: fusion pricing is warmed in
    /// parallel first (once per set of inputs it depends on), unless the
    /// persistent cache keeps a trusted record of this program's grouping.
    fn form_phase_groups(&mut self, outcome: &mut BuildOutcome) -> Result<(), BackendError> {
        let mut timed = |stage: TimedStage, start: Instant| {
            outcome.times.push(StageTime {
                stage,
                elapsed: start.elapsed(),
            })
        };
        let build = self.inputs;
        let progress = self.progress.clone();
        let start = Instant::now();
        {
            let _span = tracing::info_span!("phase_groups").entered();
            let program = low_program(&self.db, build).clone()?;
            let warmed = pricing::Warmed::of(&self.db, build, &program);
            let mut priced = 0;
            // A kept record of the grouping leaves nothing to price.
            let kept = replays_grouping(&self.db, build);
            if !kept && self.warmed.as_ref() != Some(&warmed) {
                // Noted first: a pricing cancelled half way leaves
                // candidates in the memo too.
                self.candidates_in_memo = true;
                priced = pricing::warm_fusion_pricing(&self.db, build, &program, progress.as_ref());
                self.warmed = Some(warmed);
                self.candidates_in_memo = priced > 0;
            }
            progress.begin(
                "phase groups",
                Some(priced as u64).filter(|&count| count > 0),
            );
            phase_groups(&self.db, build).clone()?;
            progress.end();
        }
        // Pricing's problems and candidate orders are freed by now.
        super::process_memory::return_freed_memory();
        timed(TimedStage::PhaseGroups, start);
        Ok(())
    }

    /// Schedules, rows, the row table, patches, placement and the estimate,
    /// after the phase groups.
    fn build_back(&mut self, outcome: &mut BuildOutcome) -> Result<(), BackendError> {
        let mut timed = |stage: TimedStage, start: Instant| {
            outcome.times.push(StageTime {
                stage,
                elapsed: start.elapsed(),
            })
        };
        let build = self.inputs;
        let progress = self.progress.clone();
        let start = Instant::now();
        self.drop_candidate_schedules();
        let (phases, scheduled_phases) = {
            let keys = phase_keys(&self.db, build).clone();
            {
                let _span = tracing::info_span!("schedules").entered();
                progress.begin("schedules", Some(keys.len() as u64));
                fan_out(&self.db, &keys, |db, _, key| {
                    let _span = tracing::debug_span!("phase", key = %key.key(db)).entered();
                    let _ = phase_figures(db, *key);
                    let _ = phase_patches(db, *key);
                    progress.advance(1);
                });
                progress.end();
            }
            let mut phases = Vec::with_capacity(keys.len());
            for &key in &keys {
                phases.push(phase_figures(&self.db, key).clone()?);
            }
            (phases, keys.len())
        };
        timed(TimedStage::Schedules, start);
        self.unwind_if_cancelled();
        // The program's schedules were the last ones read: every other
        // one (fusion pricing's candidates) is dropped from the memo.
        crate::incremental::schedules::evict_schedules(&mut self.db, scheduled_phases);
        super::process_memory::return_freed_memory();
        let keys = phase_keys(&self.db, build).clone();
        let start = Instant::now();
        let table = {
            let _span = tracing::info_span!("row_table").entered();
            progress.begin("row table", None);
            let table = row_table(&self.db, build).clone();
            progress.end();
            table?
        };
        crate::incremental::whole_program::note_rows_needed(&self.db, build);
        let mut patch_words = 0;
        for &key in &keys {
            patch_words += phase_patches(&self.db, key).clone()?.words();
        }
        timed(TimedStage::Rows, start);
        self.unwind_if_cancelled();
        let start = Instant::now();
        let placed = {
            let _span = tracing::info_span!("placement").entered();
            progress.begin("placement", None);
            let placed = placement(&self.db, build).clone();
            progress.end();
            placed?
        };
        timed(TimedStage::Placement, start);
        self.unwind_if_cancelled();
        let start = Instant::now();
        let estimate = build_estimate(&self.db, build).clone()?;
        let compute_by_op = compute_breakdown(&self.db, build).clone()?;
        timed(TimedStage::Estimate, start);
        outcome.back = Some(BackOutcome {
            headline: Headline {
                estimate: (*estimate).clone(),
                exchange_table_bytes_per_tile_max: table.max_bytes(),
                peak_sram_bytes_per_tile: placed.max_peak.1 as u64,
                peak_sram_tile: placed.max_peak.0,
                element_conflicts: placed.element_conflicts.count,
                fetch_conflicts: placed.element_conflicts.fetch_count,
                same_allocation_elements: placed.element_conflicts.same_allocation_count,
                repeat_patch_words: patch_words,
                sharing_patch_words: table.sharing_patches.len() as u64,
            },
            phases,
            compute_by_op: compute_by_op.as_ref().clone(),
        });
        Ok(())
    }

    /// Reads every phase's schedule (scheduling those fusion pricing did
    /// not) and then drops every other schedule from the memo, so that
    /// pricing's candidates are freed before the rows are encoded rather
    /// than after. Only after a pricing: otherwise the memo holds no
    /// candidates, and a warm build's schedules stay on disk (its figures
    /// and rows come from their own cache entries).
    fn drop_candidate_schedules(&mut self) {
        if !self.candidates_in_memo {
            return;
        }
        let phases = {
            let _span = tracing::info_span!("program_schedules").entered();
            let keys = phase_keys(&self.db, self.inputs).clone();
            fan_out(&self.db, &keys, |db, _, key| {
                if let Ok((problem, policy)) = phase_work(db, *key) {
                    let _ = scheduled(db, problem, policy);
                }
            });
            keys.len()
        };
        crate::incremental::schedules::evict_schedules(&mut self.db, phases);
        // Only now: a build cancelled before this point drops them next time.
        self.candidates_in_memo = false;
        super::process_memory::return_freed_memory();
    }

    /// The first half: graph, layouts, expansions and the low program
    /// (what `run` interprets and the copy audit reads).
    pub fn build_low_program(&mut self) -> Result<BuildOutcome, StageError> {
        self.db.take_executions();
        let progress = self.progress.clone();
        let mut times = Vec::new();
        let mut timed = |stage: TimedStage, start: Instant| {
            times.push(StageTime {
                stage,
                elapsed: start.elapsed(),
            })
        };
        let start = Instant::now();
        {
            let _span = tracing::info_span!("graph").entered();
            progress.begin("graph", None);
            graph(&self.db, self.inputs);
            progress.end();
        }
        timed(TimedStage::Graph, start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("layouts").entered();
            progress.begin("layouts", None);
            let layouts = self.layouts();
            progress.end();
            layouts?;
        }
        timed(TimedStage::Layouts, start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("expansion").entered();
            let keys = op_keys(&self.db, self.inputs).clone();
            progress.begin("expansion", Some(keys.len() as u64));
            fan_out(&self.db, &keys, |db, _, key| {
                let _span = tracing::debug_span!("op_expansion", op = %key.name(db)).entered();
                let _ = op_expansion(db, *key);
                progress.advance(1);
            });
            progress.end();
        }
        timed(TimedStage::Expansion, start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("low_program").entered();
            progress.begin("low program", None);
            let program = self.low_program();
            progress.end();
            program?;
        }
        timed(TimedStage::LowProgram, start);
        let start = Instant::now();
        let summary = program_summary(&self.db, self.inputs).clone()?;
        timed(TimedStage::Summary, start);
        Ok(BuildOutcome {
            times,
            executions: self.db.take_executions(),
            summary,
            back: None,
        })
    }
}
