//! `superstep sweep` on `queries/vit-tiny.toml` (at B1024, so that other
//! policies have something to win): the point count, every point
//! validated, the frontier against a brute-force computation, selection
//! (a)'s storage guarantee and optimality, the written overrides and
//! `--apply` against a build with them, a warm second sweep that schedules
//! nothing, byte-identical outputs, flag errors and `--help`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{counts, query, scratch, superstep};
use superstep::build_file::load_query;
use superstep::cache::PersistentCache;
use superstep::schedule::timing::paired_eligible;
use superstep::schedule::{SchedulePolicy, TransferWidth};
use superstep::session::Session;
use superstep::session::TrackedQuery;
use superstep::studies::sweep::{SelectionRule, default_configs, select, sweep};

const TINY: &str = "queries/vit-tiny.toml";
const POLICY: &str = "schedule.policy=B1024";

/// One CSV file as rows of named fields.
fn read_csv(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).expect("csv");
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            assert_eq!(fields.len(), header.len(), "{line}");
            header
                .iter()
                .cloned()
                .zip(fields.into_iter().map(str::to_string))
                .collect()
        })
        .collect()
}

fn number(row: &BTreeMap<String, String>, column: &str) -> u64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} = {:?}", row[column]))
}

/// Runs `superstep sweep` on the tiny query with outputs and cache in
/// `directory`; returns standard output and the sweep folder.
fn sweep_command(directory: &Path, extra: &[&str]) -> (String, PathBuf) {
    let outputs = format!("outputs.directory={}", directory.display());
    let cache = directory.join("cache");
    let cache = cache.to_str().expect("path");
    let mut arguments = vec![
        "sweep", TINY, "--set", POLICY, "--set", &outputs, "--cache", cache,
    ];
    arguments.extend_from_slice(extra);
    let output = superstep(&arguments);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        String::from_utf8_lossy(&output.stdout).to_string(),
        directory.join("vit-tiny").join("sweep"),
    )
}

#[test]
fn every_phase_is_measured_under_every_eligible_config_and_validated() {
    let mut session = Session::new(&query(TINY, &[POLICY]));
    session.build().expect("build");
    let configs = default_configs();
    let sweep = sweep(&session, &configs).expect("sweep");
    // Independently: one word32 point per default policy and phase, as many
    // paired64 points more on phases with a piece that may move paired.
    let policies = superstep::studies::sweep::DEFAULT_POLICIES.len();
    assert_eq!(policies, 11);
    let phases = session.phases();
    let eligible = phases
        .iter()
        .filter(|phase| {
            let problem = phase.problem().expect("problem");
            (0..problem.pieces()).any(|piece| paired_eligible(problem, piece))
        })
        .count();
    assert_eq!(sweep.phases.len(), phases.len());
    assert_eq!(
        sweep.point_count(),
        policies * phases.len() + policies * eligible
    );
    assert_eq!(sweep.validated_count(), sweep.point_count());
    for phase in &sweep.phases {
        assert_eq!(
            phase.points.len(),
            if phase.pairing_eligible {
                2 * policies
            } else {
                policies
            }
        );
        // The built figures are the build's.
        let figures = phases[phase.index].figures().expect("figures");
        assert_eq!(phase.built.figures.horizon, figures.horizon);
        assert_eq!(phase.built.figures.max_row_bytes, figures.max_row_bytes);
        // A B1024/word32 point is the build's own schedule when the build
        // took word32 (the tiny build has no eligible pieces).
        if !phase.pairing_eligible {
            let b1024 = phase
                .points
                .iter()
                .find(|point| point.config.to_string() == "B1024/word32")
                .and_then(|point| point.figures())
                .expect("B1024 point");
            assert_eq!(b1024.horizon, phase.built.figures.horizon);
            assert_eq!(b1024.total_row_bytes, phase.built.figures.total_row_bytes);
        }
    }

    let directory = scratch("sweep", "count");
    let (stdout, folder) = sweep_command(&directory, &[]);
    let results = read_csv(&folder.join("results.csv"));
    assert_eq!(results.len(), sweep.point_count());
    assert!(results.iter().all(|row| row["validated"] == "PASS"));
    assert!(
        stdout.contains(&format!(
            "paired64 ones only on the {eligible} phases with eligible pieces: {} points",
            sweep.point_count()
        )),
        "{stdout}"
    );
    let page = std::fs::read_to_string(folder.join("index.html")).expect("page");
    assert_eq!(page.matches("<figure class=\"plot\"").count(), phases.len());
    assert_eq!(page.matches("class=\"built\"").count(), phases.len());
    assert!(page.contains(&format!("data-count=\"{}\"", sweep.point_count())));
}

#[test]
fn the_frontier_is_exactly_the_non_dominated_set() {
    let directory = scratch("sweep", "frontier");
    let (_, folder) = sweep_command(&directory, &[]);
    let results = read_csv(&folder.join("results.csv"));
    let objectives = |row: &BTreeMap<String, String>| {
        (
            number(row, "horizon"),
            number(row, "max_row_bytes"),
            number(row, "total_row_bytes"),
        )
    };
    let mut expected = BTreeSet::new();
    for row in &results {
        let mine = objectives(row);
        let dominated = results.iter().any(|other| {
            let theirs = objectives(other);
            other["phase"] == row["phase"]
                && theirs.0 <= mine.0
                && theirs.1 <= mine.1
                && theirs.2 <= mine.2
                && (theirs.0 < mine.0 || theirs.1 < mine.1 || theirs.2 < mine.2)
        });
        if !dominated {
            expected.insert((row["phase"].clone(), row["config"].clone()));
        }
        assert_eq!(row["frontier"] == "true", !dominated, "{row:?}");
    }
    let written: BTreeSet<(String, String)> = read_csv(&folder.join("frontier.csv"))
        .iter()
        .map(|row| (row["phase"].clone(), row["config"].clone()))
        .collect();
    assert_eq!(written, expected);
    // Some points are dominated: the frontier is a real cut.
    assert!(expected.len() < results.len());
}

#[test]
fn selection_a_never_grows_storage_and_takes_the_cheapest_admissible_point() {
    let directory = scratch("sweep", "selection");
    let (stdout, folder) = sweep_command(&directory, &["--window", "256"]);
    let results = read_csv(&folder.join("results.csv"));
    let selection = read_csv(&folder.join("selection.csv"));
    let mut savings = BTreeMap::new();
    for row in &selection {
        let built_cycles = number(row, "built_cycles");
        let (built_max, built_total) = (
            number(row, "built_max_row_bytes"),
            number(row, "built_total_row_bytes"),
        );
        let admissible = |point: &BTreeMap<String, String>| {
            let max = number(point, "max_row_bytes");
            let total = number(point, "total_row_bytes");
            match row["rule"].as_str() {
                "a" => max <= built_max && total <= built_total,
                _ => max <= built_max + 256,
            }
        };
        let cycles = |point: &BTreeMap<String, String>| {
            number(point, "horizon") + number(point, "repeat_patch_cycles")
        };
        let best = results
            .iter()
            .filter(|point| point["phase"] == row["phase"] && admissible(point))
            .map(cycles)
            .min();
        let saving = number(row, "saving_cycles");
        if row["config"].is_empty() {
            assert_eq!(saving, 0);
            assert!(best.is_none_or(|best| best >= built_cycles), "{row:?}");
            continue;
        }
        if row["rule"] == "a" {
            assert!(number(row, "max_row_bytes") <= built_max, "{row:?}");
            assert!(number(row, "total_row_bytes") <= built_total, "{row:?}");
        }
        assert_eq!(Some(number(row, "cycles")), best, "{row:?}");
        assert_eq!(
            saving,
            (built_cycles - number(row, "cycles")) * number(row, "executions")
        );
        *savings.entry(row["rule"].clone()).or_insert(0) += saving;
    }
    // The numbers of the tiny B1024 build (13 phases: the default `auto`
    // fusion merges all 6 boundaries). With `auto`'s own orders (matching,
    // list) in the default set, FP8 matrix inputs and products in their
    // pairing orders, (a) saves 1,305 cycles (1,563 in the default tile
    // order, 1,277 under the FP16 recipe, 4,161 before reduced slices could
    // be ragged) where the seed study's eight policies found 532.
    assert_eq!(savings.get("a"), Some(&1305), "{savings:?}");
    assert_eq!(savings.get("b"), Some(&2092), "{savings:?}");
    assert!(stdout.contains("may grow: 1,305 cycles"), "{stdout}");
    assert!(stdout.contains("256 bytes: 2,092 cycles"), "{stdout}");

    // The session's selection says the same.
    let mut session = Session::new(&query(TINY, &[POLICY]));
    session.build().expect("build");
    let sweep = sweep(&session, &default_configs()).expect("sweep");
    assert_eq!(
        select(&sweep, SelectionRule::NoStorageGrowth).saving_cycles(),
        1305
    );
    // A window of 0 constrains only the max row: between (a) and (b).
    let tight = select(&sweep, SelectionRule::MaxRowWindow { bytes: 0 }).saving_cycles();
    assert!((1305..=2092).contains(&tight), "{tight}");
}

#[test]
fn written_overrides_build_to_the_predicted_horizons_and_apply_equals_that_build() {
    let directory = scratch("sweep", "overrides");
    let fragment = directory.join("overrides.toml");
    let fragment_text = fragment.to_str().expect("path").to_string();
    let (stdout, folder) = sweep_command(
        &directory,
        &[
            "--write-overrides",
            &fragment_text,
            "--select",
            "b",
            "--apply",
            "b",
        ],
    );
    assert!(
        stdout.contains("per-phase horizons: 7 of 7 as predicted"),
        "{stdout}"
    );
    // The fragment appended to the build file parses.
    let build_file = directory.join("vit-tiny-selected.toml");
    let text = format!(
        "{}\n{}",
        std::fs::read_to_string(TINY).expect("query"),
        std::fs::read_to_string(&fragment).expect("fragment")
    );
    std::fs::write(&build_file, text).expect("build file");
    let selected = load_query(&build_file, &[POLICY.to_string()]).expect("the fragment parses");
    let predicted: BTreeMap<String, u64> = read_csv(&folder.join("selection.csv"))
        .iter()
        .filter(|row| row["rule"] == "b" && !row["config"].is_empty())
        .map(|row| (row["phase"].clone(), number(row, "horizon")))
        .collect();
    assert_eq!(selected.overrides.len(), predicted.len());
    assert_eq!(predicted.len(), 7);
    assert!(selected.overrides.iter().all(|entry| entry.width.is_some()));
    let mut session = Session::new(&selected);
    let outcome = session.build().expect("build with the overrides");
    let back = outcome.back.expect("back half");
    for phase in &back.phases {
        if let Some(&horizon) = predicted.get(&phase.key) {
            assert_eq!(u64::from(phase.horizon), horizon, "{}", phase.key);
            assert_eq!(
                phase.policy_source,
                superstep::session::PolicySource::Override
            );
        }
    }
    // --apply rebuilt exactly that program.
    let applied: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(folder.join("applied.json")).expect("applied.json"),
    )
    .expect("json");
    assert_eq!(
        applied["real"]["estimate_cycles"],
        back.headline.estimate.total_cycles
    );
    assert_eq!(
        applied["real"]["exchange_table_bytes"],
        back.headline.exchange_table_bytes_per_tile_max
    );
    assert_eq!(
        applied["real"]["peak_sram_bytes"],
        back.headline.peak_sram_bytes_per_tile
    );
    assert_eq!(
        applied["predicted"]["estimate_cycles"],
        applied["built"]["estimate_cycles"]
            .as_u64()
            .expect("cycles")
            - 2092
    );
}

#[test]
fn a_second_sweep_in_a_new_process_schedules_nothing() {
    let directory = scratch("sweep", "warm");
    let open = || Arc::new(PersistentCache::open(&directory, 1 << 30).expect("cache"));
    let tiny = query(TINY, &[POLICY]);
    let configs = default_configs();
    let cold = {
        let mut session = Session::with_cache(&tiny, Some(open()));
        session.build().expect("build");
        sweep(&session, &configs).expect("sweep")
    };
    let cache = open();
    let mut session = Session::with_cache(&tiny, Some(cache.clone()));
    let outcome = session.build().expect("build");
    let warm = sweep(&session, &configs).expect("sweep");
    let mut executions = outcome.executions;
    executions.extend(session.take_executions());
    let runs = counts(&executions);
    // The build reads each of its phases' schedules from disk to check the
    // cached rows against; no sweep point schedules anything (and no miss
    // or write below: nothing was computed).
    assert_eq!(
        runs.get(&TrackedQuery::Scheduled),
        runs.get(&TrackedQuery::EncodedRows),
        "{runs:?}"
    );
    assert_eq!(
        runs.get(&TrackedQuery::SweepPoint),
        Some(&warm.point_count()),
        "{runs:?}"
    );
    let statistics = cache.statistics();
    assert_eq!(statistics.misses, 0, "{statistics:?}");
    assert_eq!(statistics.writes, 0, "{statistics:?}");
    assert_eq!(cold, warm);

    // The command, twice in new processes: the second misses nothing and
    // writes byte-identical files.
    let commands = scratch("sweep", "warm-command");
    let (_, folder) = sweep_command(&commands, &[]);
    let first: Vec<Vec<u8>> = ["results.csv", "frontier.csv", "selection.csv", "index.html"]
        .iter()
        .map(|file| std::fs::read(folder.join(file)).expect("output"))
        .collect();
    let outputs = format!("outputs.directory={}", commands.display());
    let cache = commands.join("cache");
    let second = superstep(&[
        "sweep",
        TINY,
        "--set",
        POLICY,
        "--set",
        &outputs,
        "--cache",
        cache.to_str().expect("path"),
    ]);
    assert!(second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(" 0 misses (0 rejected), 0 written"),
        "{stderr}"
    );
    for (file, bytes) in ["results.csv", "frontier.csv", "selection.csv", "index.html"]
        .iter()
        .zip(&first)
    {
        assert_eq!(
            &std::fs::read(folder.join(file)).expect("output"),
            bytes,
            "{file}"
        );
    }
}

#[test]
fn bad_flags_exit_2_naming_the_flag_and_help_explains_every_flag() {
    for (arguments, flag) in [
        (&["sweep", TINY, "--config", "S0"][..], "--config"),
        (&["sweep", TINY, "--config", "S64/word16"][..], "--config"),
        (&["sweep", TINY, "--apply", "c"][..], "--apply"),
        (&["sweep", TINY, "--select", "z"][..], "--select"),
        (&["sweep", TINY, "--window=-1"][..], "--window"),
        (&["sweep", TINY, "--window", "many"][..], "--window"),
        (
            &["sweep", TINY, "--write-overrides", "/no/such/folder/o.toml"][..],
            "--write-overrides",
        ),
    ] {
        let output = superstep(arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(flag), "{arguments:?}: {stderr}");
    }
    let help = superstep(&["sweep", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--config",
        "--window",
        "--write-overrides",
        "--select",
        "--apply",
        "--set",
        "--cache",
        "--no-cache",
    ] {
        assert!(text.contains(flag), "{flag}: {text}");
    }
}

/// An override's width is part of the phase's policy key: giving one
/// overridden phase a width re-schedules that phase only, and the firewall
/// keeps every other phase's figures.
#[test]
fn an_override_width_reschedules_only_its_phase() {
    let phase = "layer.mlp.down.a.rearrange#0";
    let mut session = Session::new(&query(TINY, &[&format!("schedule.override.{phase}=S64")]));
    session.build().expect("build");
    session.update(&query(
        TINY,
        &[&format!("schedule.override.{phase}=S64/word32")],
    ));
    let outcome = session.build().expect("rebuild");
    let runs = counts(&outcome.executions);
    assert_eq!(runs.get(&TrackedQuery::Scheduled), Some(&1), "{runs:?}");
    assert_eq!(runs.get(&TrackedQuery::PhaseFigures), Some(&1), "{runs:?}");
    let back = outcome.back.expect("back half");
    let figures = back
        .phases
        .iter()
        .find(|figures| figures.key == phase)
        .expect("phase");
    assert_eq!(figures.policy, SchedulePolicy::Stream { words: 64 });
    assert_eq!(figures.width, TransferWidth::Word32);
}

/// `--config` replaces the default set: `S64/word32` is one configuration,
/// `latency` and `S64` both widths, each once (four configurations; a
/// `paired64` point only where eligible).
#[test]
fn config_flags_choose_the_configurations() {
    let directory = scratch("sweep", "configs");
    let (stdout, folder) = sweep_command(
        &directory,
        &[
            "--config",
            "S64/word32",
            "--config",
            "latency",
            "--config",
            "S64",
        ],
    );
    let results = read_csv(&folder.join("results.csv"));
    let phases: BTreeSet<&str> = results.iter().map(|row| row["phase"].as_str()).collect();
    let configs: BTreeSet<&str> = results.iter().map(|row| row["config"].as_str()).collect();
    // The tiny build has no piece eligible for pairing: two word32 points per phase.
    assert_eq!(configs, BTreeSet::from(["S64/word32", "latency/word32"]));
    assert_eq!(results.len(), 2 * phases.len());
    assert!(
        stdout.contains(&format!(
            "{} exchange phases x 4 configurations, the 2 paired64 ones only on the 0 phases \
             with eligible pieces: {} points",
            phases.len(),
            results.len()
        )),
        "{stdout}"
    );
}
