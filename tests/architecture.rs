//! The module import graph, read from the source by a small Rust lexer and
//! a `use`-tree parser: every path in non-test code (comments, string and
//! character literals and `#[cfg(test)]` items left out) that starts at
//! `crate`, `self`, `super` (any number of them) or a child module is an
//! edge from the file's module to the longest module prefix it names. `use`
//! groups (`use crate::{a::X, b::{self, Y}}`), `pub use` re-exports and
//! inline paths (`crate::a::f()`) all count. Three rules hold:
//!
//! - **Layers.** Each top-level module has a rank; a module may import
//!   only from modules of a lower rank (stages import the stages before them
//!   and the machine's facts; the query layer, the session and the user
//!   interfaces sit on top). Same-rank imports are allowed only within one
//!   top-level module.
//! - **No cycles between files.** The file-level graph is acyclic: no two
//!   files import each other, directly or around a longer cycle. Imports
//!   are read as written, never followed through a re-export to the file
//!   that defines the item, and a parent and its child are files like any
//!   other: a parent's re-export of a child's item and the child's import
//!   of the parent are a cycle. The only exceptions are the child-to-parent
//!   imports listed, each with its reason, in [`PARENT_CHILD_EXEMPTIONS`].
//! - **One facade.** What users see (`cli`, `watch`, `snapshot`, `report`, `record`)
//!   asks the `session`, imports nothing from the query layer
//!   (`incremental`) and only the session items listed in
//!   [`SESSION_API`]; the session re-exports from the query layer only the
//!   plain data types listed in [`REEXPORTED_DATA`].
//!
//! The planted-violation tests at the end prove the reader sees a cycle, a
//! re-export ring, a parent⇄child cycle and an upward import it is given;
//! `report_the_import_cycles` prints the counts.

use std::collections::{BTreeMap, BTreeSet};

use crate::import_graph::{
    absolute, graph_of, import_graph, nested, paths_in, reexports, sources, tokens,
    without_test_items,
};

/// Ranks of the top-level modules, lowest first: a module may import from
/// any module of a lower rank.
const RANKS: &[(&str, u32)] = &[
    // Facts and utilities.
    ("target", 0),
    ("hashing", 0),
    ("text", 0),
    ("input_file", 0),
    // Writing checks what the command read.
    ("output_file", 1),
    ("numerics", 2),
    ("cache", 2),
    // The compiler's stages, in pipeline order.
    ("model", 3),
    ("layout", 4),
    ("expand", 5),
    ("group", 6),
    ("schedule", 7),
    ("rows", 8),
    ("patch", 9),
    ("place", 10),
    ("package", 11),
    ("estimate", 12),
    // Build files parse into the stages' vocabulary.
    ("build_file", 13),
    // Execution of what the stages make, against a reference.
    ("sim", 14),
    // The database-free pipeline, the salsa queries and the session facade.
    ("direct", 15),
    ("host_io", 15),
    ("incremental", 16),
    ("session", 17),
    // Studies run the compiler many times, or one phase many ways,
    // through the session.
    ("studies", 18),
    // What users see (a report shows studies' findings).
    ("report", 19),
    ("snapshot", 19),
    // Per-phase records read reports' summaries.
    ("record", 20),
    ("watch", 21),
    ("cli", 22),
    ("main", 23),
    ("lib", 23),
];

fn rank_of(module: &str) -> u32 {
    let top = module.split("::").next().unwrap_or(module);
    RANKS
        .iter()
        .find(|(name, _)| *name == top)
        .map(|(_, rank)| *rank)
        .unwrap_or_else(|| panic!("top-level module `{top}` has no rank: add it to RANKS"))
}

/// Every import from a module to one of the same or a higher rank in
/// another top-level module.
fn upward_imports(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut violations = Vec::new();
    for (module, targets) in graph {
        let top = module.split("::").next().unwrap_or(module);
        for target in targets {
            let target_top = target.split("::").next().unwrap_or(target);
            if top != target_top && rank_of(target) >= rank_of(module) {
                violations.push(format!(
                    "{module} (rank {}) imports {target} (rank {})",
                    rank_of(module),
                    rank_of(target)
                ));
            }
        }
    }
    violations
}

/// The imports of a parent module by a file it contains that cycle
/// detection leaves out, each with why: the parent (a `mod.rs` or a
/// `name.rs` beside its folder) defines the shared data and declares,
/// re-exports or calls the child, which works on that data. An entry
/// exempts only the child's edge to that parent: every cycle that does not
/// close through such an edge is reported, and an entry whose edge is gone
/// or closes no cycle fails `no_import_cycle_between_files`.
const PARENT_CHILD_EXEMPTIONS: &[(&str, &str, &str)] = &[
    (
        "build_file",
        "build_file::validate",
        "validation resolves the query types `build_file` defines; `build_file` calls it while loading",
    ),
    (
        "build_file",
        "build_file::fields::table",
        "each field of the table reads its resolved value from the query types `build_file` defines (the settings a rebuild compares)",
    ),
    (
        "build_file",
        "build_file::fields::vocabulary",
        "a field's reader is a function of the `BuildQuery` `build_file` defines",
    ),
    (
        "build_file",
        "build_file::validate::fit",
        "the fit check weighs the machine, planning and workload settings `build_file` defines",
    ),
    (
        "build_file::validate",
        "build_file::validate::layout",
        "the layout-override checks extend the `Resolver` their parent defines and calls them from",
    ),
    (
        "cli",
        "cli::preflight",
        "preflight checks the outputs of the parsed command line (`Cli`, `Command`) the parent declares",
    ),
    (
        "expand",
        "expand::rearrange",
        "the rearrange expansion fails with the `ExpandError` its parent defines and dispatches by",
    ),
    (
        "layout::planner",
        "layout::planner::operator_plans",
        "pass 1 plans with the planner's cost oracle, settings and `LayoutError`, and the planner runs it",
    ),
    (
        "layout::planner",
        "layout::planner::output_formats",
        "pass 2 is a method of the `Planner` its parent defines and runs",
    ),
    (
        "package",
        "package::file",
        "the file format encodes the `Package` and fails with the `PackageError` its parent defines",
    ),
    (
        "place",
        "place::check",
        "the placement check reads the `Placement` and reservations its parent defines and runs it",
    ),
    (
        "rows",
        "rows::check",
        "the row checker checks the `PhaseRows` and `RowError` its parent defines and calls it",
    ),
    (
        "rows",
        "rows::elements",
        "the element rule reads rows in the address unit its parent defines",
    ),
    (
        "rows",
        "rows::encode",
        "the encoder writes the `PhaseRows` its parent defines and calls it",
    ),
    (
        "rows",
        "rows::table",
        "the row table holds the `PhaseRows` its parent defines and re-exports its items",
    ),
    (
        "schedule",
        "schedule::candidates",
        "the candidate orders yield the `Schedule` its parent defines and re-exports their items",
    ),
    (
        "schedule",
        "schedule::figures",
        "the figures summarise the `Schedule` its parent defines and re-exports their items",
    ),
    (
        "schedule",
        "schedule::list",
        "the list scheduler fails with the `ScheduleError` its parent defines",
    ),
    (
        "schedule",
        "schedule::placer",
        "the placer fills the `Schedule` and fails with the `ScheduleError` its parent defines",
    ),
    (
        "schedule",
        "schedule::prepared",
        "a prepared problem becomes the `Schedule` its parent defines",
    ),
    (
        "schedule",
        "schedule::scheduler",
        "the scheduler makes the `Schedule` its parent defines and re-exports its items",
    ),
    (
        "schedule",
        "schedule::validate",
        "the validator checks the `Schedule` its parent defines and re-exports its items",
    ),
    (
        "schedule",
        "schedule::validate::elements",
        "the element rule checks the `Schedule` and problem its grandparent defines",
    ),
    (
        "schedule::packing",
        "schedule::packing::check",
        "the packing check checks the `Packed` alternatives its parent defines and runs it",
    ),
    (
        "schedule::packing",
        "schedule::packing::study",
        "the study measures the alternatives and refusals its parent defines and re-exports its items",
    ),
    (
        "schedule::packing",
        "schedule::packing::transform",
        "the transform makes the `Packed` alternatives its parent defines and re-exports its items",
    ),
    (
        "schedule::validate",
        "schedule::validate::elements",
        "the element rule fails with the `ValidationError` its parent defines and calls it",
    ),
    (
        "session",
        "session::build",
        "`Session::build` is a method of the facade type the parent defines and re-exports its outcome",
    ),
    (
        "snapshot",
        "snapshot::bench",
        "the bench reads the `PhaseSnapshot` its parent defines and re-exports its items",
    ),
    (
        "snapshot",
        "snapshot::capture",
        "capture writes the `PhaseSnapshot` its parent defines and re-exports its items",
    ),
    (
        "snapshot",
        "snapshot::import",
        "import reads back the `PhaseSnapshot` its parent defines and re-exports its items",
    ),
    (
        "target::encoding",
        "target::encoding::decode",
        "the decoder yields the `Instruction` its parent defines and re-exports its items",
    ),
];

/// The pairs of files that import each other (each pair once, in order).
fn two_file_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (module, targets) in graph {
        for target in targets {
            if module < target && graph.get(target).is_some_and(|back| back.contains(module)) {
                pairs.push((module.clone(), target.clone()));
            }
        }
    }
    pairs
}

/// One cycle per back edge of a depth-first search.
fn back_edge_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    fn visit<'graph>(
        module: &'graph str,
        graph: &'graph BTreeMap<String, BTreeSet<String>>,
        colour: &mut BTreeMap<&'graph str, Colour>,
        stack: &mut Vec<&'graph str>,
        cycles: &mut Vec<String>,
    ) {
        colour.insert(module, Colour::Grey);
        stack.push(module);
        for target in graph.get(module).into_iter().flatten() {
            match colour
                .get(target.as_str())
                .copied()
                .unwrap_or(Colour::Black)
            {
                Colour::White => visit(target, graph, colour, stack, cycles),
                Colour::Grey => {
                    let from = stack.iter().position(|entry| *entry == target).unwrap_or(0);
                    cycles.push(format!("{} -> {target}", stack[from..].join(" -> ")));
                }
                Colour::Black => {}
            }
        }
        stack.pop();
        colour.insert(module, Colour::Black);
    }
    let mut colour: BTreeMap<&str, Colour> = graph
        .keys()
        .map(|module| (module.as_str(), Colour::White))
        .collect();
    let mut found = Vec::new();
    for module in graph.keys() {
        if colour[module.as_str()] == Colour::White {
            visit(module, graph, &mut colour, &mut Vec::new(), &mut found);
        }
    }
    found
}

/// Whether `to` can be reached from `from` along the graph's edges.
fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::from([from]);
    let mut pending = vec![from];
    while let Some(module) = pending.pop() {
        for target in graph.get(module).into_iter().flatten() {
            if target == to {
                return true;
            }
            if seen.insert(target.as_str()) {
                pending.push(target);
            }
        }
    }
    false
}

/// The import cycles between files that do not close through an
/// `exempted` child-to-parent edge: one per back edge of a depth-first
/// search over the graph without those edges.
fn cycles(
    graph: &BTreeMap<String, BTreeSet<String>>,
    exempted: &[(&str, &str, &str)],
) -> Vec<String> {
    let mut reduced = graph.clone();
    for (parent, child, _) in exempted {
        if let Some(targets) = reduced.get_mut(*child) {
            targets.remove(*parent);
        }
    }
    back_edge_cycles(&reduced)
}

/// Exemptions that are not a child's import of a parent on a cycle.
fn stale_exemptions(
    graph: &BTreeMap<String, BTreeSet<String>>,
    exempted: &[(&str, &str, &str)],
) -> Vec<String> {
    exempted
        .iter()
        .filter(|(parent, child, _)| {
            !child.starts_with(&format!("{parent}::"))
                || !graph
                    .get(*child)
                    .is_some_and(|targets| targets.contains(*parent))
                || !reaches(graph, parent, child)
        })
        .map(|(parent, child, _)| {
            format!("exempted {child} -> {parent} is not a child's import of a parent on a cycle")
        })
        .collect()
}

/// Counts of the import graph's cycles, as the report prints them.
fn cycle_report(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    let pairs = two_file_cycles(graph);
    let parent_child = pairs
        .iter()
        .filter(|(one, other)| nested(one, other))
        .count();
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    format!(
        "{} files, {edges} imports; {} two-file cycles ({parent_child} parent⇄child, {} other); \
         {} back-edge cycles in the whole graph; {} parent⇄child exemptions; {} cycles reported",
        graph.len(),
        pairs.len(),
        pairs.len() - parent_child,
        back_edge_cycles(graph).len(),
        PARENT_CHILD_EXEMPTIONS.len(),
        cycles(graph, PARENT_CHILD_EXEMPTIONS).len(),
    )
}

#[test]
fn no_import_runs_from_a_lower_layer_to_a_higher_one() {
    let graph = import_graph();
    assert!(graph.len() > 50, "found only {} modules", graph.len());
    let violations = upward_imports(&graph);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn no_import_cycle_between_files() {
    let graph = import_graph();
    let mut found = cycles(&graph, PARENT_CHILD_EXEMPTIONS);
    found.extend(stale_exemptions(&graph, PARENT_CHILD_EXEMPTIONS));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Prints the cycle counts and the exemptions (`cargo test --test suite
/// architecture::report -- --nocapture`). Every two-file cycle left in the
/// tree is a parent and its child, and exempted.
#[test]
fn report_the_import_cycles() {
    let graph = import_graph();
    let report = cycle_report(&graph);
    eprintln!("import graph: {report}");
    for (parent, child, reason) in PARENT_CHILD_EXEMPTIONS {
        eprintln!("  exempted {child} -> {parent}: {reason}");
    }
    let unexempted: Vec<(String, String)> = two_file_cycles(&graph)
        .into_iter()
        .filter(|(one, other)| {
            !PARENT_CHILD_EXEMPTIONS.iter().any(|(parent, child, _)| {
                (one == parent && other == child) || (one == child && other == parent)
            })
        })
        .collect();
    assert!(unexempted.is_empty(), "{report}: {unexempted:?}");
}

/// The exchange checkers (the schedule validator, the row decoder and row
/// checker) and their submodules: each reads the fabric formulas itself.
const EXCHANGE_CHECKERS: &[&str] = &[
    "schedule::validate",
    "rows::check",
    "rows::decode",
    "rows::elements",
];

/// What makes schedules and rows: a checker importing any of these (or a
/// module under them) would repeat its mistakes instead of catching them.
const EXCHANGE_MAKERS: &[&str] = &[
    "target::timing",
    "schedule::timing",
    "schedule::placer",
    "schedule::pairing",
    "schedule::scheduler",
    "schedule::elements",
    "rows::encode",
];

/// Every import of an exchange checker from the code that makes schedules
/// and rows; also a message per checker the graph does not contain.
fn shared_exchange_imports(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let under =
        |module: &str, root: &str| module == root || module.starts_with(&format!("{root}::"));
    let mut violations = Vec::new();
    for checker in EXCHANGE_CHECKERS {
        if !graph.contains_key(*checker) {
            violations.push(format!("checker {checker} is not in the import graph"));
        }
        for (module, targets) in graph.iter().filter(|(module, _)| under(module, checker)) {
            for target in targets {
                if EXCHANGE_MAKERS.iter().any(|maker| under(target, maker)) {
                    violations.push(format!("{module} imports {target}"));
                }
            }
        }
    }
    violations
}

#[test]
fn the_exchange_checkers_import_nothing_of_the_scheduler_timing() {
    let graph = import_graph();
    let found = shared_exchange_imports(&graph);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // Each checker has its own reading of the formulas, and uses it.
    assert!(graph["schedule::validate"].contains("schedule::validate::fabric"));
    assert!(graph["rows::check"].contains("rows::fabric"));
    assert!(graph["rows::decode"].contains("rows::fabric"));
    // A planted import of the scheduler's timing, inline and in a group, is found.
    let mut texts = sources();
    texts
        .get_mut("schedule::validate")
        .expect("schedule::validate")
        .push_str("\nfn planted() -> i32 { crate::target::timing::time_to_mux(0, 1) }\n");
    texts
        .get_mut("rows::check")
        .expect("rows::check")
        .push_str("\nuse crate::{schedule::timing::{piece_events}};\n");
    let found = shared_exchange_imports(&graph_of(&texts));
    assert_eq!(
        found,
        vec![
            "schedule::validate imports target::timing".to_string(),
            "rows::check imports schedule::timing".to_string(),
        ]
    );
}

/// Modules that reach the compiler only through the session facade.
const FACADE_USERS: &[&str] = &["cli", "watch", "snapshot", "report", "record", "studies"];

/// What the user layer may name in `session` (an item of `session/mod.rs`,
/// or one of its submodules with everything in it). Adding a name here is
/// a decision about the facade.
const SESSION_API: &[&str] = &[
    "BackOutcome",
    "BackendError",
    "Canceller",
    "BuildError",
    "BuildOutcome",
    "EffectivePolicy",
    "Execution",
    "Headline",
    "Phase",
    "PhaseError",
    "PhaseFigures",
    "PhaseStudyError",
    "PointFigures",
    "PolicySource",
    "ProgramProfile",
    "SUGGESTIONS",
    "Session",
    "Stage",
    "StageError",
    "StageTime",
    "StepKind",
    "TrackedQuery",
    "UnknownPhase",
    "UnknownPhaseSelector",
    "WeightsError",
    "memory",
    "process_memory",
    "progress",
    "replay",
    "searched_layouts",
    "step_loads",
];

/// What the session re-exports from the query layer: plain data the
/// queries return (errors, figures, the execution record), never the
/// database, an input or a tracked function.
const REEXPORTED_DATA: &[&str] = &[
    "BackendError",
    // The handle `watch` cancels a stale build with (salsa's cancellation
    // behind it): data the session hands out, no query.
    "Canceller",
    "EffectivePolicy",
    "Execution",
    "PhaseError",
    "PhaseFigures",
    "PointFigures",
    "PolicySource",
    "Stage",
    "StageError",
    "TrackedQuery",
    "WeightsError",
];

/// The absolute paths every user-layer module names.
fn user_layer_paths(texts: &BTreeMap<String, String>) -> Vec<(String, Vec<String>)> {
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut named = Vec::new();
    for (module, text) in texts {
        let top = module.split("::").next().unwrap_or(module);
        if !FACADE_USERS.contains(&top) {
            continue;
        }
        for path in paths_in(&without_test_items(&tokens(text))) {
            if let Some(full) = absolute(module, &path, &modules) {
                named.push((module.clone(), full));
            }
        }
    }
    named
}

/// Violations of the facade rule in the given sources.
fn facade_violations(texts: &BTreeMap<String, String>) -> Vec<String> {
    let mut violations = Vec::new();
    let mut used = BTreeSet::new();
    for (module, path) in user_layer_paths(texts) {
        match path.first().map(String::as_str) {
            Some("incremental") => {
                violations.push(format!("{module} names {}", path.join("::")));
            }
            Some("session") if path.len() > 1 => {
                let name = path[1].clone();
                if !SESSION_API.contains(&name.as_str()) {
                    violations.push(format!(
                        "{module} names session::{name}, which SESSION_API does not list"
                    ));
                }
                used.insert(name);
            }
            _ => {}
        }
    }
    for name in SESSION_API {
        if !used.contains(*name) {
            violations.push(format!("SESSION_API lists {name}, which no user names"));
        }
    }
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    for (module, text) in texts {
        if module != "session" && !module.starts_with("session::") {
            continue;
        }
        for (path, _) in reexports(text) {
            let Some(full) = absolute(module, &path, &modules) else {
                continue;
            };
            let item = full.last().cloned().unwrap_or_default();
            if full.first().map(String::as_str) == Some("incremental")
                && !REEXPORTED_DATA.contains(&item.as_str())
            {
                violations.push(format!(
                    "{module} re-exports {}, which REEXPORTED_DATA does not list",
                    full.join("::")
                ));
            }
        }
    }
    violations
}

#[test]
fn user_interfaces_ask_the_session_not_the_queries() {
    let texts = sources();
    let violations = facade_violations(&texts);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    assert!(
        import_graph()["cli::common"].contains("session"),
        "the CLI asks the session"
    );
}

#[test]
fn the_reader_sees_real_edges() {
    // Known edges of every kind the reader parses, and a known non-edge, so
    // a broken reader cannot pass.
    let graph = import_graph();
    assert!(graph["schedule::scheduler"].contains("schedule::problem"));
    assert!(graph["layout::planner"].contains("model::graph"));
    assert!(!graph["target::memory"].contains("cli"));
    // A `pub use` of a child module's item by a bare path.
    assert!(
        graph["session"].contains("session::phase"),
        "{:?}",
        graph["session"]
    );
}

#[test]
fn the_reader_parses_use_trees() {
    let modules: BTreeSet<String> = ["a", "a::b", "a::b::c", "d", "d::e", "f"]
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut texts: BTreeMap<String, String> = modules
        .iter()
        .map(|module| (module.clone(), String::new()))
        .collect();
    texts.insert(
        "a::b::c".into(),
        "// use crate::f::X;\n\
         const TEXT: &str = \"crate::f::Y\";\n\
         use crate::{d::{self, e::Z as W}, *};\n\
         use super::super::Thing;\n\
         pub use self::super::Other;\n\
         #[cfg(test)]\nmod tests { use crate::f::Q; }\n\
         fn run() { W::go(); }"
            .into(),
    );
    texts.insert("a".into(), "pub(crate) use b::c::Item;".into());
    let graph = graph_of(&texts);
    assert_eq!(
        graph["a::b::c"],
        ["a", "a::b", "d", "d::e"]
            .into_iter()
            .map(str::to_string)
            .collect(),
        "comments, strings and test modules are not imports"
    );
    assert_eq!(graph["a"], ["a::b::c".to_string()].into_iter().collect());
    assert!(graph["f"].is_empty());
}

#[test]
fn a_planted_cycle_and_a_planted_upward_import_are_found() {
    let mut texts = sources();
    assert!(cycles(&graph_of(&texts), PARENT_CHILD_EXEMPTIONS).is_empty());
    // `schedule::scheduler` imports `schedule::prepared`; plant the way back,
    // inside a group, as a re-export.
    texts
        .get_mut("schedule::prepared")
        .expect("schedule::prepared")
        .push_str("\npub use super::{scheduler::{self}};\n");
    let found = cycles(&graph_of(&texts), PARENT_CHILD_EXEMPTIONS);
    assert!(
        found
            .iter()
            .any(|cycle| cycle.contains("schedule::prepared")
                && cycle.contains("schedule::scheduler")),
        "{found:?}"
    );
    // A stage importing the session, through `super::super`.
    let mut texts = sources();
    assert!(upward_imports(&graph_of(&texts)).is_empty());
    texts
        .get_mut("layout::planner::operator_plans")
        .expect("layout::planner::operator_plans")
        .push_str("\nuse super::super::super::session::Session;\n");
    let found = upward_imports(&graph_of(&texts));
    assert_eq!(
        found,
        vec!["layout::planner::operator_plans (rank 4) imports session (rank 17)".to_string()]
    );
    // The user layer naming an unlisted session item or the query layer.
    let mut texts = sources();
    texts
        .get_mut("cli::build")
        .expect("cli::build")
        .push_str("\nuse crate::session::fan_out::fan_out;\nuse crate::incremental::Db;\n");
    let found = facade_violations(&texts);
    assert_eq!(found.len(), 2, "{found:?}");
}

/// A parent, two children and a sibling module, in memory.
fn planted_family(parent: &str, child: &str, other: &str) -> BTreeMap<String, String> {
    [
        ("family", parent),
        ("family::child", child),
        ("family::other", other),
        ("outside", ""),
    ]
    .into_iter()
    .map(|(module, text)| (module.to_string(), text.to_string()))
    .collect()
}

/// A parent that re-exports a child's item, and the child importing that
/// item back from the parent: a ring as written (the re-export is the
/// parent's edge to the child, the import the child's edge to the parent),
/// though the item lives in the child.
#[test]
fn a_planted_reexport_ring_is_a_cycle() {
    let texts = planted_family(
        "pub use self::child::Item;",
        "pub struct Item;\nuse super::Item as Again;",
        "",
    );
    let graph = graph_of(&texts);
    assert_eq!(
        graph["family"],
        BTreeSet::from(["family::child".to_string()])
    );
    assert_eq!(
        graph["family::child"],
        BTreeSet::from(["family".to_string()])
    );
    assert_eq!(
        cycles(&graph, &[]),
        vec!["family -> family::child -> family".to_string()]
    );
    // A sibling reading the child's item through the parent's re-export
    // closes a ring of three files when the child imports the sibling.
    let texts = planted_family(
        "pub use child::Item;",
        "pub struct Item;\nfn run() { crate::family::other::go(); }",
        "use super::Item;\npub fn go() {}",
    );
    let found = cycles(&graph_of(&texts), &[]);
    assert_eq!(
        found,
        vec!["family -> family::child -> family::other -> family".to_string()],
    );
}

/// A parent calling its child and the child using the parent's type is a
/// two-file cycle; exempting that pair hides it and only it.
#[test]
fn a_planted_parent_child_cycle_is_reported_unless_exempted() {
    let texts = planted_family(
        "pub struct Shared;\npub fn run() { child::work(); other::work(); }",
        "use super::Shared;\npub fn work() {}",
        "use super::Shared;\npub fn work() {}",
    );
    let graph = graph_of(&texts);
    let all = cycles(&graph, &[]);
    assert_eq!(
        all,
        vec![
            "family -> family::child -> family".to_string(),
            "family -> family::other -> family".to_string(),
        ]
    );
    assert_eq!(
        two_file_cycles(&graph),
        vec![
            ("family".to_string(), "family::child".to_string()),
            ("family".to_string(), "family::other".to_string()),
        ]
    );
    let child_only = [("family", "family::child", "planted")];
    assert_eq!(
        cycles(&graph, &child_only),
        vec!["family -> family::other -> family".to_string()]
    );
    assert!(stale_exemptions(&graph, &child_only).is_empty());
    // An exemption of an edge that is not there, or of a pair that is not
    // parent and child, is stale.
    let stale = [
        ("family::child", "family::other", "siblings"),
        ("outside", "outside::nothing", "no such edge"),
    ];
    assert_eq!(stale_exemptions(&graph, &stale).len(), 2);
    // The tree's own exemptions, applied to a tree with one of their
    // children importing a sibling that imports it back, still report it.
    let mut texts = sources();
    texts
        .get_mut("rows::decode")
        .expect("rows::decode")
        .push_str("\nfn planted() { super::encode::encode_phase(); }\n");
    texts
        .get_mut("rows::encode")
        .expect("rows::encode")
        .push_str("\nuse super::decode::decode_row;\n");
    let found = cycles(&graph_of(&texts), PARENT_CHILD_EXEMPTIONS);
    assert!(
        found.len() == 1 && found[0].contains("rows::decode") && found[0].contains("rows::encode"),
        "{found:?}"
    );
}

/// The names of the functions under `#[salsa::tracked]` in `folder`.
fn tracked_functions(folder: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(folder).expect("the query layer's folder") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|extension| extension != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file");
        let mut after_attribute = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[salsa::tracked") {
                after_attribute = true;
            } else if after_attribute && let Some(rest) = line.split("fn ").nth(1) {
                let name: String = rest
                    .chars()
                    .take_while(|character| character.is_alphanumeric() || *character == '_')
                    .collect();
                names.insert(name);
                after_attribute = false;
            } else if after_attribute
                && (line.starts_with("pub struct") || line.starts_with("struct"))
            {
                // A tracked struct, not a function.
                after_attribute = false;
            }
        }
    }
    names
}

/// `TrackedQuery` lists every tracked function of the query layer, and
/// nothing else: a query added or renamed without the list fails here, so
/// no test's or watch's reference to a query can go stale silently.
#[test]
fn the_tracked_query_list_is_the_query_layers_functions() {
    let in_source = tracked_functions("src/incremental");
    assert!(in_source.len() > 30, "found only {in_source:?}");
    let listed: BTreeSet<String> = superstep::session::TrackedQuery::ALL
        .iter()
        .map(|query| query.name().to_string())
        .collect();
    let unlisted: Vec<&String> = in_source.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&in_source).collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "tracked but not in TrackedQuery: {unlisted:?}; listed but not tracked: {stale:?}"
    );
}
