//! Shared helpers for integration tests: loading shipped queries with
//! overrides, and reading salsa's execution log by query and op name.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use salsa::plumbing::AsId;
use superstep::driver::Session;
use superstep::queries::Execution;
use superstep::queries::stages::OpKey;
use superstep::query::{BuildQuery, load_query};

pub fn query(file: &str, sets: &[&str]) -> BuildQuery {
    let sets: Vec<String> = sets.iter().map(|set| set.to_string()).collect();
    load_query(Path::new(file), &sets).expect("shipped query loads")
}

/// How many times each query ran.
pub fn counts(executions: &[Execution]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for execution in executions {
        *counts.entry(execution.query.clone()).or_insert(0) += 1;
    }
    counts
}

/// The op names whose `op_expansion` ran.
pub fn expanded_ops(session: &Session, executions: &[Execution]) -> BTreeSet<String> {
    let layouts = session.layouts().expect("layouts");
    let by_id: BTreeMap<salsa::Id, String> = layouts
        .ops
        .iter()
        .map(|op| {
            (
                OpKey::new(&session.db, session.inputs, op.name.clone()).as_id(),
                op.name.clone(),
            )
        })
        .collect();
    executions
        .iter()
        .filter(|execution| execution.query == "op_expansion")
        .map(|execution| {
            by_id
                .get(&execution.key)
                .cloned()
                .unwrap_or_else(|| format!("unknown {:?}", execution.key))
        })
        .collect()
}
