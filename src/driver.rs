//! The driver: owns a database and the build input, applies a (re)loaded
//! build query, and computes the first half stage by stage, timing each
//! stage and recording which queries re-ran. Independent per-op queries are
//! warmed in parallel from here (the top), over cloned database handles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::cache::PersistentCache;
use crate::estimate::Estimate;
use crate::expand::program::LowProgram;
use crate::expand::summary::ProgramSummary;
use crate::layout::plan::Layouts;
use crate::model::graph::Graph;
use crate::queries::backend::{
    BackendError, build_estimate, compute_breakdown, placement, row_table,
};
use crate::queries::phases::{
    PhaseFigures, phase_figures, phase_groups, phase_keys, phase_patches,
};
use crate::queries::stages::{
    StageError, graph, layouts, low_program, op_expansion, op_keys, program_summary,
};
use crate::queries::{BuildInputs, CompilerDatabase, Db, Execution, apply_query, create_inputs};
use crate::query::BuildQuery;
use crate::query::overrides::nearest_keys;

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
    pub db: CompilerDatabase,
    pub inputs: BuildInputs,
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
        Session { db, inputs }
    }

    /// The session's persistent cache, if any.
    pub fn cache(&self) -> Option<&PersistentCache> {
        self.db.cache()
    }

    /// Applies an edited query; returns the input fields that changed.
    pub fn update(&mut self, query: &BuildQuery) -> Vec<&'static str> {
        apply_query(&mut self.db, self.inputs, query)
    }

    pub fn graph(&self) -> &Graph {
        graph(&self.db, self.inputs)
    }

    /// The finished package of this build (placed program, finalized rows, patches).
    pub fn package(
        &self,
    ) -> Result<crate::package::Package, crate::queries::package::AssemblyError> {
        crate::queries::package::assemble_package(&self.db, self.inputs)
    }

    pub fn layouts(&self) -> Result<Arc<Layouts>, StageError> {
        layouts(&self.db, self.inputs)
            .clone()
            .map_err(StageError::from)
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
        let start = Instant::now();
        {
            let _span = tracing::info_span!("phase_groups").entered();
            phase_groups(&self.db, build).clone()?;
        }
        timed("phase groups", start);
        let start = Instant::now();
        let keys = phase_keys(&self.db, build).clone();
        {
            let _span = tracing::info_span!("schedules").entered();
            keys.par_iter().for_each_with(self.db.clone(), |db, key| {
                let _span = tracing::debug_span!("phase").entered();
                let _ = phase_figures(db, *key);
                let _ = phase_patches(db, *key);
            });
        }
        let mut phases = Vec::with_capacity(keys.len());
        for &key in &keys {
            phases.push(phase_figures(&self.db, key).clone()?);
        }
        timed("schedules", start);
        let start = Instant::now();
        let table = {
            let _span = tracing::info_span!("row_table").entered();
            row_table(&self.db, build).clone()?
        };
        let mut patch_words = 0;
        for &key in &keys {
            patch_words += phase_patches(&self.db, key).clone()?.words();
        }
        timed("rows", start);
        let start = Instant::now();
        let placed = {
            let _span = tracing::info_span!("placement").entered();
            placement(&self.db, build).clone()?
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
            graph(&self.db, self.inputs);
        }
        timed("graph", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("layouts").entered();
            self.layouts()?;
        }
        timed("layouts", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("expansion").entered();
            let keys = op_keys(&self.db, self.inputs).clone();
            keys.par_iter().for_each_with(self.db.clone(), |db, key| {
                let _span = tracing::debug_span!("op_expansion").entered();
                let _ = op_expansion(db, *key);
            });
        }
        timed("expansion", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("low_program").entered();
            self.low_program()?;
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
    let db = &session.db;
    let keys = phase_keys(db, session.inputs);
    let known: Vec<&str> = keys.iter().map(|key| key.key(db).as_str()).collect();
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
