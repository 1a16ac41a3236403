//! Fusion pricing ahead of phase grouping. `auto` fusion prices its
//! cross-operator merges greedily, one boundary after another, because a
//! merge changes what the next boundary compares; but that dependence runs
//! only along a chain of boundaries (each one's preceding exchange is the
//! previous one's following exchange), and chains are independent of one
//! another. [`warm_fusion_pricing`] walks every chain's greedy decisions
//! with the same pricing code the `phase_groups` query runs, chains spread
//! over the machine's cores (one database clone per thread, from the top
//! level, as `fan_out` requires), largest first; the query then finds every
//! price in salsa's memo. The program is the same either way: only when and
//! where the work happens changes.

use std::sync::{Arc, Weak};

use salsa::Database;

use super::fan_out::fan_out;
use super::progress::Progress;
use crate::build_file::ScheduleSettings;
use crate::cache::CacheKey;
use crate::expand::program::LowProgram;
use crate::group::{Fusion, FusionChain, fusion_chains, merged_transfers};
use crate::incremental::grouping::FusionPricing;
use crate::incremental::price_memo::price_context;
use crate::incremental::{BuildInputs, CompilerDatabase};

/// What one warming of fusion pricing read: the low program (by identity:
/// salsa hands out the same `Arc` while its memo stands) and the settings
/// pricing depends on. A build whose `Warmed` equals the last one's skips
/// the warming (a no-op rebuild, or an edit that leaves the program and
/// the global policy alone); anything else warms again, which is never
/// wrong, only work.
#[derive(Clone, Debug)]
pub struct Warmed {
    program: Weak<LowProgram>,
    schedule: ScheduleSettings,
    fusion: Fusion,
    copy_motion: bool,
}

impl Warmed {
    pub fn of(
        database: &CompilerDatabase,
        build: BuildInputs,
        program: &Arc<LowProgram>,
    ) -> Warmed {
        let planning = build.planning(database);
        Warmed {
            program: Arc::downgrade(program),
            schedule: build.schedule(database).clone(),
            fusion: planning.fusion,
            copy_motion: planning.copy_motion,
        }
    }
}

impl PartialEq for Warmed {
    fn eq(&self, other: &Warmed) -> bool {
        self.program.ptr_eq(&other.program)
            && self.program.strong_count() > 0
            && self.schedule == other.schedule
            && self.fusion == other.fusion
            && self.copy_motion == other.copy_motion
    }
}

/// Prices (in parallel) every merge the phase grouping of `program` will
/// price, reporting one item per boundary to `progress` as stage "pricing
/// fusion"; returns how many boundaries that is (what the grouping then
/// prices again, from the memo). Does nothing (and returns 0) unless the
/// build's fusion is `auto` with copy motion.
pub fn warm_fusion_pricing(
    database: &CompilerDatabase,
    build: BuildInputs,
    program: &LowProgram,
    progress: &dyn Progress,
) -> usize {
    let planning = build.planning(database);
    if planning.fusion != Fusion::Auto || !planning.copy_motion {
        return 0;
    }
    let (mut chains, _) = {
        let _span = tracing::info_span!("fusion_chains").entered();
        fusion_chains(program)
    };
    let _span = tracing::info_span!("warm_fusion_pricing", chains = chains.len()).entered();
    let boundaries: usize = chains.iter().map(|chain| chain.following.len()).sum();
    let size = |chain: &FusionChain| {
        chain.first.words.len()
            + chain
                .following
                .iter()
                .map(|list| list.words.len())
                .sum::<usize>()
    };
    chains.sort_by_key(|chain| std::cmp::Reverse(size(chain)));
    let context = price_context(program, build.schedule(database));
    progress.begin("fusion: boundaries priced", Some(boundaries as u64));
    fan_out(database, &chains, |db, _, chain: &FusionChain| {
        crate::cache::within_computation(|| {
            price_chain(db, build, program, chain, context, progress)
        });
    });
    progress.end();
    boundaries
}

/// Walks one chain's greedy decisions, pricing each merge (the prices go
/// to the price memo, where the grouping finds them).
fn price_chain(
    db: &CompilerDatabase,
    build: BuildInputs,
    program: &LowProgram,
    chain: &FusionChain,
    context: CacheKey,
    progress: &dyn Progress,
) {
    let pricing = FusionPricing::of(db, build, context);
    let mut preceding = chain.first.clone();
    for following in &chain.following {
        // A boundary's pricing may find every schedule in the memo and so
        // make no query call: a cancelled build stops between boundaries.
        db.unwind_if_revision_cancelled();
        let merged = merged_transfers(&preceding, following);
        let cost = pricing.price(
            db,
            program,
            &preceding,
            following,
            &merged,
            chain.iterations,
        );
        preceding = if cost.is_some_and(|cost| cost.merges()) {
            merged
        } else {
            following.clone()
        };
        progress.advance(1);
    }
}
