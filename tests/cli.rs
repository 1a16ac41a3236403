//! The command line as a user meets it: exit codes, error messages that name
//! the field, reports, traces, determinism.

mod common;

use std::process::Output;

use common::{scratch, superstep};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn build_prints_counts_and_writes_a_deterministic_report() {
    let directory = scratch("cli", "report");
    let set = format!("outputs.directory={}", directory.display());
    let first = superstep(&["build", "queries/vit-tiny.toml", "--set", &set]);
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
    let second = superstep(&["build", "queries/vit-tiny.toml", "--set", &set]);
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
    let (quiet, _) = run(&["--quiet"]);
    assert!(quiet.contains("estimate:") && quiet.contains("report.json"));
    for detail in ["stage times", "counts:", "memory:", "suggestions"] {
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
