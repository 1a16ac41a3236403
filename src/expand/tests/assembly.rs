//! Tests of assembly and per-op expansion on hand-built layouts: allocation
//! numbering and remapping, the Repeat's place between prologue and
//! epilogue, rearranges (an identity move, a misaligned run), a plan that
//! does not fit its op, and one matrix product lowered through the direct
//! path.

use super::*;
fn format(
    shape: Shape,
    precision: Precision,
    order: ElementOrder,
    block: [u32; 3],
    replicas: u32,
    class: MemoryClass,
    tiles: &[u32],
) -> TensorFormat {
    TensorFormat {
        shape,
        precision,
        order,
        block,
        replicas,
        class,
        row_starts: None,
        tiles: Arc::from(tiles.to_vec()),
    }
}

/// Two row blocks of a `[4, 4]` FP16 matrix, on tiles 0 and 1: 16 bytes each.
fn two_row_blocks() -> TensorFormat {
    format(
        Shape::matrix(4, 4),
        Precision::F16,
        ElementOrder::RowMajor,
        [1, 2, 4],
        1,
        MemoryClass::Standard,
        &[0, 1],
    )
}

fn value(name: &str, kind: ValueKind, region: Region, format: TensorFormat) -> PlannedValue {
    PlannedValue {
        name: name.to_string(),
        graph_value: None,
        kind,
        region,
        format,
        iterations: 1,
    }
}

fn planned_op(name: &str, inputs: &[u32], output: u32, region: Region) -> PlannedOp {
    PlannedOp {
        name: name.to_string(),
        graph_op: None,
        kind: OpKind::Add,
        plan: OpPlan::Blockwise,
        inputs: inputs.iter().map(|&input| PlannedValueId(input)).collect(),
        output: PlannedValueId(output),
        region,
    }
}

/// Values: `x` (prologue, blocks on tiles 0 and 1), `w` (an iterated
/// weight of three layers, one block replicated on tiles 0 and 1,
/// interleaved), `y` (body) and `z` (epilogue), each two allocations.
/// Ops, listed out of region order: `layer.add` (body, `x + w -> y`, one
/// scratch), `head.copy` (epilogue, `y -> z`), `stem` (prologue, `-> x`,
/// one scratch).
fn hand_layouts(repeat: bool) -> (Layouts, Vec<OpExpansion>) {
    let mut weight = value(
        "w",
        ValueKind::Weight { iterated: true },
        Region::Body,
        format(
            Shape::matrix(4, 4),
            Precision::F8,
            ElementOrder::ColumnMajor,
            [1, 4, 4],
            2,
            MemoryClass::Interleaved,
            &[0, 1],
        ),
    );
    weight.iterations = 3;
    let layouts = Layouts {
        values: vec![
            value(
                "x",
                ValueKind::Activation,
                Region::Prologue,
                two_row_blocks(),
            ),
            weight,
            value("y", ValueKind::Activation, Region::Body, two_row_blocks()),
            value(
                "z",
                ValueKind::Activation,
                Region::Epilogue,
                two_row_blocks(),
            ),
        ],
        ops: vec![
            planned_op("layer.add", &[0, 1], 2, Region::Body),
            planned_op("head.copy", &[2], 3, Region::Epilogue),
            planned_op("stem", &[], 0, Region::Prologue),
        ],
        repeat: repeat.then_some(PlannedRepeat {
            iterations: 3,
            carried_input: PlannedValueId(2),
        }),
        output: PlannedValueId(3),
        resident_weight_bytes_max: 0,
        resident_weight_tile: 0,
    };
    let scratch = |tile: u32, bytes: u32| ScratchAllocation {
        tile,
        bytes,
        alignment: 8,
        class: MemoryClass::Standard,
        reason: Reason::AttentionScratch,
    };
    // `layer.add`: local 0 = w replica 1, 1 = y block 0, 2 = its scratch,
    // 3 = x block 1.
    let add = OpExpansion {
        references: vec![
            AllocationRef::Value {
                operand: 1,
                slot: 1,
            },
            AllocationRef::Value {
                operand: OUTPUT_OPERAND,
                slot: 0,
            },
            AllocationRef::Scratch { index: 0 },
            AllocationRef::Value {
                operand: 0,
                slot: 1,
            },
        ],
        scratch: vec![scratch(1, 40)],
        steps: vec![
            Step::Copies {
                provenance: provenance(Reason::Compute),
                copies: vec![
                    LocalCopy {
                        tile: 1,
                        source: at(0, 4),
                        destination: at(1, 8),
                        row_bytes: 4,
                        rows: 1,
                        source_stride: 4,
                        destination_stride: 4,
                    },
                    LocalCopy {
                        tile: 1,
                        source: at(3, 0),
                        destination: at(2, 0),
                        row_bytes: 8,
                        rows: 1,
                        source_stride: 8,
                        destination_stride: 8,
                    },
                ],
            },
            Step::Fills {
                provenance: provenance(Reason::Padding),
                fills: vec![ZeroFill {
                    tile: 1,
                    destination: at(2, 4),
                    row_bytes: 4,
                    rows: 1,
                    stride: 4,
                }],
            },
        ],
    };
    // `head.copy`: local 0 = y block 1, 1 = z block 1.
    let mut transfers = TransferList::default();
    transfers.push(
        1,
        at(0, 0),
        4,
        &[Destination {
            tile: 0,
            location: at(1, 0),
        }],
    );
    let head = OpExpansion {
        references: vec![
            AllocationRef::Value {
                operand: 0,
                slot: 1,
            },
            AllocationRef::Value {
                operand: OUTPUT_OPERAND,
                slot: 1,
            },
        ],
        scratch: Vec::new(),
        steps: vec![Step::Exchange {
            provenance: provenance(Reason::Rearrange),
            transfers,
        }],
    };
    // `stem`: local 0 = its scratch, 1 = x block 0.
    let stem = OpExpansion {
        references: vec![
            AllocationRef::Scratch { index: 0 },
            AllocationRef::Value {
                operand: OUTPUT_OPERAND,
                slot: 0,
            },
        ],
        scratch: vec![scratch(0, 24)],
        steps: vec![Step::Fills {
            provenance: provenance(Reason::Padding),
            fills: vec![ZeroFill {
                tile: 0,
                destination: at(1, 0),
                row_bytes: 16,
                rows: 1,
                stride: 16,
            }],
        }],
    };
    (layouts, vec![add, head, stem])
}

/// Every location of `steps`, in visiting order, as (allocation, offset).
fn locations(steps: &[Step]) -> Vec<(u32, u32)> {
    let mut found = Vec::new();
    for step in steps {
        let mut step = step.clone();
        step_locations_mut(&mut step, &mut |location| {
            found.push((location.allocation.0, location.offset))
        });
    }
    found
}

#[test]
fn assembly_numbers_value_blocks_then_scratch_and_remaps_every_reference() {
    let (layouts, expansions) = hand_layouts(true);
    let references: Vec<&OpExpansion> = expansions.iter().collect();
    let program = assemble::assemble(&layouts, &references, 2);
    assert_eq!(program.tiles, 2);
    // x: 0, 1; w: 2, 3; y: 4, 5; z: 6, 7; then layer.add's scratch 8 and
    // stem's 9 (head.copy has none).
    let tiles: Vec<u32> = program.allocations.iter().map(|a| a.tile).collect();
    assert_eq!(tiles, vec![0, 1, 0, 1, 0, 1, 0, 1, 1, 0]);
    let bytes: Vec<u32> = program.allocations.iter().map(|a| a.bytes).collect();
    assert_eq!(bytes, vec![16, 16, 16, 16, 16, 16, 16, 16, 40, 24]);
    let iterations: Vec<u32> = program.allocations.iter().map(|a| a.iterations).collect();
    assert_eq!(iterations, vec![1, 1, 3, 3, 1, 1, 1, 1, 1, 1]);
    // Data blocks of either class align to 8 bytes (so their transfers may
    // pair); scratch keeps its own. Every allocation is its own alias group.
    let alignments: Vec<u32> = program.allocations.iter().map(|a| a.alignment).collect();
    assert_eq!(alignments, vec![8; 10]);
    for (index, allocation) in program.allocations.iter().enumerate() {
        assert_eq!(allocation.alias_group, index as u32);
    }
    let bindings: Vec<(String, u32, Vec<u32>)> = program
        .values
        .iter()
        .map(|binding| {
            (
                program.name(binding.name).to_string(),
                binding.planned_value,
                binding.allocations.iter().map(|id| id.0).collect(),
            )
        })
        .collect();
    assert_eq!(
        bindings,
        vec![
            (String::from("x"), 0, vec![0, 1]),
            (String::from("w"), 1, vec![2, 3]),
            (String::from("y"), 2, vec![4, 5]),
            (String::from("z"), 3, vec![6, 7]),
        ]
    );
    // A value block's provenance names its producer (or itself when no op
    // produces it); scratch names its op and the op's output.
    let named = |index: usize| {
        let provenance = program.allocations[index].provenance;
        (
            program.name(provenance.op).to_string(),
            provenance
                .value
                .map(|value| program.name(value).to_string()),
            provenance.reason,
        )
    };
    assert_eq!(
        named(0),
        (
            String::from("stem"),
            Some(String::from("x")),
            Reason::ValueBlock
        )
    );
    assert_eq!(
        named(2),
        (
            String::from("w"),
            Some(String::from("w")),
            Reason::ValueBlock
        )
    );
    assert_eq!(
        named(4),
        (
            String::from("layer.add"),
            Some(String::from("y")),
            Reason::ValueBlock
        )
    );
    assert_eq!(
        named(8),
        (
            String::from("layer.add"),
            Some(String::from("y")),
            Reason::AttentionScratch
        )
    );
    assert_eq!(named(9).0, "stem");

    // Prologue (stem), checkpoint, the Repeat of the body (layer.add),
    // checkpoint, epilogue (head.copy).
    let steps = &program.steps;
    assert_eq!(steps.len(), 5);
    assert_eq!(locations(&steps[0..1]), vec![(0, 0)]);
    let Step::Checkpoint { name } = steps[1] else {
        panic!("{:?}", steps[1]);
    };
    assert_eq!(program.name(name), "checkpoint.before_repeat");
    let Step::Repeat { iterations, body } = &steps[2] else {
        panic!("{:?}", steps[2]);
    };
    assert_eq!(*iterations, 3);
    assert_eq!(body.len(), 2);
    // w replica 1 = 3, y block 0 = 4, the scratch = 8, x block 1 = 1;
    // offsets unchanged.
    assert_eq!(
        locations(body),
        vec![(3, 4), (4, 8), (1, 0), (8, 0), (8, 4)]
    );
    let Step::Checkpoint { name } = steps[3] else {
        panic!("{:?}", steps[3]);
    };
    assert_eq!(program.name(name), "checkpoint.after_repeat");
    // y block 1 = 5 to z block 1 = 7.
    assert_eq!(locations(&steps[4..5]), vec![(5, 0), (7, 0)]);
    // Every step carries its op's name and output value.
    let mut provenances = Vec::new();
    for step in steps.iter().chain(body) {
        match step {
            Step::Kernels { provenance, .. }
            | Step::Copies { provenance, .. }
            | Step::Fills { provenance, .. }
            | Step::Exchange { provenance, .. } => provenances.push((
                program.name(provenance.op).to_string(),
                program.name(provenance.value.expect("a value")).to_string(),
            )),
            Step::Repeat { .. } | Step::Checkpoint { .. } => {}
        }
    }
    let pair = |op: &str, value: &str| (op.to_string(), value.to_string());
    assert_eq!(
        provenances,
        vec![
            pair("stem", "x"),
            pair("head.copy", "z"),
            pair("layer.add", "y"),
            pair("layer.add", "y"),
        ]
    );
}

#[test]
fn without_a_repeat_the_body_runs_inline_between_prologue_and_epilogue() {
    let (layouts, expansions) = hand_layouts(false);
    let references: Vec<&OpExpansion> = expansions.iter().collect();
    let program = assemble::assemble(&layouts, &references, 2);
    let kinds: Vec<&str> = program
        .steps
        .iter()
        .map(|step| match step {
            Step::Kernels { .. } => "kernels",
            Step::Copies { .. } => "copies",
            Step::Fills { .. } => "fills",
            Step::Exchange { .. } => "exchange",
            Step::Repeat { .. } => "repeat",
            Step::Checkpoint { .. } => "checkpoint",
        })
        .collect();
    assert_eq!(kinds, vec!["fills", "copies", "fills", "exchange"]);
    assert!(
        !program
            .names
            .iter()
            .any(|name| name.starts_with("checkpoint"))
    );
}

#[test]
fn an_identity_rearrange_sends_the_remote_block_and_copies_the_local_one() {
    // `[4, 4]` FP16 in two row blocks on tiles 0 and 1 (16 bytes each),
    // into one `[4, 4]` block on tile 1: rows 0-1 (16 bytes = 4 words)
    // travel from tile 0 to offset 0; rows 2-3 are already on tile 1 and
    // are copied to offset 16.
    let source = two_row_blocks();
    let destination = format(
        Shape::matrix(4, 4),
        Precision::F16,
        ElementOrder::RowMajor,
        [1, 4, 4],
        1,
        MemoryClass::Interleaved,
        &[1],
    );
    let op = PlannedOp {
        name: String::from("gather"),
        graph_op: None,
        kind: OpKind::View(ViewKind::Identity),
        plan: OpPlan::Rearrange {
            view: ViewKind::Identity,
            reason: RearrangeReason::OperandFormat,
        },
        inputs: vec![PlannedValueId(0)],
        output: PlannedValueId(1),
        region: Region::Prologue,
    };
    let expansion = expand_op(&op, &[&source], &destination).expect("expands");
    assert!(expansion.scratch.is_empty());
    let reference = |location: Location| expansion.references[location.allocation.0 as usize];
    let input_block = |slot: u32| AllocationRef::Value { operand: 0, slot };
    let output_block = AllocationRef::Value {
        operand: OUTPUT_OPERAND,
        slot: 0,
    };
    assert_eq!(expansion.steps.len(), 2);
    let Step::Exchange { transfers, .. } = &expansion.steps[0] else {
        panic!("{:?}", expansion.steps[0]);
    };
    assert_eq!(transfers.len(), 1);
    assert_eq!(transfers.source_tile, vec![0]);
    assert_eq!(transfers.words, vec![4]);
    assert_eq!(reference(transfers.source_location[0]), input_block(0));
    assert_eq!(transfers.source_location[0].offset, 0);
    let destinations = transfers.destinations_of(0);
    assert_eq!(destinations.len(), 1);
    assert_eq!(destinations[0].tile, 1);
    assert_eq!(reference(destinations[0].location), output_block);
    assert_eq!(destinations[0].location.offset, 0);
    let Step::Copies { copies, .. } = &expansion.steps[1] else {
        panic!("{:?}", expansion.steps[1]);
    };
    assert_eq!(copies.len(), 1);
    let copy = copies[0];
    assert_eq!(copy.tile, 1);
    assert_eq!(reference(copy.source), input_block(1));
    assert_eq!(copy.source.offset, 0);
    assert_eq!(reference(copy.destination), output_block);
    assert_eq!(copy.destination.offset, 16);
    assert_eq!(copy.rows * copy.row_bytes, 16);
}

#[test]
fn a_rearrange_of_two_byte_runs_is_refused_as_misaligned() {
    // `[2, 3]` FP16 split into column blocks of 1: each run is 2 bytes,
    // which an exchange of 32-bit words cannot move.
    let source = format(
        Shape::matrix(2, 3),
        Precision::F16,
        ElementOrder::RowMajor,
        [1, 2, 1],
        1,
        MemoryClass::Standard,
        &[0, 1, 2],
    );
    let destination = format(
        Shape::matrix(2, 3),
        Precision::F16,
        ElementOrder::RowMajor,
        [1, 2, 3],
        1,
        MemoryClass::Standard,
        &[3],
    );
    let op = PlannedOp {
        name: String::from("narrow"),
        graph_op: None,
        kind: OpKind::View(ViewKind::Identity),
        plan: OpPlan::Rearrange {
            view: ViewKind::Identity,
            reason: RearrangeReason::OperandFormat,
        },
        inputs: vec![PlannedValueId(0)],
        output: PlannedValueId(1),
        region: Region::Prologue,
    };
    let error = expand_op(&op, &[&source], &destination).expect_err("misaligned");
    assert!(
        matches!(&error, ExpandError::Misaligned { op, bytes: 2, .. } if op == "narrow"),
        "{error:?}"
    );
}

#[test]
fn a_plan_that_does_not_fit_its_op_kind_is_an_error() {
    let op = PlannedOp {
        name: String::from("odd"),
        graph_op: None,
        kind: OpKind::Add,
        plan: OpPlan::Attention(crate::layout::cost::AttentionPlan {
            method: crate::layout::cost::AttentionMethod::Materialized,
            block_groups: 1,
            query_parts: 1,
            key_parts: 1,
            block_queries: 1,
            block_keys: 1,
            cycles: 0,
            working_bytes: 0,
            order: Default::default(),
            value_product: crate::numerics::dot::ProductInputs::Fp16,
        }),
        inputs: Vec::new(),
        output: PlannedValueId(0),
        region: Region::Body,
    };
    let block = two_row_blocks();
    let error = expand_op(&op, &[&block, &block], &block).expect_err("mismatch");
    assert!(
        matches!(&error, ExpandError::PlanMismatch { op, .. } if op == "odd"),
        "{error:?}"
    );
}

/// `x [8, 16]` FP16 (an input) times `w [16, 8]` FP8 plus `b [1, 8]`.
fn one_product() -> Graph {
    let mut graph = Graph::default();
    let x = graph.add_value(
        "x",
        Shape::matrix(8, 16),
        Precision::F16,
        ValueKind::Input,
        Region::Prologue,
    );
    let w = graph.add_value(
        "w",
        Shape::matrix(16, 8),
        Precision::F8,
        ValueKind::Weight { iterated: false },
        Region::Prologue,
    );
    let b = graph.add_value(
        "b",
        Shape::matrix(1, 8),
        Precision::F16,
        ValueKind::Weight { iterated: false },
        Region::Prologue,
    );
    let y = graph.add_op(
        "mm",
        OpKind::MatMul { bias: true },
        vec![x, w, b],
        Shape::matrix(8, 8),
        Precision::F16,
        Region::Prologue,
    );
    graph.output = Some(y);
    graph
}

fn one_tile() -> PlanningSettings {
    PlanningSettings {
        tiles: 1,
        reserved_bytes_per_tile: 65_536,
        accumulation: AccumulationPolicy::Fixed(Accumulation::F32),
        matrix_inputs: crate::numerics::dot::ProductInputs::Fp16,
        cost_table: crate::target::kernel_cost::CostTable::shipped(),
        candidate_limit: 8,
        forced_flash: None,
        fp8_cast: Default::default(),
    }
}

#[test]
fn one_product_on_one_tile_lowers_to_a_copy_and_one_kernel() {
    // On one tile the product is one block: rows 8, reduction 16, cols 8.
    // Its input arrives in ordinary memory and the matrix unit reads
    // interleaved memory, so `mm.a.rearrange` copies the whole 8 x 16 x 2
    // = 256-byte block on tile 0; the weight and bias are stored as the
    // product reads them.
    let (layouts, program) = {
        let settings = one_tile();
        let recipe = crate::numerics::dot::ProductRecipe::uniform(settings.matrix_inputs);
        lower(&one_product(), settings, &[], &recipe, &mut DirectCosts).expect("lowers")
    };
    let names: Vec<&str> = layouts.ops.iter().map(|op| op.name.as_str()).collect();
    assert_eq!(names, vec!["mm.a.rearrange", "mm"]);
    // x, w, b, y and the operand copy `mm.a`: one block each.
    assert_eq!(program.allocations.len(), 5);
    assert!(
        program
            .allocations
            .iter()
            .all(|allocation| allocation.tile == 0)
    );
    assert_eq!(program.steps.len(), 2);
    let Step::Copies { copies, .. } = &program.steps[0] else {
        panic!("{:?}", program.steps[0]);
    };
    assert_eq!(copies.len(), 1);
    assert_eq!(
        (copies[0].tile, copies[0].rows * copies[0].row_bytes),
        (0, 256)
    );
    let Step::Kernels { runs, .. } = &program.steps[1] else {
        panic!("{:?}", program.steps[1]);
    };
    assert_eq!(runs.len(), 1);
    let Kernel::MatMul {
        rows,
        reduction,
        cols,
        valid_rows,
        valid_reduction,
        valid_cols,
        output,
        ..
    } = runs[0].kernel
    else {
        panic!("{:?}", runs[0].kernel);
    };
    assert_eq!((rows, reduction, cols), (8, 16, 8));
    assert_eq!((valid_rows, valid_reduction, valid_cols), (8, 16, 8));
    assert!(matches!(
        output,
        MatMulOutput::Final {
            valid_rows: 8,
            valid_cols: 8,
            ..
        }
    ));
    // The copy writes what the kernel reads as `a`.
    let Kernel::MatMul { a, .. } = runs[0].kernel else {
        unreachable!()
    };
    assert_eq!(copies[0].destination.allocation, a.location.allocation);
    assert_eq!(
        program.allocation(a.location.allocation).class,
        MemoryClass::Interleaved
    );
    // The independent checker accepts the program.
    let check = check_program(&program).expect("a consistent program");
    assert!(check.locations > 0);
    let summary = summarize(&program);
    assert_eq!(
        (summary.total.kernel_runs, summary.total.local_copies),
        (1, 1)
    );
    assert_eq!(summary.total.exchanges, 0);
    // Bytes: x 256, w 8 columns of 16 = 128, b 16, y 8 rows of 16 = 128,
    // mm.a 256.
    assert_eq!(summary.allocated_bytes, 256 + 128 + 16 + 128 + 256);
    let by_value: BTreeMap<String, u32> = program
        .values
        .iter()
        .map(|binding| {
            (
                program.name(binding.name).to_string(),
                program.allocation(binding.allocations[0]).bytes,
            )
        })
        .collect();
    assert_eq!(by_value["w"], 128);
    assert_eq!(by_value["mm.a"], 256);
}
