//! Tests of expansion's plumbing on hand-built inputs: the location visitor
//! reaches every location of every kernel and step kind exactly once
//! (counted by hand), the program summary's counts (the Repeat body once,
//! its exchanges executed once per iteration), assembly's numbering of
//! allocations (values' block-replicas in planned-value order, then each
//! op's scratch) and its remapping of every local reference, the prologue /
//! Repeat / epilogue splice, an identity rearrange split into a transfer and
//! a local copy, and a one-product graph lowered on one tile through the
//! database-free path.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::expansion::{AllocationRef, OUTPUT_OPERAND, OpExpansion, ScratchAllocation};
use super::program::*;
use super::summary::summarize;
use super::validate::check_program;
use super::visit::step_locations_mut;
use super::*;
use crate::direct::lower;
use crate::layout::format::{ElementOrder, MemoryClass, TensorFormat};
use crate::layout::plan::{Layouts, PlannedRepeat, PlannedValue, PlannedValueId, RearrangeReason};
use crate::layout::planner::{AccumulationPolicy, DirectCosts, PlanningSettings};
use crate::model::graph::{Graph, Precision, Region, Shape, ValueKind, ViewKind};
use crate::numerics::dot::Accumulation;

fn at(allocation: u32, offset: u32) -> Location {
    Location {
        allocation: AllocationId(allocation),
        offset,
    }
}

fn operand(allocation: u32) -> Operand {
    Operand {
        location: at(allocation, 0),
        line: 8,
        matrix: 64,
    }
}

fn provenance(reason: Reason) -> Provenance {
    Provenance {
        op: 0,
        value: None,
        reason,
    }
}

/// The allocation ids a visitor reaches in `kernel`, in visiting order.
fn kernel_visits(mut kernel: Kernel) -> Vec<u32> {
    let mut visited = Vec::new();
    kernel.visit_accesses_mut(&mut |_, _, location| visited.push(location.allocation.0));
    visited
}

fn sorted(mut ids: Vec<u32>) -> Vec<u32> {
    ids.sort_unstable();
    ids
}

#[test]
fn every_kernel_location_is_visited_once() {
    let real = Real::new(1.0);
    // Each kernel names distinct allocations 0, 1, 2, ...: the visitor must
    // reach each of them once.
    let cases: Vec<(Kernel, u32)> = vec![
        (
            Kernel::MatMul {
                a: operand(0),
                weight: operand(1),
                output: MatMulOutput::Final {
                    output: operand(2),
                    bias: operand(3),
                    valid_rows: 1,
                    valid_cols: 1,
                },
                rows: 1,
                reduction: 4,
                cols: 2,
                valid_rows: 1,
                valid_reduction: 4,
                valid_cols: 2,
                accumulation: Accumulation::F32,
                inputs: crate::numerics::dot::ProductInputs::Fp16,
                activations: crate::numerics::dot::ActivationStore::F16,
            },
            4,
        ),
        (
            Kernel::MatMul {
                a: operand(0),
                weight: operand(1),
                output: MatMulOutput::Partial(operand(2)),
                rows: 1,
                reduction: 4,
                cols: 2,
                valid_rows: 1,
                valid_reduction: 4,
                valid_cols: 2,
                accumulation: Accumulation::F16,
                inputs: crate::numerics::dot::ProductInputs::Fp16,
                activations: crate::numerics::dot::ActivationStore::F16,
            },
            3,
        ),
        (
            Kernel::ReduceBias {
                local: operand(0),
                received: operand(1),
                received_slice_bytes: 8,
                count: 2,
                partial: ElementType::F32,
                bias: operand(2),
                output: operand(3),
                rows: 1,
                cols: 2,
            },
            4,
        ),
        (
            Kernel::LayerNorm {
                input: operand(0),
                gamma: operand(1),
                beta: operand(2),
                output: operand(3),
                rows: 1,
                cols: 2,
                epsilon: real,
                store: crate::numerics::dot::ActivationStore::F16,
            },
            4,
        ),
        (
            Kernel::Gelu {
                input: operand(0),
                output: operand(1),
                groups: 1,
                rows: 1,
                cols: 2,
                form: GeluForm::Erf,
                store: crate::numerics::dot::ActivationStore::F16,
            },
            2,
        ),
        (
            Kernel::Add {
                a: operand(0),
                b: operand(1),
                output: operand(2),
                groups: 1,
                rows: 1,
                cols: 2,
            },
            3,
        ),
        (
            Kernel::Rotary {
                input: operand(0),
                output: operand(1),
                groups: 1,
                rows: 1,
                cols: 2,
                first_row: 0,
                first_col: 0,
                head_dim: 2,
                grid: 1,
                class_token: true,
            },
            2,
        ),
        (
            Kernel::Attention {
                query: operand(0),
                key: operand(1),
                value: operand(2),
                output: operand(3),
                scratch: at(4, 0),
                groups: 1,
                queries: 1,
                keys: 1,
                dimension: 2,
                scale: real,
                kind: AttentionKind::Materialized,
                store: crate::numerics::dot::ActivationStore::F16,
                value_product: crate::numerics::dot::ProductInputs::Fp16,
            },
            5,
        ),
        (
            Kernel::AttentionPartial {
                query: operand(0),
                key: operand(1),
                value: operand(2),
                partial: at(3, 0),
                groups: 1,
                stride_groups: 1,
                queries: 1,
                keys: 1,
                dimension: 2,
                scale: real,
                kind: AttentionKind::Flash { key_block: 1 },
                value_product: crate::numerics::dot::ProductInputs::Fp16,
            },
            4,
        ),
        (
            Kernel::AttentionCombine {
                local: at(0, 0),
                received: at(1, 0),
                slice_bytes: 16,
                count: 2,
                output: operand(2),
                groups: 1,
                stride_groups: 1,
                queries: 1,
                dimension: 2,
                store: crate::numerics::dot::ActivationStore::F16,
            },
            3,
        ),
        (
            Kernel::Cast {
                input: operand(0),
                output: operand(1),
                from: ElementType::F16,
                to: ElementType::F32,
                groups: 1,
                rows: 1,
                cols: 2,
            },
            2,
        ),
    ];
    for (kernel, locations) in cases {
        let visited = sorted(kernel_visits(kernel));
        assert_eq!(visited, (0..locations).collect::<Vec<_>>(), "{kernel:?}");
        // What the kernel writes is one of the locations visited.
        for written in kernel.writes() {
            assert!(visited.contains(&written.0), "{kernel:?}");
        }
    }
}

/// A Repeat whose body holds one step of every kind, naming allocations
/// 0..19 once each: a product with a final output (0..4), attention
/// (4..9), two copies (9..13), a fill (13), an exchange of two transfers to
/// three destinations (14..19), and a checkpoint (none).
fn every_step_kind() -> Step {
    let mut transfers = TransferList::default();
    transfers.push(
        0,
        at(14, 0),
        2,
        &[
            Destination {
                tile: 1,
                location: at(16, 0),
            },
            Destination {
                tile: 2,
                location: at(17, 0),
            },
        ],
    );
    transfers.push(
        1,
        at(15, 4),
        1,
        &[Destination {
            tile: 0,
            location: at(18, 8),
        }],
    );
    let copy = |source: u32, destination: u32| LocalCopy {
        tile: 0,
        source: at(source, 0),
        destination: at(destination, 0),
        row_bytes: 4,
        rows: 1,
        source_stride: 4,
        destination_stride: 4,
    };
    Step::Repeat {
        iterations: 2,
        body: vec![
            Step::Kernels {
                provenance: provenance(Reason::Compute),
                runs: vec![
                    KernelRun {
                        tile: 0,
                        kernel: Kernel::MatMul {
                            a: operand(0),
                            weight: operand(1),
                            output: MatMulOutput::Final {
                                output: operand(2),
                                bias: operand(3),
                                valid_rows: 1,
                                valid_cols: 2,
                            },
                            rows: 1,
                            reduction: 4,
                            cols: 2,
                            valid_rows: 1,
                            valid_reduction: 4,
                            valid_cols: 2,
                            accumulation: Accumulation::F32,
                            inputs: crate::numerics::dot::ProductInputs::Fp16,
                            activations: crate::numerics::dot::ActivationStore::F16,
                        },
                    },
                    KernelRun {
                        tile: 1,
                        kernel: Kernel::Attention {
                            query: operand(4),
                            key: operand(5),
                            value: operand(6),
                            output: operand(7),
                            scratch: at(8, 0),
                            groups: 1,
                            queries: 1,
                            keys: 1,
                            dimension: 2,
                            scale: Real::new(1.0),
                            kind: AttentionKind::Materialized,
                            store: crate::numerics::dot::ActivationStore::F16,
                            value_product: crate::numerics::dot::ProductInputs::Fp16,
                        },
                    },
                ],
            },
            Step::Copies {
                provenance: provenance(Reason::Rearrange),
                copies: vec![copy(9, 10), copy(11, 12)],
            },
            Step::Checkpoint { name: 0 },
            Step::Fills {
                provenance: provenance(Reason::Padding),
                fills: vec![ZeroFill {
                    tile: 0,
                    destination: at(13, 0),
                    row_bytes: 4,
                    rows: 1,
                    stride: 4,
                }],
            },
            Step::Exchange {
                provenance: provenance(Reason::Rearrange),
                transfers,
            },
        ],
    }
}

#[test]
fn step_locations_reach_every_location_once_and_keep_the_changes() {
    let mut step = every_step_kind();
    let mut visited = Vec::new();
    step_locations_mut(&mut step, &mut |location| {
        visited.push(location.allocation.0);
        location.allocation.0 += 100;
    });
    assert_eq!(sorted(visited), (0..19).collect::<Vec<_>>());
    // The changes are made in place: every location now names 100..119.
    let mut after = Vec::new();
    step_locations_mut(&mut step, &mut |location| after.push(location.allocation.0));
    assert_eq!(sorted(after), (100..119).collect::<Vec<_>>());
    // Offsets are left alone.
    let mut offsets = Vec::new();
    step_locations_mut(&mut step, &mut |location| offsets.push(location.offset));
    assert_eq!(offsets.iter().filter(|&&offset| offset != 0).count(), 2);
    assert!(offsets.contains(&4) && offsets.contains(&8));
}

fn allocation(tile: u32, bytes: u32, iterations: u32) -> Allocation {
    Allocation {
        tile,
        bytes,
        alignment: 4,
        class: MemoryClass::Standard,
        alias_group: 0,
        iterations,
        provenance: provenance(Reason::ValueBlock),
    }
}

#[test]
fn the_summary_counts_the_body_once_and_its_exchanges_per_iteration() {
    let mut top_exchange = TransferList::default();
    top_exchange.push(
        0,
        at(0, 0),
        5,
        &[Destination {
            tile: 1,
            location: at(1, 0),
        }],
    );
    let program = LowProgram {
        tiles: 4,
        names: vec![String::from("op")],
        // 100 x 3 + 50 + 8 = 358 bytes.
        allocations: vec![
            allocation(0, 100, 3),
            allocation(1, 50, 1),
            allocation(2, 8, 1),
        ],
        steps: vec![
            Step::Exchange {
                provenance: provenance(Reason::Rearrange),
                transfers: top_exchange,
            },
            Step::Checkpoint { name: 0 },
            every_step_kind(),
            Step::Checkpoint { name: 0 },
        ],
        values: Vec::new(),
    };
    let summary = summarize(&program);
    assert_eq!(summary.tiles, 4);
    assert_eq!(summary.allocations, 3);
    assert_eq!(summary.allocated_bytes, 358);
    assert_eq!(summary.repeat_iterations, 2);
    // The body: 2 kernel runs, 2 copies of one row each, 1 fill, 1
    // exchange of 2 transfers to 3 destinations moving 2 + 1 words.
    let body = summary.repeat_body;
    assert_eq!(
        (body.kernel_runs, body.local_copies, body.copy_rows),
        (2, 2, 2)
    );
    assert_eq!(body.zero_fills, 1);
    assert_eq!(
        (
            body.exchanges,
            body.transfers,
            body.transfer_destinations,
            body.transfer_words
        ),
        (1, 2, 3, 3)
    );
    // Everything: the body once plus the top-level exchange of 5 words.
    let total = summary.total;
    assert_eq!(total.kernel_runs, 2);
    assert_eq!(
        (
            total.exchanges,
            total.transfers,
            total.transfer_destinations,
            total.transfer_words
        ),
        (2, 3, 4, 8)
    );
    // Executed: the top-level exchange once, the body's twice.
    assert_eq!(summary.executed_exchanges, 1 + 2);
}

mod assembly;
mod padding;
