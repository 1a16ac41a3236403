//! The persistent cache as one-shot builds meet it: a fresh session with a
//! warm cache serves every phase from disk and builds the same package; a
//! corrupt, truncated or foreign entry is a miss with a warning and never a
//! wrong result; the command line's `--cache`, `--no-cache` and
//! `--cache-limit`.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{counts, query, scratch, superstep};
use superstep::build_file::BuildQuery;
use superstep::cache::{EntryKind, PersistentCache};
use superstep::package::Package;
use superstep::session::TrackedQuery;
use superstep::session::{BuildOutcome, Session};

const TINY: &str = "queries/vit-tiny.toml";

fn open(directory: &Path) -> Arc<PersistentCache> {
    Arc::new(PersistentCache::open(directory, 1 << 30).expect("cache"))
}

/// A fresh session (as a fresh process would make) over `cache`.
fn build(query: &BuildQuery, cache: Option<Arc<PersistentCache>>) -> (BuildOutcome, Package) {
    let mut session = Session::with_cache(query, cache);
    let outcome = session.build().expect("build");
    let package = session.package().expect("package");
    (outcome, package)
}

/// The figures a user sees, which must not depend on the cache.
fn figures(outcome: &BuildOutcome) -> String {
    let back = outcome.back.as_ref().expect("back half");
    format!(
        "{:?} {} {} {} {} {}",
        back.phases,
        back.headline.estimate.total_cycles,
        back.headline.exchange_table_bytes_per_tile_max,
        back.headline.peak_sram_bytes_per_tile,
        back.headline.repeat_patch_words,
        back.headline.sharing_patch_words
    )
}

/// Entry files of one kind, sorted.
fn entries(directory: &Path, kind: EntryKind) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for shard in std::fs::read_dir(directory.join(kind.folder())).expect("kind folder") {
        for file in std::fs::read_dir(shard.expect("shard").path()).expect("shard folder") {
            files.push(file.expect("file").path());
        }
    }
    files.sort();
    files
}

/// Under the default `planning.fusion = "auto"` phase grouping reads the
/// schedule figures of the exchanges it prices as well (both sides of every
/// priced boundary and their merge) and each merge's lower bound, so a warm
/// build reads more figures than it encodes rows; under `same-operator`
/// exactly one per encoded problem.
#[test]
fn a_warm_cache_serves_every_phase_and_builds_the_same_package() {
    for fusion in ["auto", "same-operator"] {
        let directory = scratch("cache", &format!("warm-{fusion}"));
        let set = format!("planning.fusion={fusion}");
        let query = query(TINY, &[&set]);
        let (uncached, uncached_package) = build(&query, None);

        let cache = open(&directory);
        let (cold, cold_package) = build(&query, Some(cache.clone()));
        let written = cache.statistics();
        assert_eq!(written.hits, 0);
        assert!(written.writes > 0, "{written:?}");
        assert!(cache.take_warnings().is_empty());

        let cache = open(&directory);
        let (warm, warm_package) = build(&query, Some(cache.clone()));
        let statistics = cache.statistics();
        assert_eq!(statistics.misses, 0, "{fusion}: {statistics:?}");
        assert_eq!(statistics.writes, 0, "{fusion}: {statistics:?}");
        assert!(cache.take_warnings().is_empty());
        // Nothing was scheduled, encoded or placed (no miss, no write): rows,
        // schedule figures and the placement came from disk, and each rows
        // entry was checked against its schedule, read from disk too.
        let runs = counts(&warm.executions);
        let problems = runs[&TrackedQuery::EncodedRows];
        assert_eq!(
            runs.get(&TrackedQuery::Scheduled),
            Some(&problems),
            "{fusion}: {runs:?}"
        );
        let figures_read = runs[&TrackedQuery::ScheduleFigures];
        if fusion == "same-operator" {
            assert_eq!(figures_read, problems, "{runs:?}");
        } else {
            assert!(figures_read > problems, "auto prices nothing: {runs:?}");
        }
        // Plus the schedules, each problem's rows summary and the row table
        // (both checked by making them again from the checked rows), the
        // placement, the activation calibration (FP8 inputs, the default:
        // the FP32 reference does not run again), and under `auto` each
        // priced merge's bound and the record of the grouping (read, but
        // not replayed: no key signed this cache, so every boundary is
        // judged and priced again).
        let bounds = runs.get(&TrackedQuery::ProblemBound).copied().unwrap_or(0);
        assert_eq!(bounds > 0, fusion == "auto", "{runs:?}");
        assert_eq!(runs.get(&TrackedQuery::ActivationCalibration), Some(&1));
        let record = u64::from(fusion == "auto");
        assert_eq!(
            statistics.hits,
            (figures_read + 3 * problems + bounds) as u64 + 3 + record,
            "{fusion}: {statistics:?}"
        );

        assert_eq!(figures(&uncached), figures(&cold));
        assert_eq!(figures(&uncached), figures(&warm));
        assert_eq!(uncached_package, cold_package);
        assert_eq!(uncached_package, warm_package);
    }
}

/// Damages every rows entry with `damage`, then checks that a fresh build
/// warns naming `expected`, recomputes the same results and heals the
/// cache (the next build has no rejection).
fn damaged_entries_are_misses(name: &str, damage: fn(&Path), expected: &str) {
    let directory = scratch("cache", name);
    let query = query(TINY, &[]);
    let (reference, reference_package) = build(&query, None);
    build(&query, Some(open(&directory)));
    let damaged = entries(&directory, EntryKind::Rows);
    assert!(!damaged.is_empty());
    for path in &damaged {
        damage(path);
    }

    let cache = open(&directory);
    let (outcome, package) = build(&query, Some(cache.clone()));
    let statistics = cache.statistics();
    assert_eq!(statistics.rejected, damaged.len() as u64, "{statistics:?}");
    let warnings = cache.take_warnings();
    assert_eq!(warnings.len(), damaged.len(), "{warnings:?}");
    for warning in &warnings {
        assert!(warning.contains(expected), "{warning}");
        assert!(warning.contains("recomputing"), "{warning}");
    }
    assert_eq!(figures(&reference), figures(&outcome));
    assert_eq!(reference_package, package);
    let runs = counts(&outcome.executions);
    assert_eq!(
        runs.get(&TrackedQuery::EncodedRows),
        Some(&damaged.len()),
        "{runs:?}"
    );

    let cache = open(&directory);
    build(&query, Some(cache.clone()));
    assert_eq!(cache.statistics().rejected, 0);
    assert_eq!(cache.statistics().misses, 0);
}

#[test]
fn a_corrupt_entry_is_a_miss_with_a_warning() {
    damaged_entries_are_misses(
        "corrupt",
        |path| {
            let mut bytes = std::fs::read(path).expect("entry");
            let last = bytes.len() - 1;
            bytes[last] ^= 0x5a;
            std::fs::write(path, bytes).expect("write");
        },
        "corrupt",
    );
}

#[test]
fn a_truncated_entry_is_a_miss_with_a_warning() {
    damaged_entries_are_misses(
        "truncated",
        |path| {
            let bytes = std::fs::read(path).expect("entry");
            std::fs::write(path, &bytes[..bytes.len() / 2]).expect("write");
        },
        "truncated",
    );
}

#[test]
fn a_foreign_file_is_a_miss_with_a_warning() {
    damaged_entries_are_misses(
        "foreign",
        |path| std::fs::write(path, b"{\"not\": \"a cache entry\"}\n").expect("write"),
        "not a superstep cache file",
    );
}

/// The benchmark's "fresh process with a warm cache" after one phase's
/// override: exactly that phase is scheduled and encoded; every other
/// phase comes from the cache.
#[test]
fn an_override_with_a_warm_cache_schedules_only_that_phase() {
    let directory = scratch("cache", "override");
    build(&query(TINY, &[]), Some(open(&directory)));
    let cache = open(&directory);
    let edited = query(
        TINY,
        &["schedule.override.layer.mlp.down.a.rearrange#0=B64"],
    );
    let (outcome, _) = build(&edited, Some(cache.clone()));
    let runs = counts(&outcome.executions);
    // Every phase's schedule is read (its cached rows are checked against
    // it); only the overridden one misses and is computed (below).
    assert_eq!(
        runs.get(&TrackedQuery::Scheduled),
        runs.get(&TrackedQuery::EncodedRows),
        "{runs:?}"
    );
    let statistics = cache.statistics();
    // The new (problem, policy) pair misses its schedule, figures, rows and
    // rows summary, the program its row table (and the placement, when
    // the reservations moved); all else hits.
    assert!((5..=6).contains(&statistics.misses), "{statistics:?}");
    assert_eq!(statistics.writes, statistics.misses, "{statistics:?}");
    assert_eq!(figures(&outcome), figures(&build(&edited, None).0));
}

#[test]
fn eviction_keeps_the_cache_within_its_limit() {
    let directory = scratch("cache", "eviction");
    let query = query(TINY, &[]);
    build(&query, Some(open(&directory)));
    let total = open(&directory).size_on_disk();
    let limit = total / 2;
    let bounded = Arc::new(PersistentCache::open(&directory, limit).expect("cache"));
    let eviction = bounded.evict();
    assert_eq!(eviction.bytes_before, total);
    assert!(eviction.removed_entries > 0);
    assert!(eviction.bytes_after() <= limit, "{eviction:?}");
    assert_eq!(bounded.size_on_disk(), eviction.bytes_after());
    // What is left is still valid, and the build still comes out the same.
    let (reference, _) = build(&query, None);
    let (outcome, _) = build(&query, Some(bounded.clone()));
    assert_eq!(bounded.statistics().rejected, 0);
    assert_eq!(figures(&reference), figures(&outcome));
}

#[test]
fn the_command_line_uses_reports_and_can_skip_the_cache() {
    let directory = scratch("cache", "cli");
    let outputs = format!("outputs.directory={}", directory.display());
    let cache = directory.join("chosen");
    let cache_argument = cache.display().to_string();
    let arguments = ["build", TINY, "--set", &outputs, "--cache", &cache_argument];
    let first = superstep(&arguments);
    assert!(first.status.success());
    // The cache line is a diagnostic: standard error, last.
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .contains("0 hits"),
        "{stderr}"
    );
    let second = superstep(&arguments);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("0 misses"), "{stderr}");
    assert!(!entries(&cache, EntryKind::Rows).is_empty());

    // --no-cache neither reads nor writes, not even the default folder.
    let skipped = superstep(&["build", TINY, "--set", &outputs, "--no-cache"]);
    assert!(skipped.status.success());
    assert!(!String::from_utf8_lossy(&skipped.stdout).contains("hits"));
    assert!(!directory.join(".cache").exists());
    // Without --cache, the cache is OUTPUTS/.cache.
    let default = superstep(&["build", TINY, "--set", &outputs]);
    assert!(default.status.success());
    assert!(directory.join(".cache").join("rows").is_dir());

    // A cache folder that cannot exist is bad input: exit 2, naming --cache.
    let file = directory.join("a-file");
    std::fs::write(&file, "not a folder").expect("write");
    let file_argument = file.join("cache").display().to_string();
    let refused = superstep(&["build", TINY, "--set", &outputs, "--cache", &file_argument]);
    assert_eq!(refused.status.code(), Some(2));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("--cache"), "{message}");
    assert!(message.contains("--no-cache"), "{message}");
    let zero = superstep(&["build", TINY, "--cache-limit", "0"]);
    assert_eq!(zero.status.code(), Some(2));
}
