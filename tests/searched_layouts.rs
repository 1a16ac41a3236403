//! Layouts that follow the configuration (issue 46, items 1 and 2): a
//! search kept in the cache is the plan of exactly the configuration it
//! was searched for, and `[[layout.override]]` pins are never silently
//! stale (a `when` limits them; one that cannot apply is an error before
//! any fit probing).

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{query, scratch, superstep};
use superstep::session::searched_layouts::configuration_key;

const TINY: &str = "queries/vit-tiny.toml";

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The `layouts:` line of a build's standard output.
fn layouts_line(output: &Output) -> String {
    stdout(output)
        .lines()
        .find(|line| line.starts_with("layouts: "))
        .unwrap_or_else(|| panic!("no layouts line in {}", stdout(output)))
        .to_string()
}

/// A `--json` build's document.
fn document(output: &Output) -> serde_json::Value {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

/// The key follows the configuration (batch, tiles, precision) and not
/// the build's name, outputs or pins.
#[test]
fn the_key_is_the_configuration() {
    let base = configuration_key(&query(TINY, &[]));
    for same in [
        &["name=other"][..],
        &["outputs.directory=/tmp/elsewhere", "outputs.html=false"],
        &["layout.override.layer.mlp.down=1x1x16"],
        // A phase's schedule override pins that phase of the program
        // built from the plan; it does not choose the plan.
        &["schedule.override.layer.mlp.down#0=B64"],
    ] {
        assert_eq!(configuration_key(&query(TINY, same)), base, "{same:?}");
    }
    for other in [
        "workload.batch=2",
        "workload.layers=1",
        "machine.tiles=8",
        "planning.matrix_inputs=fp16",
        "schedule.policy=B64",
    ] {
        assert_ne!(configuration_key(&query(TINY, &[other])), base, "{other}");
    }
}

/// Searched once, a fresh build over the same cache uses the searched
/// plan (its estimate is the search's best) and says so; another batch
/// does not pick it up; without a cache the planner chooses; a pin takes
/// precedence over the search for its op.
#[test]
fn a_kept_search_is_the_layouts_of_its_configuration_only() {
    let directory = scratch("searched-layouts", "kept");
    let outputs = format!("outputs.directory={}", text(&directory));
    let cache = directory.join("cache");
    let cache = text(&cache);
    let search = superstep(&[
        "search", TINY, "--set", &outputs, "--cache", cache, "--json",
    ]);
    let outcome = document(&search);
    // The same search prints the same document: no wall time in it.
    assert_eq!(outcome.get("seconds"), None, "{outcome}");
    assert!(
        outcome["beam"].is_null() || outcome["beam"].get("seconds").is_none(),
        "{outcome}"
    );
    let best = outcome["best_cycles"].as_u64().expect("best_cycles");
    let trials = outcome["trials"].as_u64().expect("trials");
    let searched_ops = outcome["overrides"].as_array().expect("overrides").len();

    let build = |sets: &[&str], cached: bool| {
        let mut arguments = vec!["build", TINY, "--quiet", "--set", &outputs];
        if cached {
            arguments.extend(["--cache", cache]);
        } else {
            arguments.push("--no-cache");
        }
        for set in sets {
            arguments.extend(["--set", set]);
        }
        superstep(&arguments)
    };
    let plain = build(&[], true);
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    assert_eq!(
        layouts_line(&plain),
        format!(
            "layouts: searched (cache; estimate {} cycles when searched, {trials} trials)",
            thousands(best)
        )
    );
    let mut arguments = vec!["build", TINY, "--json", "--set", &outputs, "--cache", cache];
    arguments.extend(["--suggestions", "0"]);
    let report = document(&superstep(&arguments));
    let layouts = &report["report"]["layouts"];
    assert_eq!(layouts["origin"], "searched", "{layouts}");
    assert_eq!(layouts["searched_cycles"].as_u64(), Some(best));
    assert_eq!(layouts["searched_ops"].as_u64(), Some(searched_ops as u64));
    assert_eq!(
        report["report"]["back"]["total_cycles"].as_u64(),
        Some(best),
        "the build's estimate is the search's best"
    );
    let written: serde_json::Value = serde_json::from_slice(
        &std::fs::read(directory.join("vit-tiny/report.json")).expect("report.json"),
    )
    .expect("report.json");
    assert_eq!(written["layouts"], *layouts, "report.json records it");

    // Another batch is another configuration: the planner's layouts.
    let batch_two = build(&["workload.batch=2"], true);
    assert_eq!(batch_two.status.code(), Some(0), "{}", stderr(&batch_two));
    assert!(
        layouts_line(&batch_two).starts_with(
            "layouts: planner (no search kept for this configuration; superstep search may find"
        ),
        "{}",
        layouts_line(&batch_two)
    );
    // `watch` and `diff` build with the kept plan too, as `build` does.
    let watch = superstep(&[
        "watch",
        TINY,
        "--set",
        &outputs,
        "--cache",
        cache,
        "--exit-after",
        "0",
    ]);
    assert_eq!(watch.status.code(), Some(0), "{}", stderr(&watch));
    assert!(
        stdout(&watch)
            .lines()
            .any(|line| line.starts_with("layouts: searched (cache;")),
        "{}",
        stdout(&watch)
    );
    let diff = document(&superstep(&[
        "diff",
        TINY,
        TINY,
        "--set",
        &outputs,
        "--cache",
        cache,
        "--set-b",
        "workload.batch=2",
        "--json",
    ]));
    assert_eq!(
        diff["totals"]["total_cycles"]["a"].as_u64(),
        Some(best),
        "{diff}"
    );
    // No cache: the planner's.
    let uncached = build(&[], false);
    assert_eq!(uncached.status.code(), Some(0), "{}", stderr(&uncached));
    assert!(
        layouts_line(&uncached).starts_with("layouts: planner (--no-cache: no search looked up"),
        "{}",
        layouts_line(&uncached)
    );
    // A pin on an op the search chose takes precedence, and says so.
    if let Some(first) = outcome["overrides"].as_array().and_then(|all| all.first()) {
        let op = first[0].as_str().expect("op");
        let chosen = first[1].as_str().expect("partition");
        let pin = format!("layout.override.{op}={chosen}");
        let pinned = build(&[&pin], true);
        assert_eq!(pinned.status.code(), Some(0), "{}", stderr(&pinned));
        let line = layouts_line(&pinned);
        assert!(
            line.starts_with("layouts: searched (cache;")
                && line.contains("1 op pinned by [[layout.override]] (1 over the search's choice)"),
            "{line}"
        );
    }
    let _ = std::fs::remove_dir_all(&directory);
}

fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `--write-overrides` names the configuration searched in each entry's
/// `when`; the file with them appended applies them at that
/// configuration and skips them (counted) at another batch.
#[test]
fn written_overrides_hold_for_the_configuration_searched() {
    let directory = scratch("searched-layouts", "written");
    let outputs = format!("outputs.directory={}", text(&directory));
    let fragment = directory.join("overrides.toml");
    let search = superstep(&[
        "search",
        TINY,
        "--quiet",
        "--no-cache",
        "--set",
        &outputs,
        "--write-overrides",
        text(&fragment),
    ]);
    assert_eq!(search.status.code(), Some(0), "{}", stderr(&search));
    let written = std::fs::read_to_string(&fragment).expect("fragment");
    let entries = written.matches("[[layout.override]]").count();
    assert_eq!(
        written
            .matches("when = { batch = 1, layers = 2, tiles = 16, matrix_inputs = \"fp8\" }")
            .count(),
        entries,
        "{written}"
    );
    let base = std::fs::read_to_string(TINY).expect("vit-tiny");
    let file = directory.join("pinned.toml");
    std::fs::write(&file, format!("{base}\n{written}")).expect("write");
    let build = |sets: &[&str]| {
        let mut arguments = vec!["build", text(&file), "--quiet", "--no-cache"];
        arguments.extend(["--set", &outputs]);
        for set in sets {
            arguments.extend(["--set", set]);
        }
        superstep(&arguments)
    };
    let same = build(&[]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert!(
        !layouts_line(&same).contains("skipped"),
        "{}",
        stdout(&same)
    );
    let other = build(&["workload.batch=2"]);
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    if entries > 0 {
        let line = layouts_line(&other);
        let expected = if entries == 1 {
            String::from("1 pin skipped by `when`")
        } else {
            format!("{entries} pins skipped by `when`")
        };
        assert!(line.contains(&expected), "{line}");
        assert!(!line.contains("pinned by"), "{line}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// A `when` that matches applies its entry, one that does not skips it;
/// an unknown key is exit 2 naming the known ones.
#[test]
fn when_limits_a_pin_to_the_configurations_it_names() {
    let directory = scratch("searched-layouts", "when");
    let base = std::fs::read_to_string(TINY).expect("vit-tiny");
    let write = |name: &str, fragment: &str| {
        let path = directory.join(format!("{name}.toml"));
        std::fs::write(&path, format!("{base}\n{fragment}")).expect("write");
        path
    };
    let pinned = write(
        "pinned",
        "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"1x1x16\"\nwhen = { batch = 1, tiles = 16 }\n",
    );
    let outputs = format!("outputs.directory={}", text(&directory));
    let build = |path: &Path, sets: &[&str]| {
        let mut arguments = vec!["build", text(path), "--quiet", "--no-cache"];
        arguments.extend(["--set", &outputs]);
        for set in sets {
            arguments.extend(["--set", set]);
        }
        superstep(&arguments)
    };
    let applies = build(&pinned, &[]);
    assert_eq!(applies.status.code(), Some(0), "{}", stderr(&applies));
    assert!(
        layouts_line(&applies).ends_with("; 1 op pinned by [[layout.override]]"),
        "{}",
        layouts_line(&applies)
    );
    let skipped = build(&pinned, &["machine.tiles=8"]);
    assert_eq!(skipped.status.code(), Some(0), "{}", stderr(&skipped));
    assert!(
        layouts_line(&skipped).ends_with("; 1 pin skipped by `when` (not for this configuration)"),
        "{}",
        layouts_line(&skipped)
    );
    // A command-line pin has no `when`: it applies at any configuration.
    let set = build(
        &pinned,
        &["machine.tiles=8", "layout.override.layer.mlp.down=1x1x8"],
    );
    assert_eq!(set.status.code(), Some(0), "{}", stderr(&set));
    assert!(
        layouts_line(&set).ends_with("; 1 op pinned by [[layout.override]]"),
        "{}",
        layouts_line(&set)
    );
    let unknown = write(
        "unknown",
        "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"1x1x16\"\nwhen = { heads = 4 }\n",
    );
    let refused = build(&unknown, &[]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    for expected in [
        "layout.override[0].when.heads",
        "batch",
        "layers",
        "tiles",
        "matrix_inputs",
    ] {
        assert!(message.contains(expected), "`{expected}` in {message}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// A pin whose partition the configuration makes impossible is exit 2
/// naming the op, the configuration field and the nearest valid choices,
/// without fit probing (no smaller builds are tried).
#[test]
fn a_stale_pin_is_an_error_before_any_fit_probing() {
    let directory = scratch("searched-layouts", "stale");
    let outputs = format!("outputs.directory={}", text(&directory));
    // A batch-2 build pinning `layer.mlp.down` to `partition`: exit 2, and
    // its message.
    let refused = |partition: &str| {
        let pin = format!("layout.override.layer.mlp.down={partition}");
        let output = superstep(&[
            "build",
            TINY,
            "--no-cache",
            "--set",
            &outputs,
            "--set",
            "workload.batch=2",
            "--set",
            &pin,
        ]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        message
    };
    let message = refused("8x1x1");
    for expected in [
        "layout override for `layer.mlp.down`",
        "workload.batch",
        "nearest valid choices",
    ] {
        assert!(message.contains(expected), "`{expected}` in {message}");
    }
    assert!(!message.contains("building smaller"), "{message}");
    // More parts than tiles: the tile count is named.
    let message = refused("1x1x32");
    assert!(message.contains("machine.tiles = 16"), "{message}");
    assert!(!message.contains("building smaller"), "{message}");
    let _ = std::fs::remove_dir_all(&directory);
}

/// Over a signed remote tier: a writer's search is kept for its
/// configuration and uploaded; a reader with a fresh local cache that
/// trusts the writer fetches it and builds with it; a reader that trusts
/// no key does not take an unchecked plan from the remote.
#[test]
fn a_searched_plan_is_shared_through_a_signed_remote() {
    use std::sync::Arc;
    use std::time::Duration;
    use superstep::cache::remote::{RemoteCache, RemoteSettings};
    use superstep::cache::signing::{SigningKey, TrustedKeys};
    use superstep::cache::{PersistentCache, Signing};
    use superstep::session::Session;
    use superstep::session::searched_layouts::{
        LayoutOrigin, keep_searched_plan, searched_outcome,
    };
    use superstep::studies::layout_search::{SearchSettings, Silent, TrialSharing, search_layouts};

    let directory = scratch("searched-layouts", "remote");
    let nginx = crate::servers::Nginx::start(&directory.join("nginx"));
    let (writer_key, secret) = SigningKey::generate().expect("key");
    let secret = String::from_utf8(secret.as_bytes().to_vec()).expect("text");
    let open = |name: &str, signer: Option<&str>, trusted: &[&SigningKey]| {
        let settings = RemoteSettings {
            timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(120),
            ..RemoteSettings::default()
        };
        let signing = Signing {
            signer: signer.map(|text| SigningKey::parse(text, "test").expect("secret")),
            writer: signer.is_some(),
            listed: TrustedKeys::new(trusted.iter().map(|key| key.public()).collect()),
            also_trusted: Vec::new(),
        };
        Arc::new(
            PersistentCache::open(&directory.join(name), 1 << 30)
                .expect("cache")
                .with_signing(signing)
                .with_remote(RemoteCache::open(&nginx.url(), settings).expect("remote")),
        )
    };
    let start = query(TINY, &[]);
    let outcome = search_layouts(
        &mut Session::new(&start),
        &start,
        SearchSettings {
            rounds: 1,
            cheapest: 2,
            aligned: 0,
            orders: false,
            beam: None,
            min_share_basis_points: 0,
        },
        &Silent,
        TrialSharing::default(),
    )
    .expect("search");
    let writer = open("writer", Some(&secret), &[]);
    assert!(keep_searched_plan(&writer, &start, &outcome));
    // The same plan again is not better: the kept one stays.
    assert!(!keep_searched_plan(&writer, &start, &outcome));
    let report = writer.finish();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    let reader = open("reader", None, &[&writer_key]);
    assert_eq!(searched_outcome(&reader, &start), Some(outcome.clone()));
    let looked_up = Session::with_cache(&start, Some(reader.clone()));
    let (applied, source) = (looked_up.effective_query(&start), looked_up.layout_source());
    assert_eq!(source.origin, LayoutOrigin::Searched);
    assert_eq!(source.searched_cycles, Some(outcome.best_cycles));
    let mut session = Session::new(&applied);
    let built = session.build().expect("build");
    let cycles = built.back.expect("estimate").headline.estimate.total_cycles;
    assert_eq!(cycles, outcome.best_cycles, "the searched plan's estimate");
    // Another configuration has no plan there.
    assert_eq!(
        searched_outcome(&reader, &query(TINY, &["workload.batch=2"])),
        None
    );

    let untrusting = open("untrusting", None, &[]);
    assert_eq!(searched_outcome(&untrusting, &start), None);
    let _ = std::fs::remove_dir_all(&directory);
}

/// A plan "kept by a search" for `query`'s configuration in `cache`: the
/// planner's layouts but for `layer.mlp.down`, which it sets to `partition`.
fn keep_plan(
    cache: &superstep::cache::PersistentCache,
    query: &superstep::build_file::BuildQuery,
    partition: &str,
) {
    use superstep::session::searched_layouts::keep_searched_plan;
    use superstep::studies::layout_search::SearchOutcome;
    let outcome = SearchOutcome {
        baseline_cycles: 2,
        beam: None,
        calibration: Vec::new(),
        operators: Vec::new(),
        best_cycles: 1,
        overrides: vec![(String::from("layer.mlp.down"), String::from(partition))],
        steps: Vec::new(),
        unsearched: Vec::new(),
        trials: 1,
        compiled_here: 1,
        rejected: 0,
        placed: 0,
        fresh_sessions: 0,
        seconds: 0.0,
    };
    assert!(keep_searched_plan(cache, query, &outcome));
}

/// The searched plan is a query of the configuration (salsa's event log):
/// a changed batch re-runs it (and finds no plan for batch 2), a changed
/// per-phase schedule override does not (and the plan stays), and a plan
/// a search keeps while the session lives reaches its next build.
#[test]
fn the_searched_plan_is_a_query_of_the_configuration() {
    use std::sync::Arc;
    use superstep::cache::PersistentCache;
    use superstep::session::searched_layouts::LayoutOrigin;
    use superstep::session::{Session, TrackedQuery};

    let directory = scratch("searched-layouts", "query");
    let cache = Arc::new(PersistentCache::open(&directory.join("cache"), 1 << 30).expect("cache"));
    let start = query(TINY, &[]);
    keep_plan(&cache, &start, "1x1x16");
    let mut session = Session::with_cache(&start, Some(cache.clone()));
    session.build().expect("the searched plan builds");
    let source = session.layout_source();
    assert_eq!(source.origin, LayoutOrigin::Searched);
    assert_eq!(source.searched_ops, 1);
    let effective = session.effective_query(&start);
    assert!(
        effective
            .planning
            .layout_overrides
            .iter()
            .any(|choice| choice.op == "layer.mlp.down" && choice.partition.to_string() == "1x1x16"),
        "{:?}",
        effective.planning.layout_overrides
    );
    // A phase's schedule override: the search's query is not re-run, the
    // plan stays.
    let phase = session.phases()[0].key().to_string();
    session.take_executions();
    let overridden = query(TINY, &[&format!("schedule.override.{phase}=B64")]);
    assert!(session.update(&overridden).contains(&"overrides"));
    let runs = common::counts(&session.build().expect("builds").executions);
    assert_eq!(runs.get(&TrackedQuery::SearchedPlan), None, "{runs:?}");
    assert_eq!(
        runs.get(&TrackedQuery::SearchConfiguration),
        None,
        "{runs:?}"
    );
    assert!(
        runs.contains_key(&TrackedQuery::Scheduled),
        "the override re-schedules its phase: {runs:?}"
    );
    assert_eq!(session.layout_source().origin, LayoutOrigin::Searched);

    // Another batch: the search's query runs again and finds no plan.
    let batch_two = query(TINY, &["workload.batch=2"]);
    session.update(&batch_two);
    let runs = common::counts(&session.build().expect("builds").executions);
    assert_eq!(
        runs.get(&TrackedQuery::SearchConfiguration),
        Some(&1),
        "{runs:?}"
    );
    assert_eq!(runs.get(&TrackedQuery::SearchedPlan), Some(&1), "{runs:?}");
    assert_eq!(session.layout_source().origin, LayoutOrigin::Planner);

    // A search keeps a plan for batch 2 while the session lives: the
    // session notices it and its next build plans with it.
    keep_plan(&cache, &batch_two, "1x1x16");
    assert!(session.notice_kept_searches());
    let runs = common::counts(&session.build().expect("builds").executions);
    assert_eq!(runs.get(&TrackedQuery::SearchedPlan), Some(&1), "{runs:?}");
    assert_eq!(runs.get(&TrackedQuery::Layouts), Some(&1), "{runs:?}");
    assert_eq!(session.layout_source().origin, LayoutOrigin::Searched);
    assert!(!session.notice_kept_searches(), "noticed once");
    let _ = std::fs::remove_dir_all(&directory);
}

/// A search's trials neither validate their schedules nor check their
/// rows (they only price candidates), and price exactly what a checked
/// build prices: the same estimate, phase by phase.
#[test]
fn trials_price_what_a_checked_build_prices() {
    use superstep::session::Session;
    for sets in [&[][..], &["layout.override.layer.mlp.down=1x1x16"][..]] {
        let query = query(TINY, sets);
        let checked = Session::new(&query).build().expect("a checked build");
        let mut trial = Session::for_search(&query, None);
        let priced = trial.build().expect("a trial");
        let figures = |outcome: &superstep::session::BuildOutcome| {
            let back = outcome.back.as_ref().expect("estimate");
            (
                back.headline.estimate.total_cycles,
                back.phases
                    .iter()
                    .map(|phase| (phase.key.clone(), phase.horizon, phase.max_row_bytes))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(figures(&priced), figures(&checked), "{sets:?}");
    }
}
