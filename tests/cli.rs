//! The command line as a user meets it: exit codes, error messages that name
//! the field, reports, traces, determinism.

use crate::common;

use std::process::Output;

use common::{scratch, superstep};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn build_prints_counts_and_writes_a_deterministic_report() {
    let directory = scratch("cli", "report");
    let set = format!("outputs.directory={}", directory.display());
    let arguments = [
        "build",
        "queries/vit-tiny.toml",
        "--set",
        &set,
        "--set",
        "machine.tiles=16",
    ];
    let first = superstep(&arguments);
    assert!(first.status.success(), "{}", stderr(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    for label in [
        "kernel runs",
        "local copies",
        "exchanges",
        "transfers",
        "allocations",
        "stage times",
    ] {
        assert!(stdout.contains(label), "missing {label}: {stdout}");
    }
    let report = directory.join("vit-tiny").join("report.json");
    let first_report = std::fs::read(&report).expect("report written");
    let second = superstep(&arguments);
    assert!(second.status.success());
    assert_eq!(
        first_report,
        std::fs::read(&report).expect("report"),
        "reports differ between runs"
    );
    let json: serde_json::Value = serde_json::from_slice(&first_report).expect("valid JSON");
    assert!(
        json["program"]["total"]["transfers"]
            .as_u64()
            .expect("transfers")
            > 0
    );
    // The report says what was built: its build file, its --sets and the
    // build key package.bin's header records.
    assert_eq!(json["source"]["build_file"], "queries/vit-tiny.toml");
    // Where the outputs go is not part of what was built.
    assert_eq!(
        json["source"]["sets"],
        serde_json::json!(["machine.tiles=16"])
    );
    let package = std::fs::read(directory.join("vit-tiny").join("package.bin")).expect("package");
    let key: String = package[48..80]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(json["source"]["build_key"], key.as_str());
    let html = std::fs::read_to_string(directory.join("vit-tiny").join("report.html"))
        .expect("report.html");
    assert!(
        html.contains("id=\"build-source\"") && html.contains(&key[..16]),
        "report.html does not say what was built"
    );
}

/// Two builds that differ by one `--set` write reports that say so: their
/// recorded sets and build keys differ (in report.json and report.html),
/// and both name the build file and the compiler's version and source.
#[test]
fn reports_of_builds_differing_by_one_set_tell_apart() {
    let directory = scratch("cli", "report-sources");
    let report = |policy: &str| {
        let folder = directory.join(policy);
        let outputs = format!("outputs.directory={}", folder.display());
        let set = format!("schedule.policy={policy}");
        let output = superstep(&[
            "build",
            "queries/vit-tiny.toml",
            "--no-cache",
            "-q",
            "--suggestions",
            "0",
            "--set",
            &set,
            "--set",
            &outputs,
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let json: serde_json::Value = serde_json::from_slice(
            &std::fs::read(folder.join("vit-tiny").join("report.json")).expect("report.json"),
        )
        .expect("json");
        let html = std::fs::read_to_string(folder.join("vit-tiny").join("report.html"))
            .expect("report.html");
        (json, html)
    };
    let (latency, latency_html) = report("latency");
    let (balanced, balanced_html) = report("B1024");
    for (json, policy) in [(&latency, "latency"), (&balanced, "B1024")] {
        let source = &json["source"];
        assert_eq!(source["build_file"], "queries/vit-tiny.toml");
        assert_eq!(
            source["sets"],
            serde_json::json!([format!("schedule.policy={policy}")])
        );
        assert_eq!(
            json["compiler"],
            format!("superstep {}", env!("CARGO_PKG_VERSION"))
        );
        let fingerprint = source["compiler_source"].as_str().expect("compiler_source");
        assert_eq!(fingerprint.len(), 16, "{fingerprint}");
    }
    assert_ne!(latency["source"]["sets"], balanced["source"]["sets"]);
    let key = |json: &serde_json::Value| json["source"]["build_key"].as_str().map(String::from);
    assert_ne!(key(&latency), key(&balanced));
    assert_eq!(
        latency["source"]["compiler_source"],
        balanced["source"]["compiler_source"]
    );
    for (html, policy, json) in [
        (&latency_html, "latency", &latency),
        (&balanced_html, "B1024", &balanced),
    ] {
        assert!(
            html.contains(&format!("--set schedule.policy={policy}")),
            "{policy}"
        );
        let key = key(json).expect("key");
        assert!(html.contains(&key[..16]), "{policy}: the build key");
    }
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn run_prints_cosine() {
    let output = superstep(&["run", "queries/vit-tiny.toml"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let cosine: f64 = stdout
        .split("cosine ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|value| value.trim().parse().ok())
        .expect("cosine printed");
    assert!(cosine >= 0.99, "{stdout}");
}

#[test]
fn unknown_set_key_is_exit_2_naming_the_key() {
    let output = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--set",
        "workload.layrs=2",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("workload.layrs"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn bad_file_is_exit_2_with_a_span() {
    let directory = scratch("cli", "bad-file");
    let path = directory.join("bad.toml");
    std::fs::write(
        &path,
        "name = \"bad\"\n[workload]\nmodel = \"siglip-so400m\"\nheads = 7\n",
    )
    .expect("write");
    let output = superstep(&["build", path.to_str().expect("path")]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("workload.heads"), "{message}");
    assert!(
        message.contains("heads = 7"),
        "the span shows the line: {message}"
    );
}

#[test]
fn missing_file_is_exit_2_naming_the_path() {
    let output = superstep(&["build", "queries/no-such-build.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no-such-build.toml"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_model_that_cannot_fit_is_exit_2() {
    let output = superstep(&["build", "--set", "machine.tiles=64"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("tiles"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
}

#[test]
fn trace_writes_a_chrome_trace() {
    let directory = scratch("cli", "trace");
    let trace = directory.join("trace.json");
    let output = superstep(&[
        "--trace",
        trace.to_str().expect("path"),
        "build",
        "queries/vit-tiny.toml",
        "--set",
        &format!("outputs.directory={}", directory.display()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&trace).expect("trace written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("trace is JSON");
    let events = json.as_array().expect("array of events");
    assert!(
        events.iter().any(|event| event["name"] == "layouts"),
        "{text}"
    );
}

#[test]
fn help_explains_the_commands() {
    let output = superstep(&["--help"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["build", "run", "--trace"] {
        assert!(text.contains(word), "{text}");
    }
}

#[test]
fn explain_shows_the_auto_candidates_and_the_winner() {
    let output = superstep(&[
        "explain",
        "queries/vit-tiny.toml",
        "--phase",
        "layer.attn.merge#0",
        "--set",
        "schedule.policy=auto",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("policy: auto"), "{text}");
    assert!(text.contains("auto: "), "{text}");
    assert!(text.contains("candidates tried"), "{text}");
    assert_eq!(text.matches("  chosen").count(), 1, "one winner: {text}");
    for order in ["matching", "B1024"] {
        assert!(
            text.contains(&format!("    {order}")),
            "{order} tried: {text}"
        );
    }
}

#[test]
fn explain_shows_a_phase_and_where_its_policy_comes_from() {
    let output = superstep(&[
        "explain",
        "queries/vit-tiny.toml",
        "--phase",
        "layer.attn.merge#0",
        "--set",
        "schedule.override.layer.attn.merge#0=B64",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "provenance",
        "horizon",
        "endpoint bound",
        "latency-aware bound",
        "rows:",
        "Repeat patches",
        "override 1",
    ] {
        assert!(text.contains(expected), "missing {expected}: {text}");
    }
    let unknown = superstep(&[
        "explain",
        "queries/vit-tiny.toml",
        "--phase",
        "layer.attn#0",
    ]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("layer.attn.merge#0"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn replay_checks_every_phase() {
    let output = superstep(&["replay", "queries/vit-tiny.toml", "--sample", "0"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("0 failed"), "{text}");
    assert!(!text.contains("FAIL "), "{text}");
}

/// `--quiet` prints results only, `--verbose` adds salsa's queries table
/// (absent by default), and no progress bar reaches a pipe.
#[test]
fn verbosity_flags_and_no_progress_when_piped() {
    let directory = scratch("cli", "verbosity");
    let set = format!("outputs.directory={}", directory.display());
    let run = |flags: &[&str]| {
        let mut arguments = vec![
            "build",
            "queries/vit-tiny.toml",
            "--set",
            &set,
            "--no-cache",
        ];
        arguments.extend_from_slice(flags);
        let output = superstep(&arguments);
        assert!(output.status.success(), "{}", stderr(&output));
        (
            String::from_utf8_lossy(&output.stdout).to_string(),
            stderr(&output),
        )
    };
    let (normal, normal_errors) = run(&[]);
    assert!(normal.contains("stage times") && normal.contains("estimate:"));
    assert!(!normal.contains("queries executed"), "{normal}");
    for marker in ["schedules", "expansion [", "[=", "=>"] {
        assert!(
            !normal_errors.contains(marker),
            "progress on a pipe: {normal_errors}"
        );
    }
    let (verbose, _) = run(&["--verbose"]);
    assert!(verbose.contains("queries executed") && verbose.contains("op_expansion"));
    let (quiet, quiet_errors) = run(&["--quiet"]);
    // Results only: the headline, nothing about the run (files written, the
    // cache, the wall time) on either stream.
    assert!(quiet.contains("estimate:"), "{quiet}");
    assert!(
        quiet_errors.trim().is_empty(),
        "--quiet printed on stderr: {quiet_errors}"
    );
    for detail in [
        "stage times",
        "counts:",
        "memory:",
        "suggestions",
        "wrote ",
        "cache ",
        "total ",
    ] {
        assert!(!quiet.contains(detail), "--quiet printed {detail}: {quiet}");
    }
    let both = superstep(&["build", "queries/vit-tiny.toml", "--quiet", "--verbose"]);
    assert_eq!(
        both.status.code(),
        Some(2),
        "--quiet and --verbose conflict"
    );
    std::fs::remove_dir_all(&directory).ok();
}

/// `[[layout.override]]` errors: a missing op, a partition the product's
/// blocks cannot form, a malformed partition, a duplicate entry; each exit
/// 2 with the span of the entry and the nearest valid choices.
#[test]
fn layout_override_errors_are_exit_2_with_the_entry_and_the_nearest_choices() {
    let directory = scratch("cli", "layout-override");
    let base = std::fs::read_to_string("queries/vit-tiny.toml").expect("vit-tiny");
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "missing-op",
            "[[layout.override]]\nop = \"layer.mlp.dwn\"\npartition = \"1x1x16\"\n",
            &[
                "layer.mlp.dwn",
                "op = \"layer.mlp.dwn\"",
                "`layer.mlp.down`",
            ],
        ),
        (
            "impossible",
            "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"7x1x1\"\n",
            &[
                "partition = \"7x1x1\"",
                "not the ones asked for",
                "nearest valid choices",
            ],
        ),
        (
            "malformed",
            "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"1xax16\"\n",
            &["partition = \"1xax16\"", "not a positive whole number"],
        ),
        (
            "bad-order",
            "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"1x1x16\"\norder = \"abc\"\n",
            &["order = \"abc\"", "unknown tile order `abc`", "`rck`"],
        ),
        (
            "twice",
            "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"1x1x16\"\n\
             [[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"1x2x8\"\n",
            &["overridden once", "first override of this op"],
        ),
    ];
    for (name, fragment, expected) in cases {
        let path = directory.join(format!("{name}.toml"));
        std::fs::write(&path, format!("{base}\n{fragment}")).expect("write");
        let output = superstep(&["build", path.to_str().expect("path"), "--no-cache"]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{name}: {message}");
        assert!(!message.contains("panicked"), "{name}: {message}");
        for text in expected {
            assert!(
                message.contains(text),
                "{name}: `{text}` missing from {message}"
            );
        }
    }
    // The same from the command line names the `--set` argument.
    let output = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        "layout.override.layer.mlp.down=7x1x1",
    ]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        message.contains("--set layout.override.layer.mlp.down=7x1x1"),
        "{message}"
    );
    assert!(message.contains("nearest valid choices"), "{message}");
}

/// The conventions every command keeps (docs/cli-conventions.md): under
/// `--quiet` results only, on standard output, nothing about the run (files
/// written, the cache, the wall time) on either stream; otherwise the cache
/// line is the last line on standard error.
#[test]
fn quiet_prints_results_only_and_the_cache_line_comes_last() {
    let directory = scratch("cli", "conventions-quiet");
    let set = format!("outputs.directory={}", directory.display());
    let cache = directory.join("cache").display().to_string();
    let commands: [&[&str]; 5] = [
        &["build"],
        &["phases", "--top", "3"],
        &["explain", "--phase", "layer.attn.merge#0"],
        &["sweep", "--config", "latency/word32"],
        // run asks its cache for a kept plan only, and still ends with it.
        &["run"],
    ];
    for command in commands {
        let mut arguments = command.to_vec();
        arguments.extend(["queries/vit-tiny.toml", "--set", &set, "--cache", &cache]);
        let normal = superstep(&arguments);
        assert!(normal.status.success(), "{command:?}: {}", stderr(&normal));
        let last = stderr(&normal)
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .to_string();
        assert!(
            last.starts_with("cache ") && last.contains(" hits, "),
            "{command:?}: the cache line is not last on stderr: {}",
            stderr(&normal)
        );
        arguments.push("--quiet");
        let quiet = superstep(&arguments);
        assert!(quiet.status.success(), "{command:?}: {}", stderr(&quiet));
        assert_eq!(stderr(&quiet), "", "{command:?} --quiet wrote to stderr");
        let text = String::from_utf8_lossy(&quiet.stdout);
        assert!(
            !text.trim().is_empty(),
            "{command:?} --quiet printed no result"
        );
        for line in text.lines() {
            for about_the_run in ["wrote ", "cache ", "total "] {
                assert!(
                    !line.starts_with(about_the_run),
                    "{command:?} --quiet printed `{line}`"
                );
            }
        }
    }
}

/// A command that fails after using its cache still ends with the
/// cache's line, after the error (a build whose override names no phase:
/// the phases were grouped, and cached, before the override was refused).
#[test]
fn the_cache_line_comes_last_after_an_error_too() {
    let directory = scratch("cli", "conventions-cache-line-on-error");
    let set = format!("outputs.directory={}", directory.display());
    let cache = directory.join("cache").display().to_string();
    let output = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--set",
        &set,
        "--cache",
        &cache,
        "--set",
        "schedule.override.no.such.phase#0=latency",
    ]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("no such phase"), "{message}");
    let last = message.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("cache ") && last.contains(" written;"),
        "the cache line is not last: {message}"
    );
    assert_eq!(message.matches(" hits, ").count(), 1, "{message}");
}

/// Under `--quiet` a result line says nothing of the time it took (the
/// same command prints the same bytes): `run`, `simulate`, `verify`,
/// `replay`, `capture` and `bench-snapshot` on vit-tiny, and every line
/// is checked for a duration ("0.123 s", "12 ms") other than the model's
/// ("N cycles (0.036 ms)").
#[test]
fn quiet_results_hold_no_wall_times() {
    let directory = scratch("cli", "conventions-quiet-times");
    let set = format!("outputs.directory={}", directory.display());
    let package = directory.join("vit-tiny").join("package.bin");
    let snapshot = directory.join("phases.json");
    let trace = directory.join("vit-tiny.trace.json");
    let (package, snapshot, trace) = (
        package.display().to_string(),
        snapshot.display().to_string(),
        trace.display().to_string(),
    );
    let built = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        &set,
    ]);
    assert!(built.status.success(), "{}", stderr(&built));
    let commands: [&[&str]; 7] = [
        &["run", "queries/vit-tiny.toml", "--no-cache"],
        &[
            "profile",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--set",
            &set,
            "-o",
            &trace,
        ],
        &[
            "simulate",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--set",
            &set,
        ],
        &["verify", &package, "queries/vit-tiny.toml", "--no-cache"],
        &[
            "replay",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--sample",
            "0",
        ],
        &[
            "capture",
            "queries/vit-tiny.toml",
            "--no-cache",
            "-o",
            &snapshot,
        ],
        &["bench-snapshot", &snapshot, "--iterations", "1"],
    ];
    let duration = |word: &str, next: Option<&str>| {
        let word = word.trim_end_matches([',', ';', ':', ')']);
        let number = word.trim_start_matches('(');
        number.contains('.')
            && number.parse::<f64>().is_ok()
            && next.is_some_and(|unit| {
                let unit = unit.trim_end_matches([',', ';', ':', ')']);
                unit == "s" || unit == "ms"
            })
            || word.ends_with("ms") && word.trim_end_matches("ms").parse::<f64>().is_ok()
    };
    for command in commands {
        let mut arguments = command.to_vec();
        arguments.push("--quiet");
        let output = superstep(&arguments);
        assert!(output.status.success(), "{command:?}: {}", stderr(&output));
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            !text.trim().is_empty(),
            "{command:?} --quiet printed no result"
        );
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            for (index, word) in words.iter().enumerate() {
                // "53,473 cycles (0.036 ms)": the model's time, a result.
                let modelled = index > 0 && words[index - 1] == "cycles";
                assert!(
                    modelled || !duration(word, words.get(index + 1).copied()),
                    "{command:?} --quiet printed a wall time: `{line}`"
                );
            }
        }
    }
}

/// `--json` on build, explain and sweep: one JSON document on standard
/// output (nothing else there), with the report schema and the compiler.
#[test]
fn build_explain_and_sweep_print_one_json_document() {
    let directory = scratch("cli", "conventions-json");
    let set = format!("outputs.directory={}", directory.display());
    let run = |command: &[&str]| -> serde_json::Value {
        let mut arguments = command.to_vec();
        arguments.extend([
            "queries/vit-tiny.toml",
            "--set",
            &set,
            "--no-cache",
            "--json",
        ]);
        let output = superstep(&arguments);
        assert!(output.status.success(), "{command:?}: {}", stderr(&output));
        let document: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("{command:?}: not one JSON document: {error}"));
        assert_eq!(document["schema_version"], 3, "{command:?}");
        assert!(
            document["compiler"]
                .as_str()
                .is_some_and(|compiler| compiler.starts_with("superstep ")),
            "{command:?}: {}",
            document["compiler"]
        );
        document
    };
    let build = run(&["build"]);
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(directory.join("vit-tiny").join("report.json")).expect("report.json"),
    )
    .expect("report.json is JSON");
    assert_eq!(
        build["report"], report,
        "build --json is report.json's record"
    );
    assert_eq!(report["schema_version"], 3);
    assert_eq!(report["compiler"], build["compiler"]);
    assert!(
        build["report"]["back"]["total_cycles"]
            .as_u64()
            .expect("cycles")
            > 0
    );
    assert!(build["written"].as_array().expect("written").len() >= 4);

    // A compute step, by key and by its step number: the same line.
    let by_key = run(&["explain", "--phase", "layer.attn.core:kernels#0"]);
    assert_eq!(by_key["detail"]["kind"], "compute");
    assert_eq!(by_key["line"]["kind"], "kernels");
    assert!(
        by_key["detail"]["plan"]
            .as_str()
            .expect("plan")
            .starts_with("attention")
    );
    let step = by_key["line"]["step"].as_u64().expect("step").to_string();
    let by_step = run(&["explain", "--phase", &step]);
    assert_eq!(by_step, by_key);
    let exchange = run(&["explain", "--phase", "layer.attn.merge#0"]);
    assert_eq!(exchange["detail"]["kind"], "exchange");
    assert!(
        exchange["detail"]["schedule"]["horizon"]
            .as_u64()
            .expect("horizon")
            > 0
    );
    // Every piece either may pair or is refused for a named reason.
    let transfers = &exchange["detail"]["transfers"];
    let refused: u64 = transfers["not_pairable"]
        .as_object()
        .expect("not_pairable")
        .values()
        .map(|entry| entry["pieces"].as_u64().expect("pieces"))
        .sum();
    assert_eq!(
        transfers["pairable_pieces"].as_u64().expect("pairable") + refused,
        transfers["pieces"].as_u64().expect("pieces"),
        "{transfers}"
    );

    let sweep = run(&[
        "sweep",
        "--config",
        "latency/word32",
        "--config",
        "list/word32",
    ]);
    assert_eq!(
        sweep["configurations"],
        serde_json::json!(["latency/word32", "list/word32"])
    );
    assert!(!sweep["phases"].as_array().expect("phases").is_empty());
    assert_eq!(sweep["selections"].as_array().expect("selections").len(), 2);
}

/// `phases` numbers exchange phases and compute steps in one sequence, in
/// program order, and the trace and explain use the same numbers.
#[test]
fn phases_number_every_line_in_one_sequence() {
    let output = superstep(&["phases", "queries/vit-tiny.toml", "--no-cache", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let steps: Vec<u64> = lines
        .as_array()
        .expect("lines")
        .iter()
        .map(|line| line["step"].as_u64().expect("step"))
        .collect();
    assert_eq!(steps, (0..steps.len() as u64).collect::<Vec<_>>());
    let kinds: std::collections::BTreeSet<&str> = lines
        .as_array()
        .expect("lines")
        .iter()
        .map(|line| line["kind"].as_str().expect("kind"))
        .collect();
    assert!(
        kinds.contains("exchange") && kinds.contains("kernels"),
        "{kinds:?}"
    );
}

/// The sweep's default set has every order `auto` considers, and its
/// summary says where each of the build's suggestions stands.
#[test]
fn the_sweep_summary_places_the_builds_suggestions() {
    let directory = scratch("cli", "conventions-sweep");
    let set = format!("outputs.directory={}", directory.display());
    let output = superstep(&[
        "sweep",
        "queries/vit-tiny.toml",
        "--set",
        &set,
        "--no-cache",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("x 22 configurations"), "{text}");
    let placed = text
        .lines()
        .skip_while(|line| !line.starts_with("the build's suggestions"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .collect::<Vec<_>>();
    assert!(!placed.is_empty(), "{text}");
    for line in placed {
        assert!(
            line.contains("chosen by (") || line.contains("outside ("),
            "a suggestion without its place: {line}"
        );
    }
}

/// docs/build-file.md is rendered from the one field table; regenerate it
/// with `SUPERSTEP_WRITE_DOCS=1 cargo test --test suite cli::build_file_reference`.
#[test]
fn build_file_reference_is_current() {
    let rendered = superstep::build_file::field_reference::reference();
    let path = std::path::Path::new("docs/build-file.md");
    if std::env::var_os("SUPERSTEP_WRITE_DOCS").is_some() {
        std::fs::write(path, &rendered).expect("write docs/build-file.md");
    }
    let written = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        written == rendered,
        "docs/build-file.md is stale: run `SUPERSTEP_WRITE_DOCS=1 cargo test --test suite cli::build_file_reference` and commit it"
    );
}

/// Every value the field table lists as a choice passes validation, and a
/// value outside the list does not: the table cannot drift from validation.
#[test]
fn build_file_reference_choices_are_what_validation_accepts() {
    use superstep::build_file::fields::FIELDS;
    use superstep::build_file::load_query;
    let tiny = std::path::Path::new("queries/vit-tiny.toml");
    let mut checked = 0;
    // Members of arrays of tables (`schedule.override.width`) have no
    // `--set` of their own; the unit tests check them in a file.
    let in_array =
        |key: &str| key.starts_with("schedule.override.") || key.starts_with("layout.override.");
    for field in FIELDS
        .iter()
        .filter(|field| !field.choices.is_empty() && !in_array(field.key))
    {
        // A naming belongs to a checkpoint file (read at build, not here).
        let companion: Vec<String> = if field.key == "workload.weights.naming" {
            vec!["workload.weights.safetensors=tests/fixtures/checkpoints/timm_vit/model.safetensors".to_string()]
        } else {
            Vec::new()
        };
        for choice in field.choices {
            let mut sets = companion.clone();
            sets.push(format!("{}={choice}", field.key));
            if let Err(error) = load_query(tiny, &sets) {
                panic!("{}={choice} is listed but refused: {error:?}", field.key);
            }
            checked += 1;
        }
        let mut wrong = companion.clone();
        wrong.push(format!("{}=no-such-choice", field.key));
        assert!(
            load_query(tiny, &wrong).is_err(),
            "{} accepts a value the table does not list",
            field.key
        );
    }
    assert!(checked >= 25, "{checked}");
}

/// Every command's diagnostics have one style (miette's `× MESSAGE` and
/// `help:` lines, with the code and span where there is a source), and no
/// line is wrapped inside a key or path.
#[test]
fn diagnostics_have_one_style_across_commands() {
    let cases: &[&[&str]] = &[
        &["verify", "/nonexistent/package.bin"],
        &[
            "explain",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--phase",
            "nope",
        ],
        &[
            "packing",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--phase",
            "nope",
        ],
        &[
            "build",
            "queries/vit-tiny.toml",
            "--set",
            "workload.layers=0",
        ],
        &[
            "build",
            "queries/vit-tiny.toml",
            "--no-cache",
            "--set",
            "schedule.override.layer.mlp.dwn#0=latency",
        ],
        &[
            "phases",
            "queries/vit-tiny.toml",
            "--set",
            "schedule.policy=matchng",
        ],
        &["bench-snapshot", "/nonexistent/capture.json"],
    ];
    for arguments in cases {
        let output = superstep(arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}");
        let text = stderr(&output);
        let message = text
            .lines()
            .find(|line| line.starts_with("  × ") || line.starts_with("  x "));
        assert!(
            message.is_some(),
            "{arguments:?}: no diagnostic line in {text}"
        );
        assert!(
            !text.lines().any(|line| line.starts_with("error:")),
            "{arguments:?}: a plain error line in {text}"
        );
        assert!(!text.contains("panicked"), "{arguments:?}: {text}");
    }
}
