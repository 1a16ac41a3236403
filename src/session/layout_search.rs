//! The layout search by the compiled program's own estimate: local steps
//! from the build's layouts, each trying the next partitions (and tile
//! orders) of one matrix product or attention and accepted only when the
//! whole program, re-planned, expanded, grouped, scheduled under the
//! build's policy, placed and estimated, is cheaper and still fits.
//!
//! Every trial is an incremental rebuild of the one session: only the
//! overridden op's expansion, the conversions around it and the phases
//! whose problems changed recompute; everything else is memoized (and
//! identical phase problems are scheduled once). The trials' own values
//! stay in memory (hundreds of trials would otherwise fill the persistent
//! cache with schedules no build asks for); the outcome is kept in the
//! cache under the build's key and the search settings
//! ([`cached_search`], [`store_search`]), so a second search of the same
//! build computes nothing.
//!
//! Owns the search loop and its record; the candidates come from
//! `crate::layout::candidates`, the overrides' meaning from the planner.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The beam of [`SearchSettings::beam`], named where the settings are made
/// (`superstep search`'s flags).
pub use super::layout_beam::BeamSettings;
use super::layout_beam::{beam_search, choices_of, conversion_proxy, op_candidates, overrides_of};
use super::{Session, TrackedQuery};
use crate::build_file::{BuildQuery, package_build_key};
use crate::cache::{CacheKey, EntryKind, PersistentCache};
use crate::incremental::on_disk::Persisted;
use crate::layout::cost::{AttentionOrder, TileOrder};
use crate::layout::overrides::{LayoutOverride, Partition};
use crate::layout::plan::{Layouts, OpPlan};
use crate::layout::planner::PlanningSettings;
use crate::model::graph::Region;

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

/// How far the search looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SearchSettings {
    /// The beam that chooses the starting plan (`None`: start from the
    /// build's own layouts).
    pub beam: Option<BeamSettings>,
    /// Passes over the operators (a pass ends early when nothing improved).
    pub rounds: u32,
    /// Candidates per operator that the cost model ranks cheapest.
    pub cheapest: u32,
    /// Candidates per alignment with a neighbour's blocks.
    pub aligned: u32,
    /// Whether each accepted partition's other tile orders are tried.
    pub orders: bool,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            // Measured: on the shipped models the local steps from the cost
            // model's plans beat the local steps from the beam's plan.
            beam: None,
            rounds: 2,
            cheapest: 6,
            aligned: 3,
            orders: true,
        }
    }
}

/// One accepted step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchStep {
    pub op: String,
    pub from: String,
    pub to: String,
    pub cycles_before: u64,
    pub cycles_after: u64,
    /// Trials run for this op in the pass that accepted the step.
    pub trials: u32,
    /// Queries the accepted trial re-executed (salsa's event log).
    pub recomputed_queries: u32,
    /// Of those, exchange schedules computed.
    pub recomputed_schedules: u32,
}

/// What the beam contributed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeamReport {
    /// The proxy price of the build's plan and of the beam's best.
    pub start_price: u64,
    pub best_price: u64,
    /// The real estimate of the beam's best plan.
    pub best_cycles: u64,
    /// Whether the local steps started from it (it beat the build's plan).
    pub taken: bool,
    pub states: u32,
    pub seconds: f64,
}

/// The beam's price of one exchange phase made only of conversions,
/// against what the build's policy scheduled (horizon plus the fixed
/// overhead above it), per execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    pub phase: String,
    /// The conversions merged into it.
    pub conversions: u32,
    pub proxy_cycles: u64,
    pub real_cycles: u64,
}

/// The calibration of the beam's proxy on the session's current build:
/// every exchange phase whose ops are all conversions.
pub fn calibrate(session: &Session) -> Vec<Calibration> {
    let Ok(layouts) = session.layouts() else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for phase in session.phases() {
        let Ok(figures) = phase.figures() else {
            continue;
        };
        let mut ops: Vec<&str> = std::iter::once(phase.key())
            .chain(figures.merged_from.iter().map(String::as_str))
            .map(|key| key.split('#').next().unwrap_or(key))
            .collect();
        ops.sort_unstable();
        ops.dedup();
        let proxies: Option<Vec<u64>> = ops
            .iter()
            .map(|op| conversion_proxy(&layouts, op))
            .collect();
        if let Some(proxies) = proxies {
            rows.push(Calibration {
                phase: phase.key().to_string(),
                conversions: ops.len() as u32,
                proxy_cycles: proxies.iter().sum(),
                real_cycles: u64::from(figures.horizon)
                    + crate::target::costs::PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES,
            });
        }
    }
    rows
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchOutcome {
    pub baseline_cycles: u64,
    /// The beam's part, when it ran.
    pub beam: Option<BeamReport>,
    /// The beam's proxy against the scheduled phases, on the chosen plan.
    pub calibration: Vec<Calibration>,
    pub best_cycles: u64,
    pub overrides: Vec<(String, String)>,
    pub steps: Vec<SearchStep>,
    pub trials: u32,
    /// Trials that did not build (the program no longer fits, or a
    /// partition the planner refused).
    pub rejected: u32,
    /// Seconds the search took when it ran (not when loaded from the cache).
    pub seconds: f64,
}

crate::incremental::on_disk::persisted_by_bincode! { SearchOutcome => LayoutSearch }

impl SearchOutcome {
    /// The chosen plan as layout overrides.
    pub fn layout_overrides(&self) -> Vec<LayoutOverride> {
        self.overrides
            .iter()
            .filter_map(|(op, partition)| {
                Some(LayoutOverride {
                    op: op.clone(),
                    partition: Partition::parse(partition).ok()?,
                })
            })
            .collect()
    }
}

/// A failed search: the starting build itself did not build.
#[derive(Debug, thiserror::Error)]
#[error("the build to search from does not build: {0}")]
pub struct SearchError(pub String);

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
    cache.load_with(
        EntryKind::LayoutSearch,
        &search_key(query, settings),
        |payload, _| {
            <SearchOutcome as Persisted>::decode(payload)
                .map_err(crate::cache::EntryError::Undecodable)
        },
    )
}

/// Keeps `outcome` in `cache` for the next search of `query` under `settings`.
pub fn store_search(
    cache: &PersistentCache,
    query: &BuildQuery,
    settings: SearchSettings,
    outcome: &SearchOutcome,
) {
    if let Ok(payload) = <SearchOutcome as Persisted>::encode(outcome) {
        cache.store_payload(
            EntryKind::LayoutSearch,
            &search_key(query, settings),
            &payload,
        );
    }
}

impl Session {
    /// Searches layouts for `query` (the session's current query) and
    /// leaves the session at the best plan found.
    pub fn search_layouts(
        &mut self,
        query: &BuildQuery,
        settings: SearchSettings,
        progress: &dyn SearchProgress,
    ) -> Result<SearchOutcome, SearchError> {
        let started = Instant::now();
        let mut search = Search {
            session: self,
            query: query.clone(),
            trials: 0,
            rejected: 0,
            progress,
        };
        let baseline = search
            .evaluate(&query.planning.layout_overrides)
            .map_err(SearchError)?
            .cycles;
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
                let evaluated = search.evaluate(&found.overrides);
                let cycles = evaluated.as_ref().map_or(u64::MAX, |trial| trial.cycles);
                let taken = cycles < best;
                if taken {
                    best = cycles;
                    chosen = choices_of(&found.overrides);
                } else {
                    // Back to the build's plan for the local steps.
                    search
                        .evaluate(&query.planning.layout_overrides)
                        .map_err(SearchError)?;
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
        let layouts = search
            .session
            .layouts()
            .map_err(|error| SearchError(error.to_string()))?;
        let mut current = current_partitions(&layouts);
        let ops = search.ranked_ops(&layouts);
        let mut steps = Vec::new();
        for _round in 0..settings.rounds.max(1) {
            let mut improved = false;
            for op in &ops {
                let Some(&from) = current.get(op) else {
                    continue;
                };
                let layouts = search
                    .session
                    .layouts()
                    .map_err(|error| SearchError(error.to_string()))?;
                let candidates = search.candidates(&layouts, op, settings);
                let op_trials_before = search.trials;
                let mut op_best: Option<(u64, Partition, Trial)> = None;
                let tried =
                    |search: &mut Search<'_>,
                     partition: Partition,
                     op_best: &mut Option<(u64, Partition, Trial)>| {
                        if partition == from {
                            return;
                        }
                        let mut trial = chosen.clone();
                        trial.insert(op.clone(), partition);
                        let overrides = overrides_of(&trial);
                        if let Ok(result) = search.evaluate(&overrides)
                            && op_best
                                .as_ref()
                                .is_none_or(|(cycles, _, _)| result.cycles < *cycles)
                        {
                            *op_best = Some((result.cycles, partition, result));
                        }
                        search.progress.trial(
                            search.trials,
                            best.min(op_best.as_ref().map_or(u64::MAX, |b| b.0)),
                            op,
                        );
                    };
                for partition in candidates {
                    tried(&mut search, partition, &mut op_best);
                }
                if settings.orders {
                    let base = match &op_best {
                        Some((cycles, partition, _)) if *cycles < best => *partition,
                        _ => from,
                    };
                    for partition in other_orders(base) {
                        tried(&mut search, partition, &mut op_best);
                    }
                }
                if let Some((cycles, partition, trial)) = op_best
                    && cycles < best
                {
                    steps.push(SearchStep {
                        op: op.clone(),
                        from: from.to_string(),
                        to: partition.to_string(),
                        cycles_before: best,
                        cycles_after: cycles,
                        trials: search.trials - op_trials_before,
                        recomputed_queries: trial.recomputed_queries,
                        recomputed_schedules: trial.recomputed_schedules,
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
        // Leave the session at the best plan.
        let overrides = overrides_of(&chosen);
        let final_cycles = search.evaluate(&overrides).map_err(SearchError)?.cycles;
        debug_assert_eq!(final_cycles, best);
        let calibration = calibrate(search.session);
        let outcome = SearchOutcome {
            baseline_cycles: baseline,
            beam: beam_report,
            calibration,
            best_cycles: final_cycles,
            overrides: overrides
                .iter()
                .map(|entry| (entry.op.clone(), entry.partition.to_string()))
                .collect(),
            steps,
            trials: search.trials,
            rejected: search.rejected,
            seconds: started.elapsed().as_secs_f64(),
        };
        Ok(outcome)
    }
}

/// The cache key of a search: the starting build and the settings.
fn search_key(query: &BuildQuery, settings: SearchSettings) -> CacheKey {
    CacheKey::of("layout search", &(package_build_key(query), settings))
}

/// The partition in every other tile order.
fn other_orders(partition: Partition) -> Vec<Partition> {
    match partition {
        Partition::MatMul {
            rows,
            cols,
            reduction,
            order,
        } => TileOrder::ALL
            .into_iter()
            .filter(|other| *other != order)
            .map(|other| Partition::MatMul {
                rows,
                cols,
                reduction,
                order: other,
            })
            .collect(),
        Partition::Attention {
            queries,
            keys,
            order,
        } => AttentionOrder::ALL
            .into_iter()
            .filter(|other| *other != order)
            .map(|other| Partition::Attention {
                queries,
                keys,
                order: other,
            })
            .collect(),
    }
}

/// One evaluated trial.
struct Trial {
    cycles: u64,
    recomputed_queries: u32,
    recomputed_schedules: u32,
}

struct Search<'a> {
    session: &'a mut Session,
    query: BuildQuery,
    trials: u32,
    rejected: u32,
    progress: &'a dyn SearchProgress,
}

impl Search<'_> {
    /// The whole program's estimate under `overrides`, by an incremental
    /// rebuild of the session.
    fn evaluate(&mut self, overrides: &[LayoutOverride]) -> Result<Trial, String> {
        self.trials += 1;
        let mut query = self.query.clone();
        query.planning.layout_overrides = overrides.to_vec();
        query.planning.layout_overrides.sort();
        self.session.update(&query);
        match self.session.build() {
            Ok(outcome) => {
                let executions = outcome.executions_by_query();
                Ok(Trial {
                    cycles: outcome
                        .back
                        .as_ref()
                        .map_or(u64::MAX, |back| back.headline.total_cycles),
                    recomputed_queries: executions.values().sum::<usize>() as u32,
                    recomputed_schedules: executions
                        .get(&TrackedQuery::Scheduled)
                        .copied()
                        .unwrap_or(0) as u32,
                })
            }
            Err(error) => {
                self.rejected += 1;
                Err(error.to_string())
            }
        }
    }

    /// The heavy ops, costliest first by the cost model's cycles times
    /// executions (body ops run once per layer).
    fn ranked_ops(&self, layouts: &Layouts) -> Vec<String> {
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
        ranked.into_iter().map(|(_, name)| name).collect()
    }

    /// The partitions to try for `op_name` under `layouts`
    /// (`layout_beam::op_candidates`).
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
