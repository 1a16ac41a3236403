//! Tests of layout overrides in the planner, on a hand-built pair of
//! chained matrix products (`up`: [32, 64] x [64, 128], `down`: [32, 128] x
//! [128, 64]) on 16 tiles: an override replaces the cost model's partition
//! and tile order; an override of a missing op, of an op without a
//! partition, of the wrong kind, with parts the blocks cannot form or a
//! working set over the budget is refused with the nearest valid choices.

use super::cost::TileOrder;
use super::overrides::{LayoutOverride, Partition};
use super::plan::{Layouts, OpPlan};
use super::planner::*;
use crate::model::graph::{Graph, OpKind, Precision, Region, Shape, ValueKind};
use crate::numerics::dot::Accumulation;

fn settings() -> PlanningSettings {
    PlanningSettings {
        tiles: 16,
        reserved_bytes_per_tile: 65536,
        accumulation: AccumulationPolicy::Fixed(Accumulation::F32),
        matrix_inputs: crate::numerics::dot::ProductInputs::Fp16,
        cost_table: crate::target::kernel_cost::CostTable::shipped(),
        candidate_limit: 8,
        forced_flash: None,
        fp8_cast: Default::default(),
    }
}

fn chained_products() -> Graph {
    let mut graph = Graph::default();
    let mut x = graph.add_value(
        "x",
        Shape::matrix(32, 64),
        Precision::F16,
        ValueKind::Input,
        Region::Prologue,
    );
    for (name, k, n) in [("up", 64, 128), ("down", 128, 64)] {
        let w = graph.add_value(
            format!("{name}.w"),
            Shape::matrix(k, n),
            Precision::F8,
            ValueKind::Weight { iterated: false },
            Region::Prologue,
        );
        let bias = graph.add_value(
            format!("{name}.bias"),
            Shape::matrix(1, n),
            Precision::F16,
            ValueKind::Weight { iterated: false },
            Region::Prologue,
        );
        x = graph.add_op(
            name,
            OpKind::MatMul { bias: true },
            vec![x, w, bias],
            Shape::matrix(32, n),
            Precision::F16,
            Region::Prologue,
        );
    }
    graph.output = Some(x);
    graph
}

fn plan_with(overrides: &[(&str, &str)]) -> Result<Layouts, LayoutError> {
    let overrides: Vec<LayoutOverride> = overrides
        .iter()
        .map(|(op, partition)| LayoutOverride {
            op: op.to_string(),
            partition: Partition::parse(partition).expect("partition"),
        })
        .collect();
    let settings = settings();
    plan_layouts(
        &chained_products(),
        settings,
        &overrides,
        &crate::numerics::dot::ProductRecipe::uniform(settings.matrix_inputs),
        &mut DirectCosts,
    )
}

fn matmul_plan(layouts: &Layouts, name: &str) -> crate::layout::cost::MatMulPlan {
    match layouts
        .ops
        .iter()
        .find(|op| op.name == name)
        .map(|op| &op.plan)
    {
        Some(OpPlan::MatMul(plan)) => *plan,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn an_override_replaces_the_partition_and_the_tile_order() {
    let plain = plan_with(&[]).expect("plan");
    let chosen = matmul_plan(&plain, "down");
    let layouts = plan_with(&[("down", "1x1x16/kcr")]).expect("plan");
    let down = matmul_plan(&layouts, "down");
    assert_ne!(down.partition(), chosen.partition());
    assert_eq!(down.partition(), "1x1x16");
    assert_eq!(down.order, TileOrder::ReductionColumnsRows);
    // Reduction block r sits on tile r: the order numbers the reduction
    // axis outermost, and the other two axes have one part each.
    assert_eq!(down.tile(0, 0, 5), 5);
    // The other product keeps the cost model's plan.
    assert_eq!(matmul_plan(&layouts, "up"), matmul_plan(&plain, "up"));
    // Its operand format follows the plan: 16 reduction blocks of 8.
    let down_op = layouts
        .ops
        .iter()
        .find(|op| op.name == "down")
        .expect("down");
    let operand = &layouts.value(down_op.inputs[0]).format;
    assert_eq!(operand.block, [1, 32, 8]);
    assert_eq!(operand.replicas, 1);
}

#[test]
fn overrides_that_cannot_apply_name_the_nearest_valid_choices() {
    let refused = |overrides: &[(&str, &str)]| match plan_with(overrides) {
        Err(LayoutError::Override(error)) => *error,
        other => panic!("{overrides:?}: {other:?}"),
    };
    let missing = refused(&[("dwn", "1x1x16")]);
    assert!(
        missing.message.contains("no such matrix product"),
        "{missing}"
    );
    assert_eq!(missing.nearest.first().map(String::as_str), Some("`down`"));

    let wrong_kind = refused(&[("down", "4x4")]);
    assert!(
        wrong_kind.message.contains("ROWSxCOLSxREDUCTION"),
        "{wrong_kind}"
    );

    // 32 rows in 7 parts: blocks of 5 rows, which form 7 parts (6 full and
    // one of 2) ... but blocks of ceil(32 / 7) = 5 make ceil(32 / 5) = 7;
    // 9 parts give blocks of 4, which form 8: not the 9 asked for.
    let uneven = refused(&[("down", "9x1x1")]);
    assert!(
        uneven.message.contains("not the ones asked for"),
        "{uneven}"
    );
    assert!(!uneven.nearest.is_empty(), "{uneven}");
    for nearest in &uneven.nearest {
        let text = nearest.trim_matches('`');
        assert!(
            plan_with(&[("down", text)]).is_ok(),
            "{text} is offered but refused"
        );
    }
}

#[test]
fn an_override_over_the_working_budget_says_how_much_it_needs() {
    let mut tight = settings();
    // Leave only a few KiB per tile: one tile holding the whole product
    // cannot fit.
    tight.reserved_bytes_per_tile = 638_976 - 8 * 1024;
    let overrides = [LayoutOverride {
        op: String::from("down"),
        partition: Partition::parse("1x1x1").expect("partition"),
    }];
    let recipe = crate::numerics::dot::ProductRecipe::uniform(tight.matrix_inputs);
    match plan_layouts(
        &chained_products(),
        tight,
        &overrides,
        &recipe,
        &mut DirectCosts,
    ) {
        Err(LayoutError::Override(error)) => {
            assert!(error.message.contains("bytes of working SRAM"), "{error}")
        }
        Err(LayoutError::DoesNotFit(_)) => {}
        other => panic!("{other:?}"),
    }
}
