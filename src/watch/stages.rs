//! The queries of one (re)build grouped by pipeline stage, stages in
//! pipeline order, so users see "layouts 3, expansion 12" rather than a flat
//! list of query names. Which stage a query belongs to is the query list's
//! (`TrackedQuery::stage`), stated once beside the list itself.

use std::collections::BTreeMap;

use crate::session::{Execution, Stage, TrackedQuery};

/// The queries of one stage that ran, with how often each ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageRuns {
    pub stage: Stage,
    pub total: usize,
    /// Each query that ran, in the list's (pipeline) order.
    pub queries: BTreeMap<TrackedQuery, usize>,
}

/// Groups executions by stage, stages in pipeline order, empty stages omitted.
pub fn group_by_stage(executions: &[Execution]) -> Vec<StageRuns> {
    let mut stages: BTreeMap<Stage, StageRuns> = BTreeMap::new();
    for execution in executions {
        let stage = execution.query.stage();
        let runs = stages.entry(stage).or_insert_with(|| StageRuns {
            stage,
            total: 0,
            queries: BTreeMap::new(),
        });
        runs.total += 1;
        *runs.queries.entry(execution.query).or_insert(0) += 1;
    }
    stages.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execution(query: TrackedQuery) -> Execution {
        Execution {
            query,
            key: salsa::Id::from_bits(1),
        }
    }

    #[test]
    fn groups_in_pipeline_order() {
        let runs = group_by_stage(&[
            execution(TrackedQuery::LowProgram),
            execution(TrackedQuery::SweepPoint),
            execution(TrackedQuery::OpExpansion),
            execution(TrackedQuery::OpExpansion),
            execution(TrackedQuery::PlannedOp),
            execution(TrackedQuery::Graph),
        ]);
        let stages: Vec<_> = runs.iter().map(|run| (run.stage, run.total)).collect();
        assert_eq!(
            stages,
            vec![
                (Stage::Graph, 1),
                (Stage::Expansion, 3),
                (Stage::Program, 1),
                (Stage::Studies, 1)
            ]
        );
        assert_eq!(runs[1].queries[&TrackedQuery::OpExpansion], 2);
        let order: Vec<_> = runs[1].queries.keys().copied().collect();
        assert_eq!(
            order,
            vec![TrackedQuery::PlannedOp, TrackedQuery::OpExpansion]
        );
    }
}
