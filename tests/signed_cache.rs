//! Signed cache entries (issue 45) against a real nginx on loopback: a
//! writer's signed entries of every kind serve a trusting reader without
//! scheduling, checking or encoding anything, and the package is the
//! uncached build's; entries re-signed by an untrusted key, a changed
//! payload under a trusted signature, an entry replayed under another key
//! and unsigned poisoned entries are all re-checked or refused, nothing bad
//! is kept, and the package is still the uncached build's. The secret key
//! is never printed and never accepted from a build file.

use crate::common;
use crate::servers;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{counts, files, kind_and_key, query, scratch, superstep};
use servers::Nginx;
use superstep::cache::entry::{decode, encode};
use superstep::cache::remote::{RemoteCache, RemoteSettings};
use superstep::cache::signing::{Signature, SigningKey, TrustedKeys};
use superstep::cache::{EntryKind, PersistentCache, Signing};
use superstep::session::{Session, TrackedQuery};

const TINY: &str = "queries/vit-tiny.toml";

fn settings() -> RemoteSettings {
    RemoteSettings {
        timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(120),
        ..RemoteSettings::default()
    }
}

/// A key pair: the key and its secret's text.
fn key_pair() -> (SigningKey, String) {
    let (key, secret) = SigningKey::generate().expect("key");
    (
        key,
        String::from_utf8(secret.as_bytes().to_vec()).expect("text"),
    )
}

/// A cache in `directory` over `url`, signing with `signer` (a writer's
/// key when `writer`) and trusting `trusted`.
fn cache(
    directory: &Path,
    url: &str,
    signer: Option<&str>,
    writer: bool,
    trusted: &[&SigningKey],
) -> Arc<PersistentCache> {
    let local = PersistentCache::open(directory, 4 << 30).expect("cache");
    let signing = Signing {
        signer: signer.map(|text| SigningKey::parse(text, "test").expect("secret")),
        writer,
        listed: TrustedKeys::new(trusted.iter().map(|key| key.public()).collect()),
        also_trusted: Vec::new(),
    };
    Arc::new(
        local
            .with_signing(signing)
            .with_remote(RemoteCache::open(url, settings()).expect("remote")),
    )
}

/// A reader with a fresh local cache in `directory` over `nginx`'s remote,
/// trusting `writer` only, signing nothing and uploading nothing.
fn trusting_reader(directory: &Path, nginx: &Nginx, writer: &SigningKey) -> Arc<PersistentCache> {
    cache(directory, &nginx.url(), None, false, &[writer])
}

fn tiny() -> superstep::build_file::BuildQuery {
    query(TINY, &["workload.layers=3"])
}

/// Builds with `cache`; returns the package and the cache's report.
fn build_with(
    cache: &Arc<PersistentCache>,
) -> (
    superstep::package::Package,
    std::collections::BTreeMap<TrackedQuery, usize>,
    superstep::cache::CacheReport,
) {
    let mut session = Session::with_cache(&tiny(), Some(cache.clone()));
    let outcome = session.build().expect("build");
    let package = session.package().expect("package");
    (package, counts(&outcome.executions), cache.finish())
}

fn uncached_package() -> superstep::package::Package {
    let mut session = Session::new(&tiny());
    session.build().expect("build");
    session.package().expect("package")
}

/// The server's entries, filled by a writer signing with `secret`.
fn fill(directory: &Path, nginx: &Nginx, secret: &str) -> Vec<PathBuf> {
    let writer = cache(
        &directory.join("writer"),
        &nginx.url(),
        Some(secret),
        true,
        &[],
    );
    let (_, _, report) = build_with(&writer);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    nginx.entries()
}

#[test]
fn a_trusting_reader_takes_every_kind_from_a_signed_remote_without_checking() {
    let directory = scratch("signed-cache", "trusted");
    let nginx = Nginx::start(&directory.join("nginx"));
    let (writer_key, secret) = key_pair();
    let served = fill(&directory, &nginx, &secret);
    let kinds: std::collections::BTreeSet<&str> = served
        .iter()
        .map(|path| kind_and_key(path).0.folder())
        .collect();
    // Every kind the build stores is shared once a writer signs it.
    for kind in [
        "schedule",
        "rows",
        "figures",
        "placement",
        "bound",
        "grouping",
    ] {
        assert!(kinds.contains(kind), "{kind} not uploaded: {kinds:?}");
    }
    let expected = uncached_package();

    // A reader that trusts the writer, with a fresh local cache: nothing
    // is scheduled, and no schedule is even loaded (rows are not checked
    // against one).
    let reader = trusting_reader(&directory.join("reader"), &nginx, &writer_key);
    let (package, runs, report) = build_with(&reader);
    assert_eq!(package, expected);
    assert_eq!(runs.get(&TrackedQuery::Scheduled), None, "{runs:?}");
    // The grouping is replayed from the writer's record: no merge is
    // priced (no merge's bound, no figures beyond the program's phases).
    assert_eq!(runs.get(&TrackedQuery::ProblemBound), None, "{runs:?}");
    // Nor are rows loaded for the build: their summaries and the row
    // table are read (the package reads the rows).
    assert_eq!(
        runs.get(&TrackedQuery::ScheduleFigures),
        runs.get(&TrackedQuery::RowSummary),
        "{runs:?}"
    );
    assert_eq!(runs.get(&TrackedQuery::EncodedRows), None, "{runs:?}");
    let remote = report.remote.expect("remote");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!((remote.misses, remote.rejected), (0, 0), "{remote:?}");

    // A reader that trusts no key: today's path (only checked kinds come
    // down, every schedule is validated), the same package.
    let plain = cache(&directory.join("plain"), &nginx.url(), None, false, &[]);
    let (package, runs, report) = build_with(&plain);
    assert_eq!(package, expected);
    assert!(runs.contains_key(&TrackedQuery::Scheduled), "{runs:?}");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let _ = std::fs::remove_dir_all(&directory);
}

/// A local cache in `directory` that signs with `signer` (a secret key's
/// text) when given, as a user's own cache signs with their local key, and
/// lists no other key.
fn own_cache(directory: &Path, signer: Option<&str>) -> Arc<PersistentCache> {
    let local = PersistentCache::open(directory, 4 << 30).expect("cache");
    Arc::new(local.with_signing(Signing {
        signer: signer.map(|text| SigningKey::parse(text, "test").expect("secret")),
        writer: false,
        listed: TrustedKeys::new(Vec::new()),
        also_trusted: Vec::new(),
    }))
}

/// A user's own cache in a fresh scratch folder (`signed-cache/NAME`),
/// filled by one cold build signed with a fresh key: the folder, the
/// secret, the uncached build's package and the cold build's executed
/// queries (the cold build's package is checked to be that one).
fn own_signed_cache_after_a_cold_build(
    name: &str,
) -> (
    std::path::PathBuf,
    String,
    superstep::package::Package,
    std::collections::BTreeMap<TrackedQuery, usize>,
) {
    let directory = scratch("signed-cache", name);
    let (_, secret) = key_pair();
    let expected = uncached_package();
    let (package, cold_runs, _) = build_with(&own_cache(&directory.join("cache"), Some(&secret)));
    assert_eq!(package, expected);
    (directory, secret, expected, cold_runs)
}

/// A warm build over a local cache its own key signs replays the record of
/// its phase grouping: no boundary is priced again (no merge's bound, no
/// figures beyond the program's phases), and the package is the uncached
/// build's. The same cache without the key judges and prices every
/// boundary again, to the same package.
#[test]
fn a_warm_build_over_its_own_signed_cache_replays_the_grouping() {
    let (directory, secret, expected, cold_runs) = own_signed_cache_after_a_cold_build("replay");
    let open = |signer: Option<&str>| own_cache(&directory.join("cache"), signer);
    assert!(
        cold_runs.contains_key(&TrackedQuery::ProblemBound),
        "the tiny build prices no merge, so this test shows nothing: {cold_runs:?}"
    );
    let (package, runs, report) = build_with(&open(Some(&secret)));
    assert_eq!(package, expected);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(runs.get(&TrackedQuery::ProblemBound), None, "{runs:?}");
    assert_eq!(
        runs.get(&TrackedQuery::ScheduleFigures),
        runs.get(&TrackedQuery::RowSummary),
        "{runs:?}"
    );
    assert_eq!(report.statistics.writes, 0, "{:?}", report.statistics);
    // Without the key the record is not trusted: every boundary is priced
    // again (from cached figures and bounds), to the same package.
    let (package, runs, report) = build_with(&open(None));
    assert_eq!(package, expected);
    assert!(runs.contains_key(&TrackedQuery::ProblemBound), "{runs:?}");
    assert_eq!(report.statistics.writes, 0, "{:?}", report.statistics);
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_warm_build_over_its_own_signed_cache_loads_no_rows_until_the_package() {
    let (directory, secret, expected, cold_runs) = own_signed_cache_after_a_cold_build("no-rows");
    let open = |signer: Option<&str>| own_cache(&directory.join("cache"), signer);
    let phases = cold_runs[&TrackedQuery::PhaseFigures];
    assert!(cold_runs[&TrackedQuery::EncodedRows] > 0, "{cold_runs:?}");

    // Warm and signed: the figures, patches and row table come from the
    // rows' summaries and the kept table; no phase's rows are loaded until
    // the package asks for them, and it is the uncached build's.
    let cache = open(Some(&secret));
    let mut session = Session::with_cache(&tiny(), Some(cache.clone()));
    let outcome = session.build().expect("build");
    let runs = counts(&outcome.executions);
    assert_eq!(runs.get(&TrackedQuery::EncodedRows), None, "{runs:?}");
    assert_eq!(runs.get(&TrackedQuery::Scheduled), None, "{runs:?}");
    assert_eq!(runs[&TrackedQuery::RowTable], 1, "{runs:?}");
    assert!(runs[&TrackedQuery::RowSummary] <= phases, "{runs:?}");
    assert_eq!(session.package().expect("package"), expected);
    let report = cache.finish();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(report.statistics.writes, 0, "{:?}", report.statistics);

    // Unsigned, the same entries are checked by making them again from
    // the checked rows: the rows are loaded, nothing is refused or written.
    let cache = open(None);
    let mut session = Session::with_cache(&tiny(), Some(cache.clone()));
    let outcome = session.build().expect("build");
    let runs = counts(&outcome.executions);
    assert!(runs[&TrackedQuery::EncodedRows] > 0, "{runs:?}");
    assert_eq!(session.package().expect("package"), expected);
    let report = cache.finish();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(
        (report.statistics.rejected, report.statistics.writes),
        (0, 0),
        "{:?}",
        report.statistics
    );

    // A summary and a table that do not match the rows they claim to
    // summarise, kept unsigned: refused with a warning each, remade, the
    // same package.
    for kind in [EntryKind::RowSummary, EntryKind::RowTable] {
        for path in files(&directory.join("cache").join(kind.folder())) {
            let (kind, key) = kind_and_key(&path);
            let bytes = std::fs::read(&path).expect("entry");
            let value = payload(kind, &key, &bytes);
            let wrong = match kind {
                EntryKind::RowSummary => {
                    let mut summary: superstep::incremental::row_summary::RowSummary =
                        bincode::deserialize(&value).expect("summary");
                    summary.total_bytes += 4;
                    bincode::serialize(&summary).expect("encodes")
                }
                _ => {
                    let mut table: superstep::rows::RowTable =
                        bincode::deserialize(&value).expect("table");
                    table.identical_rows += 1;
                    bincode::serialize(&table).expect("encodes")
                }
            };
            std::fs::write(&path, encode(kind, &key, &wrong, None).expect("encodes"))
                .expect("write");
        }
    }
    let cache = open(None);
    let mut session = Session::with_cache(&tiny(), Some(cache.clone()));
    session.build().expect("build");
    assert_eq!(session.package().expect("package"), expected);
    let report = cache.finish();
    assert!(report.statistics.rejected >= 2, "{:?}", report.statistics);
    assert!(
        report
            .warnings
            .iter()
            .any(|warning| warning.contains("summary of the phase's checked rows")),
        "{:?}",
        report.warnings
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// Rewrites each served entry with `change(kind, key, bytes)`.
fn rewrite(
    served: &[PathBuf],
    change: impl Fn(EntryKind, &superstep::cache::CacheKey, &[u8]) -> Vec<u8>,
) {
    for path in served {
        let (kind, key) = kind_and_key(path);
        let bytes = std::fs::read(path).expect("entry");
        std::fs::write(path, change(kind, &key, &bytes)).expect("write");
    }
}

fn payload(kind: EntryKind, key: &superstep::cache::CacheKey, bytes: &[u8]) -> Vec<u8> {
    decode(bytes, kind, key, &TrustedKeys::default())
        .expect("valid")
        .payload
}

/// A changed payload: one byte of it altered (a schedule one event
/// longer, for schedules, so the validator refuses it).
fn changed(kind: EntryKind, payload: &[u8]) -> Vec<u8> {
    if kind == EntryKind::Schedule {
        let mut schedule: superstep::schedule::Schedule =
            bincode::deserialize(payload).expect("schedule");
        schedule.horizon += 1;
        return bincode::serialize(&schedule).expect("encodes");
    }
    let mut payload = payload.to_vec();
    let middle = payload.len() / 2;
    payload[middle] ^= 0x5a;
    payload
}

/// No local entry holds bytes the server sent in `bad`.
fn nothing_kept(local: &Path, bad: &[Vec<u8>]) {
    for path in files(local) {
        let bytes = std::fs::read(&path).expect("entry");
        assert!(!bad.contains(&bytes), "{} was kept", path.display());
    }
}

#[test]
fn untrusted_tampered_and_replayed_entries_are_rechecked_or_refused() {
    let directory = scratch("signed-cache", "attacks");
    let nginx = Nginx::start(&directory.join("nginx"));
    let (writer_key, secret) = key_pair();
    let served = fill(&directory, &nginx, &secret);
    let originals: Vec<Vec<u8>> = served
        .iter()
        .map(|path| std::fs::read(path).expect("entry"))
        .collect();
    let expected = uncached_package();
    let restore = || {
        for (path, bytes) in served.iter().zip(&originals) {
            std::fs::write(path, bytes).expect("restore");
        }
    };
    let served_now = || -> Vec<Vec<u8>> {
        served
            .iter()
            .map(|path| std::fs::read(path).expect("entry"))
            .collect()
    };

    // 1. Every entry re-signed by a key the reader does not trust, its
    // payload changed: schedules are validated (and refused), every other
    // kind is not used; the package is the uncached build's.
    let (stranger, _) = key_pair();
    rewrite(&served, |kind, key, bytes| {
        encode(
            kind,
            key,
            &changed(kind, &payload(kind, key, bytes)),
            Some(&stranger),
        )
        .expect("encodes")
    });
    let bad = served_now();
    let reader = trusting_reader(&directory.join("resigned"), &nginx, &writer_key);
    let (package, _, report) = build_with(&reader);
    assert_eq!(package, expected);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    nothing_kept(&directory.join("resigned"), &bad);

    // The same entries unchanged but re-signed by the stranger: checked
    // kinds pass their checks and are used, the others are recomputed,
    // with one warning counting them.
    restore();
    rewrite(&served, |kind, key, bytes| {
        encode(kind, key, &payload(kind, key, bytes), Some(&stranger)).expect("encodes")
    });
    let reader = trusting_reader(&directory.join("resigned-clean"), &nginx, &writer_key);
    let (package, _, report) = build_with(&reader);
    assert_eq!(package, expected);
    let remote = report.remote.expect("remote");
    assert!(remote.untrusted > 0, "{remote:?}");
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains("no trusted key signed"),
        "{:?}",
        report.warnings
    );

    // 2. A changed payload under the writer's (valid) signature: the
    // signature no longer verifies; refused, the remote off, one warning.
    restore();
    for path in &served {
        let (kind, key) = kind_and_key(path);
        let bytes = std::fs::read(path).expect("entry");
        let mut tampered = encode(
            kind,
            &key,
            &changed(kind, &payload(kind, &key, &bytes)),
            Some(&stranger),
        )
        .expect("encodes");
        // Put the writer's signer and signature back over the new digest.
        let at = signature_offset(&bytes);
        tampered[at..at + 32 + 64].copy_from_slice(&bytes[at..at + 32 + 64]);
        assert_eq!(
            decode(
                &tampered,
                kind,
                &key,
                &TrustedKeys::new(vec![writer_key.public()])
            )
            .expect("well formed")
            .signature,
            Signature::Invalid(writer_key.public())
        );
        std::fs::write(path, tampered).expect("write");
    }
    let bad = served_now();
    let reader = trusting_reader(&directory.join("tampered"), &nginx, &writer_key);
    let (package, _, report) = build_with(&reader);
    assert_eq!(package, expected);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains("does not verify"),
        "{:?}",
        report.warnings
    );
    // Both of the build's threads may meet a tampered entry before the
    // remote is off; each is rejected, the warning is one.
    assert!(report.remote.expect("remote").rejected >= 1);
    nothing_kept(&directory.join("tampered"), &bad);

    // 3. Entries replayed under other keys (each kind's entries shifted by
    // one, signatures intact): refused by their header.
    restore();
    let mut by_kind: std::collections::BTreeMap<u8, Vec<usize>> = Default::default();
    for (index, path) in served.iter().enumerate() {
        by_kind
            .entry(kind_and_key(path).0 as u8)
            .or_default()
            .push(index);
    }
    // (A kind with one entry, such as the calibration, is left as it is.)
    let mut bad = Vec::new();
    for indices in by_kind.values().filter(|indices| indices.len() > 1) {
        for (position, &index) in indices.iter().enumerate() {
            let source = indices[(position + 1) % indices.len()];
            std::fs::write(&served[index], &originals[source]).expect("write");
            bad.push(originals[source].clone());
        }
    }
    let reader = trusting_reader(&directory.join("replayed"), &nginx, &writer_key);
    let (package, _, report) = build_with(&reader);
    assert_eq!(package, expected);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    nothing_kept(&directory.join("replayed"), &bad);

    // The next build of each reader, without the remote, is clean.
    for name in ["resigned", "tampered", "replayed"] {
        let local = Arc::new(
            PersistentCache::open(&directory.join(name), 4 << 30)
                .expect("cache")
                .with_signing(Signing {
                    listed: TrustedKeys::new(vec![writer_key.public()]),
                    ..Signing::default()
                }),
        );
        let mut session = Session::with_cache(&tiny(), Some(local.clone()));
        session.build().expect("build");
        assert_eq!(session.package().expect("package"), expected);
        assert!(local.finish().warnings.is_empty(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// Where a signed entry's signer starts (after the fixed header, the tool,
/// the lengths, the digest and the signature flag).
fn signature_offset(bytes: &[u8]) -> usize {
    let tool = u16::from_le_bytes([bytes[45], bytes[46]]) as usize;
    47 + tool + 8 + 8 + 32 + 1
}

#[test]
fn keygen_writes_an_owner_only_secret_and_never_prints_it() {
    let directory = scratch("signed-cache", "keygen");
    std::fs::create_dir_all(&directory).expect("folder");
    let secret_path = directory.join("writer.key");
    let output = superstep(&[
        "cache",
        "keygen",
        "--output",
        &secret_path.display().to_string(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let secret = std::fs::read_to_string(&secret_path).expect("secret");
    let digits = secret
        .trim()
        .rsplit(':')
        .next()
        .expect("digits")
        .to_string();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!printed.contains(&digits), "the secret was printed");
    let public = std::fs::read_to_string(directory.join("writer.key.pub")).expect("public");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        public.trim()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secret_path)
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Never over an existing key.
    let again = superstep(&[
        "cache",
        "keygen",
        "--output",
        &secret_path.display().to_string(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&secret_path).expect("secret"),
        secret
    );

    // A build file holding the secret (by key name, or as a trusted key)
    // is refused (exit 2), naming the field and never echoing the secret.
    for (name, line) in [
        ("by-name", format!("signing_key = \"{}\"", secret.trim())),
        (
            "as-trusted",
            format!("trusted_keys = [\"{}\"]", secret.trim()),
        ),
    ] {
        let file = directory.join(format!("{name}.toml"));
        let text = std::fs::read_to_string(TINY).expect("query");
        std::fs::write(&file, format!("{text}\n[cache]\n{line}\n")).expect("write");
        let output = superstep(&["build", &file.display().to_string(), "--no-cache"]);
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(output.status.code(), Some(2), "{name}: {printed}");
        assert!(printed.contains("cache."), "{name}: {printed}");
        assert!(
            printed.contains("SUPERSTEP_CACHE_SIGNING_KEY"),
            "{name}: {printed}"
        );
        assert!(!printed.contains(&digits), "{name}: the secret was echoed");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// A CI-shaped sweep over a signed remote: a writer builds, two shards (each
/// a writer with the team's key, in its own folder) measure half of the
/// sweep's points each, and a reader with a fresh local cache that trusts
/// the key merges: every point, the build's rows, figures, grouping and
/// placement come down signed, so the merge recomputes nothing (no
/// remote miss, nothing scheduled, encoded or priced, from the event log)
/// and its points are the shards' points.
#[test]
fn a_sharded_sweep_over_a_signed_remote_merges_without_recomputing() {
    let directory = scratch("signed-cache", "shards");
    let nginx = Nginx::start(&directory.join("nginx"));
    let url = nginx.url();
    let (writer_key, secret) = key_pair();
    const CONFIGS: [&str; 2] = ["S64/word32", "latency/word32"];
    let writer = |name: &str, command: &[&str]| {
        let outputs = directory.join(name);
        let outputs_set = format!("outputs.directory={}", outputs.display());
        let mut process = std::process::Command::new(env!("CARGO_BIN_EXE_superstep"));
        process
            .args(command)
            .args([TINY, "--set", "workload.layers=3", "--set", &outputs_set])
            .args([
                "--cache-remote",
                &url,
                "--set",
                "cache.remote_deadline_ms=30000",
            ])
            .env("SUPERSTEP_CACHE_SIGNING_KEY", &secret)
            .env("SUPERSTEP_LOCAL_CACHE_KEY", outputs.join("local.key"))
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        process
    };
    let output = writer("build", &["build"]).output().expect("build");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let shards: Vec<std::process::Child> = (0..2)
        .map(|index| {
            let shard = format!("{index}/2");
            let mut command = writer(&format!("shard-{index}"), &["sweep"]);
            for config in CONFIGS {
                command.args(["--config", config]);
            }
            command
                .args(["--shard", &shard])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("shard")
        })
        .collect();
    for child in shards {
        let output = child.wait_with_output().expect("shard ends");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // The merge, in process: a fresh local cache trusting the writers' key.
    let reader = trusting_reader(&directory.join("merge"), &nginx, &writer_key);
    let mut session = Session::with_cache(&tiny(), Some(reader.clone()));
    let built = session.build().expect("build");
    let configs = common::sweep_configs(&CONFIGS);
    let swept = superstep::studies::sweep::sweep(&session, &configs).expect("sweep");
    let points = session.phases().len() * CONFIGS.len();
    assert_eq!(swept.point_count(), points);
    let mut runs = counts(&built.executions);
    for (query, count) in counts(&session.take_executions()) {
        *runs.entry(query).or_default() += count;
    }
    assert_eq!(
        runs.get(&TrackedQuery::SweepPoint),
        Some(&points),
        "{runs:?}"
    );
    for computed in [
        TrackedQuery::Scheduled,
        TrackedQuery::ValidatedSchedule,
        TrackedQuery::ProblemBound,
    ] {
        assert_eq!(runs.get(&computed), None, "{computed:?} ran: {runs:?}");
    }
    let report = reader.finish();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let remote = report.remote.expect("remote");
    assert_eq!((remote.misses, remote.rejected), (0, 0), "{remote:?}");
    assert!(remote.hits as usize >= points, "{remote:?}");
    let _ = std::fs::remove_dir_all(&directory);
}
