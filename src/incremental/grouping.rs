//! How `auto` fusion prices a merge (`FusionPricing`, from the memoized
//! schedule figures and lower bounds of exchange problems), and the record
//! of one low program's phase grouping under `auto` fusion:
//! each boundary's verdict (what hazards allowed, what the pricer
//! answered), in boundary order, kept in the persistent cache under the
//! program's digest and the global policy. A warm build whose record a
//! trusted key signed (this user's compiler, which judged it, or a trusted
//! writer's) groups phases by replaying it, instead of judging every
//! boundary's hazards and building the exchange problems of every merge
//! candidate to find their cached figures. A record no trusted key signed
//! is not used: checking it would cost what judging costs.

use std::sync::Arc;

use super::database::Db;
use super::inputs::BuildInputs;
use super::lowering::low_program;
use super::on_disk::{Persisted, cache_on_disk, persisted_by_bincode};
use super::price_memo::{merge_key, price_context};
use super::schedules::{
    EffectivePolicy, PolicyKey, PolicySource, ProblemKey, problem_digest, schedule_figures,
};
use crate::cache::{CacheKey, EntryError, EntryKind, StableHasher};
use crate::expand::program::{LowProgram, TransferList};
use crate::group::{
    BoundaryVerdict, FusionCost, MotionOptions, PhaseGroups, group_phases_replaying,
};
use crate::schedule::{ExchangeProblem, dependencies, phase_bound};
use crate::target::costs::PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES;

/// How `auto` fusion prices a merge: the build's global policy (memoized
/// and persistently cached schedule figures of each list under it) and
/// whether a merge its bound rules out is still scheduled.
#[derive(Clone, Copy)]
pub struct FusionPricing<'db> {
    policy: PolicyKey<'db>,
    prune_by_bounds: bool,
    /// What every price of the program shares, for the price memo
    /// ([`price_context`]).
    context: CacheKey,
}

impl<'db> FusionPricing<'db> {
    /// The pricing of `build` (reads `[schedule]`), for merges of the
    /// program whose [`price_context`] under the build's `[schedule]` is
    /// `context` (computed once per pass: it digests the allocations).
    pub fn of(db: &'db dyn Db, build: BuildInputs, context: CacheKey) -> FusionPricing<'db> {
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
            context,
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

    /// Prices one merge. With pruning on (`schedule.prune_by_bounds`, as
    /// builds run), the merged exchange is tried first against the two
    /// exchanges' lower bounds: a merged horizon below their bounds plus
    /// the barrier saved is below any schedules of theirs plus the barrier,
    /// so the merge pays and they are not scheduled (a list merged into a
    /// phase is never built as a phase of its own). Otherwise the separate
    /// exchanges are scheduled; with their horizons known, a merge whose
    /// lower bound (latency-aware or dependency chain) already reaches
    /// their sum plus the barrier saved cannot pay under any schedule, and
    /// is not scheduled. Either way the verdict is the one scheduling all
    /// three gives. A merge priced before in the same context is answered
    /// from the price memo.
    pub fn price(
        &self,
        db: &'db dyn Db,
        program: &LowProgram,
        first: &TransferList,
        second: &TransferList,
        merged: &TransferList,
        iterations: u32,
    ) -> Option<FusionCost> {
        let key = merge_key(&self.context, first, second, iterations);
        if let Some(known) = db.fusion_prices().get(&key) {
            return known;
        }
        let by_schedules = || {
            let first = ProblemKey::new(db, Arc::new(Self::problem(program, first, iterations)?));
            let second = ProblemKey::new(db, Arc::new(Self::problem(program, second, iterations)?));
            let merged = ProblemKey::new(db, Arc::new(Self::problem(program, merged, iterations)?));
            let merged_bound = u64::from(*problem_bound(db, merged));
            let sync_saved = PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES;
            if self.prune_by_bounds {
                let bounds_sum =
                    u64::from(*problem_bound(db, first)) + u64::from(*problem_bound(db, second));
                let by_bounds = FusionCost {
                    merged_horizon: None,
                    merged_bound,
                    separate_sum: bounds_sum,
                    separate_scheduled: false,
                    sync_saved,
                };
                if by_bounds.may_merge() {
                    let merged_horizon = Some(self.horizon(db, merged)?);
                    let cost = FusionCost {
                        merged_horizon,
                        ..by_bounds
                    };
                    if cost.merges() {
                        return Some(cost);
                    }
                }
            }
            let mut cost = FusionCost {
                merged_horizon: None,
                merged_bound,
                separate_sum: self.horizon(db, first)? + self.horizon(db, second)?,
                separate_scheduled: true,
                sync_saved,
            };
            if cost.may_merge() || !self.prune_by_bounds {
                cost.merged_horizon = Some(self.horizon(db, merged)?);
            }
            Some(cost)
        };
        let price = by_schedules();
        db.fusion_prices().insert(key, price);
        price
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

persisted_by_bincode! { Bound => Bound }

/// Every boundary's verdict, in the order the grouping met them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupingRecord {
    pub verdicts: Vec<BoundaryVerdict>,
}

persisted_by_bincode! { GroupingRecord => Grouping }

/// The digest of a low program's whole content (its steps, allocations and
/// tiles: everything phase grouping and fusion pricing read). Computed
/// only when the database has a persistent cache.
#[salsa::tracked(returns(copy))]
pub fn program_digest(db: &dyn Db, build: BuildInputs) -> Option<CacheKey> {
    let program = low_program(db, build).as_ref().ok()?;
    let mut hasher = StableHasher::for_domain("low program");
    std::hash::Hash::hash(&**program, &mut hasher);
    Some(hasher.digest())
}

/// The cache key of a build's grouping record: its program, the motion
/// options and the pricing settings (global policy, width, storage guard,
/// pruning).
fn record_key(db: &dyn Db, build: BuildInputs, options: MotionOptions) -> Option<CacheKey> {
    let digest = program_digest(db, build)?;
    let schedule = build.schedule(db);
    Some(CacheKey::of(
        "grouping record",
        &(
            digest,
            options,
            schedule.policy,
            schedule.width,
            schedule.row_allowance,
            schedule.prune_by_bounds,
        ),
    ))
}

/// A grouping record as the persistent cache keeps it, and whether a key
/// this reader trusts signed it (only then is it replayed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptRecord {
    pub record: Arc<GroupingRecord>,
    pub trusted: bool,
}

/// The build's grouping record, if the persistent cache keeps one. Loads
/// only; [`group_priced`] stores records.
#[salsa::tracked(returns(ref))]
pub fn kept_grouping_record(db: &dyn Db, build: BuildInputs) -> Option<KeptRecord> {
    let cache = db.cache_for(EntryKind::Grouping)?;
    let key = record_key(db, build, motion_options(db, build))?;
    cache.load_with(GroupingRecord::KIND, &key, |payload, provenance| {
        let record = GroupingRecord::decode(payload).map_err(EntryError::Undecodable)?;
        Ok(KeptRecord {
            record: Arc::new(record),
            trusted: !provenance.needs_check(),
        })
    })
}

/// Whether the persistent cache keeps a record of `build`'s grouping that
/// a trusted key signed (its grouping then prices nothing).
pub fn replays_grouping(db: &dyn Db, build: BuildInputs) -> bool {
    let options = motion_options(db, build);
    let priced = options.copy_motion && options.fusion == crate::group::Fusion::Auto;
    priced
        && kept_grouping_record(db, build)
            .as_ref()
            .is_some_and(|kept| kept.trusted)
}

/// The motion options of `build`'s planning flags.
fn motion_options(db: &dyn Db, build: BuildInputs) -> MotionOptions {
    let planning = build.planning(db);
    MotionOptions {
        copy_motion: planning.copy_motion,
        fusion: planning.fusion,
    }
}

/// Keeps `record` for the next build of the same program and settings.
fn store_record(db: &dyn Db, build: BuildInputs, options: MotionOptions, record: &GroupingRecord) {
    let (Some(cache), Some(key)) = (
        db.cache_for(EntryKind::Grouping),
        record_key(db, build, options),
    ) else {
        return;
    };
    match record.encode() {
        Ok(payload) => cache.store_payload(GroupingRecord::KIND, &key, &payload),
        Err(error) => cache.warn(format!("cache: cannot encode a grouping record: {error}")),
    }
}

/// Groups `program`'s phases under `auto` fusion: replaying the kept
/// record where there is one, judging and pricing live (and then keeping
/// the record) otherwise.
pub fn group_priced(
    db: &dyn Db,
    build: BuildInputs,
    program: &LowProgram,
    options: MotionOptions,
) -> PhaseGroups {
    let kept = kept_grouping_record(db, build).clone();
    let verdicts = match &kept {
        Some(kept) if kept.trusted => &kept.record.verdicts[..],
        _ => &[][..],
    };
    let pricing = FusionPricing::of(db, build, price_context(program, build.schedule(db)));
    let groups = {
        let mut pricer = |first: &TransferList,
                          second: &TransferList,
                          merged: &TransferList,
                          iterations: u32| {
            let cost = pricing.price(db, program, first, second, merged, iterations);
            db.advance_progress(1);
            cost
        };
        // What pricing reads is the record's making: a reader that
        // replays the record never reads it.
        crate::cache::within_computation(|| {
            group_phases_replaying(program, options, Some(&mut pricer), verdicts)
        })
    };
    let record = GroupingRecord {
        verdicts: groups.decisions.iter().map(BoundaryVerdict::from).collect(),
    };
    if kept.as_ref().map(|kept| &*kept.record) != Some(&record) {
        store_record(db, build, options, &record);
    }
    groups
}
