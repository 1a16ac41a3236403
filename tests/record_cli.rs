//! `superstep snapshot` as a user and a CI job meet it: the files it
//! writes and leaves alone, byte-identical reruns, `--check` exit codes and
//! what it reports, `--accept`, and bad input (a file as --dir, a folder of
//! another build, a damaged file) as exit code 2.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{scratch, superstep};

const PHASE: &str = "layer.attn.split_q#0";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// `superstep snapshot queries/vit-tiny.toml --dir DIR` with the
/// scratch folder's outputs (and cache), plus `extra`.
fn snapshot(scratch: &Path, dir: &Path, extra: &[&str]) -> Output {
    let outputs = format!("outputs.directory={}", scratch.join("outputs").display());
    let dir = dir.display().to_string();
    let mut arguments = vec![
        "snapshot",
        "queries/vit-tiny.toml",
        "--set",
        outputs.as_str(),
        "--dir",
        dir.as_str(),
    ];
    arguments.extend_from_slice(extra);
    superstep(&arguments)
}

/// Every file under `dir`, relative, with its bytes.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(root: &Path, at: &Path, into: &mut Vec<(PathBuf, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(at)
            .expect("lists")
            .map(|entry| entry.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, into);
            } else {
                let relative = path.strip_prefix(root).expect("under root").to_path_buf();
                into.push((relative, std::fs::read(&path).expect("reads")));
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found);
    found
}

#[test]
fn snapshot_writes_once_checks_equal_and_leaves_other_files_alone() {
    let root = scratch("record-cli", "write");
    let dir = root.join("snap");
    std::fs::create_dir_all(&dir).expect("folder");
    std::fs::write(dir.join("README.md"), b"my notes\n").expect("other file");
    let first = snapshot(&root, &dir, &[]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stdout).contains("wrote"),
        "{}",
        text(&first.stdout)
    );
    assert!(
        text(&first.stderr).contains("README.md is not a snapshot file: left alone"),
        "{}",
        text(&first.stderr)
    );
    let written = contents(&dir);
    assert!(
        written
            .iter()
            .any(|(path, _)| path == Path::new("program.txt"))
    );
    assert!(written.iter().any(|(path, _)| path.starts_with("exchange")));
    assert!(written.iter().any(|(path, _)| path.starts_with("compute")));
    assert!(
        written
            .iter()
            .any(|(path, bytes)| path == Path::new("README.md") && bytes == b"my notes\n")
    );

    // A second run rewrites nothing and a second folder gets the same bytes.
    let again = snapshot(&root, &dir, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains(" 0 written, 0 removed"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(contents(&dir), written);
    let other = root.join("other");
    let second = snapshot(&root, &other, &[]);
    assert!(second.status.success(), "{}", text(&second.stderr));
    let mut without_notes = written.clone();
    without_notes.retain(|(path, _)| path != Path::new("README.md"));
    assert_eq!(contents(&other), without_notes);

    let check = snapshot(&root, &dir, &["--check"]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert!(text(&check.stdout).contains("match the build"));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn check_reports_one_phase_and_the_program_then_accept_takes_exactly_them() {
    let root = scratch("record-cli", "check");
    let dir = root.join("snap");
    let first = snapshot(&root, &dir, &[]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let before = contents(&dir);

    let set = format!("schedule.override.{PHASE}=B64");
    let check = snapshot(&root, &dir, &["--check", "--set", &set]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stderr));
    let stdout = text(&check.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines.iter().any(|line| line.starts_with(&format!(
            "exchange {PHASE}: schedule policy latency (default) -> B64 (override)"
        ))),
        "{stdout}"
    );
    assert!(
        lines.iter().any(|line| line.starts_with("program: ")),
        "{stdout}"
    );
    assert!(
        text(&check.stderr).contains("2 changed, 0 added, 0 removed"),
        "{}",
        text(&check.stderr)
    );
    assert_eq!(contents(&dir), before, "--check writes nothing");

    let accept = snapshot(&root, &dir, &["--accept", "--set", &set]);
    assert!(accept.status.success(), "{}", text(&accept.stderr));
    let accepted = text(&accept.stdout);
    let wrote = accepted
        .lines()
        .filter(|line| line.starts_with("wrote "))
        .count();
    assert_eq!(wrote, 2, "{accepted}");
    let after = contents(&dir);
    let changed: Vec<&PathBuf> = before
        .iter()
        .zip(&after)
        .filter(|(old, new)| old != new)
        .map(|(old, _)| &old.0)
        .collect();
    assert_eq!(
        changed,
        vec![
            &PathBuf::from(format!("exchange/{}.txt", PHASE.replace('#', "@"))),
            &PathBuf::from("program.txt")
        ]
    );
    let recheck = snapshot(&root, &dir, &["--check", "--set", &set]);
    assert_eq!(recheck.status.code(), Some(0), "{}", text(&recheck.stderr));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn bad_folders_and_damaged_files_are_exit_2() {
    let root = scratch("record-cli", "bad");
    let file = root.join("a-file");
    std::fs::write(&file, b"not a folder").expect("file");
    let output = snapshot(&root, &file, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("it is a file, not a folder"),
        "{}",
        text(&output.stderr)
    );

    let dir = root.join("snap");
    assert!(snapshot(&root, &dir, &[]).status.success());
    // Another build (one layer) against this folder: exit 2 unless accepted.
    let other = snapshot(&root, &dir, &["--check", "--set", "workload.layers=1"]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other.stderr));
    assert!(
        text(&other.stderr).contains("another model or machine"),
        "{}",
        text(&other.stderr)
    );
    let other = snapshot(&root, &dir, &["--set", "workload.layers=1"]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other.stderr));
    // Another detail.
    let full = snapshot(&root, &dir, &["--check", "--detail", "full"]);
    assert_eq!(full.status.code(), Some(2), "{}", text(&full.stderr));
    assert!(
        text(&full.stderr).contains("detail summary"),
        "{}",
        text(&full.stderr)
    );

    // A damaged file is named.
    let program = dir.join("program.txt");
    let original = std::fs::read_to_string(&program).expect("program");
    let damaged = original.replacen("[estimate]", "[estimate]\nextra: 1", 1);
    std::fs::write(&program, damaged).expect("damage");
    let check = snapshot(&root, &dir, &["--check"]);
    assert_eq!(check.status.code(), Some(2), "{}", text(&check.stderr));
    assert!(
        text(&check.stderr).contains("program.txt"),
        "{}",
        text(&check.stderr)
    );
    assert!(
        text(&check.stderr).contains("digest"),
        "{}",
        text(&check.stderr)
    );
    let accept = snapshot(&root, &dir, &["--accept"]);
    assert!(accept.status.success(), "{}", text(&accept.stderr));
    assert_eq!(
        std::fs::read_to_string(&program).expect("program"),
        original
    );

    // A folder that cannot be written (skipped when the tests run as root,
    // who may write anywhere).
    let locked = root.join("locked");
    std::fs::create_dir_all(&locked).expect("folder");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    if std::fs::write(locked.join("probe"), b"").is_err() {
        let output = snapshot(&root, &locked.join("snap"), &[]);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
        assert!(
            text(&output.stderr).contains("cannot write there"),
            "{}",
            text(&output.stderr)
        );
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let _ = std::fs::remove_dir_all(&root);
}
