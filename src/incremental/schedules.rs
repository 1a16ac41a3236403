//! The per-problem queries of the back half: an exchange problem interned
//! by content (identical phases are scheduled once), the key of a policy,
//! and the schedule, its figures and its rows of a (problem, policy) pair,
//! read from and written to the persistent cache when the database has
//! one. Nothing here knows phases: `phases` maps phases onto these.

use std::sync::Arc;

use super::database::Db;
use super::on_disk::cache_on_disk;
use crate::build_file::{SchedulePolicy, TransferWidth};
use crate::cache::Refusal;
use crate::cache::{CacheKey, StableHasher};
use crate::rows::{PhaseRows, RowError, check_phase, encode_phase};
use crate::schedule::{
    AutoSettings, ExchangeProblem, ProblemError, Schedule, ScheduleError, ScheduleFigures,
    ValidationError, schedule_with, validate,
};

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

/// An exchange problem, interned by content.
#[salsa::interned(debug)]
pub struct ProblemKey<'db> {
    #[returns(ref)]
    pub problem: Arc<ExchangeProblem>,
}

/// Where a phase's policy comes from; reports write it `default` or
/// `override` (and read the capitalised spelling of older reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicySource {
    /// `schedule.policy` and `schedule.width` of the build.
    #[serde(alias = "Default")]
    Default,
    /// The `[[schedule.override]]` entry for this phase. Keyed by the phase,
    /// not by its position in the list: adding an override for another
    /// phase leaves this one's policy (and so its figures) equal.
    #[serde(alias = "Override")]
    Override,
}

impl PolicySource {
    /// The word reports and tables write.
    pub fn name(self) -> &'static str {
        match self {
            PolicySource::Default => "default",
            PolicySource::Override => "override",
        }
    }
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
#[salsa::tracked(returns(ref), lru = 65536)] // RECORDED_SCHEDULES
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
                return Err(Refusal::Shape(String::from(
                    "its arrays do not fit the problem's pieces, receives and tiles",
                )));
            }
            if !provenance.needs_check() {
                return Ok(());
            }
            validate(content, cached).map_err(|error| Refusal::Checker {
                checker: "schedule validator",
                detail: error.to_string(),
            })
        },
        || {
            let schedule = schedule_with(
                content,
                policy.policy(db),
                policy.width(db),
                &policy.auto_settings(db),
            )?;
            if db.checks_schedules_and_rows() {
                let _span = tracing::debug_span!("validate", pieces = content.pieces()).entered();
                validate(content, &schedule)?;
            }
            Ok(schedule)
        },
    )
    .map(Arc::new)
}

/// How many schedules salsa's LRU records the use of: more than any build
/// reads, so that nothing is evicted but by [`evict_schedules`]. (The
/// attribute on [`scheduled`] repeats it: a macro argument cannot name a
/// constant.)
const RECORDED_SCHEDULES: usize = 65536;

/// Drops the memoized values of all but the `keep` most recently read
/// schedules (their dependencies stay, so a later revision still verifies
/// what read them without scheduling again). A build calls it once its
/// program's schedules are read: fusion pricing's candidates, the largest
/// part of the memo, go. A value asked for again is recomputed, or read
/// from the persistent cache.
pub fn evict_schedules(db: &mut super::CompilerDatabase, keep: usize) {
    use salsa::Database;
    scheduled::set_lru_capacity(db, keep.max(1));
    db.trigger_lru_eviction();
    scheduled::set_lru_capacity(db, RECORDED_SCHEDULES);
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
                .map_err(|error| Refusal::Unverifiable {
                    what: "its schedule",
                    detail: error.to_string(),
                })?;
            check_phase(content, &schedule, cached).map_err(|error| Refusal::Checker {
                checker: "row checker",
                detail: error.to_string(),
            })
        },
        || {
            let result = validated_schedule(db, problem, policy).clone()?;
            let rows = encode_phase(content, &result)?;
            if db.checks_schedules_and_rows() {
                check_phase(content, &result, &rows)?;
            }
            Ok(rows)
        },
    )
    .map(Arc::new)
}
