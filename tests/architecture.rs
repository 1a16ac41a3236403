//! The module import graph, read from the source: every `crate::` and
//! `super::` path in non-test code (comments and `#[cfg(test)]` modules
//! left out) is an edge from the file's module to the longest module prefix
//! it names. Two rules hold:
//!
//! - **Layers.** Each top-level module has a rank; a module may import
//!   only from modules of a lower rank (stages import the stages before them
//!   and the machine's facts; the query layer, the session and the user
//!   interfaces sit on top). Same-rank imports are allowed only within one
//!   top-level module.
//! - **No cycles between files.** The file-level graph is acyclic.
//! - **One facade.** What users see (`cli`, `watch`, `snapshot`, `report`)
//!   asks the `session` and imports nothing from the query layer
//!   (`incremental`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Ranks of the top-level modules, lowest first: a module may import from
/// any module of a lower rank.
const RANKS: &[(&str, u32)] = &[
    // Facts and utilities.
    ("target", 0),
    ("hashing", 0),
    ("text", 0),
    ("output_file", 0),
    ("numerics", 1),
    ("cache", 1),
    // The compiler's stages, in pipeline order.
    ("model", 2),
    ("layout", 3),
    ("expand", 4),
    ("group", 5),
    ("schedule", 6),
    ("rows", 7),
    ("patch", 8),
    ("place", 9),
    ("package", 10),
    ("estimate", 11),
    // Build files parse into the stages' vocabulary.
    ("build_file", 12),
    // Execution of what the stages make, against a reference.
    ("sim", 13),
    // The database-free pipeline, the salsa queries and the session facade.
    ("direct", 14),
    ("host_io", 14),
    ("incremental", 15),
    ("session", 16),
    // What users see.
    ("report", 17),
    ("snapshot", 17),
    ("watch", 18),
    ("cli", 19),
    ("main", 20),
    ("lib", 20),
];

/// Source text with line comments and `#[cfg(test)] mod ... { ... }` blocks removed.
fn production_code(text: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..start]);
        let after = &rest[start + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        if trimmed.starts_with("mod ") && trimmed.find('{') < trimmed.find(';') {
            // Skip the whole module body by brace depth.
            let open = after.find('{').unwrap_or(after.len());
            let mut depth = 0usize;
            let mut end = after.len();
            for (offset, character) in after[open..].char_indices() {
                match character {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + offset + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &after[end..];
        } else {
            rest = after;
        }
    }
    kept.push_str(rest);
    kept.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `src/a/b.rs` -> `a::b`, `src/a/mod.rs` -> `a`.
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().to_string())
        .collect();
    if let Some(last) = parts.last_mut() {
        *last = last.trim_end_matches(".rs").to_string();
    }
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts.join("::")
}

fn source_files(directory: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(directory).expect("src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            source_files(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// Paths (`a::b::c`) following `prefix` in `code`.
fn paths_after<'code>(code: &'code str, prefix: &str) -> Vec<&'code str> {
    let mut paths = Vec::new();
    let mut start = 0;
    while let Some(found) = code[start..].find(prefix) {
        let at = start + found;
        let preceded_by_word = code[..at]
            .chars()
            .last()
            .is_some_and(|character| character.is_alphanumeric() || character == '_');
        let begin = at + prefix.len();
        let end = code[begin..]
            .find(|character: char| {
                !(character.is_alphanumeric() || character == '_' || character == ':')
            })
            .map_or(code.len(), |offset| begin + offset);
        if !preceded_by_word {
            paths.push(code[begin..end].trim_end_matches(':'));
        }
        start = end.max(at + 1);
    }
    paths
}

/// The file-level import graph of `src/`, test files left out.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let source = Path::new("src");
    let mut files = Vec::new();
    source_files(source, &mut files);
    let mut texts = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(source).expect("under src");
        let name = relative.to_string_lossy();
        if name.ends_with("tests.rs") || name.contains("/tests/") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        texts.insert(module_of(relative), production_code(&text));
    }
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let longest_module = |path: &[&str]| -> Option<String> {
        (1..=path.len())
            .rev()
            .map(|length| path[..length].join("::"))
            .find(|candidate| modules.contains(candidate))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in &texts {
        let targets = graph.entry(module.clone()).or_default();
        for path in paths_after(code, "crate::") {
            let parts: Vec<&str> = path.split("::").filter(|part| !part.is_empty()).collect();
            if let Some(target) = longest_module(&parts)
                && &target != module
            {
                targets.insert(target);
            }
        }
        // `super::` from module `a::b::c` (file `a/b/c.rs` or `a/b/c/mod.rs`)
        // names modules under `a::b`.
        let mut parent: Vec<&str> = module.split("::").collect();
        parent.pop();
        for path in paths_after(code, "super::") {
            let mut parts = parent.clone();
            parts.extend(path.split("::").filter(|part| !part.is_empty()));
            if let Some(target) = longest_module(&parts)
                && &target != module
            {
                targets.insert(target);
            }
        }
    }
    graph
}

fn rank_of(module: &str) -> u32 {
    let top = module.split("::").next().unwrap_or(module);
    RANKS
        .iter()
        .find(|(name, _)| *name == top)
        .map(|(_, rank)| *rank)
        .unwrap_or_else(|| panic!("top-level module `{top}` has no rank: add it to RANKS"))
}

#[test]
fn no_import_runs_from_a_lower_layer_to_a_higher_one() {
    let graph = import_graph();
    assert!(graph.len() > 50, "found only {} modules", graph.len());
    let mut violations = Vec::new();
    for (module, targets) in &graph {
        let top = module.split("::").next().unwrap_or(module);
        for target in targets {
            let target_top = target.split("::").next().unwrap_or(target);
            if top == target_top {
                continue;
            }
            if rank_of(target) >= rank_of(module) {
                violations.push(format!(
                    "{module} (rank {}) imports {target} (rank {})",
                    rank_of(module),
                    rank_of(target)
                ));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn no_import_cycle_between_files() {
    let graph = import_graph();
    // Depth-first search with colours; report one cycle per back edge.
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    let mut colour: BTreeMap<&str, Colour> = graph
        .keys()
        .map(|module| (module.as_str(), Colour::White))
        .collect();
    let mut cycles = Vec::new();
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
    let modules: Vec<&str> = graph.keys().map(String::as_str).collect();
    for module in modules {
        if colour[module] == Colour::White {
            visit(module, &graph, &mut colour, &mut Vec::new(), &mut cycles);
        }
    }
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

/// Modules that reach the compiler only through the session facade.
const FACADE_USERS: &[&str] = &["cli", "watch", "snapshot", "report"];

#[test]
fn user_interfaces_ask_the_session_not_the_queries() {
    let graph = import_graph();
    let mut violations = Vec::new();
    for (module, targets) in &graph {
        let top = module.split("::").next().unwrap_or(module);
        if !FACADE_USERS.contains(&top) {
            continue;
        }
        for target in targets {
            if target == "incremental" || target.starts_with("incremental::") {
                violations.push(format!("{module} imports {target}"));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    assert!(
        graph["cli::common"].contains("session"),
        "the CLI asks the session"
    );
}

#[test]
fn the_reader_sees_real_edges() {
    // A known edge and a known non-edge, so a broken reader cannot pass.
    let graph = import_graph();
    assert!(graph["schedule::scheduler"].contains("schedule::problem"));
    assert!(graph["layout::planner"].contains("model::graph"));
    assert!(!graph["target::memory"].contains("cli"));
}
