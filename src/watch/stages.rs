//! Which stage a salsa query belongs to, and the queries of one (re)build
//! grouped by stage in pipeline order, so users see "layouts 3, expansion 12"
//! rather than a flat list of query names.
//!
//! The map is by name, not by type: a query added by a later stage that is
//! not listed here lands in "other" until it is named, and nothing breaks.

use std::collections::BTreeMap;

use crate::session::Execution;

/// The stages in pipeline order; "other" collects unknown query names.
pub const STAGE_ORDER: &[&str] = &[
    "graph",
    "layouts",
    "expansion",
    "program",
    "phase groups",
    "schedules",
    "row tables",
    "patch lists",
    "placement",
    "package",
    "estimate",
    "other",
];

/// The stage a query (by its salsa debug name) belongs to.
pub fn stage_of(query: &str) -> &'static str {
    match query {
        "graph" => "graph",
        "planning_settings" | "matmul_costing" | "attention_costing" | "layouts" => "layouts",
        "op_keys" | "planned_op" | "op_expansion" => "expansion",
        "low_program" | "program_summary" => "program",
        "phase_groups" | "phase_keys" | "phase_problem" => "phase groups",
        "phase_policy" | "scheduled" | "schedule_figures" | "problem_digest" | "phase_figures" => {
            "schedules"
        }
        "encoded_rows" | "row_table" => "row tables",
        "phase_patches" => "patch lists",
        "tile_reservations" | "placement" => "placement",
        "build_estimate" | "compute_costs" => "estimate",
        _ => "other",
    }
}

fn stage_rank(stage: &str) -> usize {
    STAGE_ORDER
        .iter()
        .position(|known| *known == stage)
        .unwrap_or(STAGE_ORDER.len())
}

/// The queries of one stage that ran, with how often each ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageRuns {
    pub stage: &'static str,
    pub total: usize,
    pub queries: BTreeMap<String, usize>,
}

/// Groups executions by stage, stages in pipeline order, empty stages omitted.
pub fn group_by_stage(executions: &[Execution]) -> Vec<StageRuns> {
    let mut stages: BTreeMap<(usize, &'static str), StageRuns> = BTreeMap::new();
    for execution in executions {
        let stage = stage_of(&execution.query);
        let runs = stages
            .entry((stage_rank(stage), stage))
            .or_insert_with(|| StageRuns {
                stage,
                ..StageRuns::default()
            });
        runs.total += 1;
        *runs.queries.entry(execution.query.clone()).or_insert(0) += 1;
    }
    stages.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execution(query: &str) -> Execution {
        Execution {
            query: query.to_string(),
            key: salsa::Id::from_bits(1),
        }
    }

    #[test]
    fn groups_in_pipeline_order_with_unknown_names_last() {
        let runs = group_by_stage(&[
            execution("low_program"),
            execution("tile_schedule"),
            execution("op_expansion"),
            execution("op_expansion"),
            execution("planned_op"),
            execution("graph"),
        ]);
        let stages: Vec<_> = runs.iter().map(|run| (run.stage, run.total)).collect();
        assert_eq!(
            stages,
            vec![("graph", 1), ("expansion", 3), ("program", 1), ("other", 1)]
        );
        assert_eq!(runs[1].queries["op_expansion"], 2);
    }
}
