//! Cold graph-to-low-program compilation of SigLIP so400m (27 layers,
//! 1,472 tiles): through a fresh salsa database (what `superstep build`
//! does) and through the plain pipeline. Prints the process's peak resident
//! memory at the end (Linux `VmHWM`).
//!
//! `cargo bench --bench low_program`

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use superstep::build_file::load_query;
use superstep::direct::compile;
use superstep::session::Session;

fn query(layers: Option<u32>) -> superstep::build_file::BuildQuery {
    let sets: Vec<String> = layers
        .map(|layers| format!("workload.layers={layers}"))
        .into_iter()
        .collect();
    load_query(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/queries/siglip-so400m.toml"
        )),
        &sets,
    )
    .expect("query")
}

fn cold_low_program(criterion: &mut Criterion) {
    let full = query(None);
    let mut group = criterion.benchmark_group("cold_low_program");
    group.sample_size(10);
    group.bench_function("siglip-so400m-27-layers/database", |bencher| {
        bencher.iter(|| {
            let mut session = Session::new(&full);
            black_box(
                session
                    .build_low_program()
                    .expect("build")
                    .summary
                    .total
                    .transfers,
            )
        })
    });
    group.bench_function("siglip-so400m-27-layers/pipeline", |bencher| {
        bencher.iter(|| black_box(compile(&full).expect("compile").2.allocations.len()))
    });
    group.finish();
}

fn report_peak_memory(_: &mut Criterion) {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status")
        && let Some(line) = status.lines().find(|line| line.starts_with("VmHWM"))
    {
        println!(
            "peak resident memory of the benchmark process: {}",
            line.trim_start_matches("VmHWM:").trim()
        );
    }
}

criterion_group!(benches, cold_low_program, report_peak_memory);
criterion_main!(benches);
