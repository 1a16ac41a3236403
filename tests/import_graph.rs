//! Reads the module import graph of `src/` for `architecture.rs`: a small
//! Rust lexer (comments, string and character literals dropped), the
//! `#[cfg(test)]` items left out, a `use`-tree parser (groups, `self`,
//! `super` any number of times, aliases, globs) and the resolution of each
//! path to the file of the module it names as written: `use a::b::Item` is
//! an edge to the file of `a::b`, whether `Item` is defined there or
//! re-exported by it, and a `pub use crate::x::y::Z` is an edge of the file
//! that re-exports to the file of `x::y`. Re-exports are never followed to
//! the defining file, so a ring closed through a re-export stays visible.
//! Pure functions over source text, so that tests can plant violations in
//! memory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One lexical token of Rust source, as far as paths need.
#[derive(Clone, Debug, PartialEq)]
pub enum Token {
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
pub fn tokens(text: &str) -> Vec<Token> {
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
pub fn raw_string_end(characters: &[char], mut at: usize) -> Option<usize> {
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
pub fn skip_group(tokens: &[Token], at: usize) -> usize {
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
pub fn without_test_items(tokens: &[Token]) -> Vec<Token> {
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
pub fn use_tree(
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
pub fn paths_in(tokens: &[Token]) -> Vec<Vec<String>> {
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
pub fn module_of(relative: &Path) -> String {
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

pub fn source_files(directory: &Path, files: &mut Vec<std::path::PathBuf>) {
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
pub fn sources() -> BTreeMap<String, String> {
    sources_under(Path::new("src"))
}

/// The source of every module under `source` (a crate's `src/`), test
/// files left out.
pub fn sources_under(source: &Path) -> BTreeMap<String, String> {
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
pub fn absolute(module: &str, path: &[String], modules: &BTreeSet<String>) -> Option<Vec<String>> {
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
pub fn module_prefix(path: &[String], modules: &BTreeSet<String>) -> Option<(String, usize)> {
    (1..=path.len())
        .rev()
        .map(|length| (path[..length].join("::"), length))
        .find(|(candidate, _)| modules.contains(candidate))
}

/// The file-level import graph of the given module sources: an edge from
/// each module to the longest module prefix of every path it writes.
pub fn graph_of(texts: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in texts {
        let code = without_test_items(&tokens(text));
        let targets = graph.entry(module.clone()).or_default();
        for path in paths_in(&code) {
            let Some(full) = absolute(module, &path, &modules) else {
                continue;
            };
            if let Some((target, _)) = module_prefix(&full, &modules)
                && &target != module
            {
                targets.insert(target);
            }
        }
    }
    graph
}

/// Whether one module contains the other (`a` and `a::b::c`).
pub fn nested(one: &str, other: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with("::"))
    };
    within(one, other) || within(other, one)
}

pub fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(&sources())
}
/// The leaves of the `pub use` trees of one module's source, each with
/// the name it binds.
pub fn reexports(text: &str) -> Vec<(Vec<String>, String)> {
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
