//! Full builds and incremental rebuilds of SigLIP so400m (27 layers, 1,472
//! tiles) through one long-lived session, as `superstep build` and
//! `superstep watch` run them:
//!
//! - cold: a fresh database, graph to estimate;
//! - no-op: the same query again;
//! - one phase's policy overridden (a policy never seen before each time,
//!   so nothing is served from an earlier memo);
//! - the global stream policy changed (likewise a new wave width each time);
//! - the FP8 scale changed (alternating -4 and -3);
//! - the layer count changed (alternating 27 and 26);
//! - one local-step trial of the layout search: a layout override of
//!   `layer.mlp.down` never tried before in the session (the next of its
//!   valid partitions in every tile order), re-planned, re-expanded,
//!   re-grouped, re-scheduled where problems changed, placed and estimated;
//! - a fresh process with a warm persistent cache: a new database (as a new
//!   `superstep build` process makes) over a cache folder that an earlier
//!   build filled, with the same query, and with one phase's policy
//!   overridden by a policy never seen before (so that phase misses).
//!
//! `cargo bench --bench rebuild`

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use superstep::build_file::{BuildQuery, load_query};
use superstep::cache::PersistentCache;
use superstep::session::Session;

fn query(sets: &[&str]) -> BuildQuery {
    let sets: Vec<String> = sets.iter().map(|set| set.to_string()).collect();
    load_query(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/queries/siglip-so400m.toml"
        )),
        &sets,
    )
    .expect("query")
}

fn alternating(criterion: &mut Criterion, name: &str, first: BuildQuery, second: BuildQuery) {
    let mut session = Session::new(&first);
    session.build().expect("build");
    let mut flip = false;
    criterion.bench_function(name, |bencher| {
        bencher.iter(|| {
            flip = !flip;
            session.update(if flip { &second } else { &first });
            black_box(session.build().expect("rebuild").summary.total.transfers)
        })
    });
}

fn rebuilds(criterion: &mut Criterion) {
    let base = query(&[]);
    {
        let mut group = criterion.benchmark_group("build");
        group.sample_size(10);
        group.bench_function("siglip-so400m-27/cold", |bencher| {
            bencher.iter(|| {
                let mut session = Session::new(&base);
                black_box(session.build().expect("build").summary.total.transfers)
            })
        });
        group.finish();
    }
    let mut session = Session::new(&base);
    session.build().expect("build");
    criterion.bench_function("rebuild/siglip-so400m-27/no-op", |bencher| {
        bencher.iter(|| {
            session.update(&base);
            black_box(session.build().expect("rebuild").summary.total.transfers)
        })
    });
    let mut session = Session::new(&base);
    session.build().expect("build");
    let mut width = 64;
    criterion.bench_function("rebuild/siglip-so400m-27/one-phase-override", |bencher| {
        bencher.iter(|| {
            width += 1;
            let edited = query(&[&format!("schedule.override.layer.attn.merge#0=S{width}")]);
            session.update(&edited);
            black_box(session.build().expect("rebuild").summary.total.transfers)
        })
    });
    alternating(
        criterion,
        "rebuild/siglip-so400m-27/fp8-scale",
        query(&["workload.fp8_scale=-4"]),
        query(&["workload.fp8_scale=-3"]),
    );
    {
        let directory =
            std::env::temp_dir().join(format!("superstep-bench-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        let open = || {
            Some(Arc::new(
                PersistentCache::open(&directory, 8 << 30).expect("cache"),
            ))
        };
        Session::with_cache(&base, open())
            .build()
            .expect("fill the cache");
        let mut group = criterion.benchmark_group("fresh-process-warm-cache");
        group.sample_size(10);
        group.bench_function("siglip-so400m-27/no-change", |bencher| {
            bencher.iter(|| {
                let mut session = Session::with_cache(&base, open());
                black_box(session.build().expect("build").summary.total.transfers)
            })
        });
        let mut width = 64;
        group.bench_function("siglip-so400m-27/one-phase-override", |bencher| {
            bencher.iter(|| {
                width += 1;
                let edited = query(&[&format!("schedule.override.layer.attn.merge#0=S{width}")]);
                let mut session = Session::with_cache(&edited, open());
                black_box(session.build().expect("build").summary.total.transfers)
            })
        });
        group.finish();
        let _ = std::fs::remove_dir_all(&directory);
    }
    let mut group = criterion.benchmark_group("rebuild-slow");
    group.sample_size(10);
    group.bench_function("siglip-so400m-27/layers-27-to-26", |bencher| {
        let (first, second) = (
            query(&["workload.layers=27"]),
            query(&["workload.layers=26"]),
        );
        let mut session = Session::new(&first);
        session.build().expect("build");
        let mut flip = false;
        bencher.iter(|| {
            flip = !flip;
            session.update(if flip { &second } else { &first });
            black_box(session.build().expect("rebuild").summary.total.transfers)
        })
    });
    let mut session = Session::new(&base);
    session.build().expect("build");
    let mut wave = 1024;
    group.bench_function("siglip-so400m-27/global-stream-policy", |bencher| {
        bencher.iter(|| {
            wave += 1;
            session.update(&query(&[&format!("schedule.policy=B{wave}")]));
            black_box(session.build().expect("rebuild").summary.total.transfers)
        })
    });
    let mut session = Session::new(&base);
    session.build().expect("build");
    let trials = layout_trials();
    let mut next = 0;
    group.bench_function("siglip-so400m-27/layout-search-trial", |bencher| {
        bencher.iter(|| {
            let partition = &trials[next % trials.len()];
            next += 1;
            session.update(&query(&[&format!(
                "layout.override.layer.mlp.down={partition}"
            )]));
            // A trial that does not fit is a rejected trial: timed all the same.
            black_box(
                session
                    .build()
                    .map(|outcome| outcome.summary.total.transfers)
                    .ok(),
            )
        })
    });
    group.finish();
}

/// Partitions of SigLIP's `layer.mlp.down` ([729, 4304] x [4304, 1152]) the
/// search would try: the cost model's cheapest valid ones, in every order.
fn layout_trials() -> Vec<String> {
    use superstep::layout::candidates::matmul_search_candidates;
    use superstep::layout::cost::{MatMulProblem, TileOrder};
    let problem = MatMulProblem {
        m: 729,
        k: 4304,
        n: 1152,
        tiles: 1472,
        working_budget: 400 * 1024,
        accumulation: superstep::numerics::dot::Accumulation::F32,
        inputs: superstep::numerics::dot::ProductInputs::Fp16,
        activations: superstep::numerics::dot::ActivationStore::F16,
        cost_table: superstep::target::kernel_cost::CostTable::shipped(),
        candidate_limit: 64,
    };
    let mut trials = Vec::new();
    for order in TileOrder::ALL {
        for plan in matmul_search_candidates(&problem, &[], 16, 0) {
            trials.push(format!("{}/{}", plan.partition(), order.name()));
        }
    }
    trials
}

criterion_group!(benches, rebuilds);
criterion_main!(benches);
