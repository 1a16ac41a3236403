//! Tests of the layout planner on tiny hand-built graphs: on one tile, the
//! plan, formats, inserted rearranges (operand format, Repeat entry and
//! carry), iterated weights and resident weight bytes worked out by hand
//! from the cost model; on eight tiles, every value's format covering each
//! element once per replica and every op reading the formats its plan
//! needs; and the capacity errors (region 1, the whole tile with the
//! resident weights, weights alone) naming the operator and its figures.

use super::format::TensorFormat;
use super::operand_formats::{broadcast_vector_format, matmul_formats, with_precision};
use super::plan::{Layouts, OpPlan, PlannedValueId, RearrangeReason};
use super::planner::*;
use crate::layout::capacity::PlannedMemory;
use crate::layout::format::{ElementOrder, MemoryClass};
use crate::model::graph::{
    GeluKind, Graph, OpKind, Precision, Region, RepeatInfo, Shape, ValueId, ValueKind,
};
use crate::numerics::dot::Accumulation;

fn settings(tiles: u32, reserved_bytes_per_tile: u32) -> PlanningSettings {
    PlanningSettings {
        tiles,
        reserved_bytes_per_tile,
        accumulation: AccumulationPolicy::Fixed(Accumulation::F32),
        matrix_inputs: crate::numerics::dot::ProductInputs::Fp16,
        cost_table: crate::target::kernel_cost::CostTable::shipped(),
        candidate_limit: 8,
        forced_flash: None,
        fp8_cast: Default::default(),
    }
}

fn weight(
    graph: &mut Graph,
    name: &str,
    shape: Shape,
    precision: Precision,
    region: Region,
) -> ValueId {
    graph.add_value(
        name,
        shape,
        precision,
        ValueKind::Weight {
            iterated: region == Region::Body,
        },
        region,
    )
}

/// `x [8, 16]` enters a Repeat of three layers; each layer is
/// `layer.mm = layer.input x layer.w [16, 16] + layer.b` (iterated FP8 and
/// FP16 weights); the epilogue normalises the carried value (`head.norm`
/// with `head.gamma`, `head.beta`).
/// Ends a one-layer-body graph: the Repeat of `iterations` from `initial`
/// through `carried` to `carried_output`, then a layer norm of the carried
/// value (with its own gamma and beta, in the epilogue) as the output.
fn close_with_head_norm(
    mut graph: Graph,
    initial: ValueId,
    carried: ValueId,
    carried_output: ValueId,
    iterations: u32,
) -> Graph {
    let shape = graph.values[carried.0 as usize].shape;
    let cols = shape.cols;
    let gamma = weight(
        &mut graph,
        "head.gamma",
        Shape::matrix(1, cols),
        Precision::F16,
        Region::Epilogue,
    );
    let beta = weight(
        &mut graph,
        "head.beta",
        Shape::matrix(1, cols),
        Precision::F16,
        Region::Epilogue,
    );
    let normalised = graph.add_op(
        "head.norm",
        OpKind::LayerNorm { epsilon: 1e-6 },
        vec![carried, gamma, beta],
        shape,
        Precision::F16,
        Region::Epilogue,
    );
    graph.repeat = Some(RepeatInfo {
        iterations,
        initial,
        carried_input: carried,
        carried_output,
    });
    graph.output = Some(normalised);
    graph
}

fn repeated_product() -> Graph {
    let mut graph = Graph::default();
    let x = graph.add_value(
        "x",
        Shape::matrix(8, 16),
        Precision::F16,
        ValueKind::Input,
        Region::Prologue,
    );
    let carried = graph.add_value(
        "layer.input",
        Shape::matrix(8, 16),
        Precision::F16,
        ValueKind::Activation,
        Region::Body,
    );
    let w = weight(
        &mut graph,
        "layer.w",
        Shape::matrix(16, 16),
        Precision::F8,
        Region::Body,
    );
    let b = weight(
        &mut graph,
        "layer.b",
        Shape::matrix(1, 16),
        Precision::F16,
        Region::Body,
    );
    let output = graph.add_op(
        "layer.mm",
        OpKind::MatMul { bias: true },
        vec![carried, w, b],
        Shape::matrix(8, 16),
        Precision::F16,
        Region::Body,
    );
    close_with_head_norm(graph, x, carried, output, 3)
}

fn plan(graph: &Graph, settings: PlanningSettings) -> Result<Layouts, LayoutError> {
    let recipe = crate::numerics::dot::ProductRecipe::uniform(settings.matrix_inputs);
    plan_layouts(graph, settings, &[], &recipe, &mut DirectCosts)
}

#[test]
fn one_tile_plans_one_block_and_inserts_the_entry_operand_and_carry_rearranges() {
    let layouts = plan(&repeated_product(), settings(1, 65_536)).expect("plans");
    let ops: Vec<(&str, Region, Option<RearrangeReason>)> = layouts
        .ops
        .iter()
        .map(|op| {
            let reason = match &op.plan {
                OpPlan::Rearrange { reason, .. } => Some(*reason),
                _ => None,
            };
            (op.name.as_str(), op.region, reason)
        })
        .collect();
    assert_eq!(
        ops,
        vec![
            (
                "repeat.entry",
                Region::Prologue,
                Some(RearrangeReason::RepeatEntry)
            ),
            (
                "layer.mm.a.rearrange",
                Region::Body,
                Some(RearrangeReason::OperandFormat)
            ),
            ("layer.mm", Region::Body, None),
            (
                "repeat.carry",
                Region::Body,
                Some(RearrangeReason::RepeatCarry)
            ),
            ("head.norm", Region::Epilogue, None),
        ]
    );
    // The entry copies x into the carried slot, the carry the layer's
    // output back into it.
    assert_eq!(layouts.ops[0].inputs, vec![PlannedValueId(0)]);
    assert_eq!(layouts.ops[0].output, PlannedValueId(1));
    assert_eq!(layouts.ops[3].inputs, vec![PlannedValueId(4)]);
    assert_eq!(layouts.ops[3].output, PlannedValueId(1));

    // One tile: one block of 8 rows, reduction 16, 16 columns. Cycles:
    // 8 x 16 x 16 / 128 + 11 = 27 of compute, 8 x 16 x 2 / 4 = 64 words of
    // operand exchange, 8 x 16 / 4 + 11 = 43 for the bias, one phase of
    // 600: 734. Working set: input 256, partial sums 8 x 16 x 4 = 512,
    // output 8 x 16 x 2 = 256, bias 32: 1,056.
    let OpPlan::MatMul(product) = layouts.ops[2].plan else {
        panic!("{:?}", layouts.ops[2].plan);
    };
    assert_eq!(
        (
            product.row_parts,
            product.col_parts,
            product.reduction_parts
        ),
        (1, 1, 1)
    );
    assert_eq!(
        (
            product.block_rows,
            product.block_reduction,
            product.block_cols
        ),
        (8, 16, 16)
    );
    // The kernel as the estimate prices it: an 8-row FP16 product through
    // one K16 x C16 panel (32 matrix-unit cycles + call 441 + panel 155 +
    // 8 row panels at 0.05: 629), the 16 x 16 weight block widened (a cast
    // call into panels: 471) and 128 bias additions (110); then 64 words
    // exchanged and one phase of global sync (600).
    assert_eq!(product.cycles, 629 + 471 + 110 + 64 + 600);
    assert_eq!(product.working_bytes, 256 + 512 + 256 + 32);

    // The product reads its operand copy from interleaved memory.
    let operand = layouts.value(layouts.ops[2].inputs[0]);
    assert_eq!(operand.name, "layer.mm.a");
    assert_eq!(operand.format.class, MemoryClass::Interleaved);
    assert_eq!(operand.format.block, [1, 8, 16]);
    assert_eq!(
        layouts.value(PlannedValueId(1)).format.class,
        MemoryClass::Standard
    );
    // The weight is stored column-major, as the matrix unit reads it.
    let stored = layouts.value(PlannedValueId(2));
    assert_eq!(stored.format.order, ElementOrder::ColumnMajor);
    // Iterated weights hold one instance per layer.
    let iterations: Vec<(&str, u32)> = layouts
        .values
        .iter()
        .map(|value| (value.name.as_str(), value.iterations))
        .collect();
    assert_eq!(
        iterations,
        vec![
            ("x", 1),
            ("layer.input", 1),
            ("layer.w", 3),
            ("layer.b", 3),
            ("layer.mm", 1),
            ("head.gamma", 1),
            ("head.beta", 1),
            ("head.norm", 1),
            ("layer.mm.a", 1),
        ]
    );
    // Resident weights on tile 0: the weight's 16 columns of 16 codes
    // (256 bytes) and the bias' 32 bytes, three layers each, and the
    // norm's 32 + 32 bytes: 768 + 96 + 64 = 928.
    assert_eq!(layouts.resident_weight_bytes_max, 928);
    assert_eq!(layouts.resident_weight_tile, 0);
    let repeat = layouts.repeat.as_ref().expect("a repeat");
    assert_eq!(
        (repeat.iterations, repeat.carried_input),
        (3, PlannedValueId(1))
    );
    assert_eq!(layouts.output, PlannedValueId(7));
    assert_eq!(layouts.rearrange_count(), 3);
}

/// `repeated_product` widened for eight tiles and with more op kinds: the
/// layer also applies GELU and adds the residual; the prologue runs
/// attention over two groups of 16 queries and keys of dimension 8.
fn layered_graph() -> Graph {
    let mut graph = Graph::default();
    let x = graph.add_value(
        "x",
        Shape::matrix(24, 32),
        Precision::F16,
        ValueKind::Input,
        Region::Prologue,
    );
    let heads = Shape {
        groups: 2,
        rows: 16,
        cols: 8,
    };
    let mut attention_inputs = Vec::new();
    for name in ["q", "k", "v"] {
        attention_inputs.push(graph.add_value(
            name,
            heads,
            Precision::F16,
            ValueKind::Input,
            Region::Prologue,
        ));
    }
    graph.add_op(
        "attention",
        OpKind::Attention { scale: 0.35 },
        attention_inputs,
        heads,
        Precision::F16,
        Region::Prologue,
    );
    let carried = graph.add_value(
        "layer.input",
        Shape::matrix(24, 32),
        Precision::F16,
        ValueKind::Activation,
        Region::Body,
    );
    let w = weight(
        &mut graph,
        "layer.w",
        Shape::matrix(32, 32),
        Precision::F8,
        Region::Body,
    );
    let b = weight(
        &mut graph,
        "layer.b",
        Shape::matrix(1, 32),
        Precision::F16,
        Region::Body,
    );
    let product = graph.add_op(
        "layer.mm",
        OpKind::MatMul { bias: true },
        vec![carried, w, b],
        Shape::matrix(24, 32),
        Precision::F16,
        Region::Body,
    );
    let activated = graph.add_op(
        "layer.gelu",
        OpKind::Gelu {
            kind: GeluKind::Tanh,
        },
        vec![product],
        Shape::matrix(24, 32),
        Precision::F16,
        Region::Body,
    );
    let sum = graph.add_op(
        "layer.add",
        OpKind::Add,
        vec![carried, activated],
        Shape::matrix(24, 32),
        Precision::F16,
        Region::Body,
    );
    close_with_head_norm(graph, x, carried, sum, 2)
}

/// Checks that `format` stores every element of its shape exactly once in
/// each replica's block, on tiles of the machine.
fn assert_covers(name: &str, format: &TensorFormat, tiles: u32) {
    let shape = format.shape;
    let parts = format.parts();
    let extents = [shape.groups, shape.rows, shape.cols];
    for axis in 0..3 {
        // The blocks reach the edge, and no block lies wholly past it.
        assert!(parts[axis] * format.block[axis] >= extents[axis], "{name}");
        assert!(
            (parts[axis] - 1) * format.block[axis] < extents[axis],
            "{name}"
        );
    }
    assert_eq!(
        format.tiles.len() as u32,
        format.block_count() * format.replicas,
        "{name}: one tile per block and replica"
    );
    assert!(format.tiles.iter().all(|&tile| tile < tiles), "{name}");
    let mut seen = vec![0u32; shape.elements() as usize];
    let block_bytes = format.block_bytes() as usize;
    for block in 0..format.block_count() {
        let mut offsets = Vec::new();
        format.for_each_element(block, |offset, index| {
            seen[index] += 1;
            offsets.push(offset);
        });
        // Distinct bytes of the block, each element inside it.
        let count = offsets.len();
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets.len(), count, "{name}: block {block} reuses bytes");
        let element = format.element_bytes() as usize;
        assert!(
            offsets
                .iter()
                .all(|&offset| offset + element <= block_bytes),
            "{name}: block {block}"
        );
    }
    assert!(
        seen.iter().all(|&count| count == 1),
        "{name}: some element is stored {} times",
        seen.iter().copied().find(|&count| count != 1).unwrap_or(1)
    );
}

#[test]
fn on_eight_tiles_every_format_covers_its_value_and_every_op_reads_what_its_plan_needs() {
    let tiles = 8;
    let graph = layered_graph();
    let layouts = plan(&graph, settings(tiles, 65_536)).expect("plans");
    for value in &layouts.values {
        assert_covers(&value.name, &value.format, tiles);
    }
    let format = |id: PlannedValueId| &layouts.value(id).format;
    let mut checked = 0;
    for op in &layouts.ops {
        let output = format(op.output);
        match (&op.plan, &op.kind) {
            (OpPlan::MatMul(plan), _) => {
                // The partition covers the product and fits the machine.
                let (m, k, n) = (24, 32, 32);
                assert!(plan.row_parts * plan.block_rows >= m, "{}", op.name);
                assert!(
                    plan.reduction_parts * plan.block_reduction >= k,
                    "{}",
                    op.name
                );
                assert!(plan.col_parts * plan.block_cols >= n, "{}", op.name);
                assert!(plan.tiles_used() <= tiles, "{}", op.name);
                let wanted = matmul_formats(plan, m, k, n);
                assert_eq!(format(op.inputs[0]), &wanted.a, "{}", op.name);
                assert_eq!(output, &wanted.output, "{}", op.name);
                // The weight and bias come as the product reads them,
                // directly or through a broadcast of their storage.
                assert_eq!(format(op.inputs[1]), &wanted.weight, "{}", op.name);
                assert_eq!(format(op.inputs[2]), &wanted.bias, "{}", op.name);
                checked += 1;
            }
            (OpPlan::Attention(plan), _) => {
                assert!(plan.query_parts * plan.block_queries >= 16, "{}", op.name);
                assert!(plan.key_parts * plan.block_keys >= 16, "{}", op.name);
                checked += 1;
            }
            (OpPlan::Blockwise, OpKind::LayerNorm { .. }) => {
                assert!(
                    output.rows_complete(),
                    "{}: a norm needs whole rows",
                    op.name
                );
                assert_eq!(
                    format(op.inputs[0]),
                    &with_precision(output, Precision::F16),
                    "{}",
                    op.name
                );
                for slot in [1, 2] {
                    assert_eq!(
                        format(op.inputs[slot]),
                        &broadcast_vector_format(output, Precision::F16, tiles),
                        "{}",
                        op.name
                    );
                }
                checked += 1;
            }
            (OpPlan::Blockwise, _) => {
                // Element-wise ops read their inputs in the output's blocks.
                for &input in &op.inputs {
                    assert_eq!(
                        format(input),
                        &with_precision(output, layouts.value(input).format.precision),
                        "{}",
                        op.name
                    );
                }
                checked += 1;
            }
            (OpPlan::Rearrange { .. }, _) => {
                // A rearrange moves a value into another format of it.
                let input = format(op.inputs[0]);
                assert_eq!(
                    input.shape.elements(),
                    output.shape.elements(),
                    "{}",
                    op.name
                );
            }
        }
    }
    // attention, layer.mm, layer.gelu, layer.add, head.norm.
    assert_eq!(checked, 5);
    // The check saw replicated formats and broadcasts, not only one-tile
    // blocks: the norm's parameters go to all eight row blocks.
    assert!(layouts.values.iter().any(|value| value.format.replicas > 1));
    assert!(layouts.ops.iter().any(|op| matches!(
        op.plan,
        OpPlan::Rearrange {
            reason: RearrangeReason::WeightBroadcast,
            ..
        }
    )));
    // The weights of two layers are stored, none beyond the machine.
    assert_eq!(
        layouts
            .values
            .iter()
            .filter(|value| value.iterations == 2)
            .count(),
        2
    );
}

/// `x [1024, 1024]` times `a.w [1024, 1024]` (op `a`) and times
/// `b.w [1024, 512]` (op `b`), each with a bias.
fn two_large_products() -> Graph {
    let mut graph = Graph::default();
    let x = graph.add_value(
        "x",
        Shape::matrix(1024, 1024),
        Precision::F16,
        ValueKind::Input,
        Region::Prologue,
    );
    for (name, cols) in [("a", 1024), ("b", 512)] {
        let w = weight(
            &mut graph,
            &format!("{name}.w"),
            Shape::matrix(1024, cols),
            Precision::F8,
            Region::Prologue,
        );
        let bias = weight(
            &mut graph,
            &format!("{name}.bias"),
            Shape::matrix(1, cols),
            Precision::F16,
            Region::Prologue,
        );
        graph.add_op(
            name,
            OpKind::MatMul { bias: true },
            vec![x, w, bias],
            Shape::matrix(1024, cols),
            Precision::F16,
            Region::Prologue,
        );
    }
    graph
}

#[test]
fn a_product_larger_than_region_one_names_the_operator_and_its_overflow() {
    // On one tile each product is one block. Op `a`: input 1024 x 1024 x
    // 2 = 2,097,152, partial sums x 4 = 4,194,304, output x 2 = 2,097,152,
    // bias 2,048: 8,390,656 bytes against region 1's 424,880, so 7,965,776
    // over. Op `b` (512 columns): 2,097,152 + 2,097,152 + 1,048,576 +
    // 1,024 = 5,243,904, 4,819,024 over.
    let error = plan(&two_large_products(), settings(1, 65_536)).expect_err("does not fit");
    let LayoutError::DoesNotFit(shortfall) = &error else {
        panic!("{error}");
    };
    assert_eq!(shortfall.op, "a");
    assert_eq!(shortfall.memory, PlannedMemory::RegionOne);
    assert_eq!(shortfall.capacity, 424_880);
    assert_eq!(shortfall.demand, 8_390_656);
    assert_eq!(shortfall.overflow, 7_965_776);
    assert_eq!(shortfall.tiles_over, 1);
    assert_eq!(
        shortfall.contents,
        vec![
            (String::from("a: partial sums"), 4_194_304),
            (String::from("a: input block (FP16)"), 2_097_152),
            (String::from("a: output slice (FP16)"), 2_097_152),
            (String::from("a: bias (FP16)"), 2_048),
        ]
    );
    assert_eq!(
        shortfall.other_ops_over,
        vec![(String::from("b"), 4_819_024)]
    );
    let message = error.to_string();
    assert!(message.contains("operator `a`"), "{message}");
    assert!(message.contains("also over: `b`"), "{message}");
}

#[test]
fn a_product_that_fits_region_one_but_not_beside_the_weights_is_a_whole_tile_shortfall() {
    // `x [64, 512]` times `w [512, 512]` plus a bias on one tile, with
    // 200,000 bytes reserved: 438,976 bytes for data. Working set: input
    // 65,536, partial sums 131,072, output 65,536, bias 1,024: 263,168,
    // inside region 1. The resident weights (262,144 + 1,024 = 263,168)
    // come on top: 526,336, so 87,360 over the whole tile.
    let mut graph = Graph::default();
    let x = graph.add_value(
        "x",
        Shape::matrix(64, 512),
        Precision::F16,
        ValueKind::Input,
        Region::Prologue,
    );
    let w = weight(
        &mut graph,
        "w",
        Shape::matrix(512, 512),
        Precision::F8,
        Region::Prologue,
    );
    let b = weight(
        &mut graph,
        "b",
        Shape::matrix(1, 512),
        Precision::F16,
        Region::Prologue,
    );
    graph.add_op(
        "proj",
        OpKind::MatMul { bias: true },
        vec![x, w, b],
        Shape::matrix(64, 512),
        Precision::F16,
        Region::Prologue,
    );
    let error = plan(&graph, settings(1, 200_000)).expect_err("does not fit");
    let LayoutError::DoesNotFit(shortfall) = &error else {
        panic!("{error}");
    };
    assert_eq!(shortfall.op, "proj");
    assert_eq!(shortfall.memory, PlannedMemory::WholeTile);
    assert_eq!(shortfall.capacity, 438_976);
    assert_eq!(shortfall.demand, 526_336);
    assert_eq!(shortfall.overflow, 87_360);
    assert_eq!(shortfall.tiles_over, 1);
    assert_eq!(
        shortfall.contents[0],
        (String::from("resident weights (1 layer)"), 263_168)
    );
    assert!(shortfall.other_ops_over.is_empty());
    // One tile of the 1,472: more tiles would help; no Repeat to shorten.
    assert!(
        shortfall
            .hints
            .iter()
            .any(|hint| hint.contains("machine.tiles, now 1"))
    );
    assert!(
        !shortfall
            .hints
            .iter()
            .any(|hint| hint.contains("workload.layers"))
    );
}

#[test]
fn norm_parameters_larger_than_the_tile_are_a_weights_error() {
    // A LayerNorm over 200,000 columns on one tile: gamma and beta are
    // stored beside the only row block, 400,000 bytes each: 800,000 bytes
    // of resident weights against 638,976 - 65,536 = 573,440.
    let mut graph = Graph::default();
    let shape = Shape::matrix(1, 200_000);
    let x = graph.add_value(
        "x",
        shape,
        Precision::F16,
        ValueKind::Input,
        Region::Prologue,
    );
    let gamma = weight(&mut graph, "gamma", shape, Precision::F16, Region::Prologue);
    let beta = weight(&mut graph, "beta", shape, Precision::F16, Region::Prologue);
    let normalised = graph.add_op(
        "norm",
        OpKind::LayerNorm { epsilon: 1e-6 },
        vec![x, gamma, beta],
        shape,
        Precision::F16,
        Region::Prologue,
    );
    graph.output = Some(normalised);
    let error = plan(&graph, settings(1, 65_536)).expect_err("does not fit");
    assert_eq!(
        error,
        LayoutError::WeightsDoNotFit {
            tile: 0,
            needed: 800_000,
            available: 573_440,
        }
    );
}
