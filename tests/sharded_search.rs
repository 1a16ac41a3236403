//! The layout search's trials as cache entries (issue 46, item 4): two
//! shards of one search over a signed remote on loopback (a real nginx)
//! each compile only part of the trials and both pick the plan the
//! unsharded search picks; a third search of the same settings over a
//! fresh local cache that trusts the writers compiles no trial but the
//! chosen plan's own build; the merge (the shards' outcome and a build of
//! its plan, in process over a fresh local cache trusting the writers)
//! schedules and validates nothing (salsa's event log); a search
//! over a remote whose entries no trusted key signed compiles every trial
//! again.

use crate::common;
use crate::servers;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use std::sync::Arc;
use std::time::Duration;

use common::{counts, query, scratch};
use servers::Nginx;
use superstep::cache::remote::{RemoteCache, RemoteSettings};
use superstep::cache::signing::{SigningKey, TrustedKeys};
use superstep::cache::{PersistentCache, Signing};
use superstep::session::searched_layouts::LayoutOrigin;
use superstep::session::{Session, TrackedQuery};
use superstep::studies::layout_search::{SearchSettings, cached_search};

/// A fresh local cache in `directory` over the remote at `url`, trusting
/// `writer` only and signing nothing.
fn reader_cache(directory: &Path, url: &str, writer: &SigningKey) -> Arc<PersistentCache> {
    let local = PersistentCache::open(directory, 4 << 30).expect("cache");
    let settings = RemoteSettings {
        timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(120),
        ..RemoteSettings::default()
    };
    Arc::new(
        local
            .with_signing(Signing {
                signer: None,
                writer: false,
                listed: TrustedKeys::new(vec![writer.public()]),
                also_trusted: Vec::new(),
            })
            .with_remote(RemoteCache::open(url, settings).expect("remote")),
    )
}

const TINY: &str = "queries/vit-tiny.toml";

/// The search's settings in every run (small, so the test stays short).
const SETTINGS: [&str; 4] = ["--cheapest", "3", "--aligned", "1"];

/// A `superstep search --json` of the tiny query with its outputs (and its
/// local cache and local key) in `outputs`, plus `extra`.
fn search(outputs: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_superstep"));
    command
        .arg("search")
        .arg(TINY)
        .args(SETTINGS)
        .args(["--json", "--set"])
        .arg(format!("outputs.directory={}", outputs.display()))
        .args(extra)
        .env("SUPERSTEP_LOCAL_CACHE_KEY", outputs.join("local.key"))
        .env_remove("SUPERSTEP_CACHE_SIGNING_KEY")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The outcome a finished search printed.
fn outcome(child: Child) -> serde_json::Value {
    let output = child.wait_with_output().expect("search ends");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON outcome")
}

/// The steps a search took (op, partitions, estimates, trials), without
/// what the accepted trial recomputed where it was compiled (that depends
/// on what that process had compiled before).
fn steps(outcome: &serde_json::Value) -> Vec<serde_json::Value> {
    outcome["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|step| {
            let mut step = step.clone();
            let fields = step.as_object_mut().expect("a step");
            fields.remove("recomputed_queries");
            fields.remove("recomputed_schedules");
            step
        })
        .collect()
}

fn number(outcome: &serde_json::Value, field: &str) -> u64 {
    outcome[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {outcome}"))
}

#[test]
fn a_two_shard_search_over_a_signed_remote_picks_the_unsharded_plan() {
    let directory = scratch("sharded-search", "two-shards");
    let nginx = Nginx::start(&directory.join("nginx"));
    let url = nginx.url();
    let (writer_key, secret) = SigningKey::generate().expect("key");
    let secret = String::from_utf8(secret.as_bytes().to_vec()).expect("text");
    let remote = [
        "--cache-remote",
        &url,
        "--set",
        "cache.remote_deadline_ms=30000",
    ];

    let whole = outcome(
        search(&directory.join("whole"), &["--rounds", "1"])
            .spawn()
            .expect("search"),
    );
    let trials = number(&whole, "trials");
    // A trial the search ran before (a tile order that is also a
    // candidate) is read, not compiled again.
    let distinct = number(&whole, "compiled_here");
    assert!(distinct <= trials && distinct + 5 > trials, "{whole}");
    assert!(
        !whole["steps"].as_array().expect("steps").is_empty(),
        "the tiny search should take a step: {whole}"
    );

    let shards: Vec<Child> = (0..2)
        .map(|index| {
            let shard = format!("{index}/2");
            let mut extra = remote.to_vec();
            extra.extend(["--shard", &shard, "--rounds", "1"]);
            search(&directory.join(format!("shard-{index}")), &extra)
                .env("SUPERSTEP_CACHE_SIGNING_KEY", &secret)
                .spawn()
                .expect("shard")
        })
        .collect();
    let shards: Vec<serde_json::Value> = shards.into_iter().map(outcome).collect();
    for shard in &shards {
        assert_eq!(shard["overrides"], whole["overrides"], "{shard}");
        assert_eq!(shard["best_cycles"], whole["best_cycles"], "{shard}");
        assert_eq!(steps(shard), steps(&whole), "{shard}");
        assert_eq!(number(shard, "trials"), trials, "{shard}");
        assert!(number(shard, "compiled_here") < trials, "{shard}");
    }
    // Between them the shards compiled every distinct trial, each about
    // its half (the starting build is compiled by both).
    let compiled: u64 = shards
        .iter()
        .map(|shard| number(shard, "compiled_here"))
        .sum();
    assert!(compiled >= distinct, "{compiled} of {distinct}");
    assert!(compiled <= distinct + 2, "{compiled} of {distinct}");
    for shard in &shards {
        assert!(
            2 * number(shard, "compiled_here") <= distinct + 6,
            "{shard}"
        );
    }

    // The merge, in process: a fresh local cache trusting the writers'
    // key finds the search's outcome and builds its plan without
    // scheduling or validating anything (the shards built the plan into
    // the remote; its rows are loaded, signed, without a check).
    let merge = reader_cache(&directory.join("merge"), &url, &writer_key);
    let start = query(TINY, &[]);
    let settings = SearchSettings {
        beam: None,
        rounds: 1,
        cheapest: 3,
        aligned: 1,
        orders: true,
        // `superstep search`'s default.
        min_share_basis_points: 100,
    };
    let merged = cached_search(&merge, &start, settings).expect("the shards' outcome");
    assert_eq!(
        serde_json::to_value(&merged.overrides).expect("json"),
        whole["overrides"]
    );
    let mut session = Session::with_cache(&start, Some(merge.clone()));
    assert_eq!(session.layout_source().origin, LayoutOrigin::Searched);
    let built = session.build().expect("build");
    assert_eq!(
        built
            .back
            .as_ref()
            .expect("estimate")
            .headline
            .estimate
            .total_cycles,
        number(&whole, "best_cycles")
    );
    let runs = counts(&built.executions);
    for computed in [
        TrackedQuery::Scheduled,
        TrackedQuery::ValidatedSchedule,
        TrackedQuery::ProblemBound,
    ] {
        assert_eq!(runs.get(&computed), None, "{computed:?} ran: {runs:?}");
    }
    let report = merge.finish();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let fetched = report.remote.expect("remote");
    assert_eq!(fetched.rejected, 0, "{fetched:?}");

    // A reader trusting the writers' key, with settings whose outcome no
    // shard kept (two rounds): every trial of the first round is read.
    let public = writer_key.public().to_string();
    let mut extra = remote.to_vec();
    extra.extend(["--cache-trusted-key", &public, "--rounds", "2"]);
    let reader = outcome(
        search(&directory.join("reader"), &extra)
            .spawn()
            .expect("reader"),
    );
    assert!(number(&reader, "trials") > trials, "{reader}");
    // Without trusting the key, nothing is read: every trial compiled.
    let mut extra = remote.to_vec();
    extra.extend(["--rounds", "2"]);
    let stranger = outcome(
        search(&directory.join("stranger"), &extra)
            .spawn()
            .expect("stranger"),
    );
    // The stranger compiled the first round's trials too: exactly the
    // unsharded search's, which the reader read.
    assert_eq!(
        number(&stranger, "compiled_here") - number(&reader, "compiled_here"),
        distinct,
        "{stranger}\n{reader}"
    );
    assert_eq!(stranger["overrides"], reader["overrides"]);
    assert_eq!(stranger["best_cycles"], reader["best_cycles"]);
    let _ = std::fs::remove_dir_all(&directory);
}
