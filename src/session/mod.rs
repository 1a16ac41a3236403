//! The session: the one facade over the compiler's database (in the manner
//! of rust-analyzer's `ide::Analysis`). It owns the database and the build
//! input, applies a (re)loaded build query, runs a build stage by stage
//! (timing each and recording which queries re-ran), and hands out what a
//! build made: phases (`phase::Phase`), placement, row table, estimate, the
//! package, replays. The CLI, watch, capture, replay, reports and studies
//! ask it and never name a query, and it hands the database to no one;
//! independent per-op and per-phase queries are warmed in parallel from
//! here, over cloned database handles (`map_phases`, and
//! `map_phase_items` for a study measuring phases many ways).

mod build;
pub mod fan_out;
pub mod memory;
pub mod phase;
pub mod pricing;
pub mod process_memory;
pub mod progress;
pub mod replay;
pub mod searched_layouts;
pub mod step_loads;
pub mod timeline;

pub use crate::estimate::profile::{ProfileEntry, ProgramProfile, StepKind};
pub use crate::incremental::cancellation::Canceller;
pub use crate::incremental::lowering::StageError;
pub use crate::incremental::phases::PhaseFigures;
pub use crate::incremental::schedules::{EffectivePolicy, PhaseError, PolicySource};
pub use crate::incremental::sweep::PointFigures;
pub use crate::incremental::weights::WeightsError;
pub use crate::incremental::whole_program::BackendError;
pub use crate::incremental::{Execution, Stage, TrackedQuery};
pub use build::{BackOutcome, BuildError, BuildOutcome, Headline, StageTime, TimedStage};
pub use phase::{Phase, PhaseStudyError, SUGGESTIONS, UnknownPhase, UnknownPhaseSelector};

use std::collections::BTreeMap;
use std::sync::Arc;

use fan_out::fan_out;
use salsa::plumbing::AsId;

use crate::build_file::BuildQuery;
use crate::cache::PersistentCache;
use crate::estimate::Estimate;
use crate::estimate::breakdown::OpCompute;
use crate::expand::expansion::OpExpansion;
use crate::expand::program::LowProgram;
use crate::group::PhaseGroups;
use crate::incremental::lowering::{OpKey, graph, layouts, low_program, op_expansion, op_keys};
use crate::incremental::phases::{phase_groups, phase_keys, phase_positions, phase_steps};
use crate::incremental::whole_program::{
    build_estimate, compute_breakdown, placement, program_profile, row_table, tile_reservations,
};
use crate::incremental::{BuildInputs, CompilerDatabase, Db, apply_query, create_inputs};
use crate::layout::plan::Layouts;
use crate::model::graph::Graph;
use crate::model::weights::Weights;
use crate::place::{Placement, TileReservations};
use crate::rows::RowTable;

pub struct Session {
    db: CompilerDatabase,
    inputs: BuildInputs,
    progress: Arc<dyn progress::Progress>,
    /// What fusion pricing was last warmed for (`pricing::Warmed`).
    warmed: Option<pricing::Warmed>,
    /// Whether fusion pricing scheduled candidates since the program's
    /// schedules were last read (their memo is then dropped before the
    /// rows are encoded).
    candidates_in_memo: bool,
}

impl Session {
    pub fn new(query: &BuildQuery) -> Session {
        Session::with_cache(query, None)
    }

    /// A session whose per-phase results are read from and written to
    /// `cache` (a persistent, content-addressed cache) when given.
    /// Its layouts are the plan a search kept in `cache` for the query's
    /// configuration under the query's own pins, else the planner's.
    pub fn with_cache(query: &BuildQuery, cache: Option<Arc<PersistentCache>>) -> Session {
        Session::over(CompilerDatabase::with_cache(cache), query, true)
    }

    /// [`Session::with_cache`] without the searched plan: the layouts are
    /// the query's pins and the planner's choices (what `superstep search`
    /// searches from).
    pub fn as_written(query: &BuildQuery, cache: Option<Arc<PersistentCache>>) -> Session {
        Session::over(CompilerDatabase::with_cache(cache), query, false)
    }

    /// A session of `query` over the database `db`, looking searched plans
    /// up when `searched_layouts`.
    fn over(db: CompilerDatabase, query: &BuildQuery, searched_layouts: bool) -> Session {
        crate::incremental::searched_plan::KeptSearches::new(&db, searched_layouts, 0);
        let inputs = create_inputs(&db, query);
        Session {
            db,
            inputs,
            progress: progress::silent(),
            warmed: None,
            candidates_in_memo: false,
        }
    }

    /// A session for a layout search's trials: of the persistent cache it
    /// reads and keeps only the activation calibration (no trial changes
    /// it; the trials' schedules stay in memory, hundreds of them no build
    /// asks for), and it neither validates its schedules nor checks its
    /// rows: they only price a candidate, and the plan the search keeps is
    /// built again in a session that checks both.
    pub fn for_search(query: &BuildQuery, cache: Option<Arc<PersistentCache>>) -> Session {
        let db = match cache {
            Some(cache) => {
                CompilerDatabase::with_cache_for(cache, &[crate::cache::EntryKind::Calibration])
            }
            None => CompilerDatabase::with_cache(None),
        };
        Session::over(db.for_trials(), query, false)
    }

    /// The session's persistent cache, if any.
    pub fn cache(&self) -> Option<&PersistentCache> {
        self.db.cache()
    }

    /// The session's persistent cache, shared, if any.
    pub fn shared_cache(&self) -> Option<Arc<PersistentCache>> {
        self.db.shared_cache()
    }

    /// Lets another thread cancel the builds this session runs until
    /// [`Session::end_cancellable`]: the returned handle makes the session's
    /// queries (and its clones') unwind with `salsa::Cancelled`, which the
    /// caller catches (`salsa::Cancelled::catch`). A cancelled query keeps
    /// no memo and writes no cache entry; the session stays usable.
    pub fn begin_cancellable(&self) -> Canceller {
        self.db.begin_cancellable()
    }

    /// Ends what [`Session::begin_cancellable`] began: its handle does
    /// nothing from now on.
    pub fn end_cancellable(&self) {
        self.db.end_cancellable();
    }

    /// Unwinds with `salsa::Cancelled` when the current build was cancelled
    /// (what every query call checks; for work between query calls).
    pub fn unwind_if_cancelled(&self) {
        use salsa::Database;
        self.db.unwind_if_revision_cancelled();
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
        let every: Vec<(usize, ())> = (0..phase_keys(&self.db, self.inputs).len())
            .map(|index| (index, ()))
            .collect();
        self.map_phase_items(stage, &every, |phase, _| work(phase))
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

    /// The phase with stable key `key`, or the nearest keys the build has.
    pub fn phase(&self, key: &str) -> Result<Phase<'_>, UnknownPhase> {
        let keys = phase_keys(&self.db, self.inputs);
        let found = phase_positions(&self.db, self.inputs)
            .get(key)
            .and_then(|&index| Some((index as usize, *keys.get(index as usize)?)));
        match found {
            Some((index, phase)) => Ok(Phase {
                db: &self.db,
                key: phase,
                index,
            }),
            None => {
                let known: Vec<&str> = keys
                    .iter()
                    .map(|phase| phase.key(&self.db).as_str())
                    .collect();
                Err(UnknownPhase::among(key, &known))
            }
        }
    }

    /// Each phase's step, in phase order: its position in program order
    /// among every exchange phase and compute step (empty when the phase
    /// groups cannot be formed). Needs only the phase groups.
    pub fn phase_steps(&self) -> Arc<Vec<usize>> {
        phase_steps(&self.db, self.inputs).clone()
    }

    /// The phase `selector` names: its stable key, or its step (the first
    /// column of `superstep phases`). Anything else is an error that lists
    /// the exchange phases' steps and the nearest keys.
    pub fn phase_by_key_or_step(&self, selector: &str) -> Result<Phase<'_>, UnknownPhaseSelector> {
        if let Ok(phase) = self.phase(selector) {
            return Ok(phase);
        }
        let steps = self.phase_steps();
        let keys = phase_keys(&self.db, self.inputs);
        let by_step = selector
            .parse::<usize>()
            .ok()
            .and_then(|step| steps.iter().position(|&known| known == step))
            .and_then(|index| Some((index, *keys.get(index)?)));
        if let Some((index, key)) = by_step {
            return Ok(Phase {
                db: &self.db,
                key,
                index,
            });
        }
        let known: Vec<&str> = keys
            .iter()
            .map(|phase| phase.key(&self.db).as_str())
            .collect();
        // A number is a step: keys near its text mean nothing.
        let numeric = selector.parse::<usize>().is_ok();
        Err(UnknownPhaseSelector {
            selector: selector.to_string(),
            nearest: crate::text::nearest_keys(selector, &known, SUGGESTIONS)
                .into_iter()
                .filter(|_| !numeric)
                .map(str::to_string)
                .collect(),
            steps: steps.to_vec(),
        })
    }

    /// The schedule overrides of the session's query that name no phase of
    /// its build (none when the phase groups cannot be formed).
    pub fn unknown_overrides(&self) -> Vec<UnknownPhase> {
        let overrides = self.inputs.overrides(&self.db);
        if overrides.is_empty() {
            return Vec::new();
        }
        let keys = phase_keys(&self.db, self.inputs);
        if keys.is_empty() {
            return Vec::new();
        }
        let positions = phase_positions(&self.db, self.inputs);
        let known: Vec<&str> = keys
            .iter()
            .map(|phase| phase.key(&self.db).as_str())
            .collect();
        overrides
            .iter()
            .filter(|entry| !positions.contains_key(entry.phase.as_str()))
            .map(|entry| UnknownPhase::among(&entry.phase, &known))
            .collect()
    }

    /// `work` applied to every phase, in parallel over cloned database
    /// handles; results in program order.
    pub fn map_phases<T: Send>(&self, work: impl Fn(Phase<'_>) -> T + Sync + Send) -> Vec<T> {
        let keys = phase_keys(&self.db, self.inputs);
        fan_out(&self.db, keys, |db, index, &key| {
            work(Phase { db, key, index })
        })
    }

    /// `work` applied to each `(phase, item)` of `items` (a phase given by
    /// its index in [`Session::phases`]), in parallel over cloned database
    /// handles and reported to the progress observer as `stage`, one item
    /// each; results in the order of `items`. Finer than
    /// [`Session::map_phases`] for studies that measure one phase many
    /// ways, so that one phase's measurements run side by side.
    ///
    /// # Panics
    /// If an index is not one of the session's phases.
    pub fn map_phase_items<Item: Sync, T: Send>(
        &self,
        stage: &str,
        items: &[(usize, Item)],
        work: impl Fn(Phase<'_>, &Item) -> T + Sync,
    ) -> Vec<T> {
        let keys = phase_keys(&self.db, self.inputs);
        let progress = self.progress.clone();
        progress.begin(stage, Some(items.len() as u64));
        let results = fan_out(&self.db, items, |db, _, (index, item)| {
            let key = *keys
                .get(*index)
                .unwrap_or_else(|| panic!("phase index {index} of {} phases", keys.len()));
            let result = work(
                Phase {
                    db,
                    key,
                    index: *index,
                },
                item,
            );
            progress.advance(1);
            result
        });
        progress.end();
        results
    }

    /// The phase groups: the grouped steps and each phase's record.
    pub fn phase_groups(&self) -> Result<Arc<PhaseGroups>, StageError> {
        phase_groups(&self.db, self.inputs).clone()
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
        use crate::incremental::phases::{phase_keys, phase_work};
        use crate::incremental::schedules::encoded_rows;
        // Every phase's rows, loaded (or encoded) over the cores first (a
        // warm build reads only their summaries): the assembly then finds
        // them in salsa's memo, in order.
        let keys = phase_keys(&self.db, self.inputs).clone();
        fan_out::fan_out(&self.db, &keys, |db, _, key| {
            if let Ok((problem, policy)) = phase_work(db, *key) {
                let _ = encoded_rows(db, problem, policy);
            }
        });
        crate::incremental::package::assemble_package(&self.db, self.inputs)
    }

    /// The activation calibration the build's FP8 products were planned
    /// with (`None` when the build does not calibrate).
    pub fn activation_calibration(
        &self,
    ) -> Option<Arc<crate::sim::calibration::ActivationCalibration>> {
        use crate::incremental::calibration::{activation_calibration, calibration_input};
        calibration_input(&self.db, self.inputs).as_ref()?;
        activation_calibration(&self.db, self.inputs).clone().ok()
    }

    /// Each product's inputs as the build plans them (every product at the
    /// uniform inputs when they cannot be chosen: `layouts` reports why).
    pub fn product_recipe(&self) -> crate::numerics::dot::ProductRecipe {
        match crate::incremental::calibration::product_recipe(&self.db, self.inputs) {
            Ok(recipe) => recipe.as_ref().clone(),
            Err(_) => crate::numerics::dot::ProductRecipe::uniform(
                self.inputs.planning(&self.db).uniform_inputs(),
            ),
        }
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
}
