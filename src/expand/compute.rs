//! Expansion of compute ops into per-tile kernel runs: distributed matrix
//! products (kernels that honour their blocks' valid extents, and the
//! reduce-scatter of partial sums), attention, and block-wise ops (norms, activations,
//! residual adds, rotary, casts).
//!
//! Reads only the op's plan and its operand formats; memory is named through
//! the builder's local references.

use super::expansion::{ExpansionBuilder, OUTPUT_OPERAND, local_provenance};
use super::partial_exchange::{PartialGrid, partial_transfers, received_partials};
use super::program::{
    AttentionKind, ElementType, GeluForm, Kernel, KernelRun, Location, MatMulOutput, Operand, Real,
    Reason, Step, ZeroFill,
};
use crate::layout::cost::{AttentionMethod, AttentionPlan, MatMulPlan};
use crate::layout::format::{MemoryClass, TensorFormat};
use crate::model::graph::{GeluKind, OpKind, Precision};
use crate::numerics::dot::Accumulation;

fn operand(
    builder: &mut ExpansionBuilder,
    index: u8,
    format: &TensorFormat,
    block: u32,
    replica: u32,
) -> Operand {
    Operand {
        location: builder.value(index, block * format.replicas + replica, 0),
        line: format.line_bytes(),
        matrix: format.matrix_bytes(),
    }
}

pub fn element_type(precision: Precision) -> ElementType {
    match precision {
        Precision::F32 => ElementType::F32,
        Precision::F16 => ElementType::F16,
        Precision::F8 | Precision::F8Activation { .. } => ElementType::F8,
    }
}

/// Byte sizes of a split product's partial sums: one row, and the largest
/// slice (the most rows a tile reduces, `MatMulPlan::slice_rows`): each
/// received slice's slot.
struct PartialSums {
    line: u32,
    slice: u32,
}

impl PartialSums {
    fn of(plan: &MatMulPlan) -> PartialSums {
        let line = plan.block_cols * plan.partial_bytes();
        PartialSums {
            line,
            slice: plan.slice_rows() * line,
        }
    }

    /// Byte offset and length of slice `slice` of row block `row_block`
    /// in a tile's partial sums, for an `m`-row product.
    fn slice_span(&self, plan: &MatMulPlan, m: u32, row_block: u32, slice: u32) -> (u32, u32) {
        let (first_row, rows) = plan.slice(m, row_block, slice);
        (first_row * self.line, rows * self.line)
    }
}

/// A distributed matrix product: one product kernel per (row, column,
/// reduction) block; with the reduction split, the partial sums are
/// reduce-scattered and each slice summed with the bias.
pub fn expand_matmul(
    builder: &mut ExpansionBuilder,
    plan: &MatMulPlan,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) {
    let (runs, partials) = matmul_runs(builder, plan, inputs, output);
    builder.push(Step::Kernels {
        provenance: local_provenance(Reason::Compute),
        runs,
    });
    let pk = plan.reduction_parts;
    if pk == 1 {
        return;
    }
    // Reduce-scatter: tile (i, j, k) sends row slice s of its partial sums
    // to tile (i, j, s), which adds the pk slices and the bias.
    let grid = PartialGrid {
        outer: plan.row_parts,
        middle: plan.col_parts,
        parts: pk,
    };
    let tile = |i: u32, j: u32, k: u32| plan.tile(i, j, k);
    let sums = PartialSums::of(plan);
    let m = inputs[0].shape.rows;
    let output_row_parts = output.parts()[1];
    let received = received_partials(
        builder,
        grid,
        tile,
        |i, _, s| i * pk + s < output_row_parts,
        sums.slice,
    );
    let transfers = partial_transfers(grid, tile, &partials, &received, sums.slice, |i, s| {
        sums.slice_span(plan, m, i, s)
    });
    builder.exchange(Reason::PartialExchange, transfers);
    let runs = reduce_bias_runs(builder, plan, inputs[2], output, (&partials, &received));
    builder.push(Step::Kernels {
        provenance: local_provenance(Reason::Compute),
        runs,
    });
}

/// The product kernel of every (i, j, k) block, and (with the reduction
/// split) the scratch of each one's partial sums.
fn matmul_runs(
    builder: &mut ExpansionBuilder,
    plan: &MatMulPlan,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) -> (Vec<KernelRun>, Vec<Location>) {
    let (a, weight, bias) = (inputs[0], inputs[1], inputs[2]);
    let (pm, pn, pk) = (plan.row_parts, plan.col_parts, plan.reduction_parts);
    let mut runs = Vec::new();
    let mut partials = Vec::new();
    for i in 0..pm {
        for j in 0..pn {
            for k in 0..pk {
                let tile = plan.tile(i, j, k);
                let a_block = a.block_index(0, i, k);
                let a_operand = operand(builder, 0, a, a_block, j);
                // Block padding is never read (the kernel honours valid
                // extents), so no zero fills: padding that no one writes
                // (a broadcast moves only valid elements) needs none.
                let a_valid = a.valid_extent(a_block);
                let weight_block = weight.block_index(0, k, j);
                let weight_operand = operand(builder, 1, weight, weight_block, i);
                let weight_valid = weight.valid_extent(weight_block);
                let valid_rows = a_valid[1].min(plan.block_rows);
                let valid_reduction = a_valid[2].min(weight_valid[1]).min(plan.block_reduction);
                let valid_cols = weight_valid[2].min(plan.block_cols);
                let (kernel_output, partial) =
                    product_output(builder, plan, bias, output, (i, j), tile);
                partials.extend(partial);
                runs.push(KernelRun {
                    tile,
                    kernel: Kernel::MatMul {
                        a: a_operand,
                        weight: weight_operand,
                        output: kernel_output,
                        rows: plan.block_rows,
                        reduction: plan.block_reduction,
                        cols: plan.block_cols,
                        valid_rows,
                        valid_reduction,
                        valid_cols,
                        accumulation: plan.accumulation,
                        inputs: plan.inputs,
                        activations: a.precision.activation_store(),
                    },
                });
            }
        }
    }
    (runs, partials)
}

/// Where the product of block (i, j, k) on `tile` goes: with the reduction
/// whole, straight into output block (i, j) plus the bias; else into a
/// scratch of partial sums on the tile (also returned).
fn product_output(
    builder: &mut ExpansionBuilder,
    plan: &MatMulPlan,
    bias: &TensorFormat,
    output: &TensorFormat,
    (i, j): (u32, u32),
    tile: u32,
) -> (MatMulOutput, Option<Location>) {
    if plan.reduction_parts == 1 {
        let output_block = output.block_index(0, i, j);
        let extent = output.valid_extent(output_block);
        let kernel_output = MatMulOutput::Final {
            output: operand(builder, OUTPUT_OPERAND, output, output_block, 0),
            bias: operand(builder, 2, bias, j, i),
            valid_rows: extent[1],
            valid_cols: extent[2],
        };
        (kernel_output, None)
    } else {
        let partial_line = PartialSums::of(plan).line;
        let location = builder.scratch(
            tile,
            plan.block_rows * partial_line,
            MemoryClass::Standard,
            Reason::PartialSums,
        );
        let kernel_output = MatMulOutput::Partial(Operand {
            location,
            line: partial_line,
            matrix: plan.block_rows * partial_line,
        });
        (kernel_output, Some(location))
    }
}

/// The reduce-bias kernel of every tile (i, j, s) that received slices:
/// its own slice s plus the received ones plus the bias, into output block
/// row `i * pk + s`.
fn reduce_bias_runs(
    builder: &mut ExpansionBuilder,
    plan: &MatMulPlan,
    bias: &TensorFormat,
    output: &TensorFormat,
    (partials, received): (&[Location], &[Option<Location>]),
) -> Vec<KernelRun> {
    let (pm, pn, pk) = (plan.row_parts, plan.col_parts, plan.reduction_parts);
    let sums = PartialSums::of(plan);
    let (partial_line, slot_bytes) = (sums.line, sums.slice);
    let m = output.shape.rows;
    let coordinate = |i: u32, j: u32, k: u32| ((i * pn + j) * pk + k) as usize;
    let partial_type = match plan.accumulation {
        Accumulation::F32 => ElementType::F32,
        Accumulation::F16 => ElementType::F16,
    };
    let mut runs = Vec::new();
    for i in 0..pm {
        for j in 0..pn {
            for s in 0..pk {
                let Some(buffer) = received[coordinate(i, j, s)] else {
                    continue;
                };
                let output_block = output.block_index(0, i * pk + s, j);
                let extent = output.valid_extent(output_block);
                let local = partials[coordinate(i, j, s)];
                let (offset, slice_bytes) = sums.slice_span(plan, m, i, s);
                runs.push(KernelRun {
                    tile: plan.tile(i, j, s),
                    kernel: Kernel::ReduceBias {
                        local: Operand {
                            location: Location { offset, ..local },
                            line: partial_line,
                            matrix: slice_bytes,
                        },
                        received: Operand {
                            location: buffer,
                            line: partial_line,
                            matrix: slot_bytes,
                        },
                        received_slice_bytes: slot_bytes,
                        count: pk,
                        partial: partial_type,
                        bias: operand(builder, 2, bias, j, i * pk + s),
                        output: operand(builder, OUTPUT_OPERAND, output, output_block, 0),
                        rows: extent[1],
                        cols: extent[2],
                    },
                });
            }
        }
    }
    runs
}

/// The kernel flavour of an attention plan.
fn attention_kind(plan: &AttentionPlan) -> AttentionKind {
    match plan.method {
        AttentionMethod::Materialized => AttentionKind::Materialized,
        AttentionMethod::Flash { key_block } => AttentionKind::Flash { key_block },
    }
}

/// Bytes of one row slice of an attention's partial statistics (the
/// `block_queries / key_parts` rows of every group a key tile combines).
fn statistics_slice_bytes(plan: &AttentionPlan, dimension: u32) -> u32 {
    let row_bytes = AttentionPlan::partial_row_bytes(dimension);
    let slice_rows = plan.block_queries / plan.key_parts;
    slice_rows * plan.block_groups * row_bytes
}

/// Distributed attention: one kernel per (group, query, key) block; with
/// the keys split, partial statistics are reduce-scattered and each slice
/// combined into the output.
pub fn expand_attention(
    builder: &mut ExpansionBuilder,
    plan: &AttentionPlan,
    scale: f32,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) {
    let (runs, partials, fills) = attention_runs(builder, plan, scale, inputs, output);
    // The partial kernels run whole query blocks through the matrix unit:
    // the rows past a block's valid queries are zeroed on the tile first,
    // after the receives that deliver the valid rows (disjoint bytes).
    builder.push(Step::Fills {
        provenance: local_provenance(Reason::Padding),
        fills,
    });
    builder.push(Step::Kernels {
        provenance: local_provenance(Reason::Compute),
        runs,
    });
    let key_parts = plan.key_parts;
    if key_parts == 1 {
        return;
    }
    // Reduce-scatter the partial statistics: key tile k sends query slice s
    // to key tile s of the same (group, query) block.
    let grid = PartialGrid {
        outer: inputs[0].parts()[0],
        middle: plan.query_parts,
        parts: key_parts,
    };
    let tile = |group_block: u32, query_block: u32, key_block: u32| {
        plan.tile(group_block, query_block, key_block)
    };
    let slice_bytes = statistics_slice_bytes(plan, inputs[0].shape.cols);
    let output_row_parts = output.parts()[1];
    let received = received_partials(
        builder,
        grid,
        tile,
        |_, query_block, slice| query_block * key_parts + slice < output_row_parts,
        slice_bytes,
    );
    let transfers = partial_transfers(grid, tile, &partials, &received, slice_bytes, |_, s| {
        (s * slice_bytes, slice_bytes)
    });
    builder.exchange(Reason::PartialExchange, transfers);
    let runs = combine_runs(builder, plan, inputs[0], output, (&partials, &received));
    builder.push(Step::Kernels {
        provenance: local_provenance(Reason::Compute),
        runs,
    });
}

/// Zero fills of the padding rows of one query block operand that a
/// partial attention kernel on `tile` reads whole (`queries` rows of each
/// of `groups` groups; the query value's producer writes only the first
/// `valid_rows`): the rows from `valid_rows` to the block's end of each
/// group, as one fill when the groups' padding is evenly spaced (rows
/// exactly one line long), else one per group.
pub(super) fn query_padding_fills(
    tile: u32,
    operand: Operand,
    (groups, valid_rows, queries): (u32, u32, u32),
    dimension: u32,
) -> Vec<ZeroFill> {
    if valid_rows >= queries || groups == 0 {
        return Vec::new();
    }
    let padding_rows = queries - valid_rows;
    let row_bytes = dimension * 2;
    let first = Location {
        offset: operand.location.offset + valid_rows * operand.line,
        ..operand.location
    };
    if operand.line == row_bytes {
        return vec![ZeroFill {
            tile,
            destination: first,
            row_bytes: padding_rows * row_bytes,
            rows: groups,
            stride: operand.matrix,
        }];
    }
    (0..groups)
        .map(|group| ZeroFill {
            tile,
            destination: Location {
                offset: first.offset + group * operand.matrix,
                ..first
            },
            row_bytes,
            rows: padding_rows,
            stride: operand.line,
        })
        .collect()
}

/// The attention kernel of every (group, query, key) block: whole when the
/// keys are not split, else partial statistics into a scratch of their own
/// (with the zero fills of the query blocks' padding rows they read).
fn attention_runs(
    builder: &mut ExpansionBuilder,
    plan: &AttentionPlan,
    scale: f32,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) -> (Vec<KernelRun>, Vec<Location>, Vec<ZeroFill>) {
    let (query, key, value) = (inputs[0], inputs[1], inputs[2]);
    let dimension = query.shape.cols;
    let (query_parts, key_parts) = (plan.query_parts, plan.key_parts);
    let group_blocks = query.parts()[0];
    let kind = attention_kind(plan);
    // With FP8 `PV` inputs the scratch also holds the value block's FP8 cast.
    let value_cast = AttentionPlan::fp8_value_bytes(
        plan.value_product,
        u64::from(plan.block_groups),
        u64::from(plan.block_keys),
        dimension,
    ) as u32;
    let scratch_bytes = value_cast
        + match kind {
            AttentionKind::Materialized => plan.block_queries * plan.block_keys * 4,
            AttentionKind::Flash { key_block } => {
                plan.block_queries * (key_block + dimension + 2) * 4
            }
        };
    let row_bytes = AttentionPlan::partial_row_bytes(dimension);
    let mut runs = Vec::new();
    let mut partials = Vec::new();
    let mut fills = Vec::new();
    let mut filled = std::collections::HashSet::new();
    for group_block in 0..group_blocks {
        for query_block in 0..query_parts {
            let query_index = query.block_index(group_block, query_block, 0);
            let valid = query.valid_extent(query_index);
            for key_block in 0..key_parts {
                let tile = plan.tile(group_block, query_block, key_block);
                let key_index = key.block_index(group_block, key_block, 0);
                let keys = key.valid_extent(key_index)[1];
                let q = operand(builder, 0, query, query_index, key_block);
                let k = operand(builder, 1, key, key_index, query_block);
                let v = operand(builder, 2, value, key_index, query_block);
                let scratch = builder.scratch(
                    tile,
                    scratch_bytes,
                    MemoryClass::Standard,
                    Reason::AttentionScratch,
                );
                let kernel = if key_parts == 1 {
                    Kernel::Attention {
                        query: q,
                        key: k,
                        value: v,
                        output: operand(builder, OUTPUT_OPERAND, output, query_index, 0),
                        scratch,
                        groups: valid[0],
                        queries: valid[1],
                        keys,
                        dimension,
                        scale: Real::new(scale),
                        kind,
                        store: output.precision.activation_store(),
                        value_product: plan.value_product,
                    }
                } else {
                    let partial = builder.scratch(
                        tile,
                        plan.block_queries * plan.block_groups * row_bytes,
                        MemoryClass::Standard,
                        Reason::PartialSums,
                    );
                    partials.push(partial);
                    if filled.insert((tile, q.location)) {
                        fills.extend(query_padding_fills(
                            tile,
                            q,
                            (valid[0], valid[1], plan.block_queries),
                            dimension,
                        ));
                    }
                    Kernel::AttentionPartial {
                        query: q,
                        key: k,
                        value: v,
                        partial,
                        groups: valid[0],
                        stride_groups: plan.block_groups,
                        queries: plan.block_queries,
                        keys,
                        dimension,
                        scale: Real::new(scale),
                        kind,
                        value_product: plan.value_product,
                    }
                };
                runs.push(KernelRun { tile, kernel });
            }
        }
    }
    (runs, partials, fills)
}

/// The combine kernel of every key tile (group, query, slice) that
/// received statistics: its own slice plus the received ones, normalised
/// into output block row `query * key_parts + slice`.
fn combine_runs(
    builder: &mut ExpansionBuilder,
    plan: &AttentionPlan,
    query: &TensorFormat,
    output: &TensorFormat,
    (partials, received): (&[Location], &[Option<Location>]),
) -> Vec<KernelRun> {
    let dimension = query.shape.cols;
    let (query_parts, key_parts) = (plan.query_parts, plan.key_parts);
    let group_blocks = query.parts()[0];
    let slice_bytes = statistics_slice_bytes(plan, dimension);
    let coordinate = |g: u32, q: u32, k: u32| ((g * query_parts + q) * key_parts + k) as usize;
    let mut runs = Vec::new();
    for group_block in 0..group_blocks {
        for query_block in 0..query_parts {
            for slice in 0..key_parts {
                let Some(buffer) = received[coordinate(group_block, query_block, slice)] else {
                    continue;
                };
                let output_block =
                    output.block_index(group_block, query_block * key_parts + slice, 0);
                let extent = output.valid_extent(output_block);
                let local = partials[coordinate(group_block, query_block, slice)];
                runs.push(KernelRun {
                    tile: plan.tile(group_block, query_block, slice),
                    kernel: Kernel::AttentionCombine {
                        local: Location {
                            offset: slice * slice_bytes,
                            ..local
                        },
                        received: buffer,
                        slice_bytes,
                        count: key_parts,
                        output: operand(builder, OUTPUT_OPERAND, output, output_block, 0),
                        groups: extent[0],
                        stride_groups: plan.block_groups,
                        queries: extent[1],
                        dimension,
                        store: output.precision.activation_store(),
                    },
                });
            }
        }
    }
    runs
}

/// Ops computed independently on every block (and replica) of the output.
pub fn expand_blockwise(
    builder: &mut ExpansionBuilder,
    kind: &OpKind,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) {
    let parts = output.parts();
    let mut runs = Vec::new();
    for block in 0..output.block_count() {
        let position = output.block_position(block);
        let valid = output.valid_extent(block);
        for replica in 0..output.replicas {
            let tile = output.tile(block, replica);
            let out = operand(builder, OUTPUT_OPERAND, output, block, replica);
            let kernel = match kind {
                OpKind::LayerNorm { epsilon } => {
                    let vector_replica =
                        (position[0] * parts[1] + position[1]) * output.replicas + replica;
                    Kernel::LayerNorm {
                        input: operand(builder, 0, inputs[0], block, replica),
                        gamma: operand(builder, 1, inputs[1], position[2], vector_replica),
                        beta: operand(builder, 2, inputs[2], position[2], vector_replica),
                        output: out,
                        rows: valid[0] * valid[1],
                        cols: valid[2],
                        epsilon: Real::new(*epsilon),
                        store: output.precision.activation_store(),
                    }
                }
                OpKind::Gelu { kind } => Kernel::Gelu {
                    input: operand(builder, 0, inputs[0], block, replica),
                    output: out,
                    groups: valid[0],
                    rows: valid[1],
                    cols: valid[2],
                    form: match kind {
                        GeluKind::Tanh => GeluForm::Tanh,
                        GeluKind::Erf => GeluForm::Erf,
                    },
                    store: output.precision.activation_store(),
                },
                OpKind::Add => Kernel::Add {
                    a: operand(builder, 0, inputs[0], block, replica),
                    b: operand(builder, 1, inputs[1], block, replica),
                    output: out,
                    groups: valid[0],
                    rows: valid[1],
                    cols: valid[2],
                },
                OpKind::Rotary { grid, class_token } => Kernel::Rotary {
                    input: operand(builder, 0, inputs[0], block, replica),
                    output: out,
                    groups: valid[0],
                    rows: valid[1],
                    cols: valid[2],
                    first_row: output.block_start(1, position[1]),
                    first_col: position[2] * output.block[2],
                    head_dim: output.shape.cols,
                    grid: *grid,
                    class_token: *class_token,
                },
                OpKind::Cast => Kernel::Cast {
                    input: operand(builder, 0, inputs[0], block, replica),
                    output: out,
                    from: element_type(inputs[0].precision),
                    to: element_type(output.precision),
                    groups: valid[0],
                    rows: valid[1],
                    cols: valid[2],
                },
                OpKind::MatMul { .. } | OpKind::Attention { .. } | OpKind::View(_) => continue,
            };
            runs.push(KernelRun { tile, kernel });
        }
    }
    builder.push(Step::Kernels {
        provenance: local_provenance(Reason::Compute),
        runs,
    });
}
