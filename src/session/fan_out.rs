//! Fanning independent queries out over the machine's cores, one database
//! clone per thread, on plain scoped OS threads rather than rayon's pool.
//!
//! Pure cores use rayon inside queries (auto's candidate orders, the row
//! table, placement digests). A rayon worker waiting for such nested work
//! steals other jobs of its pool; if the fan-out jobs were rayon jobs too,
//! a worker in the middle of one query (attached to one database clone)
//! could pick up another fan-out job (another clone) and salsa would stop
//! it: "Cannot change database mid-query". Fan-out threads are not rayon
//! workers, so nested parallel work only blocks them, and rayon's workers
//! only ever run pure work.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `work(database, index, item)` for every item on up to one thread
/// per core, each with its own clone of `database`, and returns the results
/// in item order. A panic in any call is re-raised here, with its own
/// payload, once every thread has stopped.
pub fn fan_out<Database, Item, Output>(
    database: &Database,
    items: &[Item],
    work: impl Fn(&Database, usize, &Item) -> Output + Sync,
) -> Vec<Output>
where
    Database: Clone + Send,
    Item: Sync,
    Output: Send,
{
    let threads = std::thread::available_parallelism()
        .map_or(1, |count| count.get())
        .min(items.len());
    if threads == 0 {
        return Vec::new();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Output)>> = Mutex::new(Vec::with_capacity(items.len()));
    let stopped = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let clone = database.clone();
                let (next, results, work) = (&next, &results, &work);
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(index) else {
                            break;
                        };
                        done.push((index, work(&clone, index, item)));
                    }
                    // Release this thread's clone before reporting, so that a
                    // writer waiting for clones is never held up by a finished one.
                    drop(clone);
                    results
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .extend(done);
                })
            })
            .collect();
        // Joined here, so that a panic's own payload goes on (a cancelled
        // build's `salsa::Cancelled` stays one, and unwinds without a panic
        // message) rather than the scope's generic one. A thread's own
        // panic goes before the `Cancelled` of threads that waited on it.
        let mut panics: Vec<_> = handles
            .into_iter()
            .filter_map(|handle| handle.join().err())
            .collect();
        let own = panics
            .iter()
            .position(|payload| !payload.is::<salsa::Cancelled>())
            .unwrap_or(0);
        (!panics.is_empty()).then(|| panics.swap_remove(own))
    });
    if let Some(payload) = stopped {
        std::panic::resume_unwind(payload);
    }
    let mut results = results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    results.sort_unstable_by_key(|&(index, _)| index);
    results.into_iter().map(|(_, output)| output).collect()
}

#[cfg(test)]
mod tests {
    use super::fan_out;

    #[test]
    fn results_come_back_in_item_order_from_every_item() {
        let items: Vec<u64> = (0..1000).collect();
        let squares = fan_out(&7u64, &items, |offset, index, item| {
            assert_eq!(index as u64, *item);
            item * item + offset
        });
        assert_eq!(squares.len(), 1000);
        assert!(
            squares
                .iter()
                .enumerate()
                .all(|(index, &value)| value == (index * index) as u64 + 7)
        );
        assert!(fan_out(&0u8, &[] as &[u8], |_, _, _| 1).is_empty());
    }

    #[test]
    fn a_panic_goes_on_with_its_own_payload() {
        let items: Vec<u64> = (0..8).collect();
        let caught = std::panic::catch_unwind(|| {
            fan_out(&(), &items, |_, _, &item| {
                if item == 5 {
                    std::panic::resume_unwind(Box::new(salsa::Cancelled::Local));
                }
                item
            })
        });
        let payload = caught.expect_err("the panic goes on");
        assert!(payload.downcast_ref::<salsa::Cancelled>().is_some());
    }

    #[test]
    fn nested_rayon_work_inside_a_call_runs_beside_other_calls() {
        use rayon::prelude::*;
        let items: Vec<u64> = (0..64).collect();
        let sums = fan_out(&(), &items, |_, _, &item| {
            (0..1000u64)
                .into_par_iter()
                .map(|value| value + item)
                .sum::<u64>()
        });
        assert_eq!(sums[3], (0..1000u64).sum::<u64>() + 3000);
    }
}
