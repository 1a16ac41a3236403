//! The driver: owns a database and the build input, applies a (re)loaded
//! build query, and computes the first half stage by stage, timing each
//! stage and recording which queries re-ran. Independent per-op queries are
//! warmed in parallel from here (the top), over cloned database handles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::expand::program::LowProgram;
use crate::expand::summary::ProgramSummary;
use crate::layout::plan::Layouts;
use crate::model::graph::Graph;
use crate::queries::stages::{
    StageError, graph, layouts, low_program, op_expansion, op_keys, program_summary,
};
use crate::queries::{BuildInputs, CompilerDatabase, Execution, apply_query, create_inputs};
use crate::query::BuildQuery;

/// Time spent in one stage of a build.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTime {
    pub stage: &'static str,
    pub elapsed: Duration,
}

/// What one build computed.
#[derive(Clone, Debug)]
pub struct BuildOutcome {
    pub times: Vec<StageTime>,
    pub executions: Vec<Execution>,
    pub summary: ProgramSummary,
}

impl BuildOutcome {
    /// How many times each query ran in this build.
    pub fn executions_by_query(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for execution in &self.executions {
            *counts.entry(execution.query.clone()).or_insert(0) += 1;
        }
        counts
    }

    pub fn total_time(&self) -> Duration {
        self.times.iter().map(|time| time.elapsed).sum()
    }
}

pub struct Session {
    pub db: CompilerDatabase,
    pub inputs: BuildInputs,
}

impl Session {
    pub fn new(query: &BuildQuery) -> Session {
        let db = CompilerDatabase::default();
        let inputs = create_inputs(&db, query);
        Session { db, inputs }
    }

    /// Applies an edited query; returns the input fields that changed.
    pub fn update(&mut self, query: &BuildQuery) -> Vec<&'static str> {
        apply_query(&mut self.db, self.inputs, query)
    }

    pub fn graph(&self) -> &Graph {
        graph(&self.db, self.inputs)
    }

    pub fn layouts(&self) -> Result<Arc<Layouts>, StageError> {
        layouts(&self.db, self.inputs)
            .clone()
            .map_err(StageError::from)
    }

    pub fn low_program(&self) -> Result<Arc<LowProgram>, StageError> {
        low_program(&self.db, self.inputs).clone()
    }

    /// Computes graph, layouts, expansions and the low program.
    pub fn build(&mut self) -> Result<BuildOutcome, StageError> {
        self.db.take_executions();
        let mut times = Vec::new();
        let mut timed = |stage: &'static str, start: Instant| {
            times.push(StageTime {
                stage,
                elapsed: start.elapsed(),
            })
        };
        let start = Instant::now();
        {
            let _span = tracing::info_span!("graph").entered();
            graph(&self.db, self.inputs);
        }
        timed("graph", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("layouts").entered();
            self.layouts()?;
        }
        timed("layouts", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("expansion").entered();
            let keys = op_keys(&self.db, self.inputs).clone();
            keys.par_iter().for_each_with(self.db.clone(), |db, key| {
                let _span = tracing::debug_span!("op_expansion").entered();
                let _ = op_expansion(db, *key);
            });
        }
        timed("expansion", start);
        let start = Instant::now();
        {
            let _span = tracing::info_span!("low_program").entered();
            self.low_program()?;
        }
        timed("low program", start);
        let start = Instant::now();
        let summary = program_summary(&self.db, self.inputs).clone()?;
        timed("summary", start);
        Ok(BuildOutcome {
            times,
            executions: self.db.take_executions(),
            summary,
        })
    }
}
