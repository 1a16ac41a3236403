//! The back half's aggregate queries: the shared row table, Repeat and
//! sharing patch lists, the per-tile reservations (a firewall between rows
//! and placement), placement (also kept in the persistent cache) and the
//! estimate.

use std::collections::HashMap;
use std::sync::Arc;

use super::database::Db;
use super::inputs::BuildInputs;
use super::lowering::{StageError, low_program};
use super::on_disk::{cache_on_disk, check_by_remaking, persisted_by_bincode};
use super::phases::{
    phase_figures, phase_groups, phase_keys, phase_patches, phase_problem, phase_work,
};
use super::schedules::{PhaseError, encoded_rows, phase_cache_key, problem_digest};
use crate::cache::CacheKey;
use crate::cache::Refusal;
use crate::estimate::breakdown::{OpCompute, compute_by_op};
use crate::estimate::compute::StepLoad;
use crate::estimate::profile::{PhaseEntry, ProgramProfile, profile};
use crate::estimate::{Estimate, PhaseCost, compute_step_loads, estimate};
use crate::expand::program::{AllocationId, LowProgram, Step};
use crate::patch::memory::{patch_list_bytes, sharing_patch_cycles};
use crate::place::check::{check_placement, check_reservations};
use crate::place::{Placement, PlacementError, TileReservations, place};
use crate::rows::RowTable;

persisted_by_bincode! {
    RowTable => RowTable,
}

/// A failure of the back half.
#[derive(Debug, Clone, PartialEq, thiserror::Error, salsa::SalsaValue)]
pub enum BackendError {
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Phase(#[from] PhaseError),
    #[error(transparent)]
    Placement(#[from] PlacementError),
}

/// The shared row table of the program's phases. With a persistent cache
/// it is kept as an entry of its own, keyed by every phase's rows (their
/// (problem, policy) key) and allocation map and the tile count, so a warm
/// build reads the table without loading any phase's rows. A table no
/// trusted key signed is checked by building it again from the rows.
#[salsa::tracked(returns(ref))]
pub fn row_table(db: &dyn Db, build: BuildInputs) -> Result<Arc<RowTable>, BackendError> {
    let _span = tracing::debug_span!("row_table").entered();
    // `phase_keys` is empty when the phases cannot be formed: fail with
    // that error here rather than build an empty table.
    phase_groups(db, build).clone()?;
    let tiles = build.machine(db).tiles;
    let mut work = Vec::new();
    for &phase in phase_keys(db, build) {
        let (problem, policy) = phase_work(db, phase)?;
        let allocations = phase_problem(db, phase)
            .as_ref()
            .map_err(Clone::clone)?
            .allocations
            .clone();
        work.push((problem, policy, allocations));
    }
    let made = || -> Result<RowTable, BackendError> {
        let mut rows = Vec::with_capacity(work.len());
        for (problem, policy, _) in &work {
            rows.push(encoded_rows(db, *problem, *policy).clone()?);
        }
        let pairs: Vec<_> = rows
            .iter()
            .zip(&work)
            .map(|(rows, (_, _, allocations))| (rows.as_ref(), allocations.as_slice()))
            .collect();
        Ok(RowTable::build(&pairs, tiles))
    };
    cache_on_disk(
        db,
        || {
            let phases: Vec<(CacheKey, &[AllocationId])> = work
                .iter()
                .map(|(problem, policy, allocations)| {
                    (
                        phase_cache_key(db, *problem, *policy),
                        allocations.as_slice(),
                    )
                })
                .collect();
            Ok(CacheKey::of("row table", &(tiles, phases)))
        },
        |cached: &RowTable, provenance| {
            cached.fits(work.len(), tiles)?;
            if !provenance.needs_check() {
                return Ok(());
            }
            check_by_remaking(cached, made, "row table", "the phases' checked rows")
        },
        made,
    )
    .map(Arc::new)
}

/// Notes every phase's rows as needed by this build in the persistent
/// cache's build index (see `PersistentCache::note_needed`), whether or
/// not this run loaded them.
pub fn note_rows_needed(db: &dyn Db, build: BuildInputs) {
    let Some(cache) = db.cache_for(crate::cache::EntryKind::Rows) else {
        return;
    };
    for &phase in phase_keys(db, build) {
        if let Ok((problem, policy)) = phase_work(db, phase) {
            cache.note_needed(
                crate::cache::EntryKind::Rows,
                &phase_cache_key(db, problem, policy),
            );
        }
    }
}

/// Firewall between rows and placement: what each tile reserves.
#[salsa::tracked(returns(ref))]
pub fn tile_reservations(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<TileReservations>, BackendError> {
    let table = row_table(db, build).clone()?;
    let repeat = phase_keys(db, build)
        .iter()
        .map(|&phase| phase_patches(db, phase).clone())
        .collect::<Result<Vec<_>, _>>()?;
    let patch_bytes = patch_list_bytes(
        build.machine(db).tiles,
        repeat.iter().map(|patches| patches.as_ref()),
        &table.sharing_patches,
    );
    Ok(Arc::new(TileReservations::sized(
        &table.bytes_per_tile,
        &patch_bytes,
    )))
}

/// A digest of `steps`, in order: each step digested on its own (a Repeat
/// as its iteration count and its body's digest), in parallel, and the
/// digests combined. An exchange step whose digest `exchanges` holds (by
/// step path) is digested as that; any other step by its content.
fn steps_digest(steps: &[Step], path: &[u32], exchanges: &HashMap<&[u32], CacheKey>) -> CacheKey {
    use rayon::prelude::*;
    let digests: Vec<CacheKey> = steps
        .par_iter()
        .enumerate()
        .map(|(index, step)| {
            let mut step_path = path.to_vec();
            step_path.push(index as u32);
            match step {
                Step::Repeat { iterations, body } => CacheKey::of(
                    "placement repeat",
                    &(*iterations, steps_digest(body, &step_path, exchanges)),
                ),
                Step::Exchange { provenance, .. } => match exchanges.get(step_path.as_slice()) {
                    Some(digest) => CacheKey::of("placement exchange", &(provenance, digest)),
                    None => CacheKey::of("placement step", step),
                },
                other => CacheKey::of("placement step", other),
            }
        })
        .collect();
    CacheKey::of("placement steps", &digests)
}

/// The persistent-cache key of the placement: a digest of exactly what
/// placement reads (the program's tiles, names and allocations, the grouped
/// steps and the per-tile reservations), so no input can move the
/// placement without moving the key.
///
/// An exchange step (the bulk of the program) is digested as its phase's
/// problem digest (memoized: the phase caches compute it anyway) with the
/// phase's local-to-global allocation map. The problem keeps every piece's
/// tiles, allocations, offsets and words, so together they fix every byte
/// range the exchange reads and writes, which is all placement reads of
/// it; pieces cut or joined from the same bytes move nothing placement
/// sees. The steps and the rest are digested in parallel.
#[salsa::tracked(returns(ref))]
pub fn placement_key(db: &dyn Db, build: BuildInputs) -> Result<CacheKey, BackendError> {
    let reservations = tile_reservations(db, build).clone()?;
    let program = low_program(db, build).clone()?;
    let groups = phase_groups(db, build).clone()?;
    let mut exchanges: HashMap<&[u32], CacheKey> = HashMap::new();
    for (&phase, record) in phase_keys(db, build).iter().zip(&groups.phases) {
        let problem = phase_problem(db, phase).as_ref().map_err(Clone::clone)?;
        let digest = problem_digest(db, problem.problem);
        exchanges.insert(
            record.step_path.as_slice(),
            CacheKey::of("placement phase", &(digest, &problem.allocations)),
        );
    }
    let (steps, rest) = rayon::join(
        || steps_digest(&groups.steps, &[], &exchanges),
        || {
            use rayon::prelude::*;
            let allocations: Vec<CacheKey> = program
                .allocations
                .par_chunks(4096)
                .map(|chunk| CacheKey::of("placement allocations", chunk))
                .collect();
            CacheKey::of(
                "placement program",
                &(
                    program.tiles,
                    &program.names,
                    allocations,
                    reservations.as_ref(),
                ),
            )
        },
    );
    Ok(CacheKey::of("placement", &(steps, rest)))
}

#[salsa::tracked(returns(ref))]
pub fn placement(db: &dyn Db, build: BuildInputs) -> Result<Arc<Placement>, BackendError> {
    let _span = tracing::debug_span!("placement").entered();
    cache_on_disk(
        db,
        || placement_key(db, build).clone(),
        |placed, provenance| {
            let program = low_program(db, build)
                .clone()
                .map_err(unverifiable("the program"))?;
            let groups = phase_groups(db, build)
                .clone()
                .map_err(unverifiable("the phase groups"))?;
            let reservations = tile_reservations(db, build)
                .clone()
                .map_err(unverifiable("the tile reservations"))?;
            check_cached_placement(
                &program,
                &groups.steps,
                &reservations,
                placed,
                provenance.needs_check(),
            )
        },
        || {
            let reservations = tile_reservations(db, build).clone()?;
            let program = low_program(db, build).clone()?;
            let groups = phase_groups(db, build).clone()?;
            Ok(place(&program, &groups.steps, &reservations)?)
        },
    )
    .map(Arc::new)
}

/// A refusal because `what`, which a cached value is checked against,
/// could not be made.
fn unverifiable<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Refusal {
    move |error| Refusal::Unverifiable {
        what,
        detail: error.to_string(),
    }
}

/// A cached placement's check (local or remote): its tables fit the
/// program's allocations and tiles, and (unless a trusted key signed it,
/// `for_meaning` false) the placement checker (independent of the placer)
/// finds no violation, in the data or in the reservations' layout.
fn check_cached_placement(
    program: &LowProgram,
    steps: &[Step],
    reservations: &TileReservations,
    placed: &Placement,
    for_meaning: bool,
) -> Result<(), Refusal> {
    let allocations = program.allocations.len();
    let tiles = program.tiles as usize;
    if placed.base.len() != allocations
        || placed.live.len() != allocations
        || placed.exchange_table_base.len() != tiles
        || placed.patch_lists_base.len() != tiles
        || placed.reserved_end.len() != tiles
        || placed.peak_bytes_per_tile.len() != tiles
        || placed.high_water_per_tile.len() != tiles
    {
        return Err(Refusal::Shape(format!(
            "its tables do not fit a program of {allocations} allocations on {tiles} tiles"
        )));
    }
    if !for_meaning {
        return Ok(());
    }
    let mut violations = check_reservations(placed, reservations);
    if violations.is_empty() {
        violations = check_placement(program, steps, placed);
    }
    match violations.first() {
        None => Ok(()),
        Some(violation) => Err(Refusal::Checker {
            checker: "placement checker",
            detail: violation.to_string(),
        }),
    }
}

/// What each phase costs per execution (horizon; Repeat and sharing
/// patching), by phase index.
#[salsa::tracked(returns(ref))]
pub fn phase_costs(db: &dyn Db, build: BuildInputs) -> Result<Arc<Vec<PhaseCost>>, BackendError> {
    let table = row_table(db, build).clone()?;
    let keys = phase_keys(db, build);
    let sharing = sharing_patch_cycles(&table.sharing_patches, keys.len());
    let mut costs = Vec::with_capacity(keys.len());
    for (index, &phase) in keys.iter().enumerate() {
        let figures = phase_figures(db, phase).clone()?;
        let patches = phase_patches(db, phase).clone()?;
        costs.push(PhaseCost {
            horizon: figures.horizon as u64,
            patch_cycles: patches.cycles() + sharing[index],
        });
    }
    Ok(Arc::new(costs))
}

#[salsa::tracked(returns(ref))]
pub fn build_estimate(db: &dyn Db, build: BuildInputs) -> Result<Arc<Estimate>, BackendError> {
    let groups = phase_groups(db, build).clone()?;
    let costs = phase_costs(db, build).clone()?;
    let costs_by_path: HashMap<&[u32], PhaseCost> = groups
        .phases
        .iter()
        .zip(costs.iter())
        .map(|(record, &cost)| (record.step_path.as_slice(), cost))
        .collect();
    let compute = compute_costs(db, build).clone()?;
    let lookup = |path: &[u32]| {
        // Every exchange step is a phase with a cost (`phase_costs` walks
        // the same groups): a missing one is a broken invariant.
        let cost = costs_by_path.get(path).copied();
        debug_assert!(cost.is_some(), "no phase cost for step {path:?}");
        cost
    };
    let compute_lookup = |path: &[u32], _: &Step| {
        // Every compute step has a cost (`compute_costs` walks the same
        // steps): a missing one is a broken invariant, not 0 cycles.
        let cost = compute.get(path).copied();
        debug_assert!(cost.is_some(), "no compute cost for step {path:?}");
        cost.unwrap_or(0)
    };
    Ok(Arc::new(estimate(&groups.steps, &compute_lookup, &lookup)))
}

/// The load of every compute step (depends on the program only, so
/// schedule edits never recompute it).
#[salsa::tracked(returns(ref))]
pub fn compute_loads(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<HashMap<Vec<u32>, StepLoad>>, BackendError> {
    let groups = phase_groups(db, build).clone()?;
    Ok(Arc::new(compute_step_loads(
        &groups.steps,
        build.machine(db).tiles,
        &build.machine(db).cost_table,
    )))
}

/// Cycles of every compute step (its busiest tile).
#[salsa::tracked(returns(ref))]
pub fn compute_costs(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<HashMap<Vec<u32>, u64>>, BackendError> {
    let loads = compute_loads(db, build).clone()?;
    Ok(Arc::new(
        loads
            .iter()
            .map(|(path, load)| (path.clone(), load.cycles))
            .collect(),
    ))
}

/// The program's modelled profile: every phase and compute step in
/// program order with the cycles the estimate charges it, and the timeline.
#[salsa::tracked(returns(ref))]
pub fn program_profile(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<ProgramProfile>, BackendError> {
    let groups = phase_groups(db, build).clone()?;
    let program = low_program(db, build).clone()?;
    let costs = phase_costs(db, build).clone()?;
    let loads = compute_loads(db, build).clone()?;
    let phases: HashMap<Vec<u32>, PhaseEntry<'_>> = groups
        .phases
        .iter()
        .zip(costs.iter())
        .enumerate()
        .map(|(index, (record, &cost))| {
            (
                record.step_path.clone(),
                PhaseEntry {
                    index,
                    key: record.key.as_str(),
                    cost,
                },
            )
        })
        .collect();
    Ok(Arc::new(profile(
        &groups.steps,
        &program.names,
        &phases,
        &loads,
        build.machine(db).tiles,
    )))
}

/// Compute cycles, matrix-unit MACs and roofline per op, from the same step
/// costs the estimate adds up.
#[salsa::tracked(returns(ref))]
pub fn compute_breakdown(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<Vec<OpCompute>>, BackendError> {
    let groups = phase_groups(db, build).clone()?;
    let program = low_program(db, build).clone()?;
    let step_cycles = compute_costs(db, build).clone()?;
    Ok(Arc::new(compute_by_op(
        &groups.steps,
        &program.names,
        &step_cycles,
        build.machine(db).tiles,
    )))
}
