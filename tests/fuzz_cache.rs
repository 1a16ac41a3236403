//! Digest-valid mutations of a local cache (issue 26): every entry of a
//! warm cache, of every kind, with payload bytes changed, cut or extended
//! and its digest recomputed, so that only a check of meaning can tell.
//! No mutated cache may make the compiler panic; the build either succeeds
//! or exits with a named error. Packages that differ from the clean build's
//! are counted by whether `verify` accepts them, and none may be one it
//! rejects (a rewritten rows entry is decoded and checked against its
//! validated schedule on every hit, so it is a miss). The remote
//! tier's version of this (through a loopback server) is in
//! `tests/remote_trust.rs`.
//!
//! Cases per run: `FUZZ_CASES` x the default (like `tests/fuzz_package.rs`).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{Random, files, fuzz_cases, kind_and_key, scratch, superstep};
use superstep::cache::EntryKind;
use superstep::cache::entry::{decode, encode};

const TINY: &str = "queries/vit-tiny.toml";

/// The build every case runs: three layers so that Repeat patches, shared
/// rows and several phase kinds are in the cache.
fn build(outputs: &Path, cache: &Path) -> Output {
    superstep(&[
        "build",
        TINY,
        "--suggestions",
        "1",
        "--cache",
        cache.to_str().expect("path"),
        "--set",
        "workload.layers=3",
        "--set",
        &format!("outputs.directory={}", outputs.display()),
    ])
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Copies every file of `from` into `to`, keeping the folder layout.
fn copy_folder(from: &Path, to: &Path) {
    for file in files(from) {
        let relative = file.strip_prefix(from).expect("inside");
        let target = to.join(relative);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("folder");
        std::fs::copy(&file, &target).expect("copy");
    }
}

/// The cache's entries (files in kind folders), with their kinds.
fn entries(cache: &Path) -> Vec<(PathBuf, EntryKind)> {
    let kinds: Vec<&str> = EntryKind::ALL.iter().map(|kind| kind.folder()).collect();
    let mut found: Vec<(PathBuf, EntryKind)> = files(cache)
        .into_iter()
        .filter(|path| {
            let kind_folder = path
                .parent()
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .and_then(|name| name.to_str());
            kind_folder.is_some_and(|name| kinds.contains(&name))
        })
        .map(|path| {
            let (kind, _) = kind_and_key(&path);
            (path, kind)
        })
        .collect();
    found.sort_by(|left, right| left.0.cmp(&right.0));
    found
}

/// One mutation of a payload: a few bytes changed, or cut short, or
/// extended, or a run of bytes zeroed.
fn mutate(payload: &mut Vec<u8>, random: &mut Random) {
    match random.below(4) {
        0 | 1 if !payload.is_empty() => {
            for _ in 0..1 + random.below(4) {
                let index = random.below(payload.len() as u64) as usize;
                payload[index] = random.next() as u8;
            }
        }
        2 if !payload.is_empty() => {
            let keep = random.below(payload.len() as u64) as usize;
            payload.truncate(keep);
        }
        _ => {
            for _ in 0..1 + random.below(16) {
                payload.push(random.next() as u8);
            }
        }
    }
}

/// What one mutated cache did to the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// The same package as the clean cache's.
    Identical,
    /// Another package, which `verify` accepts.
    OtherVerified,
    /// A named error (exit 1 or 2).
    Refused,
}

#[test]
fn digest_valid_mutations_of_local_entries_never_panic() {
    let directory = scratch("fuzz-cache", "local");
    let clean_cache = directory.join("clean-cache");
    let clean = build(&directory.join("clean"), &clean_cache);
    assert!(clean.status.success(), "{}", text(&clean));
    let clean_package =
        std::fs::read(directory.join("clean/vit-tiny/package.bin")).expect("package");
    let originals = entries(&clean_cache);
    let mut kinds_seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, kind) in &originals {
        *kinds_seen.entry(kind.folder()).or_default() += 1;
    }
    assert!(
        kinds_seen.len() >= 5,
        "the warm cache holds several kinds: {kinds_seen:?}"
    );
    let mut random = Random(0x000c_ac4e_0261);
    let mut outcomes: BTreeMap<Outcome, usize> = BTreeMap::new();
    let mut by_kind: BTreeMap<(&str, Outcome), usize> = BTreeMap::new();
    let cases = fuzz_cases(60);
    for case in 0..cases {
        let cache = directory.join(format!("cache-{case}"));
        let _ = std::fs::remove_dir_all(&cache);
        copy_folder(&clean_cache, &cache);
        // Half the cases mutate one entry (so each kind's effect shows),
        // half mutate a random share of all of them.
        let single = case % 2 == 0;
        let chosen = random.below(originals.len() as u64) as usize;
        let mut mutated_kind = "many";
        for (index, (original, kind)) in originals.iter().enumerate() {
            if single && index != chosen || !single && !random.chance(30) {
                continue;
            }
            let path = cache.join(original.strip_prefix(&clean_cache).expect("inside"));
            let (_, key) = kind_and_key(&path);
            let bytes = std::fs::read(&path).expect("entry");
            let mut payload = decode(
                &bytes,
                *kind,
                &key,
                &superstep::cache::signing::TrustedKeys::default(),
            )
            .expect("a valid entry")
            .payload;
            mutate(&mut payload, &mut random);
            std::fs::write(&path, encode(*kind, &key, &payload, None).expect("encodes"))
                .expect("write");
            if single {
                mutated_kind = kind.folder();
            }
        }
        let outputs = directory.join(format!("out-{case}"));
        let output = build(&outputs, &cache);
        let printed = text(&output);
        assert!(
            !printed.contains("panicked") && output.status.code() != Some(101),
            "case {case} ({mutated_kind}): {printed}"
        );
        let outcome = match output.status.code() {
            Some(0) => {
                let package_path = outputs.join("vit-tiny/package.bin");
                let package = std::fs::read(&package_path).expect("package");
                if package == clean_package {
                    Outcome::Identical
                } else {
                    let verified = superstep(&["verify", package_path.to_str().expect("path")]);
                    assert!(
                        !text(&verified).contains("panicked"),
                        "case {case}: {}",
                        text(&verified)
                    );
                    assert!(
                        verified.status.code() == Some(0),
                        "case {case} ({mutated_kind}): the build succeeded with a package \
                         `verify` rejects: {}",
                        text(&verified)
                    );
                    Outcome::OtherVerified
                }
            }
            Some(1 | 2) => {
                assert!(
                    printed.contains("error"),
                    "case {case}: a failure names itself: {printed}"
                );
                Outcome::Refused
            }
            other => panic!("case {case} ({mutated_kind}): exit {other:?}: {printed}"),
        };
        *outcomes.entry(outcome).or_default() += 1;
        *by_kind.entry((mutated_kind, outcome)).or_default() += 1;
        let _ = std::fs::remove_dir_all(&cache);
        let _ = std::fs::remove_dir_all(&outputs);
    }
    eprintln!(
        "{cases} mutated caches ({} entries: {kinds_seen:?}): {outcomes:?}; by kind: {by_kind:?}",
        originals.len()
    );
    let _ = std::fs::remove_dir_all(&directory);
}
