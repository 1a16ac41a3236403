//! The searched plan as a cached query of its configuration: `superstep
//! search` keeps its best plan under [`configuration_key`], and a plain
//! build (and every command that builds) looks that key up before it
//! builds, applying the plan's layouts as overrides, else keeping the
//! planner's beam ([`with_searched_layouts`]). The persistent cache is the
//! store: local, and the remote tier when one is configured (signed as the
//! cache signs every entry it shares).
//!
//! The key is the configuration the plan was searched for: the graph
//! (model, batch, layers, weights), the machine (tiles, cost table), the
//! planning settings (matrix inputs, activation scale, accumulation,
//! reservation, fusion) and the scheduling settings the search scores
//! with (policy, width, row allowance, `[[schedule.override]]`). Not in
//! it: the build's name and outputs, the cache settings, whether bounds
//! prune (the same program either way), the `[[layout.override]]` pins
//! (they are the plan's own kind of value, applied over it) and the
//! search's own knobs (beam, rounds, candidates, orders): those change
//! how hard a search looks, not which configuration its plan is for, so
//! the entry keeps the best plan any search of the configuration found.
//!
//! Owns the key, the entry's reading and keeping, the merge of the
//! searched plan with the user's pins, the record of which layouts a
//! build used ([`LayoutSource`]) and the check, before anything is
//! compiled, that every pin can apply to the configuration ([`stale_pin`]). The search itself is
//! `crate::session::layout_search`.

use std::collections::BTreeSet;

use serde::Serialize;

use super::layout_search::SearchOutcome;
use crate::build_file::{BuildQuery, package_build_key};
use crate::cache::{CacheKey, EntryKind, PersistentCache};
use crate::incremental::on_disk::Persisted;
use crate::layout::overrides::{OverrideCause, OverrideError};
use crate::layout::planner::{DirectCosts, LayoutError, plan_layouts};
use crate::model::graph::OpKind;
use crate::text::{counted, thousands};

/// The key a searched plan is kept under: the configuration it was
/// searched for (see the module header for what is and is not in it).
pub fn configuration_key(query: &BuildQuery) -> CacheKey {
    let mut neutral = query.clone();
    neutral.name = String::new();
    neutral.planning.layout_overrides.clear();
    neutral.planning.skipped_layout_overrides = 0;
    CacheKey::of("searched layouts", &package_build_key(&neutral))
}

/// The best plan a search kept for `query`'s configuration, if any. A
/// plan neither on disk nor fetched from a remote tier is not looked up
/// (a build that finds none counts no cache miss for it).
pub fn searched_plan(cache: &PersistentCache, query: &BuildQuery) -> Option<SearchOutcome> {
    let key = configuration_key(query);
    if !cache.path(EntryKind::LayoutSearch, &key).is_file()
        && !cache.fetches_remotely(EntryKind::LayoutSearch)
    {
        return None;
    }
    cache.load_with(EntryKind::LayoutSearch, &key, |payload, _| {
        <SearchOutcome as Persisted>::decode(payload).map_err(crate::cache::EntryError::Undecodable)
    })
}

/// Keeps `outcome` as the plan of `query`'s configuration unless a plan
/// kept there already estimates no more cycles (the best known plan
/// stays). Returns whether it was kept.
pub fn keep_searched_plan(
    cache: &PersistentCache,
    query: &BuildQuery,
    outcome: &SearchOutcome,
) -> bool {
    if searched_plan(cache, query).is_some_and(|kept| kept.best_cycles <= outcome.best_cycles) {
        return false;
    }
    match <SearchOutcome as Persisted>::encode(outcome) {
        Ok(payload) => {
            cache.store_payload(EntryKind::LayoutSearch, &configuration_key(query), &payload);
            true
        }
        Err(_) => false,
    }
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

/// `query` with the plan a search kept for its configuration applied
/// under its pins (a pin takes precedence over the search for the op it
/// names), and which layouts that is. Without `cache`, or with no plan
/// kept for the configuration, the query is unchanged: the planner's beam
/// chooses every layout the pins leave.
pub fn with_searched_layouts(
    query: &BuildQuery,
    cache: Option<&PersistentCache>,
) -> (BuildQuery, LayoutSource) {
    let pins = &query.planning.layout_overrides;
    let mut source = LayoutSource {
        origin: LayoutOrigin::Planner,
        looked_up: cache.is_some(),
        searched_cycles: None,
        searched_trials: None,
        searched_ops: 0,
        pinned_ops: pins.len() as u32,
        pins_over_search: 0,
        pins_skipped_by_when: query.planning.skipped_layout_overrides,
    };
    let Some(plan) = cache.and_then(|cache| searched_plan(cache, query)) else {
        return (query.clone(), source);
    };
    let pinned: BTreeSet<&str> = pins.iter().map(|pin| pin.op.as_str()).collect();
    let searched = plan.layout_overrides();
    let mut merged = pins.clone();
    for choice in &searched {
        if pinned.contains(choice.op.as_str()) {
            source.pins_over_search += 1;
        } else {
            merged.push(choice.clone());
        }
    }
    merged.sort();
    let mut applied = query.clone();
    applied.planning.layout_overrides = merged;
    source.origin = LayoutOrigin::Searched;
    source.searched_cycles = Some(plan.best_cycles);
    source.searched_trials = Some(plan.trials);
    source.searched_ops = searched.len() as u32;
    (applied, source)
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
