//! The layout search by the compiled program's own estimate: local steps
//! from the build's layouts, each trying the next partitions (and tile
//! orders) of one matrix product or attention and accepted only when the
//! whole program, re-planned, expanded, grouped, scheduled under the
//! build's policy, placed and estimated, is cheaper and still fits.
//!
//! Every trial is an incremental rebuild of the one session: only the
//! overridden op's expansion, the conversions around it and the phases
//! whose problems changed recompute; everything else is memoized (and
//! identical phase problems are scheduled once). The trials' compiled
//! values stay in memory (hundreds of trials would otherwise fill the
//! persistent cache with schedules no build asks for); what each trial
//! compiled to is kept in the cache (`trials`), so a later
//! search, or another shard of this one, reads it instead of compiling it.
//! The candidates of each op follow the chosen plan's layouts, never the
//! last trial's, so the steps are the same whoever compiled the trials.
//! The outcome is kept under the build's key and the search settings
//! ([`cached_search`], [`store_search`]), so a second search of the same
//! build computes nothing.
//!
//! Owns the search loop and its record; the candidates come from
//! `crate::layout::candidates`, the overrides' meaning from the planner,
//! the trials' keeping and the shards from `trials`.

mod beam;
mod calibration;
pub mod settings;
pub mod trials;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crate::build_file::{BuildQuery, package_build_key};
use crate::cache::{CacheKey, PersistentCache};
use crate::layout::overrides::{LayoutOverride, Partition};
use crate::layout::plan::{Layouts, OpPlan};
use crate::layout::planner::PlanningSettings;
use crate::model::graph::Region;
use crate::session::process_memory::{resident_bytes, return_freed_memory};
use crate::session::searched_layouts::{load_search_outcome, store_search_outcome};
use crate::session::{BuildError, Session, StageError, TrackedQuery};
/// The beam of [`SearchSettings::beam`], named where the settings are made
/// (`superstep search`'s flags).
pub use beam::BeamSettings;
use beam::{beam_search, choices_of, op_candidates, other_orders, overrides_of};
use trials::{SearchShard, TrialRecord, TrialStore};

/// The model's head dimension (0 without heads), for candidates whose
/// column blocks hold whole heads.
fn head_dimension(query: &BuildQuery) -> u32 {
    let model = &query.workload.model;
    if model.heads > 0 && model.width.is_multiple_of(model.heads) {
        model.width / model.heads
    } else {
        0
    }
}

pub use settings::SearchSettings;
use settings::split_by_share;

pub use crate::layout::search_record::{
    BeamReport, Calibration, OpCalibration, SearchOutcome, SearchStep, UnsearchedOp,
};
pub use calibration::{calibrate, calibrate_operators};

/// A failed search.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The starting build did not build (or place).
    #[error("the build to search from does not build: {0}")]
    Start(BuildError),
    /// The plan of the search's steps did not plan its layouts.
    #[error("the plan the search chose does not plan its layouts: {0}")]
    Layouts(StageError),
    /// The chosen plan did not build when compiled at the end.
    #[error("the plan the search chose does not build: {0}")]
    Chosen(BuildError),
    /// The chosen plan compiled to another estimate than its trial said.
    #[error(
        "the chosen plan compiled to {compiled} cycles, where its trial said {trial}: a kept \
         trial does not match this compiler's build of it"
    )]
    KeptTrialMismatch { compiled: u64, trial: u64 },
}

/// Reports a search's progress: trials run and the best estimate so far.
pub trait SearchProgress {
    fn trial(&self, trials: u32, best_cycles: u64, op: &str);
}

/// A progress that reports nothing.
pub struct Silent;

impl SearchProgress for Silent {
    fn trial(&self, _: u32, _: u64, _: &str) {}
}

/// The heavy ops of `layouts` with their current partitions.
fn current_partitions(layouts: &Layouts) -> BTreeMap<String, Partition> {
    layouts
        .ops
        .iter()
        .filter_map(|op| Some((op.name.clone(), op.plan.partition()?)))
        .collect()
}

/// The outcome of an earlier search of `query` under `settings`, from
/// `cache`, if one is kept there.
pub fn cached_search(
    cache: &PersistentCache,
    query: &BuildQuery,
    settings: SearchSettings,
) -> Option<SearchOutcome> {
    load_search_outcome(cache, &search_key(query, settings))
}

/// Keeps `outcome` in `cache` for the next search of `query` under `settings`.
pub fn store_search(
    cache: &PersistentCache,
    query: &BuildQuery,
    settings: SearchSettings,
    outcome: &SearchOutcome,
) {
    store_search_outcome(cache, &search_key(query, settings), outcome);
}

/// Where a search's trials are kept and read, which of them this process
/// compiles, and how much memory its trials may hold.
#[derive(Clone, Default)]
pub struct TrialSharing {
    /// The cache trials are read from and kept in (`None`: every trial is
    /// compiled here and kept nowhere).
    pub cache: Option<Arc<PersistentCache>>,
    /// This process's shard of the trials (`None`: all of them).
    pub shard: Option<SearchShard>,
    /// Resident bytes above which the trials' session is dropped and a
    /// fresh one started (checked before each trial compiled; `None`:
    /// never).
    /// Every trial's compiled values stay in the session's memo, hundreds
    /// of trials' worth; a fresh session costs one build of the chosen
    /// plan's unchanged values (the calibration is read from the cache).
    pub memory_budget: Option<u64>,
}

/// Searches layouts for `query` (`session`'s current query) and leaves
/// the session at the best plan found. Trials kept in
/// `sharing`'s cache are read instead of compiled, and the trials
/// compiled are kept there.
pub fn search_layouts(
    session: &mut Session,
    query: &BuildQuery,
    settings: SearchSettings,
    progress: &dyn SearchProgress,
    sharing: TrialSharing,
) -> Result<SearchOutcome, SearchError> {
    let started = Instant::now();
    let mut search = Search {
        session,
        query: query.clone(),
        trials: 0,
        rejected: 0,
        compiled: 0,
        placed: 0,
        sequence: 0,
        progress,
        store: sharing
            .cache
            .clone()
            .map(|cache| TrialStore::new(cache, query)),
        shard: sharing.shard,
        cache: sharing.cache,
        memory_budget: sharing.memory_budget,
        fresh_sessions: 0,
    };
    let baseline = search.baseline(&query.planning.layout_overrides)?;
    let mut chosen = choices_of(&query.planning.layout_overrides);
    let mut best = baseline;
    let mut beam_report = None;
    if let Some(beam) = settings.beam {
        let beam_started = Instant::now();
        let found = beam_search(
            search.session.graph(),
            search.planning(),
            &search.session.product_recipe(),
            &query.planning.layout_overrides,
            head_dimension(query),
            beam,
        );
        if let Some(found) = found {
            let record = search.trial(&found.overrides);
            let cycles = record.cycles.unwrap_or(u64::MAX);
            let taken = cycles < best && search.fits(&found.overrides, record);
            if taken {
                best = cycles;
                chosen = choices_of(&found.overrides);
            }
            beam_report = Some(BeamReport {
                start_price: found.start_price,
                best_price: found.best_price,
                best_cycles: cycles,
                taken,
                states: found.states,
                seconds: beam_started.elapsed().as_secs_f64(),
            });
        }
    }
    let layouts = search.layouts_of(&chosen)?;
    let mut current = current_partitions(&layouts);
    let (ops, unsearched) = split_by_share(
        search.ranked_ops(&layouts),
        best,
        settings.min_share_basis_points,
    );
    let mut steps = Vec::new();
    for _round in 0..settings.rounds.max(1) {
        let mut improved = false;
        for op in &ops {
            let Some(&from) = current.get(op) else {
                continue;
            };
            // The candidates follow the chosen plan's layouts (never
            // the last trial's), so every shard tries the same ones.
            let layouts = search.layouts_of(&chosen)?;
            let candidates: Vec<Partition> = search
                .candidates(&layouts, op, settings)
                .into_iter()
                .filter(|partition| *partition != from)
                .collect();
            let op_trials_before = search.trials;
            let mut tried = search.batch(op, &chosen, &candidates, best);
            let mut op_best = search.winner(op, &chosen, &tried, best);
            if settings.orders {
                let base = match &op_best {
                    Some((_, partition, _)) => *partition,
                    None => from,
                };
                let orders: Vec<Partition> = other_orders(base)
                    .into_iter()
                    .filter(|partition| *partition != from)
                    .collect();
                tried.extend(search.batch(op, &chosen, &orders, best));
                op_best = search.winner(op, &chosen, &tried, best);
            }
            if let Some((cycles, partition, record)) = op_best
                && cycles < best
            {
                steps.push(SearchStep {
                    op: op.clone(),
                    from: from.to_string(),
                    to: partition.to_string(),
                    cycles_before: best,
                    cycles_after: cycles,
                    trials: search.trials - op_trials_before,
                    recomputed_queries: record.recomputed_queries,
                    recomputed_schedules: record.recomputed_schedules,
                });
                best = cycles;
                chosen.insert(op.clone(), partition);
                current.insert(op.clone(), partition);
                improved = true;
            }
        }
        if !improved {
            break;
        }
    }
    // Leave the session at the best plan: compiled here, whoever
    // compiled its trial (the calibration reads its phases).
    let overrides = overrides_of(&chosen);
    let final_cycles = search
        .build(&overrides)
        .map_err(SearchError::Chosen)?
        .cycles
        .unwrap_or(u64::MAX);
    if final_cycles != best {
        return Err(SearchError::KeptTrialMismatch {
            compiled: final_cycles,
            trial: best,
        });
    }
    let calibration = calibrate(search.session);
    let operators = calibrate_operators(search.session);
    let outcome = SearchOutcome {
        baseline_cycles: baseline,
        beam: beam_report,
        calibration,
        operators,
        best_cycles: final_cycles,
        overrides: overrides
            .iter()
            .map(|entry| (entry.op.clone(), entry.partition.to_string()))
            .collect(),
        steps,
        unsearched,
        trials: search.trials,
        compiled_here: search.compiled,
        rejected: search.rejected,
        placed: search.placed,
        fresh_sessions: search.fresh_sessions,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok(outcome)
}

/// The cache key of a search: the starting build and the settings.
fn search_key(query: &BuildQuery, settings: SearchSettings) -> CacheKey {
    CacheKey::of("layout search", &(package_build_key(query), settings))
}

struct Search<'a> {
    session: &'a mut Session,
    query: BuildQuery,
    trials: u32,
    rejected: u32,
    /// Trials compiled in this process (the others were read from the
    /// cache: kept by an earlier search or another shard).
    compiled: u32,
    /// Trials placed to check that they fit.
    placed: u32,
    /// Candidates batched so far (shards own candidates by this count).
    sequence: usize,
    progress: &'a dyn SearchProgress,
    store: Option<TrialStore>,
    shard: Option<SearchShard>,
    /// The cache a fresh session reads the calibration from.
    cache: Option<Arc<PersistentCache>>,
    memory_budget: Option<u64>,
    fresh_sessions: u32,
}

impl Search<'_> {
    /// The search's query with `overrides` as its layout overrides.
    fn query_with(&self, overrides: &[LayoutOverride]) -> BuildQuery {
        let mut query = self.query.clone();
        query.planning.layout_overrides = overrides.to_vec();
        query.planning.layout_overrides.sort();
        query
    }

    /// Over the memory budget, drops the trials' session for a fresh one
    /// at `query`, the trial about to be compiled (the trials' values are
    /// rebuilt as trials need them; the steps do not depend on them).
    fn within_budget(&mut self, query: &BuildQuery) {
        let Some(budget) = self.memory_budget else {
            return;
        };
        if resident_bytes().is_none_or(|resident| resident <= budget) {
            return;
        }
        // The old session's memory is freed before the new one fills.
        *self.session = Session::for_search(query, None);
        return_freed_memory();
        *self.session = Session::for_search(query, self.cache.clone());
        self.fresh_sessions += 1;
        tracing::debug!(resident = ?resident_bytes(), "search: a fresh trials session");
    }

    /// The layouts of the plan `choices` (the session moved to it; only
    /// the planner runs).
    fn layouts_of(
        &mut self,
        choices: &BTreeMap<String, Partition>,
    ) -> Result<std::sync::Arc<Layouts>, SearchError> {
        let query = self.query_with(&overrides_of(choices));
        self.session.update(&query);
        self.session.layouts().map_err(SearchError::Layouts)
    }

    /// The whole program's estimate under `overrides`, by an incremental
    /// rebuild of the session, not placed (`Err`: why it did not build).
    fn compile(&mut self, overrides: &[LayoutOverride]) -> Result<TrialRecord, BuildError> {
        let query = self.query_with(overrides);
        self.within_budget(&query);
        self.session.update(&query);
        let (cycles, executions) = self.session.unplaced_estimate()?;
        let schedules = executions
            .iter()
            .filter(|execution| execution.query == TrackedQuery::Scheduled)
            .count();
        Ok(TrialRecord {
            cycles: Some(cycles),
            fits: None,
            recomputed_queries: executions.len() as u32,
            recomputed_schedules: schedules as u32,
        })
    }

    /// The whole build under `overrides`, placed (`Err`: why it did not
    /// build or fit).
    fn build(&mut self, overrides: &[LayoutOverride]) -> Result<TrialRecord, BuildError> {
        let query = self.query_with(overrides);
        self.session.update(&query);
        let outcome = self.session.build()?;
        let executions = outcome.executions_by_query();
        Ok(TrialRecord {
            cycles: Some(
                outcome
                    .back
                    .as_ref()
                    .map_or(u64::MAX, |back| back.headline.estimate.total_cycles),
            ),
            fits: Some(true),
            recomputed_queries: executions.values().sum::<usize>() as u32,
            recomputed_schedules: executions
                .get(&TrackedQuery::Scheduled)
                .copied()
                .unwrap_or(0) as u32,
        })
    }

    /// The trial among `tried` (`op` at each partition over `chosen`)
    /// with the least estimate under `best` that fits, the first in
    /// `tried`'s order among equal estimates: trials are placed in that
    /// order until one fits (a trial that does not fit is rejected, and
    /// its record says so).
    fn winner(
        &mut self,
        op: &str,
        chosen: &BTreeMap<String, Partition>,
        tried: &[(Partition, TrialRecord)],
        best: u64,
    ) -> Option<(u64, Partition, TrialRecord)> {
        let mut ranked: Vec<(u64, usize)> = tried
            .iter()
            .enumerate()
            .filter_map(|(index, (_, record))| {
                let cycles = record.cycles?;
                (cycles < best && record.fits != Some(false)).then_some((cycles, index))
            })
            .collect();
        ranked.sort_unstable();
        for (cycles, index) in ranked {
            let (partition, record) = tried[index];
            let mut trial = chosen.clone();
            trial.insert(op.to_string(), partition);
            if self.fits(&overrides_of(&trial), record) {
                return Some((cycles, partition, record));
            }
        }
        None
    }

    /// Whether the trial of `overrides` places: as its record (or the
    /// kept one) says, else placed here and kept.
    fn fits(&mut self, overrides: &[LayoutOverride], record: TrialRecord) -> bool {
        if let Some(fits) = record.fits {
            return fits;
        }
        let kept = self
            .store
            .as_ref()
            .and_then(|store| store.lookup(overrides));
        if let Some(fits) = kept.and_then(|kept| kept.fits) {
            return fits;
        }
        let query = self.query_with(overrides);
        self.session.update(&query);
        self.placed += 1;
        let fits = self.session.fits().is_ok();
        if !fits {
            self.rejected += 1;
        }
        if let Some(store) = &self.store {
            store.keep(
                overrides,
                &TrialRecord {
                    fits: Some(fits),
                    ..record
                },
            );
        }
        fits
    }

    /// Compiles the trial of `overrides` here and keeps it.
    fn compile_and_keep(&mut self, overrides: &[LayoutOverride]) -> TrialRecord {
        self.compiled += 1;
        let record = self.compile(overrides).unwrap_or(TrialRecord {
            cycles: None,
            fits: None,
            recomputed_queries: 0,
            recomputed_schedules: 0,
        });
        if let Some(store) = &self.store {
            store.keep(overrides, &record);
        }
        record
    }

    /// Counts one trial's outcome.
    fn counted(&mut self, record: TrialRecord) -> TrialRecord {
        self.trials += 1;
        if record.cycles.is_none() {
            self.rejected += 1;
        }
        record
    }

    /// The starting build's estimate: kept, or compiled (an error when it
    /// does not build).
    fn baseline(&mut self, overrides: &[LayoutOverride]) -> Result<u64, SearchError> {
        let kept = self
            .store
            .as_ref()
            .and_then(|store| store.lookup(overrides));
        if let Some(record) = kept
            && let Some(cycles) = record.cycles
            && record.fits == Some(true)
        {
            self.counted(record);
            return Ok(cycles);
        }
        self.compiled += 1;
        let record = self.build(overrides).map_err(SearchError::Start)?;
        if let Some(store) = &self.store {
            store.keep(overrides, &record);
        }
        Ok(self.counted(record).cycles.unwrap_or(u64::MAX))
    }

    /// One trial: kept, else compiled here and kept.
    fn trial(&mut self, overrides: &[LayoutOverride]) -> TrialRecord {
        let kept = self
            .store
            .as_ref()
            .and_then(|store| store.lookup(overrides));
        let record = match kept {
            Some(record) => record,
            None => self.compile_and_keep(overrides),
        };
        self.counted(record)
    }

    /// Another shard's trial: waited for, else compiled here.
    fn awaited(
        &mut self,
        overrides: &[LayoutOverride],
        patience: std::time::Duration,
    ) -> TrialRecord {
        let waited = self
            .store
            .as_mut()
            .and_then(|store| store.wait_for(overrides, patience));
        let record = match waited {
            Some(record) => record,
            None => self.compile_and_keep(overrides),
        };
        self.counted(record)
    }

    /// The trials of `op` at each of `partitions` over the plan `chosen`,
    /// in the partitions' order: this shard's first (all of them without
    /// shards), then the other shards' as they keep them.
    fn batch(
        &mut self,
        op: &str,
        chosen: &BTreeMap<String, Partition>,
        partitions: &[Partition],
        best: u64,
    ) -> Vec<(Partition, TrialRecord)> {
        let overrides: Vec<Vec<LayoutOverride>> = partitions
            .iter()
            .map(|partition| {
                let mut trial = chosen.clone();
                trial.insert(op.to_string(), *partition);
                overrides_of(&trial)
            })
            .collect();
        let mut records: Vec<Option<TrialRecord>> = vec![None; partitions.len()];
        let shard = self.shard;
        let mut best_so_far = best;
        let mut report = |search: &mut Self, record: TrialRecord| {
            if let Some(cycles) = record.cycles {
                best_so_far = best_so_far.min(cycles);
            }
            search.progress.trial(search.trials, best_so_far, op);
        };
        // Shards own candidates by their place in the whole search's
        // sequence of candidates (the same in every shard), so that each
        // compiles its share however small the batches are.
        let first = self.sequence;
        self.sequence += overrides.len();
        for (index, trial) in overrides.iter().enumerate() {
            if shard.is_none_or(|shard| shard.owns(first + index)) {
                let record = self.trial(trial);
                report(self, record);
                records[index] = Some(record);
            }
        }
        if let Some(shard) = shard {
            for (index, trial) in overrides.iter().enumerate() {
                if records[index].is_none() {
                    let record = self.awaited(trial, shard.patience);
                    report(self, record);
                    records[index] = Some(record);
                }
            }
        }
        partitions
            .iter()
            .copied()
            .zip(records.into_iter().flatten())
            .collect()
    }

    /// The heavy ops, costliest first by the cost model's cycles times
    /// executions (body ops run once per layer), with those cycles.
    fn ranked_ops(&self, layouts: &Layouts) -> Vec<(u64, String)> {
        let iterations = layouts
            .repeat
            .as_ref()
            .map_or(1, |repeat| repeat.iterations);
        let mut ranked: Vec<(u64, String)> = layouts
            .ops
            .iter()
            .filter_map(|op| {
                let cycles = match &op.plan {
                    OpPlan::MatMul(plan) => plan.cycles,
                    OpPlan::Attention(plan) => plan.cycles,
                    _ => return None,
                };
                let runs = if op.region == Region::Body {
                    iterations
                } else {
                    1
                };
                Some((cycles * u64::from(runs), op.name.clone()))
            })
            .collect();
        ranked.sort_by(|left, right| right.0.cmp(&left.0).then(left.1.cmp(&right.1)));
        ranked
    }

    /// The partitions to try for `op_name` under `layouts`
    /// (`beam::op_candidates`).
    fn candidates(
        &self,
        layouts: &Layouts,
        op_name: &str,
        settings: SearchSettings,
    ) -> Vec<Partition> {
        op_candidates(
            self.session.graph(),
            PlanningSettings {
                matrix_inputs: self.session.product_recipe().inputs_of(op_name),
                ..self.planning()
            },
            layouts,
            op_name,
            head_dimension(&self.query),
            settings.cheapest,
            settings.aligned,
        )
    }

    fn planning(&self) -> PlanningSettings {
        crate::build_file::planning_settings(
            self.query.machine.tiles,
            self.query.machine.cost_table,
            &self.query.planning,
            self.query.workload.attention,
        )
    }
}
