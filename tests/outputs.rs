//! Issue 26, items 3 and 4: what a command writes when its reader goes
//! away, its disk is full, or its output path is an input or a link. A
//! closed standard output ends the command quietly (exit 0) and the build
//! still finishes its files; a full one is an error naming it; the outputs
//! folder holds one build's files, as its record (`build.json`) says; no
//! output path may be one of the command's inputs; a trace that could not be
//! written is an error.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::scratch;
use superstep::build_file::{load_query, package_build_key};
use superstep::package::file::PackageHeader;
use superstep::report::manifest;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Runs the binary with its standard output a pipe whose reader has
/// already gone (as `| head -0` would leave it): every write is EPIPE.
fn into_closed_pipe(arguments: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_superstep"))
        .args(arguments)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("superstep runs");
    drop(child.stdout.take());
    child.wait_with_output().expect("superstep ends")
}

/// Runs the binary with standard output on `/dev/full`.
fn into_full_device(arguments: &[&str]) -> Output {
    let full = std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    Command::new(env!("CARGO_BIN_EXE_superstep"))
        .args(arguments)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("superstep runs")
}

/// `superstep build` of the tiny ViT, uncached, with `folder` as its
/// `outputs.directory=...` setting.
fn tiny_build(folder: &str) -> [&str; 5] {
    [
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        folder,
    ]
}

fn assert_quiet_success(output: &Output) {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(0), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(!message.contains("Broken pipe"), "{message}");
}

/// The package build key of vit-tiny with `sets`, in hex.
fn build_key(sets: &[String]) -> String {
    let query = load_query(Path::new("queries/vit-tiny.toml"), sets).expect("vit-tiny");
    package_build_key(&query).hex()
}

#[test]
fn a_build_into_a_closed_pipe_finishes_its_files_and_the_folder_holds_one_build() {
    let directory = scratch("outputs", "pipe");
    let folder = format!("outputs.directory={}", directory.display());
    // First build: the default policy, stdout read as usual.
    let first = common::superstep(&tiny_build(&folder));
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    // Second build, different settings, into a pipe nobody reads.
    let second_sets = vec![folder.clone(), String::from("schedule.policy=B64")];
    let mut arguments = vec!["build", "queries/vit-tiny.toml", "--no-cache"];
    for set in &second_sets {
        arguments.extend(["--set", set.as_str()]);
    }
    assert_quiet_success(&into_closed_pipe(&arguments));
    let outputs = directory.join("vit-tiny");
    let record = manifest::check(&outputs).expect("the folder matches its record");
    let expected = build_key(&second_sets);
    assert_ne!(expected, build_key(&[folder]), "the two builds differ");
    assert_eq!(
        record.build_key, expected,
        "the record names the second build"
    );
    let names: Vec<&str> = record.files.iter().map(|file| file.name.as_str()).collect();
    for name in [
        "package.bin",
        "report.json",
        "report.html",
        "last-build.json",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let header = PackageHeader::read(&outputs.join("package.bin")).expect("a package");
    assert_eq!(
        header.build.hex(),
        expected,
        "package.bin is the second build's"
    );
    // Nothing else superstep writes is left beside them (no temporary files).
    for entry in std::fs::read_dir(&outputs).expect("lists") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .to_string();
        assert!(
            name == manifest::MANIFEST_FILE || names.contains(&name.as_str()),
            "{name} is not in the record"
        );
    }
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn reading_commands_into_a_closed_pipe_end_quietly() {
    for arguments in [
        &[
            "explain",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--phase",
            "embed.patch.a.rearrange#0",
        ][..],
        &["phases", "queries/vit-tiny.toml", "--no-cache"],
        &["audit", "copies", "queries/vit-tiny.toml", "--no-cache"],
    ] {
        let output = into_closed_pipe(arguments);
        assert_quiet_success(&output);
    }
}

#[test]
fn a_full_standard_output_is_an_error_naming_it() {
    let directory = scratch("outputs", "full");
    let folder = format!("outputs.directory={}", directory.display());
    let output = into_full_device(&tiny_build(&folder));
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(
        message.contains("writing to standard output: No space left on device"),
        "{message}"
    );
    // The build's files were still written, whole.
    manifest::check(&directory.join("vit-tiny")).expect("a complete folder");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_trace_onto_the_build_file_is_refused_and_leaves_it_intact() {
    let directory = scratch("outputs", "trace-input");
    let query = directory.join("query.toml");
    let text = std::fs::read_to_string("queries/vit-tiny.toml").expect("vit-tiny");
    std::fs::write(&query, &text).expect("copy");
    let query_text = query.display().to_string();
    // Named directly, and through another spelling of the same file.
    let dotted = directory.join(".").join("query.toml").display().to_string();
    for trace in [query_text.as_str(), dotted.as_str()] {
        let output = common::superstep(&["--trace", trace, "build", &query_text, "--no-cache"]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(message.contains("--trace"), "{message}");
        assert!(message.contains("which this command reads"), "{message}");
        assert_eq!(std::fs::read_to_string(&query).expect("reads"), text);
    }
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_trace_that_cannot_be_written_is_an_error() {
    // A device is never written (docs/files.md): `--trace /dev/full` is
    // refused before any work, naming the flag and the kind of file.
    let directory = scratch("outputs", "trace-full");
    let folder = format!("outputs.directory={}", directory.display());
    let output = common::superstep(&[&["--trace", "/dev/full"][..], &tiny_build(&folder)].concat());
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(
        message.contains("--trace: cannot write trace /dev/full"),
        "{message}"
    );
    assert!(message.contains("character device"), "{message}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_report_is_never_written_through_a_link() {
    let directory = scratch("outputs", "link");
    let outputs = directory.join("vit-tiny");
    std::fs::create_dir_all(&outputs).expect("folder");
    let victim = directory.join("victim.txt");
    std::fs::write(&victim, "keep me").expect("victim");
    std::os::unix::fs::symlink(&victim, outputs.join("report.json")).expect("link");
    let folder = format!("outputs.directory={}", directory.display());
    let output = common::superstep(&tiny_build(&folder));
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        message.contains("report.json is a symbolic link"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&victim).expect("reads"), "keep me");
    // The build did not finish its folder, and the folder says so.
    assert!(!outputs.join(manifest::MANIFEST_FILE).exists());
    let _ = std::fs::remove_dir_all(&directory);
}
