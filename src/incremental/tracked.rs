//! Every tracked function of the query layer, listed once: the execution
//! log names what re-ran by this list, `watch` and `--why` group it into
//! pipeline stages by it, and tests refer to a query by its item
//! (`TrackedQuery::Scheduled`), never by a string that would pass silently
//! after a rename. `tests/architecture.rs` checks the list against the
//! `#[salsa::tracked]` functions in `src/incremental/`.

use serde::Serialize;

/// A pipeline stage, in pipeline order (what `watch` shows re-ran).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Stage {
    Graph,
    Layouts,
    Expansion,
    Program,
    PhaseGroups,
    Schedules,
    RowTables,
    PatchLists,
    Placement,
    Estimate,
    /// The parameter values the simulators read.
    Weights,
    /// Studies beside the build: suggestions, sweeps, packing.
    Studies,
}

impl Stage {
    /// How the stage is shown.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Graph => "graph",
            Stage::Layouts => "layouts",
            Stage::Expansion => "expansion",
            Stage::Program => "program",
            Stage::PhaseGroups => "phase groups",
            Stage::Schedules => "schedules",
            Stage::RowTables => "row tables",
            Stage::PatchLists => "patch lists",
            Stage::Placement => "placement",
            Stage::Estimate => "estimate",
            Stage::Weights => "weights",
            Stage::Studies => "studies",
        }
    }
}

macro_rules! tracked_queries {
    ($($item:ident = $name:literal in $stage:ident,)*) => {
        /// A tracked function of the query layer.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub enum TrackedQuery {
            $($item,)*
        }

        impl TrackedQuery {
            /// Every tracked function, in pipeline order.
            pub const ALL: &[TrackedQuery] = &[$(TrackedQuery::$item,)*];

            /// The function's name (salsa's debug name for it).
            pub fn name(self) -> &'static str {
                match self {
                    $(TrackedQuery::$item => $name,)*
                }
            }

            /// The stage it belongs to.
            pub fn stage(self) -> Stage {
                match self {
                    $(TrackedQuery::$item => Stage::$stage,)*
                }
            }

            /// The query salsa names `name`, if it is one of the list.
            pub fn from_name(name: &str) -> Option<TrackedQuery> {
                match name {
                    $($name => Some(TrackedQuery::$item),)*
                    _ => None,
                }
            }
        }
    };
}

tracked_queries! {
    Graph = "graph" in Graph,
    CalibrationInput = "calibration_input" in Layouts,
    ActivationCalibration = "activation_calibration" in Layouts,
    ProductRecipe = "product_recipe" in Layouts,
    PlanningSettings = "planning_settings" in Layouts,
    MatmulCosting = "matmul_costing" in Layouts,
    AttentionCosting = "attention_costing" in Layouts,
    SearchConfiguration = "search_configuration" in Layouts,
    SearchedPlan = "searched_plan" in Layouts,
    LayoutOverrides = "layout_overrides" in Layouts,
    Layouts = "layouts" in Layouts,
    OpKeys = "op_keys" in Expansion,
    OpPositions = "op_positions" in Expansion,
    PlannedOp = "planned_op" in Expansion,
    OpExpansion = "op_expansion" in Expansion,
    LowProgram = "low_program" in Program,
    ProgramSummary = "program_summary" in Program,
    ProgramDigest = "program_digest" in PhaseGroups,
    KeptGroupingRecord = "kept_grouping_record" in PhaseGroups,
    PhaseGroups = "phase_groups" in PhaseGroups,
    ProblemBound = "problem_bound" in PhaseGroups,
    PhaseKeys = "phase_keys" in PhaseGroups,
    PhasePositions = "phase_positions" in PhaseGroups,
    PhaseSteps = "phase_steps" in PhaseGroups,
    PhaseProblem = "phase_problem" in PhaseGroups,
    PhasePolicy = "phase_policy" in Schedules,
    Scheduled = "scheduled" in Schedules,
    ValidatedSchedule = "validated_schedule" in Schedules,
    ProblemDigest = "problem_digest" in Schedules,
    ScheduleFigures = "schedule_figures" in Schedules,
    PhaseFigures = "phase_figures" in Schedules,
    EncodedRows = "encoded_rows" in RowTables,
    RowSummary = "row_summary" in RowTables,
    RowTable = "row_table" in RowTables,
    RepeatBase = "repeat_base" in PatchLists,
    PhasePatches = "phase_patches" in PatchLists,
    TileReservations = "tile_reservations" in Placement,
    PlacementKey = "placement_key" in Placement,
    Placement = "placement" in Placement,
    PhaseCosts = "phase_costs" in Estimate,
    ComputeLoads = "compute_loads" in Estimate,
    ComputeCosts = "compute_costs" in Estimate,
    BuildEstimate = "build_estimate" in Estimate,
    ProgramProfile = "program_profile" in Estimate,
    ComputeBreakdown = "compute_breakdown" in Estimate,
    Weights = "weights" in Weights,
    PhaseAlternatives = "phase_alternatives" in Studies,
    AlternativeOutcome = "alternative_outcome" in Studies,
    SweepPoint = "sweep_point" in Studies,
    PairingEligible = "pairing_eligible" in Studies,
    PackingStudy = "packing_study" in Studies,
}

impl std::fmt::Display for TrackedQuery {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = TrackedQuery::ALL.iter().map(|query| query.name()).collect();
        for query in TrackedQuery::ALL {
            assert_eq!(TrackedQuery::from_name(query.name()), Some(*query));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TrackedQuery::ALL.len());
        assert_eq!(TrackedQuery::from_name("tile_schedule"), None);
    }

    #[test]
    fn stages_run_in_pipeline_order_along_the_list() {
        let stages: Vec<Stage> = TrackedQuery::ALL
            .iter()
            .map(|query| query.stage())
            .collect();
        assert!(
            stages.windows(2).all(|pair| pair[0] <= pair[1]),
            "{stages:?}"
        );
    }
}
