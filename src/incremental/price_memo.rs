//! Merge prices by content, shared by a database and its clones.
//!
//! Fusion pricing walks every chain of boundaries ahead of phase grouping,
//! chains in parallel (`crate::session::pricing`); the grouping then asks
//! for the same prices again, one boundary after another in program order,
//! on one thread. Without this memo each of those questions builds three
//! exchange problems (the two exchanges apart and their merge) only to
//! find their figures in salsa's memo: in a layout search's trials, that
//! serial pass was two fifths of the main thread's time. Here a price
//! costs the digests of its two transfer lists.
//!
//! A price is a function of exactly what its key digests: the two lists,
//! the Repeat iterations around them, the program's allocations and tiles
//! (which resolve the lists into exchange problems) and the schedule
//! settings pricing reads. Scheduling reads no salsa input besides its
//! problem and policy, so a price found here inside a query is the one the
//! query would compute, as with a persistent-cache read. Owns the memo and
//! the keys; `super::grouping::FusionPricing` reads and fills it.

use std::hash::Hash;
use std::sync::Mutex;

use crate::build_file::ScheduleSettings;
use crate::cache::{CacheKey, StableHasher};
use crate::expand::program::{LowProgram, TransferList};
use crate::group::FusionCost;
use crate::hashing::FastMap;

/// The most prices the memo holds: past it, it starts again empty (a
/// build prices a few dozen merges; a long layout search some thousands).
const MAX_PRICES: usize = 1 << 16;

/// Prices answered so far, by [`merge_key`].
#[derive(Debug, Default)]
pub struct PriceMemo {
    prices: Mutex<FastMap<CacheKey, Option<FusionCost>>>,
}

impl PriceMemo {
    /// The price kept under `key`: `Some(None)` when that merge could not
    /// be priced, `None` when it was never asked.
    pub fn get(&self, key: &CacheKey) -> Option<Option<FusionCost>> {
        self.prices
            .lock()
            .ok()
            .and_then(|prices| prices.get(key).copied())
    }

    /// Keeps `price` under `key`.
    pub fn insert(&self, key: CacheKey, price: Option<FusionCost>) {
        if let Ok(mut prices) = self.prices.lock() {
            if prices.len() >= MAX_PRICES {
                prices.clear();
            }
            prices.insert(key, price);
        }
    }

    /// How many prices it holds.
    pub fn len(&self) -> usize {
        self.prices.lock().map_or(0, |prices| prices.len())
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What every merge price of `program` under `schedule` shares: the
/// program's tiles and allocations and the schedule settings. Computed
/// once per pricing pass.
pub fn price_context(program: &LowProgram, schedule: &ScheduleSettings) -> CacheKey {
    let mut hasher = StableHasher::for_domain("fusion price context");
    program.tiles.hash(&mut hasher);
    program.allocations.hash(&mut hasher);
    schedule.hash(&mut hasher);
    hasher.digest()
}

/// The key of the merge of `first` and `second` inside `iterations`
/// Repeat iterations, in `context` ([`price_context`]).
pub fn merge_key(
    context: &CacheKey,
    first: &TransferList,
    second: &TransferList,
    iterations: u32,
) -> CacheKey {
    let mut hasher = StableHasher::for_domain("fusion merge");
    context.0.hash(&mut hasher);
    first.hash(&mut hasher);
    second.hash(&mut hasher);
    iterations.hash(&mut hasher);
    hasher.digest()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::program::{
        Allocation, AllocationId, Destination, Location, Provenance, Reason,
    };
    use crate::layout::format::MemoryClass;
    use crate::schedule::{SchedulePolicy, TransferWidth};

    fn settings() -> ScheduleSettings {
        ScheduleSettings {
            policy: SchedulePolicy::Auto,
            width: TransferWidth::Auto,
            row_allowance: 256,
            prune_by_bounds: true,
        }
    }

    fn program(tile_of_allocation: u32) -> LowProgram {
        LowProgram {
            tiles: 2,
            allocations: vec![Allocation {
                tile: tile_of_allocation,
                bytes: 64,
                alignment: 4,
                class: MemoryClass::Standard,
                alias_group: 0,
                iterations: 1,
                provenance: Provenance {
                    op: 0,
                    value: None,
                    reason: Reason::Rearrange,
                },
            }],
            ..LowProgram::default()
        }
    }

    fn list(words: u32) -> TransferList {
        let location = Location {
            allocation: AllocationId(0),
            offset: 0,
        };
        let mut list = TransferList::default();
        list.push(0, location, words, &[Destination { tile: 1, location }]);
        list
    }

    /// Every part of what a price depends on changes its key, and the
    /// order of the two lists matters (a merge keeps list order).
    #[test]
    fn a_key_changes_with_everything_a_price_reads() {
        let context = price_context(&program(0), &settings());
        let key = merge_key(&context, &list(1), &list(2), 1);
        assert_eq!(key, merge_key(&context, &list(1), &list(2), 1));
        let mut other_tiles = program(0);
        other_tiles.tiles = 4;
        let mut other_settings = settings();
        other_settings.prune_by_bounds = false;
        let others = [
            merge_key(&context, &list(2), &list(1), 1),
            merge_key(&context, &list(1), &list(3), 1),
            merge_key(&context, &list(1), &list(2), 27),
            merge_key(
                &price_context(&program(1), &settings()),
                &list(1),
                &list(2),
                1,
            ),
            merge_key(
                &price_context(&other_tiles, &settings()),
                &list(1),
                &list(2),
                1,
            ),
            merge_key(
                &price_context(&program(0), &other_settings),
                &list(1),
                &list(2),
                1,
            ),
        ];
        for (index, other) in others.iter().enumerate() {
            assert_ne!(&key, other, "variation {index}");
        }
    }

    /// The memo answers what was kept, tells an unpriceable merge from one
    /// never asked, and starts again once full.
    #[test]
    fn the_memo_keeps_prices_and_unpriceable_merges() {
        let memo = PriceMemo::default();
        let context = price_context(&program(0), &settings());
        let priced = merge_key(&context, &list(1), &list(2), 1);
        let unpriceable = merge_key(&context, &list(2), &list(1), 1);
        assert_eq!(memo.get(&priced), None);
        let cost = FusionCost {
            merged_horizon: Some(10),
            merged_bound: 8,
            separate_sum: 20,
            separate_scheduled: true,
            sync_saved: 5,
        };
        memo.insert(priced, Some(cost));
        memo.insert(unpriceable, None);
        assert_eq!(memo.get(&priced), Some(Some(cost)));
        assert_eq!(memo.get(&unpriceable), Some(None));
        assert_eq!(memo.len(), 2);
        for index in 0..MAX_PRICES as u32 {
            memo.insert(merge_key(&context, &list(index), &list(0), 1), None);
        }
        assert!(memo.len() <= MAX_PRICES, "{}", memo.len());
        assert_eq!(memo.get(&priced), None, "emptied when full");
    }
}
