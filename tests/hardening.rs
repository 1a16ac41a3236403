//! Issue 12's numbered cases, as a new user meets them: every bad input is
//! exit code 2 with a message naming the flag, field, phase or file and what
//! to change; no panic, no unbounded allocation, no silent no-op.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{scratch, superstep};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// Exit code 2, no panic, and every `expected` text in standard error.
fn assert_input_error(output: &Output, expected: &[&str]) -> String {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    for text in expected {
        assert!(message.contains(text), "missing `{text}` in: {message}");
    }
    message
}

/// Runs the binary with its address space limited to `megabytes` (bounded
/// memory: an unbounded allocation fails instead of swapping).
fn superstep_bounded(arguments: &[&str], megabytes: u64) -> Output {
    let mut script = format!("ulimit -v {} && exec \"$0\"", megabytes * 1024);
    for index in 1..=arguments.len() {
        script.push_str(&format!(" \"${index}\""));
    }
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_superstep"))
        .args(arguments)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("superstep runs")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write test input");
}

/// `queries/vit-tiny.toml` with `extra` appended, in `directory`.
fn tiny_with(directory: &Path, extra: &str) -> String {
    let text = std::fs::read_to_string("queries/vit-tiny.toml").expect("vit-tiny");
    let path = directory.join("query.toml");
    write(&path, &format!("{text}\n{extra}\n"));
    path.display().to_string()
}

/// A one-phase schema-4 snapshot with `transfer` as its only transfer.
fn snapshot_with(directory: &Path, name: &str, tile_count: &str, transfer: &str) -> String {
    let path = directory.join(name);
    write(
        &path,
        &format!(
            "{{\"schema_version\":4,\"tile_count\":{tile_count},\"phases\":[{{\"phase\":0,\
             \"transfers\":[{transfer}]}}]}}"
        ),
    );
    path.display().to_string()
}

// Case 1: `--trace` to a file that cannot be created.
#[test]
fn case_01_an_unwritable_trace_is_exit_2_before_any_work_on_every_subcommand() {
    let directory = scratch("hardening", "trace");
    let outputs = directory.join("outputs");
    let set = format!("outputs.directory={}", outputs.display());
    let folder_as_trace = directory.display().to_string();
    let missing = directory.join("missing").join("trace.json");
    let below_file = {
        let file = directory.join("plain");
        write(&file, "x");
        file.join("trace.json")
    };
    let subcommands: [&[&str]; 8] = [
        &["build", "queries/vit-tiny.toml", "--set", &set],
        &["run", "queries/vit-tiny.toml"],
        &["simulate", "queries/vit-tiny.toml", "--no-cache"],
        &["replay", "queries/vit-tiny.toml", "--no-cache"],
        &["explain", "queries/vit-tiny.toml", "--phase", "x#0"],
        &["capture", "queries/vit-tiny.toml", "-o", "/tmp/never.json"],
        &["bench-snapshot", "no-such.json"],
        &["watch", "queries/vit-tiny.toml", "--exit-after", "0"],
    ];
    for trace in [
        folder_as_trace.as_str(),
        missing.to_str().expect("utf-8"),
        below_file.to_str().expect("utf-8"),
        "/proc/superstep-trace.json",
    ] {
        for subcommand in subcommands {
            let mut arguments = vec!["--trace", trace];
            arguments.extend_from_slice(subcommand);
            let output = superstep(&arguments);
            assert_input_error(&output, &["cannot write trace", trace]);
        }
    }
    assert!(!outputs.exists(), "no work was done before the error");
}

// Case 2: an override naming a phase the build does not have.
#[test]
fn case_02_an_override_of_a_missing_phase_is_exit_2_with_the_nearest_keys() {
    let from_set = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        "schedule.override.layer.mlp.dwn#0=latency",
    ]);
    assert_input_error(
        &from_set,
        &[
            "layer.mlp.dwn#0",
            "did you mean `layer.mlp.down#0`",
            "--set schedule.override.layer.mlp.dwn#0=latency",
        ],
    );

    let directory = scratch("hardening", "override");
    let file = tiny_with(
        &directory,
        "[[schedule.override]]\nphase = \"layer.mlp.dwn#0\"\npolicy = \"S64\"",
    );
    let from_file = superstep(&["build", &file, "--no-cache"]);
    assert_input_error(
        &from_file,
        &[
            "did you mean `layer.mlp.down#0`",
            "phase = \"layer.mlp.dwn#0\"",
            "no phase has this key",
        ],
    );
    // Every command that builds checks it.
    for command in ["simulate", "replay", "capture"] {
        let mut arguments = vec![command, file.as_str(), "--no-cache"];
        if command == "capture" {
            arguments.extend(["-o", "/tmp/superstep-never-written.json"]);
        }
        assert_input_error(&superstep(&arguments), &["layer.mlp.down#0"]);
    }

    let explain = superstep(&[
        "explain",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--phase",
        "layer.mlp.dwn#0",
    ]);
    assert_input_error(&explain, &["did you mean `layer.mlp.down#0`"]);

    // Watch refuses the build as `build` does (the session checks
    // overrides while building), with build's diagnostic, and keeps
    // watching.
    let watch = superstep(&[
        "watch",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--exit-after",
        "0",
        "--set",
        "schedule.override.layer.mlp.dwn#0=latency",
    ]);
    let text = stdout(&watch);
    assert!(
        text.contains("failed (cold, still watching)")
            && text.contains("schedule override of phase \"layer.mlp.dwn#0\"")
            && text.contains("did you mean `layer.mlp.down#0`"),
        "{text}"
    );
}

// Case 3: `bench-snapshot --iterations` is bounded.
#[test]
fn case_03_bench_iterations_out_of_range_is_exit_2() {
    for iterations in ["4294967296", "100000000", "0", "1001"] {
        let output = superstep(&[
            "bench-snapshot",
            "no-such-snapshot.json",
            "--iterations",
            iterations,
        ]);
        assert_input_error(&output, &["--iterations"]);
        assert!(stderr(&output).contains("1..=1000"), "{}", stderr(&output));
    }
}

// Case 4: snapshots beyond every bound, and `--phase` out of range.
#[test]
fn case_04_snapshots_beyond_the_bounds_are_rejected_in_bounded_memory() {
    let directory = scratch("hardening", "snapshot-bounds");
    // One transfer of a whole tile memory to 65,535 tiles: ~40 GiB to replay.
    let mut destinations = String::new();
    for tile in 1..65536u32 {
        if tile > 1 {
            destinations.push(',');
        }
        destinations.push_str(&format!("[{tile},311296]"));
    }
    let huge = snapshot_with(
        &directory,
        "huge.json",
        "65536",
        &format!(
            "{{\"source\":0,\"source_addresses\":[311296],\"destinations\":[{destinations}],\
             \"words\":159744,\"width\":\"Word32\"}}"
        ),
    );
    assert!(std::fs::metadata(&huge).expect("written").len() < 1 << 20);
    let output = superstep_bounded(&["bench-snapshot", &huge], 3072);
    assert_input_error(&output, &["phase 0, transfer 0", "words"]);

    let transfer = |source: &str, words: &str, destination: &str| {
        format!(
            "{{\"source\":{source},\"source_addresses\":[311296],\"destinations\":[[1,{destination}]],\
             \"words\":{words},\"width\":\"Word32\"}}"
        )
    };
    let cases = [
        ("negative-address", "4", transfer("0", "4", "-8")),
        ("negative-words", "4", transfer("0", "-4", "311296")),
        (
            "huge-address",
            "4",
            transfer("0", "4", "1180591620717411303424"),
        ),
        ("huge-tiles", "1e12", transfer("0", "4", "311296")),
        (
            "huge-tiles-integer",
            "1000000000000",
            transfer("0", "4", "311296"),
        ),
        ("negative-source", "4", transfer("-1", "4", "311296")),
    ];
    for (name, tile_count, transfer) in cases {
        let path = snapshot_with(&directory, &format!("{name}.json"), tile_count, &transfer);
        let output = superstep_bounded(&["bench-snapshot", &path], 3072);
        let message = assert_input_error(&output, &[&path]);
        if tile_count == "4" {
            assert!(
                message.contains("phases[0], transfer 0"),
                "{name}: {message}"
            );
        } else {
            assert!(message.contains("tile_count"), "{name}: {message}");
        }
    }

    let valid = snapshot_with(&directory, "valid.json", "4", &transfer("0", "4", "311296"));
    let output = superstep(&["bench-snapshot", &valid, "--phase", "999"]);
    let message = assert_input_error(&output, &["--phase 999", "its phase has id 0"]);
    assert!(!message.contains("not a valid snapshot"), "{message}");
}

// Case 5: upper bounds state the real limit.
#[test]
fn case_05_too_large_values_state_the_real_range() {
    for key in [
        "workload.layers",
        "workload.batch",
        "workload.width",
        "workload.mlp",
        "workload.heads",
        "workload.patches",
        "workload.patch",
        "planning.max_partition_candidates",
        "machine.tiles",
    ] {
        let output = superstep(&[
            "build",
            "queries/vit-tiny.toml",
            "--set",
            &format!("{key}=9223372036854775807"),
        ]);
        let message = assert_input_error(&output, &[key]);
        assert!(!message.contains("must be at least"), "{key}: {message}");
        assert!(
            message.contains("at most") || message.contains("between 1 and 1,472"),
            "{key}: {message}"
        );
    }
    let directory = scratch("hardening", "huge-integer");
    let text = std::fs::read_to_string("queries/vit-tiny.toml")
        .expect("vit-tiny")
        .replace("layers = 2\n", "layers = 99999999999999999999\n");
    let path = directory.join("huge.toml");
    write(&path, &text);
    let output = superstep(&["build", path.to_str().expect("utf-8")]);
    let message = assert_input_error(&output, &["workload.layers", "too large"]);
    assert!(!message.contains("i128"), "{message}");
}

// Case 6: the outputs folder, `capture -o` and `--json` are checked first.
#[test]
fn case_06_unwritable_outputs_are_exit_2_before_the_compile() {
    let directory = scratch("hardening", "outputs");
    let file = directory.join("plain");
    write(&file, "x");
    let below_file = format!("outputs.directory={}", file.join("out").display());
    for extra in [&[][..], &["--no-cache"][..]] {
        for set in [
            "outputs.directory=/proc/superstep-outputs",
            below_file.as_str(),
        ] {
            let mut arguments = vec!["build", "queries/vit-tiny.toml", "--set", set];
            arguments.extend_from_slice(extra);
            let output = superstep(&arguments);
            let message = assert_input_error(&output, &["outputs.directory"]);
            assert!(!message.contains("--cache:"), "{message}");
            assert!(!stdout(&output).contains("stage times"), "compiled first");
        }
    }
    // The default cache folder under a bad outputs folder blames the folder.
    let run = superstep(&[
        "replay",
        "queries/vit-tiny.toml",
        "--set",
        "outputs.directory=/proc/superstep-outputs",
    ]);
    let message = assert_input_error(&run, &["outputs.directory"]);
    assert!(!message.contains("--cache:"), "{message}");

    let missing = directory.join("not-made");
    let capture = superstep(&[
        "capture",
        "queries/vit-tiny.toml",
        "-o",
        missing.join("x.json").to_str().expect("utf-8"),
    ]);
    assert_input_error(&capture, &["capture -o", "does not exist"]);
    let bench = superstep(&[
        "bench-snapshot",
        "no-such.json",
        "--json",
        missing.join("records.json").to_str().expect("utf-8"),
    ]);
    assert_input_error(&bench, &["--json", "does not exist"]);
    assert!(!missing.exists(), "no folder the user did not ask for");
}

// Case 8: diagnostics point at the value at fault.
#[test]
fn case_08_diagnostics_point_at_the_value_at_fault() {
    let directory = scratch("hardening", "diagnostics");
    let text = std::fs::read_to_string("queries/vit-tiny.toml").expect("vit-tiny");
    let batch = directory.join("batch.toml");
    write(&batch, &text.replace("batch = 1\n", "batch = 1000000\n"));
    let output = superstep(&["build", batch.to_str().expect("utf-8")]);
    let message = assert_input_error(&output, &["workload.batch", "batch = 1000000"]);
    assert!(
        message.contains("the largest batch that fits: workload.batch = "),
        "{message}"
    );

    // `phases`, not `build`: the capacity check's own error (`build`
    // would go on to build candidates, a SigLIP on 1,472 tiles among them:
    // tests/fit_error.rs covers that on the tiny ViT).
    let tiles = superstep(&["phases", "--set", "machine.tiles=3"]);
    let message = assert_input_error(&tiles, &["machine.tiles", "--set machine.tiles=3"]);
    assert!(!message.contains("layers = 27"), "{message}");

    let all_tiles = superstep(&["phases", "--set", "workload.layers=2000"]);
    let message = assert_input_error(&all_tiles, &["not more tiles: all 1,472 of the c600"]);
    assert!(!message.contains("use at least"), "{message}");

    let typo = directory.join("typo.toml");
    write(&typo, &text.replace("width = 64", "widht = 64"));
    assert_input_error(
        &superstep(&["build", typo.to_str().expect("utf-8")]),
        &["widht", "width"],
    );
    let policy = directory.join("policy.toml");
    write(
        &policy,
        &text.replace("policy = \"latency\"", "policy = \"s256\""),
    );
    assert_input_error(
        &superstep(&["build", policy.to_str().expect("utf-8")]),
        &["did you mean \"S256\""],
    );

    let junk = directory.join("junk.safetensors");
    write(&junk, "this is not a safetensors file at all");
    let weights = superstep(&[
        "run",
        "queries/vit-tiny.toml",
        "--set",
        &format!("workload.weights.safetensors={}", junk.display()),
    ]);
    assert_input_error(&weights, &["junk.safetensors"]);

    let watch = superstep(&[
        "watch",
        directory
            .join("no-folder")
            .join("q.toml")
            .to_str()
            .expect("utf-8"),
        "--exit-after",
        "0",
    ]);
    assert_input_error(&watch, &["cannot watch", "does not exist"]);

    // A build file missing in an existing folder: exit 2 at once, not a
    // watch that waits for it.
    let missing = superstep(&[
        "watch",
        directory.join("missing.toml").to_str().expect("utf-8"),
        "--exit-after",
        "0",
    ]);
    assert_input_error(
        &missing,
        &["cannot watch", "missing.toml", "no such build file"],
    );
}

// Case 9: one model of reserved memory.
#[test]
fn case_09_one_model_of_reserved_memory() {
    let help = superstep(&["build", "--help"]);
    let text = stdout(&help);
    for figure in ["638,976", "637,872", "reserved_bytes_per_tile"] {
        assert!(text.contains(figure), "--help lacks {figure}: {text}");
    }
    let file = std::fs::read_to_string("queries/siglip-so400m.toml").expect("siglip");
    assert!(
        file.contains("637,872"),
        "the build file explains the model"
    );
    let output = superstep(&["build", "--set", "machine.tiles=3"]);
    let message = assert_input_error(&output, &["638,976", "reserved_bytes_per_tile"]);
    assert!(message.contains("573,440"), "{message}");
    let placement = superstep::cli::memory::placement_message(
        &superstep::place::PlacementError::DoesNotFit {
            tile: 7,
            region: String::from("the whole tile (0x4c000-0xe7bb0)"),
            capacity: 613_296,
            bytes_over: 100,
            usable: 637_872,
            reserved: 24_576,
            tiles_over: 3,
            first_tiles_over: vec![7, 9, 11],
            largest_live: Vec::new(),
            hint: String::from("use fewer layers (workload.layers)"),
        },
        Some(1472),
    );
    for figure in [
        "637,872",
        "638,976",
        "24,576",
        "613,296",
        "573,440",
        "the whole tile",
        "3 tile(s) over: 7, 9, 11",
        "fewer layers",
    ] {
        assert!(placement.contains(figure), "{figure}: {placement}");
    }
    assert!(!placement.contains("use more tiles"), "{placement}");
    // The placement's advice never suggests a smaller reservation: placement
    // uses the actual exchange table, not the planner's reservation.
    let help = placement
        .lines()
        .find(|line| line.contains("help:"))
        .unwrap_or("");
    assert!(!help.contains("reserved_bytes_per_tile"), "{placement}");
}

// Case 10: a cache warning is printed once, without colour codes.
#[test]
fn case_10_a_cache_warning_is_printed_once_without_colour() {
    let directory = scratch("hardening", "warning-once");
    let cache = directory.join("cache");
    let set = format!("outputs.directory={}", directory.display());
    let arguments = [
        "build",
        "queries/vit-tiny.toml",
        "--set",
        &set,
        "--cache",
        cache.to_str().expect("utf-8"),
    ];
    assert!(superstep(&arguments).status.success());
    // A rows summary: a warm build reads every phase's (not its rows,
    // when it keeps its package, and not every figures entry: those of
    // merges fusion priced are not read when the grouping is replayed
    // from its signed record).
    let mut damaged = 0;
    let mut stack = vec![cache.join("summary")];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("cache folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if damaged == 0 {
                write(&path, "not an entry");
                damaged += 1;
            }
        }
    }
    assert_eq!(damaged, 1);
    let output = superstep(&arguments);
    let message = stderr(&output);
    assert!(output.status.success(), "{message}");
    assert_eq!(message.matches("not an entry").count(), 0, "{message}");
    let warnings = message
        .lines()
        .filter(|line| line.contains("recomputing"))
        .count();
    assert_eq!(warnings, 1, "{message}");
    assert!(!message.contains('\u{1b}'), "ANSI codes: {message:?}");
}

// Case 11: no stale command names or help text.
#[test]
fn case_11_no_stale_text() {
    // Every command the build files, the validator's messages and the
    // README's command list name exists.
    let mut named = std::collections::BTreeSet::new();
    for file in [
        "queries/siglip-so400m.toml",
        "queries/pe-core-l14.toml",
        "queries/vit-b16.toml",
        "queries/vit-tiny.toml",
        "README.md",
        "src/build_file/validate/mod.rs",
    ] {
        let text = std::fs::read_to_string(file).expect("readable");
        for line in text.lines() {
            let prose = !file.ends_with("README.md");
            let mut rest = line;
            while let Some(at) = rest.find("superstep ") {
                let after = &rest[at + "superstep ".len()..];
                let word: String = after
                    .chars()
                    .take_while(|character| character.is_ascii_lowercase() || *character == '-')
                    .collect();
                // In the README only its command lines name commands.
                if !word.is_empty() && (prose || line.starts_with("superstep ")) {
                    named.insert(word);
                }
                rest = after;
            }
        }
    }
    assert!(
        named.contains("phases") && named.contains("build"),
        "{named:?}"
    );
    for command in &named {
        let output = superstep(&[command, "--help"]);
        assert!(
            output.status.success(),
            "`superstep {command}` is named but does not exist"
        );
    }
    let help = stdout(&superstep(&["build", "--help"]));
    for output in ["phases.csv", "package.bin", "last-build.json", "placement"] {
        assert!(help.contains(output), "build --help lacks {output}: {help}");
    }
    let readme = std::fs::read_to_string("README.md").expect("README");
    assert!(
        readme.contains("superstep watch   [QUERY]"),
        "watch QUERY is optional"
    );
    let default = std::fs::read_to_string("queries/siglip-so400m.toml").expect("default");
    assert!(
        default.contains("the commented [[schedule.override]] below is an example"),
        "{default}"
    );
    assert!(
        !default.contains("\n[[schedule.override]]"),
        "the default query carries no live override: {default}"
    );
}

// Two processes, one cache: concurrent builds (one evicting down to a tiny
// limit while the other reads) both succeed with byte-identical packages,
// and leave a cache the next build reads without warnings.
#[test]
fn two_processes_share_one_cache_folder() {
    let directory = scratch("hardening", "two-processes");
    let cache = directory.join("cache");
    let cache_text = cache.to_str().expect("utf-8").to_string();
    let spawn = |name: &str, limit: &str| {
        let set = format!("outputs.directory={}", directory.join(name).display());
        Command::new(env!("CARGO_BIN_EXE_superstep"))
            .args([
                "build",
                "queries/vit-tiny.toml",
                "--set",
                &set,
                "--cache",
                &cache_text,
                "--cache-limit",
                limit,
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("superstep starts")
    };
    for round in 0..3 {
        // Round 0 fills the cache from nothing; later rounds read it while
        // the other process evicts (a 1 MiB limit is below the entries' size).
        let first = spawn("first", "2048");
        let second = spawn("second", if round == 0 { "2048" } else { "1" });
        let first = first.wait_with_output().expect("first");
        let second = second.wait_with_output().expect("second");
        assert!(first.status.success(), "round {round}: {}", stderr(&first));
        assert!(
            second.status.success(),
            "round {round}: {}",
            stderr(&second)
        );
        for output in [&first, &second] {
            assert!(
                !stderr(output).contains("warning"),
                "round {round}: {}",
                stderr(output)
            );
        }
        let package = |name: &str| {
            std::fs::read(directory.join(name).join("vit-tiny").join("package.bin"))
                .expect("package written")
        };
        assert_eq!(package("first"), package("second"), "round {round}");
    }
    let next = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--set",
        &format!("outputs.directory={}", directory.join("third").display()),
        "--cache",
        &cache_text,
    ]);
    assert!(next.status.success(), "{}", stderr(&next));
    assert!(!stderr(&next).contains("warning"), "{}", stderr(&next));
    assert!(stderr(&next).contains("(0 rejected)"), "{}", stderr(&next));
}

// Case 7: the package file is read back: simulate and verify run on the
// file from disk, and a foreign, truncated, corrupt, old or stale file is
// an error naming it (exit code 2).
#[test]
fn case_07_the_package_file_is_read_back_and_checked() {
    let directory = scratch("hardening", "package-file");
    let set = format!("outputs.directory={}", directory.display());
    let build = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        &set,
    ]);
    assert!(build.status.success(), "{}", stderr(&build));
    let file = directory.join("vit-tiny").join("package.bin");
    let path = file.to_str().expect("utf-8");

    let simulate = |package: Option<&str>, extra: &[&str]| {
        let mut arguments = vec![
            "simulate",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--set",
            &set,
        ];
        if let Some(package) = package {
            arguments.extend(["--package", package]);
        }
        arguments.extend_from_slice(extra);
        superstep(&arguments)
    };
    let from_file = simulate(Some(path), &[]);
    assert!(from_file.status.success(), "{}", stderr(&from_file));
    let text = stdout(&from_file);
    assert!(
        text.contains(&format!("package read from {path}")),
        "{text}"
    );
    assert!(text.contains("cosine"), "{text}");
    let default = simulate(None, &[]);
    assert!(default.status.success(), "{}", stderr(&default));
    assert!(
        stdout(&default).contains("(up to date)"),
        "{}",
        stdout(&default)
    );
    let verify = superstep(&["verify", path]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert!(
        stdout(&verify).contains("all checks pass"),
        "{}",
        stdout(&verify)
    );

    // Another query's file: rejected before the compile.
    let stale = simulate(Some(path), &["--set", "workload.layers=1"]);
    assert_input_error(&stale, &["--package", "another query"]);
    // The default simulate of another query does not take the stale file.
    let other = simulate(None, &["--set", "workload.layers=1"]);
    assert!(other.status.success(), "{}", stderr(&other));
    assert!(
        stdout(&other).contains("assembled in memory"),
        "{}",
        stdout(&other)
    );

    let original = std::fs::read(&file).expect("package");
    let damaged = |name: &str, bytes: &[u8]| {
        let path = directory.join(name);
        std::fs::write(&path, bytes).expect("write");
        path.display().to_string()
    };
    let truncated = damaged("truncated.bin", &original[..original.len() / 2]);
    let mut flipped = original.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    let corrupt = damaged("corrupt.bin", &flipped);
    let foreign = damaged("foreign.bin", b"PK\x03\x04 a zip file, not a package");
    let mut old = original.clone();
    old[..8].copy_from_slice(b"SSTPKG02");
    let old = damaged("old.bin", &old);
    let mut longer = original.clone();
    longer.extend_from_slice(b"tail");
    let longer = damaged("longer.bin", &longer);
    for (file, expected) in [
        (&truncated, "is truncated"),
        (&corrupt, "is corrupt"),
        (&foreign, "is not a superstep package"),
        (&old, "format 02"),
        (&longer, "bytes after the package"),
    ] {
        assert_input_error(&superstep(&["verify", file]), &[file, expected]);
        assert_input_error(&simulate(Some(file), &[]), &[file, expected]);
    }
}

/// Issue 26, item 6: `build` reads the checkpoint it names, so a garbage
/// SafeTensors file is exit code 2 naming the field and the file, not a
/// build that `run` later refuses.
#[test]
fn a_garbage_checkpoint_fails_the_build_naming_it() {
    let directory = scratch("hardening", "garbage-weights");
    let garbage = directory.join("model.safetensors");
    std::fs::write(&garbage, [0x41u8; 300]).expect("garbage");
    let weights = format!("workload.weights.safetensors={}", garbage.display());
    let outputs = format!("outputs.directory={}", directory.display());
    // FP8 inputs read the checkpoint first for calibration: the error names
    // the field and the file all the same.
    for inputs in ["planning.matrix_inputs=fp16", "planning.matrix_inputs=fp8"] {
        let output = superstep(&[
            "build",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--set",
            &weights,
            "--set",
            &outputs,
            "--set",
            inputs,
        ]);
        assert_input_error(
            &output,
            &["workload.weights.safetensors", "model.safetensors"],
        );
        assert!(
            !directory.join("vit-tiny").join("package.bin").exists(),
            "{inputs}: nothing is written for a build that failed"
        );
    }
    let _ = std::fs::remove_dir_all(&directory);
}
