//! Shared helpers for integration tests: loading shipped queries with
//! overrides, and reading salsa's execution log by query and op name (the
//! log's assertion helpers are each shown to fail at the end).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use superstep::build_file::{BuildQuery, load_query};
use superstep::cache::{CacheKey, EntryKind};
use superstep::incremental::{Execution, TrackedQuery};
use superstep::session::Session;

/// Variants of `queries/vit-tiny.toml` that cover every model feature and
/// planning path the shipped models use (`--set` lists).
pub const TINY_VARIANTS: &[&[&str]] = &[
    &["workload.attention=flash"],
    &["planning.accumulation=f16"],
    &["workload.batch=2"],
    &["workload.fuse_qkv=false"],
    &["machine.tiles=7"],
    &[
        "workload.gelu=erf",
        "workload.pooling=map",
        "workload.class_token=false",
    ],
    &[
        "workload.rotary=true",
        "workload.pooling=attention",
        "workload.pooling_heads=2",
        "workload.projection=32",
        "workload.pre_norm=true",
    ],
    // Attention split over key blocks (partial statistics combined).
    &[
        "workload.patches=256",
        "workload.heads=2",
        "workload.width=128",
        "workload.mlp=256",
        "machine.tiles=64",
    ],
    &[
        "workload.patches=256",
        "workload.heads=2",
        "workload.width=128",
        "workload.mlp=256",
        "machine.tiles=64",
        "workload.attention=flash",
    ],
    // The FP16 recipe (FP8 weights widened on the tile): what the
    // reference libraries compute.
    &["planning.matrix_inputs=fp16"],
];

pub fn query(file: &str, sets: &[&str]) -> BuildQuery {
    let sets: Vec<String> = sets.iter().map(|set| set.to_string()).collect();
    load_query(Path::new(file), &sets).expect("shipped query loads")
}

/// How many times each query ran.
pub fn counts(executions: &[Execution]) -> BTreeMap<TrackedQuery, usize> {
    let mut counts = BTreeMap::new();
    for execution in executions {
        *counts.entry(execution.query).or_insert(0) += 1;
    }
    counts
}

/// Every query that ran, one line each with its count when above one
/// (`planned_op x42`), in `TrackedQuery` order: the pipeline's, not the
/// log's, whose order depends on how the parallel workers interleave. The
/// text an incrementality test pins, so that a query that starts
/// re-running after an edit shows in its diff.
pub fn executed_queries(executions: &[Execution]) -> String {
    counts(executions)
        .into_iter()
        .map(|(query, runs)| match runs {
            1 => query.to_string(),
            _ => format!("{query} x{runs}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `query` ran for `key` (ty's `assert_query_was_run` style:
/// by query and key, not by a count of names).
pub fn was_run(executions: &[Execution], query: TrackedQuery, key: salsa::Id) -> bool {
    executions
        .iter()
        .any(|execution| execution.query == query && execution.key == key)
}

/// Panics unless `query` ran for `key`.
#[track_caller]
pub fn assert_query_was_run(executions: &[Execution], query: TrackedQuery, key: salsa::Id) {
    assert!(
        was_run(executions, query, key),
        "`{query}` did not run for {key:?}; ran: {:?}",
        counts(executions)
    );
}

/// Panics if `query` ran for `key`.
#[track_caller]
pub fn assert_query_was_not_run(executions: &[Execution], query: TrackedQuery, key: salsa::Id) {
    assert!(
        !was_run(executions, query, key),
        "`{query}` re-ran for {key:?}"
    );
}

/// The op names whose `op_expansion` ran.
pub fn expanded_ops(session: &Session, executions: &[Execution]) -> BTreeSet<String> {
    let by_id = session.op_names_by_id();
    executions
        .iter()
        .filter(|execution| execution.query == TrackedQuery::OpExpansion)
        .map(|execution| {
            by_id
                .get(&execution.key)
                .cloned()
                .unwrap_or_else(|| format!("unknown {:?}", execution.key))
        })
        .collect()
}

/// An empty scratch folder for one test of one suite.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("superstep-{suite}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).expect("scratch directory");
    directory
}

/// Runs the `superstep` binary from the repository root.
pub fn superstep(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_superstep"))
        .args(arguments)
        // The per-user local cache key of the tests' processes: made on
        // first use in the temporary folder, never in the user's home.
        .env(
            "SUPERSTEP_LOCAL_CACHE_KEY",
            std::env::temp_dir().join("superstep-tests-local-cache.key"),
        )
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("superstep runs")
}

/// A SplitMix64 stream: the fuzz suites' seeded, reproducible randomness.
pub struct Random(pub u64);

impl Random {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 { 0 } else { self.next() % bound }
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// `default` cases, scaled by the `FUZZ_CASES` environment variable.
pub fn fuzz_cases(default: u64) -> u64 {
    let scale: u64 = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1);
    default * scale.max(1)
}

/// The kind and key of an entry file `KIND/XX/KEY`.
pub fn kind_and_key(path: &Path) -> (EntryKind, CacheKey) {
    let folder = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|name| name.to_str())
        .expect("KIND/XX/KEY");
    let kind = EntryKind::ALL
        .into_iter()
        .find(|kind| kind.folder() == folder)
        .expect("a known kind");
    let hex = path
        .file_name()
        .and_then(|name| name.to_str())
        .expect("KEY");
    let mut key = [0u8; 32];
    for (index, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * index..2 * index + 2], 16).expect("hex");
    }
    (kind, CacheKey(key))
}

/// Every file under `folder`.
pub fn files(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Writes `weights` (of `graph`) to `path` as a checkpoint in superstep's
/// own naming, one tensor per instance, after `edit` has seen each
/// instance's values (value name, instance, values).
pub fn write_superstep_checkpoint(
    graph: &superstep::model::graph::Graph,
    weights: &superstep::model::weights::Weights,
    path: &Path,
    mut edit: impl FnMut(&str, u32, &mut Vec<f32>),
) {
    use superstep::model::graph::ValueKind;
    let mut writer = superstep::model::safetensors::SafeTensorsWriter::new();
    for (&id, data) in weights.tensors.iter() {
        let value = graph.value(id);
        let iterated = matches!(value.kind, ValueKind::Weight { iterated: true });
        for instance in 0..data.instances {
            let mut values = data.instance(instance).to_vec();
            edit(&value.name, instance, &mut values);
            writer
                .add_f32(
                    &superstep::model::weights::tensor_name(&value.name, iterated, instance),
                    &[value.shape.rows as usize, value.shape.cols as usize],
                    &values,
                )
                .expect("add tensor");
        }
    }
    writer.write(path).expect("write checkpoint");
}

/// Sweep configurations as `--config` spells them (`S64/word32`, ...).
pub fn sweep_configs(texts: &[&str]) -> Vec<superstep::studies::sweep::SweepConfig> {
    texts
        .iter()
        .flat_map(|text| {
            text.parse::<superstep::studies::sweep::ConfigList>()
                .expect("config")
                .0
        })
        .collect()
}

/// A log of three executions: `graph` and `layouts` for one key, `graph`
/// again for another (ids of bits 1 and 2, printed `Id(0)` and `Id(1)`).
fn planted_log() -> Vec<Execution> {
    let (one, two) = (salsa::Id::from_bits(1), salsa::Id::from_bits(2));
    vec![
        Execution {
            query: TrackedQuery::Layouts,
            key: one,
        },
        Execution {
            query: TrackedQuery::Graph,
            key: one,
        },
        Execution {
            query: TrackedQuery::Graph,
            key: two,
        },
    ]
}

#[test]
fn executed_queries_lists_every_query_in_pipeline_order_with_counts() {
    assert_eq!(executed_queries(&planted_log()), "graph x2\nlayouts");
    assert_eq!(executed_queries(&[]), "");
}

#[test]
fn assert_query_was_run_passes_on_a_query_that_ran_for_the_key() {
    assert_query_was_run(
        &planted_log(),
        TrackedQuery::Layouts,
        salsa::Id::from_bits(1),
    );
}

#[test]
#[should_panic(expected = "`layouts` did not run for Id(1)")]
fn assert_query_was_run_fails_on_a_query_that_ran_for_another_key() {
    assert_query_was_run(
        &planted_log(),
        TrackedQuery::Layouts,
        salsa::Id::from_bits(2),
    );
}

#[test]
#[should_panic(expected = "`low_program` did not run for Id(0)")]
fn assert_query_was_run_fails_on_a_query_that_did_not_run() {
    assert_query_was_run(
        &planted_log(),
        TrackedQuery::LowProgram,
        salsa::Id::from_bits(1),
    );
}

#[test]
fn assert_query_was_not_run_passes_on_another_key() {
    assert_query_was_not_run(
        &planted_log(),
        TrackedQuery::Layouts,
        salsa::Id::from_bits(2),
    );
}

#[test]
#[should_panic(expected = "`graph` re-ran for Id(1)")]
fn assert_query_was_not_run_fails_on_a_query_that_ran() {
    assert_query_was_not_run(&planted_log(), TrackedQuery::Graph, salsa::Id::from_bits(2));
}

#[test]
#[should_panic(expected = "graph x2")]
fn a_pinned_query_list_fails_when_a_query_starts_running() {
    let pinned = "layouts";
    let mut log = planted_log();
    log.retain(|execution| execution.query == TrackedQuery::Layouts);
    assert_eq!(executed_queries(&log), pinned);
    // One more query in the log is a different text.
    let now = executed_queries(&planted_log());
    assert_eq!(now, pinned, "{now}");
}

/// A headless Chromium for the tests that load pages: `CHROMIUM`, else
/// `chromium` on the PATH; `None` when there is none, unless
/// `SUPERSTEP_REQUIRE_BROWSER` is set (as `.ci/run` sets it once Chromium
/// is installed), which makes a missing browser a failure instead of a
/// check that says it did not run.
pub fn chromium() -> Option<PathBuf> {
    let named = std::env::var_os("CHROMIUM").map(PathBuf::from);
    let found = named.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|folder| folder.join("chromium"))
                .find(|candidate| candidate.is_file())
        })
    });
    if found.is_none() && std::env::var_os("SUPERSTEP_REQUIRE_BROWSER").is_some() {
        panic!("SUPERSTEP_REQUIRE_BROWSER is set and no chromium was found (set CHROMIUM)");
    }
    found
}

/// The DOM of the page file `page` opened at `fragment` (`#...` or empty)
/// after its scripts ran, as headless Chromium dumps it; panics when the
/// browser fails or takes over a minute.
pub fn rendered_dom(browser: &Path, page: &Path, fragment: &str) -> String {
    let profile = scratch("chromium", &format!("profile-{}", fragment.len()));
    let address = format!("file://{}{fragment}", page.display());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(&address)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut dom).map(|_| dom)
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if child.try_wait().expect("chromium waits").is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium took over a minute on {address}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader
        .join()
        .expect("reader thread")
        .expect("chromium's output is text")
}
