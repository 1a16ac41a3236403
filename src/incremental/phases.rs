//! The back half's per-phase queries: phase groups, each phase's exchange
//! problem (interned by content, so identical phases are scheduled once),
//! its effective policy (a firewall out of the override list), and the
//! schedule and rows of a (problem, policy) pair, read from and written to
//! the persistent cache when the database has one.
//!
//! Phases are identified by their stable key (`op#ordinal`), never by
//! position.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::database::Db;
use super::inputs::BuildInputs;
use super::lowering::{StageError, low_program};
use super::on_disk::cache_on_disk;
use crate::build_file::{SchedulePolicy, TransferWidth};
use crate::cache::{CacheKey, StableHasher};
use crate::expand::program::{AllocationId, LowProgram, Step, TransferList};
use crate::group::{
    ExchangePhase, Fusion, FusionCost, MotionOptions, PhaseGroups, group_phases_priced,
    group_phases_with,
};
use crate::patch::{PhasePatches, repeat_patches};
use crate::rows::{PhaseRows, RowError, check_phase, encode_phase};
pub use crate::schedule::ScheduleFigures;
use crate::schedule::{
    AutoSettings, CandidateOutcome, ExchangeProblem, ProblemError, Schedule, ScheduleError,
    ValidationError, dependencies, phase_bound, schedule_with, validate,
};
use crate::target::costs::PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES;

/// A phase-level failure (a bug in a stage, caught by its checker).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, salsa::SalsaValue)]
pub enum PhaseError {
    #[error("phase `{phase}`: {source}")]
    Problem { phase: String, source: ProblemError },
    #[error("scheduling: {0}")]
    Schedule(#[from] ScheduleError),
    #[error("the schedule fails validation: {0}")]
    Validation(#[from] ValidationError),
    #[error("rows: {0}")]
    Rows(#[from] RowError),
    #[error("phase `{0}` is not in the program")]
    Missing(String),
    #[error("{0}")]
    Stage(String),
}

/// The phase groups under `planning.copy_motion` and `planning.fusion`.
/// Under `auto` each cross-operator merge hazards allow is priced with the
/// memoized (and persistently cached) schedule figures of the two exchange
/// problems and of their merge, under the build's global policy; only then
/// does this query read `[schedule]`.
#[salsa::tracked(returns(ref))]
pub fn phase_groups(db: &dyn Db, build: BuildInputs) -> Result<Arc<PhaseGroups>, StageError> {
    let program = low_program(db, build).clone()?;
    let planning = build.planning(db);
    let options = MotionOptions {
        copy_motion: planning.copy_motion,
        fusion: planning.fusion,
    };
    if options.fusion != Fusion::Auto || !options.copy_motion {
        return Ok(Arc::new(group_phases_with(&program, options)));
    }
    let pricing = FusionPricing::of(db, build);
    let mut pricer =
        |first: &TransferList, second: &TransferList, merged: &TransferList, iterations: u32| {
            let cost = pricing.price(db, &program, first, second, merged, iterations);
            db.advance_progress(1);
            cost
        };
    Ok(Arc::new(group_phases_priced(
        &program,
        options,
        Some(&mut pricer),
    )))
}

/// How `auto` fusion prices a merge: the build's global policy (memoized
/// and persistently cached schedule figures of each list under it) and
/// whether a merge its bound rules out is still scheduled.
#[derive(Clone, Copy)]
pub struct FusionPricing<'db> {
    policy: PolicyKey<'db>,
    prune_by_bounds: bool,
}

impl<'db> FusionPricing<'db> {
    /// The pricing of `build` (reads `[schedule]`).
    pub fn of(db: &'db dyn Db, build: BuildInputs) -> FusionPricing<'db> {
        let schedule = build.schedule(db);
        let policy = PolicyKey::of(
            db,
            &EffectivePolicy::new(
                schedule.policy,
                schedule.width,
                schedule.row_allowance,
                PolicySource::Default,
            ),
        );
        FusionPricing {
            policy,
            prune_by_bounds: schedule.prune_by_bounds,
        }
    }

    fn problem(
        program: &LowProgram,
        transfers: &TransferList,
        iterations: u32,
    ) -> Option<ExchangeProblem> {
        ExchangeProblem::with_origin(transfers, &program.allocations, iterations, program.tiles)
            .ok()
            .map(|(problem, _)| problem)
    }

    fn horizon(&self, db: &'db dyn Db, problem: ProblemKey<'db>) -> Option<u64> {
        let figures = schedule_figures(db, problem, self.policy).as_ref().ok()?;
        Some(u64::from(figures.horizon))
    }

    /// The scheduled horizon of one transfer list (`None`: it cannot be
    /// scheduled, and the merge is not taken).
    pub fn list_horizon(
        &self,
        db: &'db dyn Db,
        program: &LowProgram,
        transfers: &TransferList,
        iterations: u32,
    ) -> Option<u64> {
        let problem = ProblemKey::new(db, Arc::new(Self::problem(program, transfers, iterations)?));
        self.horizon(db, problem)
    }

    /// Prices one merge: the separate exchanges first; with their horizons
    /// known, a merge whose lower bound (latency-aware or dependency chain)
    /// already reaches their sum
    /// plus the barrier saved cannot pay under any schedule, and is not
    /// scheduled (unless `schedule.prune_by_bounds` is off).
    pub fn price(
        &self,
        db: &'db dyn Db,
        program: &LowProgram,
        first: &TransferList,
        second: &TransferList,
        merged: &TransferList,
        iterations: u32,
    ) -> Option<FusionCost> {
        let separate_sum = self.list_horizon(db, program, first, iterations)?
            + self.list_horizon(db, program, second, iterations)?;
        let merged = ProblemKey::new(db, Arc::new(Self::problem(program, merged, iterations)?));
        let mut cost = FusionCost {
            merged_horizon: None,
            merged_bound: u64::from(*problem_bound(db, merged)),
            separate_sum,
            sync_saved: PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES,
        };
        if cost.may_merge() || !self.prune_by_bounds {
            cost.merged_horizon = Some(self.horizon(db, merged)?);
        }
        Some(cost)
    }
}

/// The larger of a problem's latency-aware and dependency bounds: no
/// schedule of it is shorter. Kept in the persistent cache, since a warm
/// build would otherwise build every merged problem's dependency DAG again
/// only to find its figures cached.
#[salsa::tracked(returns(ref))]
pub fn problem_bound<'db>(db: &'db dyn Db, problem: ProblemKey<'db>) -> u32 {
    let content = problem.problem(db);
    let Bound(bound) = cache_on_disk(
        db,
        || {
            Ok::<_, std::convert::Infallible>(CacheKey::of(
                "problem bound",
                &problem_digest(db, problem),
            ))
        },
        |_, _| Ok(()),
        || Ok(Bound(phase_bound(content, &dependencies(content)))),
    )
    .unwrap_or_else(|never| match never {});
    bound
}

/// A problem's lower bound, as the persistent cache stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Bound(pub u32);

super::on_disk::persisted_by_bincode! { Bound => Bound }

/// An exchange phase, identified by its key.
#[salsa::interned(debug)]
pub struct PhaseKey<'db> {
    #[returns(copy)]
    pub build: BuildInputs,
    #[returns(ref)]
    pub key: String,
}

/// The keys of every phase, in program order. Empty when the phase groups
/// cannot be formed: every aggregate over the keys (`row_table`, and through
/// it reservations, placement and the estimate) reads `phase_groups` first
/// and fails with its error instead of working on no phases.
#[salsa::tracked(returns(ref))]
pub fn phase_keys<'db>(db: &'db dyn Db, build: BuildInputs) -> Vec<PhaseKey<'db>> {
    match phase_groups(db, build) {
        Ok(groups) => groups
            .phases
            .iter()
            .map(|phase| PhaseKey::new(db, build, phase.key.clone()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Each phase's position by key, built once per phase groups (so locating
/// every phase is linear, not quadratic).
#[salsa::tracked(returns(ref))]
pub fn phase_positions(db: &dyn Db, build: BuildInputs) -> Arc<BTreeMap<String, u32>> {
    Arc::new(match phase_groups(db, build) {
        Ok(groups) => groups
            .phases
            .iter()
            .enumerate()
            .map(|(position, phase)| (phase.key.clone(), position as u32))
            .collect(),
        Err(_) => BTreeMap::new(),
    })
}

/// The phase record at `position` and its transfer list (and Repeat iterations).
pub fn locate_phase(
    groups: &PhaseGroups,
    position: u32,
) -> Option<(&ExchangePhase, &TransferList, u32)> {
    let phase = groups.phases.get(position as usize)?;
    let mut steps = &groups.steps;
    let mut iterations = 1;
    for (depth, &index) in phase.step_path.iter().enumerate() {
        match steps.get(index as usize)? {
            Step::Repeat {
                iterations: count,
                body,
            } if depth + 1 < phase.step_path.len() => {
                iterations = *count;
                steps = body;
            }
            Step::Exchange { transfers, .. } if depth + 1 == phase.step_path.len() => {
                return Some((phase, transfers, iterations));
            }
            _ => return None,
        }
    }
    None
}

/// An exchange problem, interned by content.
#[salsa::interned(debug)]
pub struct ProblemKey<'db> {
    #[returns(ref)]
    pub problem: Arc<ExchangeProblem>,
}

/// A phase's problem plus what maps it back to the program.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct PhaseProblem<'db> {
    pub problem: ProblemKey<'db>,
    /// Global allocation of each of the problem's local allocations.
    pub allocations: Vec<AllocationId>,
    pub executions: u32,
    pub in_repeat: bool,
    pub merged_from: Vec<String>,
}

#[salsa::tracked(returns(ref))]
pub fn phase_problem<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<PhaseProblem<'db>, PhaseError> {
    let build = phase.build(db);
    let groups = phase_groups(db, build)
        .as_ref()
        .map_err(|error| PhaseError::Stage(error.to_string()))?;
    let program = low_program(db, build)
        .as_ref()
        .map_err(|error| PhaseError::Stage(error.to_string()))?;
    let key = phase.key(db);
    let (record, transfers, iterations) = phase_positions(db, build)
        .get(key)
        .and_then(|&position| locate_phase(groups, position))
        .ok_or_else(|| PhaseError::Missing(key.clone()))?;
    let (problem, origin) =
        ExchangeProblem::with_origin(transfers, &program.allocations, iterations, program.tiles)
            .map_err(|source| PhaseError::Problem {
                phase: key.clone(),
                source,
            })?;
    Ok(PhaseProblem {
        problem: ProblemKey::new(db, Arc::new(problem)),
        allocations: origin.allocations,
        executions: record.executions,
        in_repeat: record.in_repeat,
        merged_from: record.merged_from.clone(),
    })
}

/// Where a phase's policy comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum PolicySource {
    /// `schedule.policy` and `schedule.width` of the build.
    Default,
    /// The `[[schedule.override]]` entry for this phase. Keyed by the phase,
    /// not by its position in the list: adding an override for another
    /// phase leaves this one's policy (and so its figures) equal.
    Override,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EffectivePolicy {
    pub policy: SchedulePolicy,
    pub width: TransferWidth,
    /// `auto`'s storage guard (`schedule.row_allowance`), in bytes.
    pub row_allowance: u32,
    pub source: PolicySource,
}

impl EffectivePolicy {
    /// The one constructor: a policy and width under the build's storage
    /// guard, and where it came from.
    pub fn new(
        policy: SchedulePolicy,
        width: TransferWidth,
        row_allowance: u32,
        source: PolicySource,
    ) -> EffectivePolicy {
        EffectivePolicy {
            policy,
            width,
            row_allowance,
            source,
        }
    }

    /// A configuration tried in place of the build's own (sweep points,
    /// suggestion alternatives, packing studies).
    pub fn overriding(
        policy: SchedulePolicy,
        width: TransferWidth,
        row_allowance: u32,
    ) -> EffectivePolicy {
        EffectivePolicy::new(policy, width, row_allowance, PolicySource::Override)
    }
}

/// Firewall: the policy of one phase, out of the build's override list.
#[salsa::tracked(returns(ref))]
pub fn phase_policy<'db>(db: &'db dyn Db, phase: PhaseKey<'db>) -> EffectivePolicy {
    let build = phase.build(db);
    let schedule = build.schedule(db);
    let key = phase.key(db);
    match build.overrides(db).iter().find(|entry| &entry.phase == key) {
        Some(entry) => EffectivePolicy::new(
            entry.policy,
            entry.width.unwrap_or(schedule.width),
            schedule.row_allowance,
            PolicySource::Override,
        ),
        None => EffectivePolicy::new(
            schedule.policy,
            schedule.width,
            schedule.row_allowance,
            PolicySource::Default,
        ),
    }
}

#[salsa::interned(debug)]
pub struct PolicyKey<'db> {
    #[returns(copy)]
    pub policy: SchedulePolicy,
    #[returns(copy)]
    pub width: TransferWidth,
    /// `auto`'s storage guard in bytes (0 for every other policy, so that
    /// changing it re-runs only `auto` phases).
    #[returns(copy)]
    pub row_allowance: u32,
}

impl<'db> PolicyKey<'db> {
    /// The key of a phase's effective policy.
    pub fn of(db: &'db dyn Db, effective: &EffectivePolicy) -> Self {
        let row_allowance = if effective.policy == SchedulePolicy::Auto {
            effective.row_allowance
        } else {
            0
        };
        PolicyKey::new(db, effective.policy, effective.width, row_allowance)
    }

    /// The key of a configuration tried in place of the build's own.
    pub fn from_config(
        db: &'db dyn Db,
        policy: SchedulePolicy,
        width: TransferWidth,
        row_allowance: u32,
    ) -> Self {
        PolicyKey::of(
            db,
            &EffectivePolicy::overriding(policy, width, row_allowance),
        )
    }

    /// The settings of the `auto` policy this key carries.
    pub fn auto_settings(self, db: &'db dyn Db) -> AutoSettings {
        AutoSettings {
            row_allowance_bytes: self.row_allowance(db),
            ..AutoSettings::default()
        }
    }
}

/// The schedule of a problem under a policy (shared by every phase with
/// the same content), proved by the schedule validator (independent of the
/// scheduler) whether the scheduler made it or a cache held it, before
/// anything (fusion pricing, auto's choice, figures, rows) reads it. A
/// cached schedule that fails is a miss with a warning, recomputed; one a
/// trusted key signed (this user's compiler, which validated it, or a
/// trusted writer's) is checked for shape only.
#[salsa::tracked(returns(ref))]
pub fn scheduled<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<Arc<Schedule>, PhaseError> {
    let _span = tracing::debug_span!(
        "schedule",
        policy = %policy.policy(db),
        width = ?policy.width(db),
        pieces = problem.problem(db).pieces()
    )
    .entered();
    let content = problem.problem(db);
    cache_on_disk(
        db,
        || Ok(phase_cache_key(db, problem, policy)),
        |cached, provenance| {
            if !schedule_fits(content, cached) {
                return Err(String::from(
                    "its arrays do not fit the problem's pieces, receives and tiles",
                ));
            }
            if !provenance.needs_check() {
                return Ok(());
            }
            validate(content, cached)
                .map_err(|error| format!("the schedule validator refuses it: {error}"))
        },
        || {
            let schedule = schedule_with(
                content,
                policy.policy(db),
                policy.width(db),
                &policy.auto_settings(db),
            )?;
            let _span = tracing::debug_span!("validate", pieces = content.pieces()).entered();
            validate(content, &schedule)?;
            Ok(schedule)
        },
    )
    .map(Arc::new)
}

/// [`scheduled`] as the program uses it: what rows are encoded from and
/// reports show (its own query, so that the event log says which
/// schedules the program took).
#[salsa::tracked(returns(ref))]
pub fn validated_schedule<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<Arc<Schedule>, PhaseError> {
    scheduled(db, problem, policy).clone()
}

/// The digest of a problem's content (computed once per problem, and only
/// when the database has a persistent cache).
#[salsa::tracked(returns(copy))]
pub fn problem_digest<'db>(db: &'db dyn Db, problem: ProblemKey<'db>) -> CacheKey {
    let mut hasher = StableHasher::for_domain("exchange problem");
    problem.problem(db).write_content(&mut hasher);
    hasher.digest()
}

/// The persistent cache's key of a (problem, policy) pair's results.
pub fn phase_cache_key<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
) -> CacheKey {
    CacheKey::of(
        "phase results",
        &(
            problem_digest(db, problem),
            policy.policy(db),
            policy.width(db),
            policy.row_allowance(db),
        ),
    )
}

/// A cached schedule must at least have the problem's shape before anything
/// reads it (the entry is digest-checked; the validator checks its content
/// when the program uses it).
fn schedule_fits(problem: &ExchangeProblem, schedule: &Schedule) -> bool {
    schedule.send_start.len() == problem.pieces()
        && schedule.paired.len() == problem.pieces()
        && schedule.select.len() == problem.receives()
        && schedule.payload_start.len() == problem.receives()
        && schedule.pointer_write.len() == problem.receives()
        && schedule.deselect.len() == problem.receives()
        && schedule.tile_end.len() == problem.tiles as usize
}

/// The figures of a (problem, policy) pair's schedule. With a persistent
/// cache they are served from a small entry of their own, so a warm build
/// never loads the full schedule.
#[salsa::tracked(returns(ref))]
pub fn schedule_figures<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<ScheduleFigures, PhaseError> {
    cache_on_disk(
        db,
        || Ok(phase_cache_key(db, problem, policy)),
        |_, _| Ok(()),
        || {
            let result = scheduled(db, problem, policy).clone()?;
            Ok(ScheduleFigures::of(&result))
        },
    )
}

/// The encoded (and checked) rows of a scheduled problem. A persistent
/// cache hit skips the encoder, not the check: cached rows are decoded and
/// compared with the validated schedule's events like fresh ones, so a
/// rewritten entry is a miss with a warning, never a package. Rows a
/// trusted key signed (checked by the compiler that signed them) are
/// checked for shape only, so no schedule is loaded for them.
#[salsa::tracked(returns(ref))]
pub fn encoded_rows<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<Arc<PhaseRows>, PhaseError> {
    let _span = tracing::debug_span!("rows", policy = %policy.policy(db)).entered();
    let content = problem.problem(db);
    cache_on_disk(
        db,
        || Ok(phase_cache_key(db, problem, policy)),
        |cached: &PhaseRows, provenance| {
            // Shape first (the checker indexes by it), then meaning: the
            // rows must decode to exactly the events of the phase's
            // validated schedule, as freshly encoded rows are checked,
            // unless a trusted key signed them.
            cached.fits(content)?;
            if !provenance.needs_check() {
                return Ok(());
            }
            let schedule = validated_schedule(db, problem, policy)
                .clone()
                .map_err(|error| format!("its schedule: {error}"))?;
            check_phase(content, &schedule, cached)
                .map_err(|error| format!("the row checker refused it: {error}"))
        },
        || {
            let result = validated_schedule(db, problem, policy).clone()?;
            let rows = encode_phase(content, &result)?;
            check_phase(content, &result, &rows)?;
            Ok(rows)
        },
    )
    .map(Arc::new)
}

/// The (problem, policy) pair of a phase.
pub fn phase_work<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<(ProblemKey<'db>, PolicyKey<'db>), PhaseError> {
    let problem = phase_problem(db, phase)
        .as_ref()
        .map_err(Clone::clone)?
        .problem;
    let policy = phase_policy(db, phase);
    Ok((problem, PolicyKey::of(db, policy)))
}

/// One phase's figures for reports (a firewall over schedule and rows).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PhaseFigures {
    pub key: String,
    pub merged_from: Vec<String>,
    pub executions: u32,
    pub in_repeat: bool,
    pub policy: String,
    pub policy_source: PolicySource,
    /// The concrete policy that made the schedule (`auto`'s winner).
    pub chosen: String,
    pub width: String,
    pub transfers: u64,
    pub destinations: u64,
    pub horizon: u32,
    /// The endpoint bound: max events one tile sends or receives (a piece
    /// that may pair at half its words; `crate::schedule::Schedule`).
    pub lower_bound: u32,
    /// The latency-aware bound (`crate::schedule::bound`).
    pub latency_bound: u32,
    pub max_row_bytes: u64,
    pub total_row_bytes: u64,
    /// Repeat patch words over all tiles.
    pub patch_words: u64,
    /// Under `auto`: every candidate tried and which won.
    pub candidates: Vec<CandidateOutcome>,
}

#[salsa::tracked(returns(ref))]
pub fn phase_figures<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<PhaseFigures, PhaseError> {
    let record = phase_problem(db, phase).as_ref().map_err(Clone::clone)?;
    let (problem, policy) = phase_work(db, phase)?;
    let schedule = schedule_figures(db, problem, policy).clone()?;
    let rows = encoded_rows(db, problem, policy).clone()?;
    let effective = phase_policy(db, phase);
    let content = problem.problem(db);
    Ok(PhaseFigures {
        key: phase.key(db).clone(),
        merged_from: record.merged_from.clone(),
        executions: record.executions,
        in_repeat: record.in_repeat,
        policy: effective.policy.to_string(),
        policy_source: effective.source.clone(),
        chosen: schedule.chosen.to_string(),
        width: format!("{:?}", schedule.width),
        transfers: content.pieces() as u64,
        destinations: content.receives() as u64,
        horizon: schedule.horizon,
        lower_bound: schedule.lower_bound,
        latency_bound: schedule.latency_bound,
        max_row_bytes: rows.max_bytes(),
        total_row_bytes: rows.total_bytes(),
        patch_words: phase_patches(db, phase).clone()?.words(),
        candidates: schedule.candidates,
    })
}

/// Repeat patch lists of one phase.
#[salsa::tracked(returns(ref))]
pub fn phase_patches<'db>(
    db: &'db dyn Db,
    phase: PhaseKey<'db>,
) -> Result<Arc<PhasePatches>, PhaseError> {
    let (problem, policy) = phase_work(db, phase)?;
    let rows = encoded_rows(db, problem, policy).clone()?;
    let base_selection = repeat_base(db, phase.build(db));
    Ok(Arc::new(repeat_patches(
        problem.problem(db),
        &rows,
        base_selection,
    )))
}

/// Firewall: whether Repeat patches may use a moving base register
/// (`planning.repeat_base`), out of the planning flags.
#[salsa::tracked(returns(copy))]
pub fn repeat_base(db: &dyn Db, build: BuildInputs) -> bool {
    build.planning(db).repeat_base
}
