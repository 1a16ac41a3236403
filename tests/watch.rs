//! `superstep watch` end to end: the real binary watching a copy of
//! `queries/vit-tiny.toml` in a scratch folder, through a plain write, an
//! editor-style atomic save (write a temporary file, rename it over the
//! build file), an invalid edit and its fix. Output is polled, never timed:
//! every wait is for a line to appear, with a generous deadline.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common;

use common::scratch;
use superstep::watch::{Refresh, WatchEvent, WatchOptions, Watcher};

/// Deadline for one expected piece of output on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// vit-tiny's reserve, and one that passes the query's own size check but
/// leaves the layout planner too little room on some tile.
const FITS: &str = "reserved_bytes_per_tile = 65536";
const DOES_NOT_FIT: &str = "reserved_bytes_per_tile = 630000";

/// The last line of a build report's metrics.
const LAST_METRIC: &str = "peak SRAM/tile";

fn tiny_copy(directory: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries/vit-tiny.toml");
    let target = directory.join("vit-tiny.toml");
    std::fs::copy(source, &target).expect("copy the build file");
    target
}

fn edit(path: &Path, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(path).expect("read build file");
    assert!(text.contains(from), "{from} not in the build file");
    text.replacen(from, to, 1)
}

/// The running watcher, with everything it printed so far.
struct Watch {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Watch {
    fn start(file: &Path, exit_after: usize) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_superstep"))
            .arg("watch")
            .arg(file)
            .args([
                "--exit-after",
                &exit_after.to_string(),
                "--debounce-ms",
                "100",
                // The build file's outputs folder is the repository's.
                "--no-artifacts",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("superstep watch starts");
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let sink = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut text = sink.lock().expect("output lock");
                    text.push_str(&line);
                    text.push('\n');
                }
            });
        }
        Watch { child, output }
    }

    fn text(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    /// Waits until the output contains `needle` and, after it, `end` (the
    /// last line of the block, so the block is complete); returns the
    /// output from the needle's first occurrence on.
    fn wait_for_block(&mut self, needle: &str, end: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self.text();
            if let Some(start) = text.find(needle)
                && text[start..].contains(end)
            {
                return text[start..].to_string();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Give the reader threads a moment to drain the pipes.
                std::thread::sleep(Duration::from_millis(200));
                let text = self.text();
                let found = text
                    .find(needle)
                    .is_some_and(|start| text[start..].contains(end));
                assert!(found, "exited ({status}) without {needle:?}:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} ... {end:?} within {PATIENCE:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for a build report: its header and its last metric.
    fn wait_for_build(&mut self, header: &str) -> String {
        self.wait_for_block(header, LAST_METRIC)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of one build's block, up to the next `==` header.
fn block(from_header: &str) -> &str {
    let end = from_header[2..]
        .find("\n==")
        .map_or(from_header.len(), |index| index + 3);
    &from_header[..end]
}

/// The `re-ran queries` lines of a block.
fn reran(block: &str) -> String {
    block
        .lines()
        .skip_while(|line| !line.starts_with("re-ran queries"))
        .take_while(|line| !line.starts_with("stage times"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names of the queries a block's re-ran table lists (inside each
/// stage line's parentheses: `layouts 2 (activation_calibration 1, ...)`).
fn reran_queries(block: &str) -> Vec<String> {
    reran(block)
        .lines()
        .filter_map(|line| {
            let inside = line.split_once('(')?.1.rsplit_once(')')?.0;
            Some(
                inside
                    .split(", ")
                    .filter_map(|entry| entry.split_whitespace().next())
                    .map(String::from)
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect()
}

#[test]
fn watch_rebuilds_on_writes_and_renames_and_survives_an_invalid_edit() {
    let directory = scratch("watch", "edits");
    let file = tiny_copy(&directory);
    let mut watch = Watch::start(&file, 4);
    let first = watch.wait_for_build("== build 1: vit-tiny (cold");
    assert!(first.contains("transfers"), "{first}");
    watch.wait_for_block("watching", "Ctrl-C");

    // 1. A plain write: of the compiler, only the activation calibration
    // reads the weights' scale (the FP32 reference runs on the FP8
    // weights); its scales come out the same, so the product recipe stops
    // the change there and the assembled program is all that differs.
    std::fs::write(&file, edit(&file, "fp8_scale = -4", "fp8_scale = -3")).expect("write");
    let second = watch.wait_for_build("== build 2: vit-tiny (incremental");
    let second = block(&second);
    assert!(second.contains("changed inputs: fp8_scale"), "{second}");
    assert!(second.contains("workload.fp8_scale"), "{second}");
    assert!(second.contains("-4 -> -3"), "{second}");
    assert_eq!(
        reran_queries(second),
        ["activation_calibration", "product_recipe"],
        "{second}"
    );
    assert!(second.contains("headline metrics"), "{second}");
    assert!(second.contains("(±0)"), "{second}");
    assert!(second.contains("cycles"), "{second}");

    // 2. An editor's atomic save: a temporary file renamed over the target.
    let temporary = directory.join(".vit-tiny.toml.tmp");
    std::fs::write(&temporary, edit(&file, "layers = 2", "layers = 3")).expect("write temp");
    std::fs::rename(&temporary, &file).expect("rename over the build file");
    let third = watch.wait_for_build("== build 3: vit-tiny (incremental");
    let third = block(&third);
    assert!(third.contains("workload.layers"), "{third}");
    assert!(third.contains("2 -> 3"), "{third}");
    assert!(reran(third).contains("graph"), "{third}");

    // 3. An invalid edit: the error names the field; watching goes on.
    std::fs::write(&file, edit(&file, "heads = 4", "heads = 7")).expect("write");
    let invalid = watch.wait_for_block("== build file invalid", "does not divide");
    let invalid = block(&invalid);
    assert!(invalid.contains("workload.heads = 7"), "{invalid}");

    // 4. The fix rebuilds (nothing re-runs: it equals the last applied query).
    std::fs::write(&file, edit(&file, "heads = 7", "heads = 4")).expect("write");
    let fourth = watch.wait_for_build("== build 4: vit-tiny (incremental");
    assert!(block(&fourth).contains("changed inputs: none"), "{fourth}");
    watch.wait_for_block("stopped watching", "\n");
    let status = watch.child.wait().expect("watch exits");
    assert!(status.success(), "{status}\n{}", watch.text());
    let _ = std::fs::remove_dir_all(&directory);
}

/// Ctrl-C (SIGINT, sent with `kill -INT`) stops the watcher with exit code 0.
#[cfg(unix)]
#[test]
fn ctrl_c_stops_cleanly() {
    let directory = scratch("watch", "interrupt");
    let file = tiny_copy(&directory);
    let mut watch = Watch::start(&file, 100);
    watch.wait_for_block("watching", "Ctrl-C");
    let sent = Command::new("kill")
        .args(["-INT", &watch.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    watch.wait_for_block("stopped watching", "\n");
    let status = watch.child.wait().expect("watch exits");
    assert_eq!(status.code(), Some(0), "{}", watch.text());
    let _ = std::fs::remove_dir_all(&directory);
}

/// A `Write` the test can read while the watcher thread writes to it.
#[derive(Clone, Default)]
struct SharedOutput(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedOutput {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("output lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedOutput {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("output lock")).to_string()
    }

    fn wait_for(&self, needle: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.text().contains(needle) {
            assert!(Instant::now() < deadline, "no {needle:?}:\n{}", self.text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Replaces `file`'s content atomically.
fn replace_whole(file: &std::path::Path, text: &str) {
    let temporary = file.with_extension("toml.next");
    std::fs::write(&temporary, text).expect("write");
    std::fs::rename(&temporary, file).expect("rename");
}

/// The loop's core driven through a channel, without a file system watcher:
/// a touch without a content change does nothing; a build that fails in a
/// stage is reported and the next valid content rebuilds.
#[test]
fn core_ignores_unchanged_content_and_reports_stage_errors() {
    let directory = scratch("watch", "core");
    let file = tiny_copy(&directory);
    let original = std::fs::read_to_string(&file).expect("read");
    let (sender, events) = channel();
    let mut options = WatchOptions::new(&file);
    options.quiet_period = Duration::from_millis(10);
    options.exit_after = Some(2);
    let output = SharedOutput::default();
    let mut sink = output.clone();
    let handle = std::thread::spawn(move || {
        let mut watcher = Watcher::new(options);
        watcher.run(&events, &mut sink).expect("run")
    });
    output.wait_for("watching");
    sender.send(WatchEvent::Touched).expect("send");
    sender.send(WatchEvent::Touched).expect("send");
    // Edits replace the file whole (write beside it, then rename), so the
    // loop never reads a half-written file, however the threads interleave.
    replace_whole(&file, &original.replace(FITS, DOES_NOT_FIT));
    sender.send(WatchEvent::Touched).expect("send");
    output.wait_for("== build 2");
    replace_whole(&file, &original);
    sender.send(WatchEvent::Touched).expect("send");
    let summary = handle.join().expect("watch thread");
    let text = output.text();
    assert_eq!(summary.handled, 2, "{text}");
    assert_eq!(summary.last, Refresh::Built, "{text}");
    assert!(summary.reached_limit);
    assert!(text.contains("== build 2: vit-tiny failed"), "{text}");
    assert!(text.contains("planning.reserved_bytes_per_tile"), "{text}");
    assert!(text.contains("error:"), "{text}");
    assert!(text.contains("== build 3: vit-tiny (incremental"), "{text}");
    let _ = std::fs::remove_dir_all(&directory);
}

/// Re-reading identical content does nothing; a comment-only edit rebuilds
/// with no changed input and no query re-run.
#[test]
fn refresh_compares_content_before_applying_it() {
    let directory = scratch("watch", "unchanged");
    let file = tiny_copy(&directory);
    let mut watcher = Watcher::new(WatchOptions::new(&file));
    let mut out = Vec::new();
    assert_eq!(watcher.refresh(&mut out).expect("refresh"), Refresh::Built);
    let printed = out.len();
    assert_eq!(
        watcher.refresh(&mut out).expect("refresh"),
        Refresh::Unchanged
    );
    assert_eq!(out.len(), printed);
    let mut text = std::fs::read_to_string(&file).expect("read");
    text.push_str("\n# a comment\n");
    std::fs::write(&file, text).expect("write");
    assert_eq!(watcher.refresh(&mut out).expect("refresh"), Refresh::Built);
    let text = String::from_utf8(out[printed..].to_vec()).expect("utf-8");
    assert!(text.contains("changed inputs: none"), "{text}");
    assert!(text.contains("re-ran queries: none"), "{text}");
    assert!(watcher.metrics().is_some());
    let _ = std::fs::remove_dir_all(&directory);
}

/// After each successful build the watcher says it is rebuilding, names the
/// phases whose cycles moved most, and writes the artifacts (report.json,
/// phases.csv, compute.csv, last-build.json); `write_artifacts: false`
/// writes none.
#[test]
fn rebuilds_name_the_phases_that_moved_and_write_artifacts() {
    let directory = scratch("watch", "artifacts");
    let file = tiny_copy(&directory);
    let outputs = directory.join("outputs");
    let mut options = WatchOptions::new(&file);
    options.sets = vec![format!("outputs.directory={}", outputs.display())];
    options.write_artifacts = true;
    let mut watcher = Watcher::new(options);
    let mut out = Vec::new();
    assert_eq!(watcher.refresh(&mut out).expect("refresh"), Refresh::Built);
    let first = String::from_utf8(out.clone()).expect("utf-8");
    assert!(first.contains("building vit-tiny…"), "{first}");
    let report = outputs.join("vit-tiny").join("report.json");
    for name in [
        "report.json",
        "phases.csv",
        "compute.csv",
        "last-build.json",
    ] {
        let path = outputs.join("vit-tiny").join(name);
        assert!(path.exists(), "{} not written: {first}", path.display());
        assert!(
            first.contains(&format!("wrote {}", path.display())),
            "{first}"
        );
    }
    let before: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON");
    std::fs::write(
        &file,
        edit(&file, "policy = \"latency\"", "policy = \"B1024\""),
    )
    .expect("write");
    let printed = out.len();
    assert_eq!(watcher.refresh(&mut out).expect("refresh"), Refresh::Built);
    let second = String::from_utf8(out[printed..].to_vec()).expect("utf-8");
    assert!(second.contains("rebuilding vit-tiny…"), "{second}");
    assert!(second.contains("phases that moved most"), "{second}");
    let after: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON");
    assert_ne!(
        before["back"]["total_cycles"], after["back"]["total_cycles"],
        "report.json rewritten after the rebuild"
    );
    // The first phase line names a phase whose horizon x executions moved.
    let line = second
        .lines()
        .skip_while(|line| !line.starts_with("phases that moved most"))
        .nth(1)
        .expect("a phase line");
    let key = line.split_whitespace().next().expect("a key");
    let cost = |report: &serde_json::Value| {
        report["back"]["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .find(|phase| phase["key"] == key)
            .map(|phase| {
                phase["horizon"].as_u64().expect("horizon")
                    * phase["executions"].as_u64().expect("executions")
            })
    };
    assert_ne!(cost(&before), cost(&after), "{line}");
    let quiet_directory = directory.join("quiet");
    let mut options = WatchOptions::new(&file);
    options.sets = vec![format!("outputs.directory={}", quiet_directory.display())];
    let mut watcher = Watcher::new(options);
    assert_eq!(
        watcher.refresh(&mut Vec::new()).expect("refresh"),
        Refresh::Built
    );
    assert!(!quiet_directory.exists(), "no artifacts unless asked");
    let _ = std::fs::remove_dir_all(&directory);
}

/// `--snapshot DIR`: the first build writes the snapshot folder; an edit
/// that overrides one phase's policy names exactly that phase's file and
/// the program file, and the folder then matches the edited build.
#[test]
fn a_snapshot_folder_is_kept_current_and_changed_files_are_named() {
    let directory = scratch("watch", "snapshot");
    let file = tiny_copy(&directory);
    let folder = directory.join("snap");
    let mut options = WatchOptions::new(&file);
    options.snapshot = Some(superstep::watch::snapshot::SnapshotOptions {
        dir: folder.clone(),
        detail: superstep::record::Detail::Summary,
    });
    let mut watcher = Watcher::new(options);
    let mut out = Vec::new();
    assert_eq!(watcher.refresh(&mut out).expect("refresh"), Refresh::Built);
    let first = String::from_utf8(out.clone()).expect("utf-8");
    assert!(
        first.contains(&format!("snapshot {}: wrote", folder.display())),
        "{first}"
    );
    assert!(folder.join("program.txt").exists());
    let mut text = std::fs::read_to_string(&file).expect("read");
    text.push_str("\n[[schedule.override]]\nphase = \"layer.attn.split_q#0\"\npolicy = \"B64\"\n");
    std::fs::write(&file, text).expect("write");
    let printed = out.len();
    assert_eq!(watcher.refresh(&mut out).expect("refresh"), Refresh::Built);
    let second = String::from_utf8(out[printed..].to_vec()).expect("utf-8");
    assert!(
        second.contains(&format!(
            "snapshot {}: 2 changed, 0 added, 0 removed",
            folder.display()
        )),
        "{second}"
    );
    let named: Vec<&str> = second
        .lines()
        .filter(|line| line.starts_with("  ") && line.contains(".txt ("))
        .collect();
    assert_eq!(named.len(), 2, "{second}");
    assert!(
        named
            .iter()
            .any(|line| line.starts_with("  program.txt (program: ")),
        "{second}"
    );
    assert!(
        named.iter().any(|line| line.starts_with("  exchange/layer.attn.split_q@0.txt (exchange layer.attn.split_q#0: schedule policy latency (default) -> B64 (override)")),
        "{second}"
    );
    // The same content again: a touch rebuilds nothing and the folder holds.
    let printed = out.len();
    let mut text = std::fs::read_to_string(&file).expect("read");
    text.push_str("\n# a comment\n");
    std::fs::write(&file, text).expect("write");
    assert_eq!(watcher.refresh(&mut out).expect("refresh"), Refresh::Built);
    let third = String::from_utf8(out[printed..].to_vec()).expect("utf-8");
    assert!(third.contains("no file changed"), "{third}");
    let _ = std::fs::remove_dir_all(&directory);
}

/// A build that fails under watch is explained exactly as `superstep
/// build` explains it (the diagnostic with its help), not as one plain
/// `error:` line.
#[test]
fn a_failed_build_is_explained_as_build_explains_it() {
    let directory = scratch("watch", "explained");
    let file = tiny_copy(&directory);
    let outputs = format!("outputs.directory={}", directory.display());
    let sets = [
        "--no-cache",
        "--set",
        outputs.as_str(),
        "--set",
        "schedule.override.no.such.phase#0=latency",
    ];
    let run = |command: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_superstep"))
            .args(command)
            .arg(&file)
            .args(sets)
            .output()
            .expect("superstep runs")
    };
    let build = run(&["build"]);
    assert_eq!(build.status.code(), Some(2));
    let explained = String::from_utf8_lossy(&build.stderr).trim().to_string();
    assert!(explained.contains("help: "), "{explained}");
    let watch = run(&["watch", "--exit-after", "0", "--no-artifacts"]);
    let printed = String::from_utf8_lossy(&watch.stdout);
    assert!(
        printed.contains(&explained),
        "watch printed:\n{printed}\nbuild explained:\n{explained}"
    );
    assert_eq!(watch.status.code(), Some(2));
}

/// The watcher reports its cache after every build (on standard output);
/// the end of the process does not report it again on standard error.
#[test]
fn the_cache_is_reported_once_per_build() {
    let directory = scratch("watch", "cache-once");
    let file = tiny_copy(&directory);
    let outputs = format!("outputs.directory={}", directory.display());
    let cache = directory.join("cache");
    let output = Command::new(env!("CARGO_BIN_EXE_superstep"))
        .arg("watch")
        .arg(&file)
        .args([
            "--exit-after",
            "0",
            "--no-artifacts",
            "--set",
            &outputs,
            "--cache",
        ])
        .arg(&cache)
        .output()
        .expect("superstep runs");
    assert_eq!(output.status.code(), Some(0));
    let printed = String::from_utf8_lossy(&output.stdout);
    let errors = String::from_utf8_lossy(&output.stderr);
    let lines = |text: &str| {
        text.lines()
            .filter(|line| line.starts_with("cache "))
            .count()
    };
    assert_eq!(lines(&printed), 1, "{printed}");
    assert_eq!(lines(&errors), 0, "{errors}");
}

/// A change of the file's content during a build cancels it: the loop says
/// so and builds the new content. The first build is held (by a hook on
/// the build thread) until it is cancelled, so the change always arrives
/// while it runs; the held build checks for cancellation as a query does.
#[test]
fn a_change_during_a_build_cancels_it_and_builds_the_new_content() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let directory = scratch("watch", "cancel");
    let file = tiny_copy(&directory);
    let original = std::fs::read_to_string(&file).expect("read");
    let (sender, events) = channel();
    let (started, build_started) = channel();
    let started = Mutex::new(started);
    let calls = AtomicUsize::new(0);
    let mut options = WatchOptions::new(&file);
    options.quiet_period = Duration::from_millis(10);
    options.exit_after = Some(1);
    options.before_build = Some(superstep::watch::BuildHook(Arc::new(move |session| {
        if calls.fetch_add(1, Ordering::SeqCst) > 0 {
            return;
        }
        let _ = started.lock().expect("lock").send(());
        // Held until cancelled (bounded: an uncancelled build then runs
        // to its end and the assertions below fail).
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            session.unwind_if_cancelled();
            std::thread::sleep(Duration::from_millis(5));
        }
    })));
    let output = SharedOutput::default();
    let mut sink = output.clone();
    let handle = std::thread::spawn(move || {
        let mut watcher = Watcher::new(options);
        watcher.run(&events, &mut sink).expect("run")
    });
    build_started
        .recv_timeout(PATIENCE)
        .expect("the first build starts");
    replace_whole(
        &file,
        &original.replacen("name = \"vit-tiny\"", "name = \"vit-tiny-edited\"", 1),
    );
    sender.send(WatchEvent::Touched).expect("send");
    let summary = handle.join().expect("watch thread");
    let text = output.text();
    assert!(
        text.contains("== build 1 cancelled (the file changed) =="),
        "{text}"
    );
    assert!(text.contains("== build 2: vit-tiny-edited (cold"), "{text}");
    assert!(!text.contains("== build 1: vit-tiny"), "{text}");
    assert_eq!(summary.handled, 1, "{text}");
    assert_eq!(summary.last, Refresh::Built, "{text}");
    let _ = std::fs::remove_dir_all(&directory);
}
