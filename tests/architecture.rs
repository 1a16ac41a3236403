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
//!   files import each other, directly or around a longer cycle (a parent's
//!   re-export of a child's item and the child's import of the parent count
//!   as a cycle too).
//! - **One facade.** What users see (`cli`, `watch`, `snapshot`, `report`)
//!   asks the `session`, imports nothing from the query layer
//!   (`incremental`) and only the session items listed in
//!   [`SESSION_API`]; the session re-exports from the query layer only the
//!   plain data types listed in [`REEXPORTED_DATA`].
//!
//! The planted-violation tests at the end prove the reader sees a cycle and
//! an upward import it is given.

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

/// One lexical token of Rust source, as far as paths need.
#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    PathSeparator,
    Open(char),
    Close(char),
    Comma,
    Semicolon,
    Star,
    Hash,
    Other,
}

/// Tokens of `text` with whitespace, comments (line, nested block), string
/// literals (plain, byte, raw) and character literals removed.
fn tokens(text: &str) -> Vec<Token> {
    let characters: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < characters.len() {
        let character = characters[at];
        let next = characters.get(at + 1).copied();
        if character.is_whitespace() {
            at += 1;
        } else if character == '/' && next == Some('/') {
            while at < characters.len() && characters[at] != '\n' {
                at += 1;
            }
        } else if character == '/' && next == Some('*') {
            let mut depth = 0;
            while at < characters.len() {
                if characters[at] == '/' && characters.get(at + 1) == Some(&'*') {
                    depth += 1;
                    at += 2;
                } else if characters[at] == '*' && characters.get(at + 1) == Some(&'/') {
                    depth -= 1;
                    at += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    at += 1;
                }
            }
        } else if character == '"' {
            at += 1;
            while at < characters.len() && characters[at] != '"' {
                at += if characters[at] == '\\' { 2 } else { 1 };
            }
            at += 1;
        } else if character == 'r'
            && matches!(next, Some('"') | Some('#'))
            && raw_string_end(&characters, at + 1).is_some()
        {
            at = raw_string_end(&characters, at + 1).unwrap_or(characters.len());
        } else if character == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                at += 2;
                while at < characters.len() && characters[at] != '\'' {
                    at += 1;
                }
                at += 1;
            } else if characters.get(at + 2) == Some(&'\'') {
                at += 3;
            } else {
                at += 1;
                while at < characters.len()
                    && (characters[at].is_alphanumeric() || characters[at] == '_')
                {
                    at += 1;
                }
            }
        } else if character.is_alphanumeric() || character == '_' {
            let begin = at;
            while at < characters.len()
                && (characters[at].is_alphanumeric() || characters[at] == '_')
            {
                at += 1;
            }
            let word: String = characters[begin..at].iter().collect();
            // A byte string (b"..") or raw byte string continues as a literal.
            if (word == "b" || word == "br") && matches!(characters.get(at), Some('"') | Some('#'))
            {
                continue;
            }
            tokens.push(Token::Word(word));
        } else {
            at += 1;
            tokens.push(match character {
                ':' if next == Some(':') => {
                    at += 1;
                    Token::PathSeparator
                }
                '{' | '(' | '[' => Token::Open(character),
                '}' | ')' | ']' => Token::Close(character),
                ',' => Token::Comma,
                ';' => Token::Semicolon,
                '*' => Token::Star,
                '#' => Token::Hash,
                _ => Token::Other,
            });
        }
    }
    tokens
}

/// Where the raw string whose hashes start at `at` ends, if it is one.
fn raw_string_end(characters: &[char], mut at: usize) -> Option<usize> {
    let mut hashes = 0;
    while characters.get(at) == Some(&'#') {
        hashes += 1;
        at += 1;
    }
    if characters.get(at) != Some(&'"') {
        return None;
    }
    at += 1;
    while at < characters.len() {
        if characters[at] == '"'
            && (0..hashes).all(|offset| characters.get(at + 1 + offset) == Some(&'#'))
        {
            return Some(at + 1 + hashes);
        }
        at += 1;
    }
    Some(characters.len())
}

/// The index after the bracketed group that opens at `at`.
fn skip_group(tokens: &[Token], at: usize) -> usize {
    let mut depth = 0usize;
    let mut index = at;
    while index < tokens.len() {
        match tokens[index] {
            Token::Open(_) => depth += 1,
            Token::Close(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return index + 1;
                }
            }
            _ => {}
        }
        index += 1;
    }
    tokens.len()
}

/// `tokens` without the items marked `#[cfg(test)]` (a `mod` with a body,
/// a `use`, a `fn`, an `impl`).
fn without_test_items(tokens: &[Token]) -> Vec<Token> {
    let word = |index: usize, text: &str| tokens.get(index) == Some(&Token::Word(text.into()));
    let mut kept = Vec::with_capacity(tokens.len());
    let mut index = 0;
    while index < tokens.len() {
        let is_cfg_test = tokens[index] == Token::Hash
            && tokens.get(index + 1) == Some(&Token::Open('['))
            && word(index + 2, "cfg")
            && tokens.get(index + 3) == Some(&Token::Open('('))
            && word(index + 4, "test")
            && tokens.get(index + 5) == Some(&Token::Close(')'))
            && tokens.get(index + 6) == Some(&Token::Close(']'));
        if !is_cfg_test {
            kept.push(tokens[index].clone());
            index += 1;
            continue;
        }
        // Skip the attribute, then the item: up to its `;` or through its body.
        index += 7;
        while index < tokens.len() {
            match tokens[index] {
                Token::Semicolon => {
                    index += 1;
                    break;
                }
                Token::Open('{') => {
                    index = skip_group(tokens, index);
                    break;
                }
                _ => index += 1,
            }
        }
    }
    kept
}

/// The full paths (segments) a `use` tree starting at `at` names, each
/// with the name it binds, and the index after the tree.
fn use_tree(
    tokens: &[Token],
    mut at: usize,
    prefix: &[String],
) -> (Vec<(Vec<String>, String)>, usize) {
    let mut path = prefix.to_vec();
    let mut leaves = Vec::new();
    let mut alias = None;
    loop {
        match tokens.get(at) {
            Some(Token::PathSeparator) => at += 1,
            Some(Token::Word(word)) if word == "as" => {
                if let Some(Token::Word(name)) = tokens.get(at + 1) {
                    alias = Some(name.clone());
                }
                at += 2;
                break;
            }
            Some(Token::Word(word)) => {
                // `self` in a group names the group's own path.
                if word != "self" || path.is_empty() {
                    path.push(word.clone());
                }
                at += 1;
            }
            Some(Token::Star) => {
                at += 1;
                alias = Some("*".to_string());
                break;
            }
            Some(Token::Open('{')) => {
                at += 1;
                loop {
                    match tokens.get(at) {
                        Some(Token::Close('}')) => {
                            at += 1;
                            break;
                        }
                        Some(Token::Comma) => at += 1,
                        None => break,
                        _ => {
                            let (inner, after) = use_tree(tokens, at, &path);
                            leaves.extend(inner);
                            at = after.max(at + 1);
                        }
                    }
                }
                return (leaves, at);
            }
            _ => break,
        }
    }
    let name = alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
    leaves.push((path, name));
    (leaves, at)
}

/// Every path (segments) in the code: the leaves of each `use` tree and
/// each inline path of two or more segments, an inline path that starts
/// with a name a `use` bound being read through that `use`.
fn paths_in(tokens: &[Token]) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut bound: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut inline = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        match &tokens[index] {
            Token::Word(word) if word == "use" => {
                let (leaves, after) = use_tree(tokens, index + 1, &[]);
                for (path, name) in leaves {
                    bound.insert(name, path.clone());
                    paths.push(path);
                }
                index = after.max(index + 1);
            }
            Token::Word(word) if index == 0 || tokens[index - 1] != Token::PathSeparator => {
                let mut path = vec![word.clone()];
                let mut next = index + 1;
                while tokens.get(next) == Some(&Token::PathSeparator) {
                    match tokens.get(next + 1) {
                        Some(Token::Word(segment)) => {
                            path.push(segment.clone());
                            next += 2;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 {
                    inline.push(path);
                }
                index = next.max(index + 1);
            }
            _ => index += 1,
        }
    }
    for path in inline {
        match bound.get(&path[0]) {
            Some(full) => {
                let mut resolved = full.clone();
                resolved.extend(path[1..].iter().cloned());
                paths.push(resolved);
            }
            None => paths.push(path),
        }
    }
    paths
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

/// The source of every module under `src/`, test files left out.
fn sources() -> BTreeMap<String, String> {
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
        texts.insert(module_of(relative), text);
    }
    texts
}

/// The absolute path (from the crate root) a path in `module` names, if it
/// starts at `crate`, `self`, `super` or a child module of ours.
fn absolute(module: &str, path: &[String], modules: &BTreeSet<String>) -> Option<Vec<String>> {
    let root = module == "lib" || module == "main";
    let own: Vec<String> = if root {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    };
    let (mut base, rest) = match path.first().map(String::as_str)? {
        "crate" => (Vec::new(), &path[1..]),
        "self" | "super" => {
            // `super` any number of times, also after `self`.
            let mut base = own;
            let mut rest = if path[0] == "self" { &path[1..] } else { path };
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        first => {
            // A bare path starts at a child module, or names nothing of ours.
            let mut child = own.clone();
            child.push(first.to_string());
            if !modules.contains(&child.join("::")) {
                return None;
            }
            (own, path)
        }
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The longest module prefix of an absolute path.
fn module_prefix(path: &[String], modules: &BTreeSet<String>) -> Option<(String, usize)> {
    (1..=path.len())
        .rev()
        .map(|length| (path[..length].join("::"), length))
        .find(|(candidate, _)| modules.contains(candidate))
}

/// What each module re-exports: the name a `pub use` binds, and the
/// absolute path it binds it to.
type Reexports = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn reexport_maps(texts: &BTreeMap<String, String>, modules: &BTreeSet<String>) -> Reexports {
    let mut maps = Reexports::new();
    for (module, text) in texts {
        for (path, name) in reexports(text) {
            if name == "*" {
                continue;
            }
            if let Some(full) = absolute(module, &path, modules) {
                maps.entry(module.clone()).or_default().insert(name, full);
            }
        }
    }
    maps
}

/// The module that defines what an absolute path names: its longest module
/// prefix, followed through that module's re-exports to where the item
/// lives (so `use super::X`, with the parent re-exporting a sibling's `X`,
/// is an edge to that sibling).
fn defining_module(
    mut full: Vec<String>,
    modules: &BTreeSet<String>,
    reexports: &Reexports,
) -> Option<String> {
    for _ in 0..16 {
        let (prefix, length) = module_prefix(&full, modules)?;
        let through = full
            .get(length)
            .and_then(|item| reexports.get(&prefix)?.get(item));
        match through {
            Some(target) if *target != full[..=length] => {
                let mut next = target.clone();
                next.extend(full[length + 1..].iter().cloned());
                full = next;
            }
            _ => return Some(prefix),
        }
    }
    module_prefix(&full, modules).map(|(prefix, _)| prefix)
}

/// The file-level import graph of the given module sources.
fn graph_of(texts: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let reexports = reexport_maps(texts, &modules);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in texts {
        let code = without_test_items(&tokens(text));
        let targets = graph.entry(module.clone()).or_default();
        for path in paths_in(&code) {
            let Some(full) = absolute(module, &path, &modules) else {
                continue;
            };
            if let Some(target) = defining_module(full, &modules, &reexports)
                && &target != module
            {
                targets.insert(target);
            }
        }
    }
    graph
}

/// Whether one module contains the other (`a` and `a::b::c`).
fn nested(one: &str, other: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with("::"))
    };
    within(one, other) || within(other, one)
}

fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(&sources())
}

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

/// One cycle per back edge of a depth-first search.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
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
            if nested(module, target) {
                continue;
            }
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

#[test]
fn no_import_runs_from_a_lower_layer_to_a_higher_one() {
    let graph = import_graph();
    assert!(graph.len() > 50, "found only {} modules", graph.len());
    let violations = upward_imports(&graph);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn no_import_cycle_between_files() {
    let found = cycles(&import_graph());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Modules that reach the compiler only through the session facade.
const FACADE_USERS: &[&str] = &["cli", "watch", "snapshot", "report"];

/// What the user layer may name in `session` (an item of `session/mod.rs`,
/// or one of its submodules with everything in it). Adding a name here is
/// a decision about the facade.
const SESSION_API: &[&str] = &[
    "AuditSummary",
    "BackOutcome",
    "BackendError",
    "Blocked",
    "BoundaryAudit",
    "BuildOutcome",
    "CopyAudit",
    "Execution",
    "GroupAudit",
    "Other",
    "Phase",
    "PhaseError",
    "PhaseFigures",
    "PolicySource",
    "ProgramProfile",
    "SUGGESTIONS",
    "Session",
    "StageError",
    "StageTime",
    "StepKind",
    "Suggestion",
    "WeightsError",
    "layout_search",
    "memory",
    "packing",
    "progress",
    "replay",
    "suggest",
    "sweep",
    "unknown_override_phases",
];

/// What the session re-exports from the query layer: plain data the
/// queries return (errors, figures, the execution record), never the
/// database, an input or a tracked function.
const REEXPORTED_DATA: &[&str] = &[
    "BackendError",
    "EffectivePolicy",
    "Execution",
    "PhaseError",
    "PhaseFigures",
    "PointFigures",
    "PolicySource",
    "StageError",
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

/// The leaves of the `pub use` trees of one module's source, each with
/// the name it binds.
fn reexports(text: &str) -> Vec<(Vec<String>, String)> {
    let code = without_test_items(&tokens(text));
    let mut found = Vec::new();
    for (index, token) in code.iter().enumerate() {
        if *token != Token::Word("pub".into()) {
            continue;
        }
        let mut at = index + 1;
        if code.get(at) == Some(&Token::Open('(')) {
            at = skip_group(&code, at);
        }
        if code.get(at) == Some(&Token::Word("use".into())) {
            found.extend(use_tree(&code, at + 1, &[]).0);
        }
    }
    found
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
    assert!(cycles(&graph_of(&texts)).is_empty());
    // `schedule::scheduler` imports `schedule::problem`; plant the way back,
    // inside a group, as a re-export.
    texts
        .get_mut("schedule::problem")
        .expect("schedule::problem")
        .push_str("\npub use super::{scheduler::{self}};\n");
    let found = cycles(&graph_of(&texts));
    assert!(
        found
            .iter()
            .any(|cycle| cycle.contains("schedule::problem")
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
        vec!["layout::planner::operator_plans (rank 3) imports session (rank 16)".to_string()]
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
