//! The session: the one facade over the compiler's database (in the manner
//! of rust-analyzer's `ide::Analysis`). It owns the database and the build
//! input, applies a (re)loaded build query, runs a build stage by stage
//! (timing each and recording which queries re-ran), and hands out what a
//! build made: phases (`phase::Phase`), placement, row table, estimate, the
//! package, replays. The CLI, watch, capture, replay and reports ask it and
//! never name a query; independent per-op and per-phase queries are warmed
//! in parallel from here, over cloned database handles.

pub mod fan_out;
pub mod layout_beam;
pub mod layout_search;
pub mod memory;
pub mod packing;
pub mod phase;
pub mod pricing;
pub mod progress;
pub mod replay;
pub mod suggest;
pub mod sweep;
pub mod timeline;

pub use crate::estimate::profile::{ProfileEntry, ProgramProfile, StepKind};
pub use crate::group::audit::{
    AuditSummary, Blocked, BoundaryAudit, CopyAudit, ExchangeRef, GroupAudit, ItemAccess,
    MotionView, Movable, Other,
};
pub use crate::incremental::Execution;
pub use crate::incremental::lowering::StageError;
pub use crate::incremental::phases::{EffectivePolicy, PhaseError, PhaseFigures, PolicySource};
pub use crate::incremental::weights::WeightsError;
pub use crate::incremental::whole_program::BackendError;
pub use phase::Phase;
pub use suggest::Suggestion;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fan_out::fan_out;
use salsa::plumbing::AsId;

use crate::build_file::BuildQuery;
use crate::cache::PersistentCache;
use crate::estimate::Estimate;
use crate::estimate::breakdown::OpCompute;
use crate::expand::expansion::OpExpansion;
use crate::expand::program::LowProgram;
use crate::expand::summary::ProgramSummary;
use crate::group::PhaseGroups;
use crate::incremental::lowering::{
    OpKey, graph, layouts, low_program, op_expansion, op_keys, program_summary,
};
use crate::incremental::phases::{
    phase_figures, phase_groups, phase_keys, phase_patches, phase_positions,
};
use crate::incremental::whole_program::{
    build_estimate, compute_breakdown, placement, program_profile, row_table, tile_reservations,
};
use crate::incremental::{BuildInputs, CompilerDatabase, Db, apply_query, create_inputs};
use crate::layout::plan::Layouts;
use crate::model::graph::Graph;
use crate::model::weights::Weights;
use crate::place::{Placement, TileReservations};
use crate::rows::RowTable;
use crate::text::nearest_keys;

/// Time spent in one stage of a build.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTime {
    pub stage: &'static str,
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

/// The back half's headline figures.
#[derive(Clone, Debug)]
pub struct BackOutcome {
    pub phases: Vec<PhaseFigures>,
    pub cycles: u64,
    pub milliseconds: f64,
    pub barriers: u64,
    pub exchange_table_bytes_max: u64,
    pub repeat_patch_words: u64,
    pub sharing_patch_words: u64,
    pub peak_sram_bytes: u64,
    pub peak_sram_tile: u32,
    /// Exchanges x tiles x elements where a tile's sends and receives
    /// share a memory element, and where they touch its exchange code's.
    pub element_conflicts: u64,
    pub fetch_conflicts: u64,
    pub estimate: Estimate,
    /// Compute cycles, MACs and roofline per op (most cycles first).
    pub compute_by_op: Vec<crate::estimate::breakdown::OpCompute>,
}

impl BuildOutcome {
    /// How many times each query ran in this build.
    pub fn executions_by_query(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for execution in &self.executions {
            *counts.entry(execution.query.clone()).or_insert(0) += 1;
        }
        counts
    }

    pub fn total_time(&self) -> Duration {
        self.times.iter().map(|time| time.elapsed).sum()
    }
}

pub struct Session {
    db: CompilerDatabase,
    inputs: BuildInputs,
    progress: Arc<dyn progress::Progress>,
    /// What fusion pricing was last warmed for (`pricing::Warmed`).
    warmed: Option<pricing::Warmed>,
}

impl Session {
    pub fn new(query: &BuildQuery) -> Session {
        Session::with_cache(query, None)
    }

    /// A session whose per-phase results are read from and written to
    /// `cache` (a persistent, content-addressed cache) when given.
    pub fn with_cache(query: &BuildQuery, cache: Option<Arc<PersistentCache>>) -> Session {
        let db = CompilerDatabase::with_cache(cache);
        let inputs = create_inputs(&db, query);
        Session {
            db,
            inputs,
            progress: progress::silent(),
            warmed: None,
        }
    }

    /// The session's persistent cache, if any.
    pub fn cache(&self) -> Option<&PersistentCache> {
        self.db.cache()
    }

    /// Applies an edited query; returns the input fields that changed.
    pub fn update(&mut self, query: &BuildQuery) -> Vec<&'static str> {
        apply_query(&mut self.db, self.inputs, query)
    }

    /// Reports the session's stages and items to `observer` from now on.
    pub fn set_progress(&mut self, observer: Arc<dyn progress::Progress>) {
        let sink = observer.clone();
        self.db
            .set_progress(Arc::new(move |items| sink.advance(items)));
        self.progress = observer;
    }

    /// [`Session::map_phases`], reported to the progress observer as
    /// `stage`, one item per phase.
    pub fn map_phases_reporting<T: Send>(
        &self,
        stage: &str,
        work: impl Fn(Phase<'_>) -> T + Sync + Send,
    ) -> Vec<T> {
        let progress = self.progress.clone();
        progress.begin(stage, Some(phase_keys(&self.db, self.inputs).len() as u64));
        let results = self.map_phases(|phase| {
            let result = work(phase);
            progress.advance(1);
            result
        });
        progress.end();
        results
    }

    /// The database and the build input, for tests that read queries and
    /// the salsa event log directly. Everything else uses the facade.
    pub fn internals(&self) -> (&CompilerDatabase, BuildInputs) {
        (&self.db, self.inputs)
    }

    /// Every exchange phase of the build, in program order (empty when the
    /// phase groups cannot be formed).
    pub fn phases(&self) -> Vec<Phase<'_>> {
        phase_keys(&self.db, self.inputs)
            .iter()
            .enumerate()
            .map(|(index, &key)| Phase {
                db: &self.db,
                key,
                index,
            })
            .collect()
    }

    /// The phase with stable key `key`.
    pub fn phase(&self, key: &str) -> Option<Phase<'_>> {
        let index = *phase_positions(&self.db, self.inputs).get(key)? as usize;
        let key = *phase_keys(&self.db, self.inputs).get(index)?;
        Some(Phase {
            db: &self.db,
            key,
            index,
        })
    }

    /// `work` applied to every phase, in parallel over cloned database
    /// handles; results in program order.
    pub fn map_phases<T: Send>(&self, work: impl Fn(Phase<'_>) -> T + Sync + Send) -> Vec<T> {
        let keys = phase_keys(&self.db, self.inputs);
        fan_out(&self.db, keys, |db, index, &key| {
            work(Phase { db, key, index })
        })
    }

    /// The phase groups: the grouped steps and each phase's record.
    pub fn phase_groups(&self) -> Result<Arc<PhaseGroups>, StageError> {
        phase_groups(&self.db, self.inputs).clone()
    }

    /// The copy-boundary audit of the low program: every exchange boundary
    /// with its copy/fill groups, where each may move and what blocks it,
    /// beside copy motion's decision there (first half and phase groups
    /// only; nothing is scheduled).
    pub fn copy_audit(&self) -> Result<CopyAudit, StageError> {
        let program = self.low_program()?;
        let groups = self.phase_groups()?;
        Ok(crate::group::audit::audit_copies(
            &program,
            &groups.decisions,
        ))
    }

    /// [`Session::copy_audit`] beside what copy motion would decide with
    /// cross-operator fusion (the seed's experiment, `Fusion::AcrossOperators`),
    /// computed for the audit only: the build keeps its phase groups.
    pub fn copy_audit_across_operators(&self) -> Result<CopyAudit, StageError> {
        let program = self.low_program()?;
        let groups = crate::group::group_phases_with(
            &program,
            crate::group::MotionOptions {
                copy_motion: true,
                fusion: crate::group::Fusion::AcrossOperators,
            },
        );
        Ok(crate::group::audit::audit_copies(
            &program,
            &groups.decisions,
        ))
    }

    /// The placement of every allocation, the exchange table and patch lists.
    pub fn placement(&self) -> Result<Arc<Placement>, BackendError> {
        placement(&self.db, self.inputs).clone()
    }

    /// What each tile reserves for the exchange table and patch lists.
    pub fn tile_reservations(&self) -> Result<Arc<TileReservations>, BackendError> {
        tile_reservations(&self.db, self.inputs).clone()
    }

    /// The shared row table of every phase.
    pub fn row_table(&self) -> Result<Arc<RowTable>, BackendError> {
        row_table(&self.db, self.inputs).clone()
    }

    /// The estimate of the whole program.
    pub fn estimate(&self) -> Result<Arc<Estimate>, BackendError> {
        build_estimate(&self.db, self.inputs).clone()
    }

    /// The program's modelled profile: every phase and compute step with
    /// its cycles, and the timeline.
    pub fn profile(&self) -> Result<Arc<ProgramProfile>, BackendError> {
        program_profile(&self.db, self.inputs).clone()
    }

    /// Compute cycles, MACs and roofline per op.
    pub fn compute_breakdown(&self) -> Result<Arc<Vec<OpCompute>>, BackendError> {
        compute_breakdown(&self.db, self.inputs).clone()
    }

    /// Every op's expansion, in layout order.
    pub fn op_expansions(&self) -> Result<Vec<Arc<OpExpansion>>, StageError> {
        op_keys(&self.db, self.inputs)
            .iter()
            .map(|&key| {
                op_expansion(&self.db, key)
                    .clone()
                    .map_err(StageError::from)
            })
            .collect()
    }

    /// Op names by the salsa id of their op key (to name the keys of an
    /// execution log), for the build's current ops.
    pub fn op_names_by_id(&self) -> BTreeMap<salsa::Id, String> {
        let Ok(layouts) = self.layouts() else {
            return BTreeMap::new();
        };
        layouts
            .ops
            .iter()
            .map(|op| {
                let key = OpKey::new(&self.db, self.inputs, op.name.clone());
                (key.as_id(), op.name.clone())
            })
            .collect()
    }

    /// The queries that ran since the last call (salsa's event log).
    pub fn take_executions(&self) -> Vec<Execution> {
        self.db.take_executions()
    }

    pub fn graph(&self) -> &Graph {
        graph(&self.db, self.inputs)
    }

    /// The finished package of this build (placed program, finalized rows, patches).
    pub fn package(
        &self,
    ) -> Result<crate::package::Package, crate::incremental::package::AssemblyError> {
        crate::incremental::package::assemble_package(&self.db, self.inputs)
    }

    pub fn layouts(&self) -> Result<Arc<Layouts>, StageError> {
        layouts(&self.db, self.inputs)
            .clone()
            .map_err(StageError::from)
    }

    /// The build's parameter values (seeded or from its SafeTensors file),
    /// made once per session.
    pub fn weights(&self) -> Result<Arc<Weights>, WeightsError> {
        crate::incremental::weights::weights(&self.db, self.inputs).clone()
    }

    pub fn low_program(&self) -> Result<Arc<LowProgram>, StageError> {
        low_program(&self.db, self.inputs).clone()
    }

    /// Computes the whole pipeline: the first half (graph, layouts,
    /// expansion, low program), then phase groups, per-phase schedules and
    /// rows (warmed in parallel), the row table, patches, placement and the
    /// estimate.
    pub fn build(&mut self) -> Result<BuildOutcome, BackendError> {
        let outcome = self.build_front()?;
        self.build_back(outcome)
    }

    /// The second half of [`Session::build`], after `build_front` returned
    /// `outcome` (a caller may inspect the first half in between; what that
    /// runs is logged into the outcome's executions).
    pub fn build_back(&mut self, mut outcome: BuildOutcome) -> Result<BuildOutcome, BackendError> {
        let mut timed = |stage: &'static str, start: Instant| {
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
            if self.warmed.as_ref() != Some(&warmed) {
                priced = pricing::warm_fusion_pricing(&self.db, build, &program, progress.as_ref());
                self.warmed = Some(warmed);
            }
            progress.begin(
                "phase groups",
                Some(priced as u64).filter(|&count| count > 0),
            );
            phase_groups(&self.db, build).clone()?;
            progress.end();
        }
        timed("phase groups", start);
        let start = Instant::now();
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
        timed("schedules", start);
        let start = Instant::now();
        let table = {
            let _span = tracing::info_span!("row_table").entered();
            progress.begin("row table", None);
            let table = row_table(&self.db, build).clone();
            progress.end();
            table?
        };
        let mut patch_words = 0;
        for &key in &keys {
            patch_words += phase_patches(&self.db, key).clone()?.words();
        }
        timed("rows", start);
        let start = Instant::now();
        let placed = {
            let _span = tracing::info_span!("placement").entered();
            progress.begin("placement", None);
            let placed = placement(&self.db, build).clone();
            progress.end();
            placed?
        };
        timed("placement", start);
        let start = Instant::now();
        let estimate = build_estimate(&self.db, build).clone()?;
        let compute_by_op = compute_breakdown(&self.db, build).clone()?;
        timed("estimate", start);
        outcome.back = Some(BackOutcome {
            phases,
            cycles: estimate.total_cycles,
            milliseconds: estimate.milliseconds,
            barriers: estimate.barriers,
            exchange_table_bytes_max: table.max_bytes(),
            repeat_patch_words: patch_words,
            sharing_patch_words: table.sharing_patches.len() as u64,
            peak_sram_bytes: placed.max_peak.1 as u64,
            element_conflicts: placed.element_conflicts.count,
            fetch_conflicts: placed.element_conflicts.fetch_count,
            peak_sram_tile: placed.max_peak.0,
            estimate: (*estimate).clone(),
            compute_by_op: compute_by_op.as_ref().clone(),
        });
        outcome.executions.extend(self.db.take_executions());
        Ok(outcome)
    }

    /// Computes graph, layouts, expansions and the low program.
    pub fn build_front(&mut self) -> Result<BuildOutcome, StageError> {
        self.db.take_executions();
        let progress = self.progress.clone();
        let mut times = Vec::new();
        let mut timed = |stage: &'static str, start: Instant| {
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
        timed("graph", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("layouts").entered();
            progress.begin("layouts", None);
            let layouts = self.layouts();
            progress.end();
            layouts?;
        }
        timed("layouts", start);
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
        timed("expansion", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("low_program").entered();
            progress.begin("low program", None);
            let program = self.low_program();
            progress.end();
            program?;
        }
        timed("low program", start);
        let start = Instant::now();
        let summary = program_summary(&self.db, self.inputs).clone()?;
        timed("summary", start);
        Ok(BuildOutcome {
            times,
            executions: self.db.take_executions(),
            summary,
            back: None,
        })
    }
}

/// How many nearest phase keys a message names.
pub const SUGGESTIONS: usize = 5;

/// The overrides of `query` that name no phase of the session's build, each
/// with the nearest existing keys (none when the build has no phase groups).
pub fn unknown_override_phases(
    session: &Session,
    query: &BuildQuery,
) -> Vec<(String, Vec<String>)> {
    if query.overrides.is_empty() {
        return Vec::new();
    }
    let phases = session.phases();
    let known: Vec<&str> = phases.iter().map(|phase| phase.key()).collect();
    if known.is_empty() {
        return Vec::new();
    }
    query
        .overrides
        .iter()
        .filter(|entry| !known.contains(&entry.phase.as_str()))
        .map(|entry| {
            let nearest = nearest_keys(&entry.phase, &known, SUGGESTIONS);
            (
                entry.phase.clone(),
                nearest.into_iter().map(str::to_string).collect(),
            )
        })
        .collect()
}
