//! The remote cache tier against a real server: nginx with WebDAV `PUT`
//! on a loopback port, started and stopped by each test, and a fault proxy
//! in front of it. A fresh local cache with a warm remote serves a SigLIP
//! build (two layers: every phase of the full model's layer body, with a
//! Repeat) without scheduling; three shard processes then a merge sweep that
//! schedules nothing; every fault (down, refusing, silent, 404, 500,
//! truncated, someone else's bytes, a huge body) leaves the build
//! succeeding with one warning and the same package as an uncached build;
//! two processes uploading the same entries at once; no credentials shown.

use crate::common;
use crate::servers;

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use common::{counts, query, scratch, superstep};
use servers::{Fault, Nginx, Proxy};
use superstep::cache::PersistentCache;
use superstep::cache::remote::{RemoteCache, RemoteSettings};
use superstep::session::Session;
use superstep::session::TrackedQuery;

const TINY: &str = "queries/vit-tiny.toml";
const SIGLIP: &str = "queries/siglip-so400m.toml";

fn settings() -> RemoteSettings {
    RemoteSettings {
        timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(120),
        ..RemoteSettings::default()
    }
}

fn cache_with_remote(directory: &Path, url: &str) -> Arc<PersistentCache> {
    let local = PersistentCache::open(directory, 4 << 30).expect("cache");
    Arc::new(local.with_remote(RemoteCache::open(url, settings()).expect("remote")))
}

#[test]
fn a_fresh_local_cache_with_a_warm_remote_serves_siglip_without_scheduling() {
    let directory = scratch("remote", "siglip");
    let nginx = Nginx::start(&directory.join("nginx"));
    let query = query(SIGLIP, &["workload.layers=2"]);
    let cold_cache = cache_with_remote(&directory.join("first"), &nginx.url());
    let mut cold = Session::with_cache(&query, Some(cold_cache.clone()));
    let cold_outcome = cold.build().expect("build");
    let cold_package = cold.package().expect("package");
    let report = cold_cache.finish();
    let remote = report.remote.expect("remote report");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(remote.uploaded > 50, "{remote:?}");
    // Only kinds an independent checker proves are shared (schedules and
    // the placement); rows, figures and the rest are derived locally.
    assert!(remote.uploaded < report.statistics.writes, "{remote:?}");
    assert_eq!(nginx.entries().len() as u64, remote.uploaded);

    let warm_cache = cache_with_remote(&directory.join("second"), &nginx.url());
    let mut warm = Session::with_cache(&query, Some(warm_cache.clone()));
    let warm_outcome = warm.build().expect("build");
    let runs = counts(&warm_outcome.executions);
    // `scheduled` runs to load each schedule from the remote (figures and
    // rows are derived locally), and `placement` once to load and check
    // the placement; the remote has every one (no misses below), so
    // nothing is scheduled and nothing placed. (This line used to ask for
    // a query named "placement_search", which does not exist, and so
    // checked nothing.)
    assert_eq!(runs.get(&TrackedQuery::Placement), Some(&1), "{runs:?}");
    assert_eq!(warm.package().expect("package"), cold_package);
    assert_eq!(
        warm_outcome
            .back
            .as_ref()
            .map(|back| back.headline.estimate.total_cycles),
        cold_outcome
            .back
            .as_ref()
            .map(|back| back.headline.estimate.total_cycles)
    );
    let report = warm_cache.finish();
    let remote = report.remote.expect("remote report");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(remote.rejected, 0);
    assert_eq!(remote.misses, 0, "every shared entry came down: {remote:?}");
    assert_eq!(remote.hits, report.statistics.hits, "{remote:?}");
    assert!(remote.bytes_downloaded > 1 << 20, "{remote:?}");
    // What came down is kept locally: a third session needs no remote.
    let local_only =
        Arc::new(PersistentCache::open(&directory.join("second"), 4 << 30).expect("cache"));
    let mut third = Session::with_cache(&query, Some(local_only.clone()));
    let runs = counts(&third.build().expect("build").executions);
    // Each schedule is read from the local cache to check its rows against;
    // none is computed (no miss, no write).
    assert_eq!(
        runs.get(&TrackedQuery::Scheduled),
        runs.get(&TrackedQuery::EncodedRows),
        "{runs:?}"
    );
    assert_eq!(local_only.statistics().misses, 0);
    assert_eq!(local_only.statistics().writes, 0);
}

/// Runs the binary; panics with its standard error unless it succeeded.
fn run(arguments: &[&str]) -> Output {
    let output = superstep(arguments);
    assert!(
        output.status.success(),
        "{arguments:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Both streams (the cache's summary line goes to either).
fn both(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `superstep build` of the tiny ViT with outputs in `outputs` and the
/// local cache `cache` (none: `--no-cache`), behind `remote` if given.
fn build_tiny(
    outputs: &Path,
    cache: Option<&Path>,
    remote: Option<&str>,
    extra: &[&str],
) -> Output {
    let outputs_set = format!("outputs.directory={}", outputs.display());
    let mut arguments: Vec<String> = ["build", TINY, "--suggestions", "0", "--set", &outputs_set]
        .iter()
        .map(|text| text.to_string())
        .collect();
    match cache {
        Some(cache) => arguments.extend(["--cache".to_string(), cache.display().to_string()]),
        None => arguments.push("--no-cache".to_string()),
    }
    if let Some(remote) = remote {
        arguments.extend(["--cache-remote".to_string(), remote.to_string()]);
    }
    arguments.extend(extra.iter().map(|text| text.to_string()));
    let borrowed: Vec<&str> = arguments.iter().map(String::as_str).collect();
    run(&borrowed)
}

fn package(outputs: &Path) -> Vec<u8> {
    std::fs::read(outputs.join("vit-tiny").join("package.bin")).expect("package")
}

#[test]
fn every_server_fault_degrades_to_local_work_with_one_warning() {
    let directory = scratch("remote", "faults");
    let nginx = Nginx::start(&directory.join("nginx"));
    let uncached = directory.join("uncached");
    build_tiny(&uncached, None, None, &[]);
    let expected = package(&uncached);
    // Fill the server through a clean run, so that faults in reading meet
    // real entries behind the proxy.
    let filled = directory.join("filled");
    build_tiny(
        &filled,
        Some(&filled.join("cache")),
        Some(&nginx.url()),
        &[],
    );
    assert!(!nginx.entries().is_empty());
    let nothing = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let down = format!(
        "http://127.0.0.1:{}/superstep",
        nothing.local_addr().expect("addr").port()
    );
    drop(nothing);
    let cases: Vec<(&str, Option<Fault>, &str)> = vec![
        ("down", None, "remote cache http://127.0.0.1:"),
        (
            "refuses",
            Some(Fault::Refuse),
            "remote cache http://127.0.0.1:",
        ),
        (
            "silent",
            Some(Fault::Silent),
            "remote cache http://127.0.0.1:",
        ),
        ("not-found", Some(Fault::NotFound), ""),
        (
            "slow",
            Some(Fault::Forward {
                delay: Duration::from_millis(10),
            }),
            "",
        ),
        ("server-error", Some(Fault::ServerError), "500"),
        (
            "truncated",
            Some(Fault::Truncated),
            "remote cache http://127.0.0.1:",
        ),
        (
            "foreign",
            Some(Fault::Foreign),
            "fails its check: not a superstep cache file",
        ),
        ("huge", Some(Fault::Huge), "over the"),
    ];
    for (name, fault, warning) in cases {
        let proxy = fault.map(|fault| Proxy::start(nginx.port, fault));
        let url = proxy.as_ref().map_or(down.clone(), Proxy::url);
        let outputs = directory.join(name);
        let output = build_tiny(
            &outputs,
            Some(&outputs.join("cache")),
            Some(&url),
            &[
                "--set",
                "cache.remote_timeout_ms=1000",
                "--set",
                "cache.remote_deadline_ms=1000",
            ],
        );
        let text = both(&output);
        let warnings: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("warning:"))
            .collect();
        assert_eq!(package(&outputs), expected, "{name}: the package differs");
        if name == "not-found" {
            // An ordinary miss; its uploads are answered 201.
            assert!(warnings.is_empty(), "{name}: {text}");
        } else if name == "slow" {
            // 20 ms more per request is no fault: every entry comes down.
            assert!(warnings.is_empty(), "{name}: {text}");
            // (Rows, figures and the rest are derived locally: only the
            // remote's own line says every shared entry came down.)
            let remote_line = text
                .split("remote http")
                .nth(1)
                .unwrap_or_default()
                .to_string();
            assert!(
                remote_line.contains(" 0 misses (0 rejected)"),
                "{name}: {text}"
            );
        } else {
            assert_eq!(warnings.len(), 1, "{name}: {text}");
            assert!(warnings[0].contains(warning), "{name}: {text}");
            assert!(
                warnings[0].contains("fell back to local work"),
                "{name}: {text}"
            );
        }
        let summary = text
            .lines()
            .find(|line| line.starts_with("cache "))
            .expect("summary");
        assert!(
            summary.contains("; remote http://127.0.0.1:"),
            "{name}: {summary}"
        );
        assert!(!text.contains("panicked"), "{name}: {text}");
        if let Some(proxy) = &proxy {
            assert!(
                proxy.requests.load(std::sync::atomic::Ordering::Relaxed) > 0,
                "{name}"
            );
        }
        // Nothing the server sent is kept locally: a rerun without the
        // remote rebuilds only from its own (complete) local entries.
        let again = build_tiny(&outputs, Some(&outputs.join("cache")), None, &[]);
        assert!(
            both(&again).contains(" 0 misses"),
            "{name}: {}",
            both(&again)
        );
    }
}

#[test]
fn two_processes_uploading_the_same_entries_at_once_leave_them_whole() {
    let directory = scratch("remote", "concurrent");
    let nginx = Nginx::start(&directory.join("nginx"));
    let url = nginx.url();
    let spawn = |name: &str| {
        let outputs = directory.join(name);
        let outputs_set = format!("outputs.directory={}", outputs.display());
        let cache = outputs.join("cache");
        std::process::Command::new(env!("CARGO_BIN_EXE_superstep"))
            .args([
                "build",
                TINY,
                "--suggestions",
                "0",
                "--set",
                &outputs_set,
                "--cache",
            ])
            .arg(&cache)
            .args([
                "--cache-remote",
                &url,
                "--set",
                "cache.remote_deadline_ms=30000",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("runs")
    };
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| spawn("one"));
        let second = scope.spawn(|| spawn("two"));
        (first.join().expect("one"), second.join().expect("two"))
    });
    for output in [&first, &second] {
        assert!(output.status.success(), "{}", both(output));
        assert!(!both(output).contains("warning:"), "{}", both(output));
    }
    // A third process with an empty local cache reads every entry from the
    // server and rejects none.
    let third = directory.join("three");
    let output = build_tiny(&third, Some(&third.join("cache")), Some(&url), &[]);
    let text = both(&output);
    assert!(text.contains("(0 rejected), 0 uploaded"), "{text}");
    assert!(text.contains(" 0 misses"), "{text}");
    assert_eq!(package(&third), package(&directory.join("one")));
}

#[test]
fn credentials_are_refused_in_the_file_and_never_shown() {
    let directory = scratch("remote", "credentials");
    let outputs_set = format!("outputs.directory={}", directory.display());
    let output = superstep(&[
        "build",
        TINY,
        "--set",
        &outputs_set,
        "--set",
        "cache.remote=http://alice:secret@127.0.0.1:9/cache",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(text.contains("cache.remote carries credentials"), "{text}");
    assert!(text.contains("SUPERSTEP_CACHE_TOKEN"), "{text}");
    let output = superstep(&[
        "build",
        TINY,
        "--set",
        &outputs_set,
        "--set",
        "cache.remote=ftp://host/x",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("not a remote cache URL"),
        "{}",
        stderr(&output)
    );
    // On the command line they are accepted for the request but never
    // printed, nor written to last-build.json.
    let nothing = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = nothing.local_addr().expect("addr").port();
    drop(nothing);
    let url = format!("http://alice:secret@127.0.0.1:{port}/cache");
    let output = build_tiny(
        &directory,
        Some(&directory.join("cache")),
        Some(&url),
        &["--set", "cache.remote_timeout_ms=500"],
    );
    let text = format!(
        "{}{}",
        stderr(&output),
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(!text.contains("secret"), "{text}");
    assert!(
        text.contains(&format!("remote http://127.0.0.1:{port}/cache")),
        "{text}"
    );
    let record = std::fs::read_to_string(directory.join("vit-tiny").join("last-build.json"))
        .expect("record");
    assert!(!record.contains("secret"));
}

#[test]
fn three_shards_then_a_merge_that_schedules_nothing() {
    let directory = scratch("remote", "shards");
    let nginx = Nginx::start(&directory.join("nginx"));
    let url = nginx.url();
    let sweep = |name: &str, shard: Option<&str>| {
        let outputs = directory.join(name);
        let outputs_set = format!("outputs.directory={}", outputs.display());
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_superstep"));
        command
            .args([
                "sweep",
                TINY,
                "--set",
                "schedule.policy=B1024",
                "--set",
                &outputs_set,
            ])
            .args([
                "--config",
                "S64/word32",
                "--config",
                "B256/word32",
                "--config",
                "latency/word32",
            ])
            .arg("--cache")
            .arg(outputs.join("cache"))
            .args([
                "--cache-remote",
                &url,
                "--set",
                "cache.remote_deadline_ms=30000",
                "--verbose",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if let Some(shard) = shard {
            command.args(["--shard", shard]);
        }
        command
    };
    let mut shards: Vec<std::process::Child> = (0..3)
        .map(|index| {
            sweep(&format!("shard-{index}"), Some(&format!("{index}/3")))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("shard")
        })
        .collect();
    let mut measured = 0;
    for child in shards.drain(..) {
        let output = child.wait_with_output().expect("shard ends");
        assert!(output.status.success(), "{}", stderr(&output));
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let count: usize = text
            .split(" of the ")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|count| count.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        measured += count;
        assert!(
            !directory
                .join("shard-0")
                .join("vit-tiny")
                .join("sweep")
                .exists()
        );
    }
    let phases = {
        let mut session = Session::new(&query(TINY, &["schedule.policy=B1024"]));
        session.build_low_program().expect("front");
        session.phases().len()
    };
    let points = phases * 3;
    assert_eq!(measured, points, "every point in exactly one shard");
    let merge = sweep("merge", None).output().expect("merge");
    assert!(merge.status.success(), "{}", stderr(&merge));
    let text = String::from_utf8_lossy(&merge.stdout).to_string();
    assert!(text.contains(&format!("{points} points")), "{text}");
    // Every schedule of every point came from the remote (the points
    // themselves, figures of schedules, are derived locally: checking one
    // costs what computing it costs); the one remote miss is the placement
    // (shards do not place the program), computed and uploaded by the merge.
    let streams = both(&merge);
    let remote_line = streams
        .split("remote http")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(
        remote_line.contains(" 1 misses (0 rejected), 1 uploaded"),
        "{streams}"
    );
    // The same merge in process, from the salsa event log.
    let query = query(TINY, &["schedule.policy=B1024"]);
    let cache = cache_with_remote(&directory.join("in-process"), &url);
    let mut session = Session::with_cache(&query, Some(cache.clone()));
    session.build().expect("build");
    let configs = common::sweep_configs(&["S64/word32", "B256/word32", "latency/word32"]);
    let swept = superstep::studies::sweep::sweep(&session, &configs).expect("sweep");
    assert_eq!(swept.point_count(), points);
    let runs = counts(&session.take_executions());
    assert_eq!(
        runs.get(&TrackedQuery::SweepPoint),
        Some(&points),
        "{runs:?}"
    );
    // Every schedule came from the remote, and the placement the merge
    // above uploaded: no remote misses, so nothing was scheduled.
    let remote = cache.finish().remote.expect("remote");
    assert_eq!((remote.misses, remote.rejected), (0, 0), "{remote:?}");
    assert!(
        directory
            .join("merge")
            .join("vit-tiny")
            .join("sweep")
            .join("results.csv")
            .exists()
    );
}
