//! Incrementality, asserted from salsa's execution log: which queries re-ran
//! after each kind of edit to the build query. Every build and edit pins the
//! complete list of the queries it executed (`common::executed_queries`:
//! sorted in pipeline order with run counts, since the log's own order
//! depends on the parallel workers), so a query that starts re-running
//! fails the test; the targeted assertions beside it say which keys and ops
//! re-ran and why.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use common::{
    assert_query_was_not_run, assert_query_was_run, counts, executed_queries, expanded_ops, query,
};
use superstep::expand::summary::StepCounts;
use superstep::layout::plan::{Layouts, OpPlan};
use superstep::numerics::dot::Accumulation;
use superstep::place::TileReservations;
use superstep::rows::RowTable;
use superstep::schedule::{ExchangeProblem, SchedulePolicy};
use superstep::session::Session;
use superstep::session::TrackedQuery;

#[test]
fn cold_build_runs_every_stage_once_per_key() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    let outcome = session.build().expect("build");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        graph
        calibration_input
        activation_calibration
        product_recipe
        planning_settings
        matmul_costing x9
        attention_costing
        searched_plan
        layout_overrides
        layouts
        op_keys
        op_positions
        planned_op x35
        op_expansion x35
        low_program
        program_summary
        program_digest
        kept_grouping_record
        phase_groups
        problem_bound x15
        phase_keys
        phase_positions
        phase_problem x13
        phase_policy x13
        scheduled x14
        validated_schedule x12
        schedule_figures x14
        phase_figures x13
        encoded_rows x12
        row_summary x12
        row_table
        repeat_base
        phase_patches x13
        tile_reservations
        placement
        phase_costs
        compute_loads
        compute_costs
        build_estimate
        compute_breakdown
        ");
    let counts = counts(&outcome.executions);
    let ops = session.layouts().expect("layouts").ops.len();
    assert_eq!(counts[&TrackedQuery::Graph], 1);
    assert_eq!(counts[&TrackedQuery::Layouts], 1);
    assert_eq!(counts[&TrackedQuery::LowProgram], 1);
    assert_eq!(counts[&TrackedQuery::OpExpansion], ops);
    assert_eq!(counts[&TrackedQuery::PlannedOp], ops);
}

#[test]
fn no_op_rebuild_runs_nothing() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("build");
    let changed = session.update(&query("queries/vit-tiny.toml", &[]));
    assert!(changed.is_empty());
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @"");
    assert!(outcome.executions.is_empty(), "{:?}", outcome.executions);
}

#[test]
fn fp8_scale_reruns_no_layout_query() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("build");
    let changed = session.update(&query("queries/vit-tiny.toml", &["workload.fp8_scale=-3"]));
    assert_eq!(changed, vec!["fp8_scale"]);
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        activation_calibration
        product_recipe
        ");
    let counts = counts(&outcome.executions);
    for stage in [
        TrackedQuery::Graph,
        TrackedQuery::PlanningSettings,
        TrackedQuery::Layouts,
        TrackedQuery::MatmulCosting,
        TrackedQuery::AttentionCosting,
        TrackedQuery::PlannedOp,
        TrackedQuery::OpExpansion,
        TrackedQuery::OpKeys,
    ] {
        assert!(!counts.contains_key(&stage), "{stage} re-ran: {counts:?}");
    }
    // The scale only changes the stored weight codes: no compiler query
    // reads it but the activation calibration (the FP32 reference runs on
    // the FP8 weights), whose scales are then the same, so the product
    // recipe re-runs and stops there (backdated).
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        [
            TrackedQuery::ActivationCalibration,
            TrackedQuery::ProductRecipe
        ],
        "{counts:?}"
    );
    let mut fp16 = Session::new(&query(
        "queries/vit-tiny.toml",
        &["planning.matrix_inputs=fp16"],
    ));
    fp16.build().expect("build");
    fp16.update(&query(
        "queries/vit-tiny.toml",
        &["planning.matrix_inputs=fp16", "workload.fp8_scale=-3"],
    ));
    // Without FP8 inputs nothing calibrates: nothing re-runs at all.
    let outcome = fp16.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @"");
    assert!(outcome.executions.is_empty(), "{:?}", outcome.executions);
}

#[test]
fn weights_are_a_query_behind_the_scale_firewall() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("build");
    session.take_executions();
    let first = session.weights().expect("weights");
    let executions = session.take_executions();
    insta::assert_snapshot!(executed_queries(&executions), @"weights");
    let ran = counts(&executions);
    assert_eq!(ran.get(&TrackedQuery::Weights), Some(&1), "{ran:?}");
    // Asked again: the memo, nothing re-runs.
    let again = session.weights().expect("weights");
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    assert!(session.take_executions().is_empty());

    session.update(&query("queries/vit-tiny.toml", &["workload.fp8_scale=-3"]));
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        activation_calibration
        product_recipe
        ");
    // The calibration reads the weights' scale (and its scales come out
    // the same, so the recipe stops the change).
    assert_eq!(
        counts(&outcome.executions).into_keys().collect::<Vec<_>>(),
        [
            TrackedQuery::ActivationCalibration,
            TrackedQuery::ProductRecipe
        ],
        "{:?}",
        outcome.executions
    );
    let rescaled = session.weights().expect("weights");
    let executions = session.take_executions();
    insta::assert_snapshot!(executed_queries(&executions), @"weights");
    let ran = counts(&executions);
    // Only the weights re-run (they read the scale and the graph, which is
    // verified unchanged); the compiler is untouched.
    assert_eq!(
        ran.keys().collect::<Vec<_>>(),
        vec![&TrackedQuery::Weights],
        "{ran:?}"
    );
    assert_eq!(
        rescaled.fp8_scale,
        superstep::model::quantisation::Fp8Scale::Fixed(-3)
    );
    assert_ne!(
        first.fp8_scale,
        superstep::model::quantisation::Fp8Scale::Fixed(-3)
    );
    assert_eq!(first.input, rescaled.input);
    assert_ne!(
        first.tensors, rescaled.tensors,
        "FP8 codes move with the scale"
    );
}

/// Queries of the first half (graph to low program).
const FIRST_HALF: [TrackedQuery; 11] = [
    TrackedQuery::Graph,
    TrackedQuery::PlanningSettings,
    TrackedQuery::MatmulCosting,
    TrackedQuery::AttentionCosting,
    TrackedQuery::Layouts,
    TrackedQuery::OpKeys,
    TrackedQuery::PlannedOp,
    TrackedQuery::OpExpansion,
    TrackedQuery::LowProgram,
    TrackedQuery::ProgramSummary,
    TrackedQuery::PhaseGroups,
];

/// (Under the default `planning.fusion = "auto"` phase grouping prices
/// merges with the global policy, so this pins `same-operator`; see
/// `global_policy_regroups_phases_only_under_auto_fusion`.)
#[test]
fn scheduling_fields_rerun_nothing_in_the_first_half() {
    let same = "planning.fusion=same-operator";
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[same]));
    session.build().expect("build");
    let changed = session.update(&query(
        "queries/vit-tiny.toml",
        &[
            same,
            "schedule.policy=B256",
            "schedule.width=paired64",
            "schedule.override.layer.attn.qkv.a.rearrange#0=S64",
        ],
    ));
    assert_eq!(changed, vec!["schedule", "overrides"]);
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        phase_policy x19
        scheduled x17
        validated_schedule x17
        schedule_figures x17
        phase_figures x19
        encoded_rows x17
        row_summary x17
        row_table
        phase_patches x19
        tile_reservations
        phase_costs
        build_estimate
        ");
    let counts = counts(&outcome.executions);
    for stage in FIRST_HALF {
        assert!(!counts.contains_key(&stage), "{stage} re-ran: {counts:?}");
    }
    assert!(
        counts
            .get(&TrackedQuery::Scheduled)
            .is_some_and(|&runs| runs > 1),
        "{counts:?}"
    );
}

/// Overriding one phase's policy re-runs that phase's schedule and rows and
/// the aggregates above them; no layout, expansion or other phase's
/// schedule re-runs.
#[test]
fn one_phase_override_reschedules_only_that_phase() {
    let file = "queries/vit-tiny.toml";
    let mut session = Session::new(&query(file, &[]));
    session.build().expect("build");
    session.update(&query(
        file,
        &["schedule.override.layer.mlp.down.a.rearrange#0=B64"],
    ));
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        phase_policy x13
        scheduled
        validated_schedule
        schedule_figures
        phase_figures
        encoded_rows
        row_summary
        row_table
        phase_patches
        tile_reservations
        phase_costs
        build_estimate
        ");
    let counts = counts(&outcome.executions);
    for stage in FIRST_HALF.iter().chain(&[TrackedQuery::PhaseProblem]) {
        assert!(!counts.contains_key(stage), "{stage} re-ran: {counts:?}");
    }
    assert_eq!(counts.get(&TrackedQuery::Scheduled), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get(&TrackedQuery::EncodedRows),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(
        counts.get(&TrackedQuery::PhaseFigures),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(
        counts.get(&TrackedQuery::PhasePatches),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(counts.get(&TrackedQuery::RowTable), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get(&TrackedQuery::BuildEstimate),
        Some(&1),
        "{counts:?}"
    );
    // The firewall: every phase's policy is re-read, cheaply.
    let phases = outcome.back.as_ref().expect("back half").phases.len();
    assert_eq!(
        counts.get(&TrackedQuery::PhasePolicy),
        Some(&phases),
        "{counts:?}"
    );
    let overridden = outcome
        .back
        .as_ref()
        .and_then(|back| {
            back.phases
                .iter()
                .find(|phase| phase.key == "layer.mlp.down.a.rearrange#0")
        })
        .expect("phase");
    assert_eq!(overridden.policy, SchedulePolicy::Balanced { words: 64 });
}

#[test]
fn attention_method_reexpands_only_attention() {
    let base = ["workload.attention=materialized"];
    let mut session = Session::new(&query("queries/vit-tiny.toml", &base));
    session.build().expect("build");
    session.update(&query(
        "queries/vit-tiny.toml",
        &["workload.attention=flash"],
    ));
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        planning_settings
        attention_costing
        layouts
        op_keys
        op_positions
        planned_op x35
        op_expansion
        low_program
        program_summary
        program_digest
        phase_groups
        phase_keys
        phase_positions
        phase_problem x13
        row_table
        placement
        compute_loads
        build_estimate
        compute_breakdown
        ");
    let expanded = expanded_ops(&session, &outcome.executions);
    assert_eq!(expanded, BTreeSet::from(["layer.attn.core".to_string()]));
    let counts = counts(&outcome.executions);
    assert_eq!(counts.get(&TrackedQuery::MatmulCosting), None, "{counts:?}");
    assert_eq!(
        counts.get(&TrackedQuery::AttentionCosting),
        Some(&1),
        "{counts:?}"
    );
}

/// The accumulation precision is an input of the matrix products' costing
/// only: attention is not re-costed, and exactly the ops whose plan or
/// operand formats changed (the matrix products and the rearranges of
/// their partial sums) are re-expanded.
#[test]
fn accumulation_replans_only_the_matrix_products() {
    let mut session = Session::new(&query(
        "queries/vit-tiny.toml",
        &["planning.accumulation=f32"],
    ));
    session.build().expect("build");
    let before = session.layouts().expect("layouts");
    let changed = session.update(&query(
        "queries/vit-tiny.toml",
        &["planning.accumulation=f16"],
    ));
    assert!(!changed.is_empty());
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        calibration_input
        product_recipe
        planning_settings
        matmul_costing x5
        layout_overrides
        layouts
        op_keys
        op_positions
        planned_op x35
        op_expansion x5
        low_program
        program_summary
        program_digest
        phase_groups
        phase_keys
        phase_positions
        phase_problem x13
        scheduled
        validated_schedule
        schedule_figures
        phase_figures
        encoded_rows
        row_summary
        row_table
        repeat_base
        phase_patches
        tile_reservations
        placement
        phase_costs
        compute_loads
        build_estimate
        compute_breakdown
        ");
    let after = session.layouts().expect("layouts");
    let counts = counts(&outcome.executions);
    assert_eq!(
        counts.get(&TrackedQuery::AttentionCosting),
        None,
        "{counts:?}"
    );
    assert!(
        counts
            .get(&TrackedQuery::MatmulCosting)
            .is_some_and(|&runs| runs > 0),
        "{counts:?}"
    );
    let expanded = expanded_ops(&session, &outcome.executions);
    assert_eq!(expanded, changed_ops(&before, &after));
    assert!(expanded.contains("layer.mlp.up"), "{expanded:?}");
    for untouched in [
        "layer.attn.core",
        "layer.ln1",
        "layer.ln2",
        "layer.mlp.gelu",
    ] {
        assert!(
            !expanded.contains(untouched),
            "{untouched} re-expanded: {expanded:?}"
        );
    }
}

/// `auto` accumulation (with a bound above zero) costs both precisions of
/// every product, so changing its bound on FP16 partials re-costs nothing:
/// the layouts are re-planned from the memoized costings and exactly the
/// ops whose plan or formats changed are re-expanded.
#[test]
fn auto_accumulation_bound_recosts_nothing_and_reexpands_what_changed() {
    let file = "queries/vit-tiny.toml";
    let mut session = Session::new(&query(file, &["planning.auto_f16_max_parts=1"]));
    session.build().expect("build");
    let before = session.layouts().expect("layouts");
    assert!(
        before.ops.iter().all(
            |op| !matches!(&op.plan, OpPlan::MatMul(plan) if plan.accumulation == Accumulation::F16)
        ),
        "a bound of 1 admits no FP16 partials"
    );
    session.update(&query(file, &["planning.auto_f16_max_parts=16"]));
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        calibration_input
        product_recipe
        planning_settings
        layout_overrides
        layouts
        op_keys
        op_positions
        planned_op x35
        op_expansion
        low_program
        program_summary
        program_digest
        phase_groups
        phase_keys
        phase_positions
        phase_problem x13
        scheduled
        validated_schedule
        schedule_figures
        phase_figures
        encoded_rows
        row_summary
        row_table
        repeat_base
        phase_patches
        tile_reservations
        placement
        phase_costs
        compute_loads
        build_estimate
        compute_breakdown
        ");
    let after = session.layouts().expect("layouts");
    let counts = counts(&outcome.executions);
    assert_eq!(counts.get(&TrackedQuery::MatmulCosting), None, "{counts:?}");
    assert_eq!(
        counts.get(&TrackedQuery::AttentionCosting),
        None,
        "{counts:?}"
    );
    let f16_products: Vec<&str> = after
        .ops
        .iter()
        .filter(
            |op| matches!(&op.plan, OpPlan::MatMul(plan) if plan.accumulation == Accumulation::F16),
        )
        .map(|op| op.name.as_str())
        .collect();
    assert!(!f16_products.is_empty(), "auto chose no FP16 partials");
    let expanded = expanded_ops(&session, &outcome.executions);
    assert_eq!(expanded, changed_ops(&before, &after));
    for product in f16_products {
        assert!(expanded.contains(product), "{product}: {expanded:?}");
    }
    assert!(!expanded.contains("layer.attn.core"), "{expanded:?}");
}

/// Ops whose plan, output format or an input's format differ between two layouts.
fn changed_ops(before: &Layouts, after: &Layouts) -> BTreeSet<String> {
    after
        .ops
        .iter()
        .filter(|op| {
            let old = before.ops.iter().find(|old| old.name == op.name);
            old.is_none_or(|old| {
                old.plan != op.plan
                    || before.value(old.output).format != after.value(op.output).format
                    || old
                        .inputs
                        .iter()
                        .zip(&op.inputs)
                        .any(|(&was, &is)| before.value(was).format != after.value(is).format)
            })
        })
        .map(|op| op.name.clone())
        .collect()
}

/// Fewer partition candidates change the plans (and so the formats) of the
/// wide matrix products only; exactly the ops whose plan or operand formats
/// changed are re-expanded.
#[test]
fn format_change_reexpands_only_the_ops_it_touches() {
    let file = "queries/vit-b16.toml";
    // The cost model's own plans: the shipped layout overrides fix the
    // partitions the candidate count would change.
    let plans = "layout.override=auto";
    let base = ["workload.layers=1", plans];
    let mut session = Session::new(&query(file, &base));
    session.build().expect("build");
    let before = session.layouts().expect("layouts");
    session.update(&query(
        file,
        &[
            "workload.layers=1",
            plans,
            "planning.max_partition_candidates=2",
        ],
    ));
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        calibration_input
        product_recipe
        planning_settings
        matmul_costing x5
        layout_overrides
        layouts
        op_keys
        op_positions
        planned_op x46
        op_expansion x28
        low_program
        program_summary
        program_digest
        phase_groups
        problem_bound x32
        phase_keys
        phase_positions
        phase_problem x21
        phase_policy x2
        scheduled x32
        validated_schedule x16
        schedule_figures x32
        phase_figures x21
        encoded_rows x16
        row_summary x16
        row_table
        repeat_base
        phase_patches x21
        tile_reservations
        placement
        phase_costs
        compute_loads
        compute_costs
        build_estimate
        compute_breakdown
        ");
    let after = session.layouts().expect("layouts");
    let touched: BTreeSet<String> = after
        .ops
        .iter()
        .filter(|op| {
            let old = before.ops.iter().find(|old| old.name == op.name);
            let formats = |layouts: &superstep::layout::plan::Layouts,
                           op: &superstep::layout::plan::PlannedOp| {
                let mut formats: Vec<_> = op
                    .inputs
                    .iter()
                    .map(|&input| layouts.value(input).format.clone())
                    .collect();
                formats.push(layouts.value(op.output).format.clone());
                formats
            };
            match old {
                None => true,
                Some(old) => old.plan != op.plan || formats(&before, old) != formats(&after, op),
            }
        })
        .map(|op| op.name.clone())
        .collect();
    let expanded = expanded_ops(&session, &outcome.executions);
    assert_eq!(expanded, touched);
    // Two candidates fall short of the products' best partitions, so
    // their formats (and their neighbours') change; the norms, whose
    // formats stay, are not re-expanded.
    assert!(!expanded.is_empty(), "no plan changed");
    assert!(
        expanded.len() < after.ops.len(),
        "{} of {} ops re-expanded: {expanded:?}",
        expanded.len(),
        after.ops.len()
    );
    for untouched in ["layer.ln1", "layer.ln2"] {
        assert!(
            !expanded.contains(untouched),
            "{untouched} re-expanded: {expanded:?}"
        );
    }
}

/// The distinct exchange problems (by content, as they are interned) of
/// the session's phases.
fn problem_ids(session: &Session) -> HashSet<Arc<ExchangeProblem>> {
    session
        .phases()
        .iter()
        .map(|phase| phase.problem().expect("problem").clone())
        .collect()
}

fn row_table_of(session: &Session) -> RowTable {
    (*session.row_table().expect("rows")).clone()
}

fn reservations(session: &Session) -> TileReservations {
    (*session.tile_reservations().expect("reservations")).clone()
}

/// A new global stream policy re-runs exactly: every phase's policy
/// firewall, figures and patches; one schedule, one figures and one
/// encoding per distinct problem; the row table, the reservations and the
/// estimate; placement only if the reservations moved. Nothing of the first
/// half and no phase problem.
#[test]
fn global_stream_policy_reschedules_every_problem_and_nothing_upstream() {
    let file = "queries/vit-tiny.toml";
    // Same-operator fusion: under `auto` phase grouping re-prices too
    // (`global_policy_regroups_phases_only_under_auto_fusion`).
    let same = "planning.fusion=same-operator";
    let mut session = Session::new(&query(file, &[same, "schedule.policy=B256"]));
    session.build().expect("build");
    let (table, reserved) = (row_table_of(&session), reservations(&session));
    let changed = session.update(&query(file, &[same, "schedule.policy=S8"]));
    assert_eq!(changed, vec!["schedule"]);
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        phase_policy x19
        scheduled x16
        validated_schedule x16
        schedule_figures x16
        phase_figures x19
        encoded_rows x16
        row_summary x16
        row_table
        phase_patches x19
        tile_reservations
        phase_costs
        build_estimate
        ");
    let runs = counts(&outcome.executions);
    let phases = session.phases().len();
    let problems = problem_ids(&session).len();
    let mut expected = BTreeMap::from([
        (TrackedQuery::PhasePolicy, phases),
        (TrackedQuery::PhaseFigures, phases),
        (TrackedQuery::PhasePatches, phases),
        (TrackedQuery::Scheduled, problems),
        (TrackedQuery::ValidatedSchedule, problems),
        (TrackedQuery::ScheduleFigures, problems),
        (TrackedQuery::EncodedRows, problems),
        (TrackedQuery::RowSummary, problems),
        (TrackedQuery::RowTable, 1),
        (TrackedQuery::PhaseCosts, 1),
        (TrackedQuery::BuildEstimate, 1),
    ]);
    // Salsa backdates equal values: the reservations re-run only if the
    // row table moved, and placement only if the reservations moved.
    assert_ne!(row_table_of(&session), table, "the edit must change rows");
    expected.insert(TrackedQuery::TileReservations, 1);
    if reservations(&session) != reserved {
        expected.insert(TrackedQuery::Placement, 1);
    }
    assert_eq!(runs, expected);
}

/// Phase grouping reads `[schedule]` only under `planning.fusion = "auto"`
/// (the default): with `same-operator` a global policy change re-runs
/// nothing in phase grouping; under `auto` it re-prices the boundaries.
#[test]
fn global_policy_regroups_phases_only_under_auto_fusion() {
    let file = "queries/vit-tiny.toml";
    let same = "planning.fusion=same-operator";
    let mut session = Session::new(&query(file, &[same, "schedule.policy=B256"]));
    session.build().expect("build");
    session.update(&query(file, &[same, "schedule.policy=S8"]));
    let executions = session.build().expect("rebuild").executions;
    insta::assert_snapshot!(executed_queries(&executions), @r"
        phase_policy x19
        scheduled x16
        validated_schedule x16
        schedule_figures x16
        phase_figures x19
        encoded_rows x16
        row_summary x16
        row_table
        phase_patches x19
        tile_reservations
        phase_costs
        build_estimate
        ");
    let runs = counts(&executions);
    assert!(!runs.contains_key(&TrackedQuery::PhaseGroups), "{runs:?}");
    assert!(!runs.contains_key(&TrackedQuery::LowProgram), "{runs:?}");

    let auto = "planning.fusion=auto";
    let mut session = Session::new(&query(file, &[auto, "schedule.policy=B256"]));
    session.build().expect("build");
    session.update(&query(file, &[auto, "schedule.policy=S8"]));
    let executions = session.build().expect("rebuild").executions;
    insta::assert_snapshot!(executed_queries(&executions), @r"
        phase_groups
        phase_keys
        phase_positions
        phase_problem x13
        phase_policy x13
        scheduled x14
        validated_schedule x12
        schedule_figures x14
        phase_figures x13
        encoded_rows x12
        row_summary x12
        row_table
        phase_patches x13
        tile_reservations
        placement
        phase_costs
        compute_loads
        build_estimate
        compute_breakdown
        ");
    let runs = counts(&executions);
    assert_eq!(runs.get(&TrackedQuery::PhaseGroups), Some(&1), "{runs:?}");
    assert!(!runs.contains_key(&TrackedQuery::LowProgram), "{runs:?}");
}

/// A new layer count changes the graph (the Repeat's iteration count): the
/// graph, layouts and every op's plan re-run, but no op is re-expanded (the
/// Repeat body is expanded once); every phase problem is rebuilt, and
/// exactly the problems not seen before (those inside the Repeat, whose
/// iteration count changed, unless an equal problem was scheduled earlier)
/// are scheduled. No policy firewall re-runs.
#[test]
fn layer_count_replans_and_schedules_only_new_problems() {
    let file = "queries/vit-tiny.toml";
    // Same-operator fusion: `auto` also schedules the merges it prices.
    let same = "planning.fusion=same-operator";
    let mut session = Session::new(&query(file, &[same, "workload.layers=2"]));
    session.build().expect("build");
    let before = problem_ids(&session);
    let changed = session.update(&query(file, &[same, "workload.layers=1"]));
    assert_eq!(changed, vec!["model"]);
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        graph
        activation_calibration
        product_recipe
        matmul_costing x9
        attention_costing
        layouts
        op_keys
        op_positions
        planned_op x35
        low_program
        program_summary
        phase_groups
        phase_keys
        phase_positions
        phase_problem x19
        scheduled x12
        validated_schedule x12
        schedule_figures x12
        phase_figures x15
        encoded_rows x12
        row_summary x12
        row_table
        phase_patches x15
        tile_reservations
        placement
        phase_costs
        compute_loads
        build_estimate
        compute_breakdown
        ");
    let runs = counts(&outcome.executions);
    let ops = session.layouts().expect("layouts").ops.len();
    let phases = session.phases().len();
    for (query, expected) in [
        (TrackedQuery::Graph, Some(1)),
        (TrackedQuery::Layouts, Some(1)),
        (TrackedQuery::PlannedOp, Some(ops)),
        (TrackedQuery::OpExpansion, None),
        (TrackedQuery::LowProgram, Some(1)),
        (TrackedQuery::PhaseGroups, Some(1)),
        (TrackedQuery::PhaseProblem, Some(phases)),
        (TrackedQuery::PhasePolicy, None),
        (
            TrackedQuery::Scheduled,
            Some(problem_ids(&session).difference(&before).count()),
        ),
        (TrackedQuery::RowTable, Some(1)),
        (TrackedQuery::BuildEstimate, Some(1)),
    ] {
        assert_eq!(runs.get(&query).copied(), expected, "{query}: {runs:?}");
    }
}

/// Overrides are keyed by phase, not by their position in the list: adding
/// an override for phase A ahead of phase B's re-schedules A only, and B's
/// policy firewall holds (its schedule, rows and figures do not re-run).
#[test]
fn adding_an_override_leaves_another_overridden_phase_untouched() {
    let file = "queries/vit-tiny.toml";
    let phase_b = "layer.mlp.down.a.rearrange#0";
    let phase_a = "layer.attn.merge#0";
    let override_b = format!("schedule.override.{phase_b}=B64");
    let override_a = format!("schedule.override.{phase_a}=S64");
    let mut session = Session::new(&query(file, &[&override_b]));
    session.build().expect("build");
    let ids: BTreeMap<String, salsa::Id> = session
        .phases()
        .iter()
        .map(|phase| (phase.key().to_string(), phase.id()))
        .collect();
    session.update(&query(file, &[&override_a, &override_b]));
    let rebuilt = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&rebuilt.executions), @r"
        phase_policy x13
        scheduled
        validated_schedule
        schedule_figures
        phase_figures
        encoded_rows
        row_summary
        row_table
        phase_patches
        tile_reservations
        phase_costs
        build_estimate
        ");
    let figures_rerun: BTreeSet<salsa::Id> = rebuilt
        .executions
        .iter()
        .filter(|execution| execution.query == TrackedQuery::PhaseFigures)
        .map(|execution| execution.key)
        .collect();
    assert_eq!(figures_rerun, BTreeSet::from([ids[phase_a]]));
    for query in [
        TrackedQuery::PhasePolicy,
        TrackedQuery::PhaseFigures,
        TrackedQuery::PhasePatches,
    ] {
        assert_query_was_run(&rebuilt.executions, query, ids[phase_a]);
    }
    for query in [
        TrackedQuery::PhaseFigures,
        TrackedQuery::PhasePatches,
        TrackedQuery::PhaseProblem,
    ] {
        assert_query_was_not_run(&rebuilt.executions, query, ids[phase_b]);
    }
    let counts = counts(&rebuilt.executions);
    assert_eq!(counts.get(&TrackedQuery::Scheduled), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get(&TrackedQuery::EncodedRows),
        Some(&1),
        "{counts:?}"
    );
    let back = rebuilt.back.expect("back half");
    let policy_of = |key: &str| {
        back.phases
            .iter()
            .find(|phase| phase.key == key)
            .map(|phase| phase.policy)
    };
    use SchedulePolicy::{Balanced, Stream};
    assert_eq!(policy_of(phase_a), Some(Stream { words: 64 }));
    assert_eq!(policy_of(phase_b), Some(Balanced { words: 64 }));
}

/// A layout override for one matrix product re-plans from the memoized
/// costings, re-expands exactly the ops whose plan or operand formats
/// changed (the product and the conversions around it) and schedules
/// exactly the phase problems not seen before.
#[test]
fn layout_override_reexpands_one_op_and_reschedules_only_changed_phases() {
    let file = "queries/vit-tiny.toml";
    // Same-operator fusion: `auto` also schedules the merges it prices.
    let same = "planning.fusion=same-operator";
    let mut session = Session::new(&query(file, &[same]));
    session.build().expect("build");
    let before = session.layouts().expect("layouts");
    let problems_before = problem_ids(&session);
    let changed = session.update(&query(
        file,
        &[same, "layout.override.layer.mlp.down=1x1x16"],
    ));
    assert_eq!(changed, vec!["planning"]);
    let outcome = session.build().expect("rebuild");
    insta::assert_snapshot!(executed_queries(&outcome.executions), @r"
        calibration_input
        product_recipe
        planning_settings
        layout_overrides
        layouts
        op_keys
        op_positions
        planned_op x35
        op_expansion x4
        low_program
        program_summary
        phase_groups
        phase_keys
        phase_positions
        phase_problem x18
        scheduled x3
        validated_schedule x3
        schedule_figures x3
        phase_figures x13
        encoded_rows x3
        row_summary x3
        row_table
        repeat_base
        phase_patches x13
        tile_reservations
        placement
        phase_costs
        compute_loads
        compute_costs
        build_estimate
        compute_breakdown
        ");
    let after = session.layouts().expect("layouts");
    let runs = counts(&outcome.executions);
    assert_eq!(runs.get(&TrackedQuery::MatmulCosting), None, "{runs:?}");
    assert_eq!(runs.get(&TrackedQuery::AttentionCosting), None, "{runs:?}");
    let expanded = expanded_ops(&session, &outcome.executions);
    assert_eq!(expanded, changed_ops(&before, &after));
    assert!(expanded.contains("layer.mlp.down"), "{expanded:?}");
    for untouched in [
        "layer.attn.qkv",
        "layer.attn.core",
        "layer.attn.out",
        "layer.mlp.up",
        "layer.ln1",
    ] {
        assert!(!expanded.contains(untouched), "{untouched}: {expanded:?}");
    }
    let new_problems = problem_ids(&session).difference(&problems_before).count();
    assert!(new_problems > 0);
    assert_eq!(
        runs.get(&TrackedQuery::Scheduled).copied().unwrap_or(0),
        new_problems,
        "{runs:?}"
    );
}

/// The column-then-reduction pair: the MLP's up projection split by output
/// columns over 16 tiles and the down projection split by reduction over
/// the same 16 tiles in the same order; the down projection's operand is
/// then on the tiles that produced it, and its conversion moves nothing
/// over the exchange (local copies only). The cost model alone does not
/// choose it; a layout override does, and the search's candidates hold it.
#[test]
fn column_then_reduction_pair_needs_no_conversion_exchange() {
    let file = "queries/vit-tiny.toml";
    let mut session = Session::new(&query(file, &["layout.override.layer.mlp.down=1x1x16"]));
    session.build().expect("build");
    let layouts = session.layouts().expect("layouts");
    let up = layouts
        .ops
        .iter()
        .find(|op| op.name == "layer.mlp.up")
        .expect("up");
    let OpPlan::MatMul(up_plan) = up.plan else {
        panic!("up is a product")
    };
    assert_eq!(
        up_plan.partition(),
        "1x16x1",
        "the up projection is split by columns"
    );
    let names: Vec<String> = layouts.ops.iter().map(|op| op.name.clone()).collect();
    let expansions = session.op_expansions().expect("expansions");
    let conversion = names
        .iter()
        .position(|name| name == "layer.mlp.down.a.rearrange")
        .expect("the operand conversion exists (memory class and padding differ)");
    let counts = step_counts(&expansions[conversion]);
    assert_eq!(
        counts.transfers, 0,
        "no exchange between the pair: {counts:?}"
    );
    assert!(counts.local_copies > 0, "the operand is copied locally");

    // Without the override the cost model's plan converts over the exchange.
    let mut plain = Session::new(&query(file, &[]));
    plain.build().expect("build");
    let layouts = plain.layouts().expect("layouts");
    let position = layouts
        .ops
        .iter()
        .position(|op| op.name == "layer.mlp.down.a.rearrange")
        .expect("conversion");
    assert!(step_counts(&plain.op_expansions().expect("expansions")[position]).transfers > 0);
}

fn step_counts(expansion: &superstep::expand::expansion::OpExpansion) -> StepCounts {
    let mut counts = StepCounts::default();
    for step in &expansion.steps {
        counts.add_step(step);
    }
    counts
}

/// The search by the real estimate, on a tiny ViT with a wide MLP: it
/// finds the column-then-reduction pair (the down projection split by
/// reduction over the tiles that hold the up projection's column blocks,
/// so its operand conversion moves nothing over the exchange), its
/// estimate equals a plain build with the overrides it writes, cycle for
/// cycle, and every accepted step lowered the estimate.
#[test]
fn the_search_finds_the_pair_and_its_estimate_is_a_plain_build_with_its_overrides() {
    use superstep::studies::layout_search::BeamSettings;
    use superstep::studies::layout_search::{SearchSettings, Silent, TrialSharing, search_layouts};
    let file = "queries/vit-tiny.toml";
    // Under the FP16 recipe, where the pair is the beam's plan; under FP8
    // inputs the beam prices a ragged reduction (`1x2x8`) cheaper.
    let wide = "workload.mlp=2048";
    let recipe = "planning.matrix_inputs=fp16";
    let start = query(file, &[wide, recipe]);
    let mut session = Session::new(&start);
    let outcome = search_layouts(
        &mut session,
        &start,
        SearchSettings {
            beam: Some(BeamSettings::default()),
            ..SearchSettings::thorough()
        },
        &Silent,
        TrialSharing::default(),
    )
    .expect("search");
    assert!(outcome.best_cycles < outcome.baseline_cycles, "{outcome:?}");
    // The local steps start from the beam's plan when it compiled cheaper.
    let beam = outcome
        .beam
        .as_ref()
        .expect("the default search runs the beam");
    let mut before = if beam.taken {
        assert!(beam.best_cycles < outcome.baseline_cycles, "{outcome:?}");
        beam.best_cycles
    } else {
        outcome.baseline_cycles
    };
    for step in &outcome.steps {
        assert_eq!(step.cycles_before, before, "{outcome:?}");
        assert!(step.cycles_after < step.cycles_before, "{step:?}");
        before = step.cycles_after;
    }
    assert_eq!(before, outcome.best_cycles);
    let partition = |name: &str| {
        outcome
            .overrides
            .iter()
            .find(|(op, _)| op == name)
            .map(|(_, partition)| partition.clone())
    };
    // An op's partition in the beam's plan: where the first local step
    // that changed it started, else where the search ended.
    let beam_partition = |name: &str| {
        outcome
            .steps
            .iter()
            .find(|step| step.op == name)
            .map(|step| step.from.clone())
            .or_else(|| partition(name))
    };
    // The pair, in the beam's plan: the down projection split by reduction
    // alone, into as many parts as the up projection has column blocks.
    // (A local step may trade it for a plan the real estimate prices
    // lower: since reduced slices may be ragged, `1x2x8`.)
    // (The tile order, after a `/`, does not matter here.)
    let up = beam_partition("layer.mlp.up").expect("an up projection plan");
    let up_columns = up.split('x').nth(1).expect("ROWSxCOLSxREDUCTION");
    let down = beam_partition("layer.mlp.down").expect("a down projection plan");
    assert_eq!(
        down.split('/').next(),
        Some(format!("1x1x{up_columns}").as_str()),
        "{outcome:?}"
    );

    // A plain build of the written overrides: the same estimate.
    let sets: Vec<String> = outcome
        .overrides
        .iter()
        .map(|(op, partition)| format!("layout.override.{op}={partition}"))
        .chain([wide.to_string(), recipe.to_string()])
        .collect();
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let mut plain = Session::new(&query(file, &sets));
    let built = plain.build().expect("plain build with the overrides");
    assert_eq!(
        built.back.expect("back").headline.estimate.total_cycles,
        outcome.best_cycles
    );
    // The beam's plan, built: the pair's operand conversion moves nothing
    // over the exchange.
    let sets: Vec<String> = outcome
        .overrides
        .iter()
        .map(|(op, _)| format!("layout.override.{op}={}", beam_partition(op).expect("plan")))
        .chain([wide.to_string(), recipe.to_string()])
        .collect();
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let mut paired = Session::new(&query(file, &sets));
    paired.build().expect("plain build of the beam's plan");
    let layouts = paired.layouts().expect("layouts");
    let position = layouts
        .ops
        .iter()
        .position(|op| op.name == "layer.mlp.down.a.rearrange")
        .expect("conversion");
    let counts = step_counts(&paired.op_expansions().expect("expansions")[position]);
    assert_eq!(counts.transfers, 0, "{counts:?}");
}
