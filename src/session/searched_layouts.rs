//! The searched plan, as the session hands it out: which layouts a build
//! uses ([`LayoutSource`], its `layouts:` line), the query as built (the
//! build's pins over the plan a search kept for its configuration,
//! [`Session::effective_query`]), the keeping of a search's plan, and the
//! check, before anything is compiled, that every pin can apply to the
//! configuration ([`stale_pin`]). The lookup itself is a query of the
//! configuration (`crate::incremental::searched_plan`); the search is
//! `crate::studies::layout_search`.

use serde::Serialize;

use super::Session;
use crate::build_file::BuildQuery;
use crate::cache::PersistentCache;
use crate::incremental::Db;
use crate::incremental::lowering::layout_overrides;
use crate::incremental::searched_plan::{
    KeptSearches, kept_plan_now, search_configuration, searched_plan,
};
use crate::layout::overrides::{OverrideCause, OverrideError};
use crate::layout::planner::{DirectCosts, LayoutError, plan_layouts};
use crate::layout::search_record::SearchOutcome;
use crate::model::graph::OpKind;
use crate::text::{counted, thousands};

/// The key a search of `query`'s configuration keeps its plan under.
pub fn configuration_key(query: &BuildQuery) -> crate::cache::CacheKey {
    crate::incremental::searched_plan::configuration_key(query)
}

/// The plan a search kept in `cache` for `query`'s configuration, if any
/// (what the session's query of the configuration reads).
pub fn searched_outcome(cache: &PersistentCache, query: &BuildQuery) -> Option<SearchOutcome> {
    crate::incremental::searched_plan::kept_outcome(cache, &configuration_key(query))
}

/// A search's outcome kept in `cache` under the search's own `key` (its
/// starting build and settings: `crate::studies::layout_search` makes it).
pub fn load_search_outcome(
    cache: &PersistentCache,
    key: &crate::cache::CacheKey,
) -> Option<SearchOutcome> {
    crate::incremental::searched_plan::load_outcome(cache, key)
}

/// Keeps a search's `outcome` in `cache` under the search's own `key`.
pub fn store_search_outcome(
    cache: &PersistentCache,
    key: &crate::cache::CacheKey,
    outcome: &SearchOutcome,
) {
    crate::incremental::searched_plan::store_outcome(cache, key, outcome);
}

/// `query` with `outcome`'s plan laid under its pins: the query a build of
/// the searched plan builds, where no cache holds the plan.
pub fn with_plan(query: &BuildQuery, outcome: &SearchOutcome) -> BuildQuery {
    let mut planned = query.clone();
    let plan = crate::incremental::searched_plan::KeptPlan {
        overrides: outcome.layout_overrides(),
        best_cycles: outcome.best_cycles,
        trials: outcome.trials,
    };
    planned.planning.layout_overrides = crate::incremental::searched_plan::pinned_over(
        &query.planning.layout_overrides,
        Some(&plan),
    );
    planned
}

/// Keeps `outcome` as the plan of `query`'s configuration unless a plan
/// kept there already estimates no more cycles (the best known plan
/// stays). Returns whether it was kept.
pub fn keep_searched_plan(
    cache: &PersistentCache,
    query: &BuildQuery,
    outcome: &SearchOutcome,
) -> bool {
    crate::incremental::searched_plan::keep_searched_plan(cache, query, outcome)
}

/// Where a build's layouts came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutOrigin {
    /// A search kept for this configuration, from the cache.
    Searched,
    /// The planner's beam (no search kept, or no cache).
    Planner,
}

/// Which layouts a build used, as its one `layouts:` line says and
/// report.json records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayoutSource {
    pub origin: LayoutOrigin,
    /// Whether a cache was there to look a search up in (said by the line;
    /// not in report.json, whose bytes do not depend on whether a build
    /// used a cache).
    #[serde(skip)]
    pub looked_up: bool,
    /// The searched plan's estimate when it was searched.
    pub searched_cycles: Option<u64>,
    /// The trials the search took.
    pub searched_trials: Option<u32>,
    /// Ops whose layouts the searched plan sets.
    pub searched_ops: u32,
    /// `[[layout.override]]` pins applied (file and `--set`).
    pub pinned_ops: u32,
    /// Of those, ops the searched plan also set (the pin took precedence).
    pub pins_over_search: u32,
    /// File pins left out because their `when` does not match.
    pub pins_skipped_by_when: u32,
}

impl LayoutSource {
    /// The `layouts:` line.
    pub fn line(&self) -> String {
        let mut line = match (self.origin, self.searched_cycles, self.searched_trials) {
            (LayoutOrigin::Searched, Some(cycles), Some(trials)) => format!(
                "layouts: searched (cache; estimate {} cycles when searched, {trials} trials)",
                thousands(cycles)
            ),
            (LayoutOrigin::Searched, _, _) => String::from("layouts: searched (cache)"),
            (LayoutOrigin::Planner, ..) if self.looked_up => String::from(
                "layouts: planner (no search kept for this configuration; superstep search may \
                 find better ones)",
            ),
            (LayoutOrigin::Planner, ..) => String::from(
                "layouts: planner (--no-cache: no search looked up; superstep search may find \
                 better ones)",
            ),
        };
        if self.pinned_ops > 0 {
            line.push_str(&format!(
                "; {} pinned by [[layout.override]]",
                counted(self.pinned_ops, "op", "ops")
            ));
            if self.pins_over_search > 0 {
                line.push_str(&format!(
                    " ({} over the search's choice)",
                    self.pins_over_search
                ));
            }
        }
        if self.pins_skipped_by_when > 0 {
            line.push_str(&format!(
                "; {} skipped by `when` (not for this configuration)",
                counted(self.pins_skipped_by_when, "pin", "pins")
            ));
        }
        line
    }
}

impl Session {
    /// Which layouts the session's build uses: the plan a search kept for
    /// its configuration (when the session looks searched plans up and
    /// its cache holds one) under the build's own pins, else the planner's.
    pub fn layout_source(&self) -> LayoutSource {
        let (db, build) = (&self.db, self.inputs);
        let planning = build.planning(db);
        let pins = &planning.layout_overrides;
        let looked_up = KeptSearches::try_get(db).is_some_and(|kept| kept.looked_up(db))
            && self.cache().is_some();
        let mut source = LayoutSource {
            origin: LayoutOrigin::Planner,
            looked_up,
            searched_cycles: None,
            searched_trials: None,
            searched_ops: 0,
            pinned_ops: pins.len() as u32,
            pins_over_search: 0,
            pins_skipped_by_when: planning.skipped_layout_overrides,
        };
        if let Some(plan) = searched_plan(db, build) {
            source.origin = LayoutOrigin::Searched;
            source.searched_cycles = Some(plan.best_cycles);
            source.searched_trials = Some(plan.trials);
            source.searched_ops = plan.overrides.len() as u32;
            source.pins_over_search = plan
                .overrides
                .iter()
                .filter(|choice| pins.iter().any(|pin| pin.op == choice.op))
                .count() as u32;
        }
        source
    }

    /// `query` (the session's, as written) as the session builds it: its
    /// layout overrides are the pins over the searched plan. What a build
    /// records and keys its package by.
    pub fn effective_query(&self, query: &BuildQuery) -> BuildQuery {
        let mut effective = query.clone();
        effective.planning.layout_overrides = layout_overrides(&self.db, self.inputs).clone();
        effective
    }

    /// Asks the cache again for the plan of the session's configuration
    /// and, when a search kept another since the session last asked,
    /// makes the next build use it (a long-lived session: `watch`).
    /// Returns whether the plan changed.
    pub fn notice_kept_searches(&mut self) -> bool {
        use salsa::Setter;
        let Some(kept) = KeptSearches::try_get(&self.db) else {
            return false;
        };
        if !kept.looked_up(&self.db) {
            return false;
        }
        let Some(cache) = self.db.cache_for(crate::cache::EntryKind::LayoutSearch) else {
            return false;
        };
        let key = search_configuration(&self.db, self.inputs);
        let now = kept_plan_now(cache, &key);
        let known = searched_plan(&self.db, self.inputs).as_deref().cloned();
        if now == known {
            return false;
        }
        let generation = kept.generation(&self.db) + 1;
        kept.set_generation(&mut self.db).to(generation);
        true
    }
}

/// A pin that cannot apply to the build's configuration.
#[derive(Clone, Debug)]
pub struct StalePin {
    pub problem: OverrideError,
    /// Whether the op itself is wrong (no product or attention of that
    /// name), rather than its partition.
    pub op_is_wrong: bool,
}

/// The first pin of `query` that cannot apply to its configuration at all
/// (its op, or a partition the op's shape on these tiles cannot form),
/// found by planning once at a fixed activation scale (a scale changes no
/// partition's validity), so that it is reported before calibration,
/// the compile and any fit probing. `None` when the query has no pins,
/// every pin applies, or only memory refuses one (fit probing explains
/// that).
pub fn stale_pin(query: &BuildQuery) -> Option<StalePin> {
    if query.planning.layout_overrides.is_empty() {
        return None;
    }
    let graph = crate::direct::build_query_graph(query);
    let recipe = crate::sim::calibration::recipe(&query.planning, None);
    let planned = plan_layouts(
        &graph,
        crate::direct::planning_settings(query),
        &query.planning.layout_overrides,
        &recipe,
        &mut DirectCosts,
    );
    match planned {
        Err(LayoutError::Override(problem)) if problem.cause != OverrideCause::Memory => {
            let op_is_wrong = !graph.op_ids().any(|id| {
                let op = graph.op(id);
                op.name == problem.op
                    && matches!(op.kind, OpKind::MatMul { .. } | OpKind::Attention { .. })
            });
            Some(StalePin {
                problem: *problem,
                op_is_wrong,
            })
        }
        _ => None,
    }
}
