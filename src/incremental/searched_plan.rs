//! The searched plan as a query of its configuration. `superstep search`
//! keeps its best plan (a [`SearchOutcome`]) in the persistent cache under
//! [`configuration_key`]; [`searched_plan`] looks that key up for the
//! build, and [`super::lowering::layout_overrides`] lays the user's
//! `[[layout.override]]` pins over it, so the layouts a build plans with
//! are the best plan known for exactly its configuration, else the
//! planner's beam for every op nothing names.
//!
//! The key is the configuration a plan was searched for: the workload
//! (model, batch, layers, weights, FP8 scaling, attention), the machine
//! (tiles, cost table), the planning settings (matrix inputs, activation
//! scale, accumulation, reservation, fusion) and the scheduling settings a
//! search scores every trial with (policy, width, row allowance). Not in
//! it: the build's name and outputs, the cache, whether bounds prune (the
//! same program either way), the layout pins (the plan's own kind of
//! value, laid over it) and the per-phase `[[schedule.override]]` entries
//! (pins on single phases of the program built from the plan). So
//! [`searched_plan`] re-runs when the batch changes and not when a phase's
//! schedule override does, which the event log shows.
//!
//! The plan lives outside the database, in the cache: a session reads it
//! once per revision of what the key depends on, and asks again when told
//! that a search may have kept a new one ([`KeptSearches`]).

use std::hash::Hash;
use std::sync::Arc;

use super::database::Db;
use super::inputs::BuildInputs;
use crate::build_file::{BuildQuery, MachineSettings, PlanningFlags, ScheduleSettings, Workload};
use crate::cache::{CacheKey, EntryKind, PersistentCache};
use crate::incremental::on_disk::Persisted;
use crate::layout::overrides::LayoutOverride;
use crate::layout::search_record::SearchOutcome;

crate::incremental::on_disk::persisted_by_bincode! { SearchOutcome => LayoutSearch }

/// Whether the session looks searched plans up, and how many times it has
/// been told that the cache may hold a new one (a salsa input, so that a
/// kept search reaches a long-lived session such as `watch`'s).
#[salsa::input(singleton, debug)]
pub struct KeptSearches {
    #[returns(copy)]
    pub looked_up: bool,
    #[returns(copy)]
    pub generation: u64,
}

/// The plan a search kept for a configuration: what a build needs of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptPlan {
    /// The plan's layouts, one override per op it sets, sorted.
    pub overrides: Vec<LayoutOverride>,
    /// Its estimate when it was searched.
    pub best_cycles: u64,
    /// The trials the search took.
    pub trials: u32,
}

impl KeptPlan {
    fn of(outcome: &SearchOutcome) -> KeptPlan {
        let mut overrides = outcome.layout_overrides();
        overrides.sort();
        KeptPlan {
            overrides,
            best_cycles: outcome.best_cycles,
            trials: outcome.trials,
        }
    }
}

/// The key a searched plan is kept under, from the parts of a
/// configuration it depends on (see the module header).
fn key_of(
    workload: &Workload,
    machine: &MachineSettings,
    planning: &PlanningFlags,
    schedule: &ScheduleSettings,
) -> CacheKey {
    let mut planning = planning.clone();
    planning.layout_overrides.clear();
    planning.skipped_layout_overrides = 0;
    let mut schedule = schedule.clone();
    schedule.prune_by_bounds = true;
    #[derive(Hash)]
    struct Configuration<'a> {
        workload: &'a Workload,
        machine: &'a MachineSettings,
        planning: &'a PlanningFlags,
        schedule: &'a ScheduleSettings,
    }
    CacheKey::of(
        "searched layouts",
        &Configuration {
            workload,
            machine,
            planning: &planning,
            schedule: &schedule,
        },
    )
}

/// The key a search of `query`'s configuration keeps its plan under.
pub fn configuration_key(query: &BuildQuery) -> CacheKey {
    key_of(
        &query.workload,
        &query.machine,
        &query.planning,
        &query.schedule,
    )
}

/// [`configuration_key`] of the build's inputs: it reads every input but
/// the name, the outputs and the per-phase schedule overrides.
#[salsa::tracked(returns(copy))]
pub fn search_configuration(db: &dyn Db, build: BuildInputs) -> CacheKey {
    let workload = Workload {
        model: build.model(db).clone(),
        batch: build.batch(db),
        fuse_qkv: build.fuse_qkv(db),
        fp8_scale: build.fp8_scale(db),
        attention: build.attention(db),
        weights: build.weights(db).clone(),
    };
    key_of(
        &workload,
        build.machine(db),
        build.planning(db),
        build.schedule(db),
    )
}

/// The plan a search kept in `cache` under `key`, if any. A plan neither on
/// disk nor fetched from a remote tier is not looked up (a build that finds
/// none counts no cache miss for it).
pub fn kept_outcome(cache: &PersistentCache, key: &CacheKey) -> Option<SearchOutcome> {
    if !cache.path(EntryKind::LayoutSearch, key).is_file()
        && !cache.fetches_remotely(EntryKind::LayoutSearch)
    {
        return None;
    }
    // Polled, not loaded: a configuration no search kept a plan for is the
    // usual case, not a miss.
    cache.poll_with(EntryKind::LayoutSearch, key, decode_outcome)
}

/// A kept outcome's payload, decoded (whoever signed it: an outcome is
/// only a plan, which every build checks as it compiles it).
fn decode_outcome(
    payload: &[u8],
    _: crate::cache::Provenance,
) -> Result<SearchOutcome, crate::cache::EntryError> {
    <SearchOutcome as Persisted>::decode(payload).map_err(crate::cache::EntryError::Undecodable)
}

/// The search's query: the plan a search kept for the build's
/// configuration, when the session looks searched plans up and its cache
/// holds one.
#[salsa::tracked(returns(ref))]
pub fn searched_plan(db: &dyn Db, build: BuildInputs) -> Option<Arc<KeptPlan>> {
    let kept = KeptSearches::try_get(db)?;
    // Read on every path: a session told of a new search asks again.
    let _ = kept.generation(db);
    if !kept.looked_up(db) {
        return None;
    }
    let cache = db.cache_for(EntryKind::LayoutSearch)?;
    let key = search_configuration(db, build);
    kept_outcome(cache, &key).map(|outcome| Arc::new(KeptPlan::of(&outcome)))
}

/// The plan `cache` holds for `key` now, as [`searched_plan`] would read
/// it (a session compares the two to learn whether a search kept a new
/// plan since it last asked).
pub fn kept_plan_now(cache: &PersistentCache, key: &CacheKey) -> Option<KeptPlan> {
    kept_outcome(cache, key).map(|outcome| KeptPlan::of(&outcome))
}

/// `pins` over the searched `plan`: every pin, and the plan's choice for
/// each op no pin names, sorted.
pub fn pinned_over(pins: &[LayoutOverride], plan: Option<&KeptPlan>) -> Vec<LayoutOverride> {
    let mut merged = pins.to_vec();
    if let Some(plan) = plan {
        merged.extend(
            plan.overrides
                .iter()
                .filter(|choice| !pins.iter().any(|pin| pin.op == choice.op))
                .cloned(),
        );
    }
    merged.sort();
    merged
}

/// A search's outcome kept in `cache` under `key` (a search's own key: its
/// starting build and settings), loaded as any entry (a miss counts).
pub fn load_outcome(cache: &PersistentCache, key: &CacheKey) -> Option<SearchOutcome> {
    cache.load_with(EntryKind::LayoutSearch, key, decode_outcome)
}

/// Keeps `outcome` in `cache` under `key` (a search's own key, or a
/// configuration's); false when it does not encode.
pub fn store_outcome(cache: &PersistentCache, key: &CacheKey, outcome: &SearchOutcome) -> bool {
    match <SearchOutcome as Persisted>::encode(outcome) {
        Ok(payload) => {
            cache.store_payload(EntryKind::LayoutSearch, key, &payload);
            true
        }
        Err(_) => false,
    }
}

/// Keeps `outcome` as the plan of `query`'s configuration unless a plan
/// kept there already estimates no more cycles (the best known plan
/// stays). Returns whether it was kept.
pub fn keep_searched_plan(
    cache: &PersistentCache,
    query: &BuildQuery,
    outcome: &SearchOutcome,
) -> bool {
    let key = configuration_key(query);
    if kept_outcome(cache, &key).is_some_and(|kept| kept.best_cycles <= outcome.best_cycles) {
        return false;
    }
    store_outcome(cache, &key, outcome)
}
