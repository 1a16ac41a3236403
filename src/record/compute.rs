//! The record files of compute steps (kernels, local copies, fills): what
//! runs (kernel shapes and how many runs of each, copy and fill bytes), on
//! how many tiles, and the step's modelled cycles. Steps are taken from the
//! phase groups' program in the order the profile numbers them.

use std::collections::BTreeMap;
use std::hash::Hash;

use super::identity::{Detail, RecordError};
use super::sheet::{Sheet, hex16, histogram};
use crate::estimate::profile::ProgramProfile;
use crate::expand::program::{AttentionKind, Kernel, MatMulOutput, Step};
use crate::session::{Session, StepKind};
use crate::text::thousands;

/// The shape of a kernel run: its kind and block dimensions, without its
/// operands' addresses.
pub fn kernel_shape(kernel: &Kernel) -> String {
    match *kernel {
        Kernel::MatMul {
            rows,
            reduction,
            cols,
            valid_rows,
            valid_reduction,
            valid_cols,
            accumulation,
            output,
            ..
        } => format!(
            "matmul {rows}x{reduction}x{cols} (valid {valid_rows}x{valid_reduction}x{valid_cols}) {:?} {}",
            accumulation,
            match output {
                MatMulOutput::Partial(_) => "partial",
                MatMulOutput::Final { .. } => "final",
            }
        ),
        Kernel::ReduceBias {
            count,
            partial,
            rows,
            cols,
            ..
        } => format!("reduce_bias {rows}x{cols} of {count} {partial:?} slices"),
        Kernel::LayerNorm { rows, cols, .. } => format!("layer_norm {rows}x{cols}"),
        Kernel::Gelu {
            groups,
            rows,
            cols,
            form,
            ..
        } => format!("gelu {groups}x{rows}x{cols} {form:?}"),
        Kernel::Add {
            groups, rows, cols, ..
        } => format!("add {groups}x{rows}x{cols}"),
        Kernel::Rotary {
            groups,
            rows,
            cols,
            head_dim,
            grid,
            class_token,
            ..
        } => format!(
            "rotary {groups}x{rows}x{cols} head {head_dim} grid {grid}{}",
            if class_token { " class" } else { "" }
        ),
        Kernel::Attention {
            groups,
            queries,
            keys,
            dimension,
            kind,
            value_product,
            ..
        } => format!(
            "attention {groups}x{queries}x{keys}x{dimension} {}{}",
            attention_kind(kind),
            value_product_inputs(value_product)
        ),
        Kernel::AttentionPartial {
            groups,
            stride_groups,
            queries,
            keys,
            dimension,
            kind,
            value_product,
            ..
        } => format!(
            "attention_partial {groups}/{stride_groups}x{queries}x{keys}x{dimension} {}{}",
            attention_kind(kind),
            value_product_inputs(value_product)
        ),
        Kernel::AttentionCombine {
            count,
            groups,
            stride_groups,
            queries,
            dimension,
            ..
        } => format!("attention_combine {groups}/{stride_groups}x{queries}x{dimension} of {count}"),
        Kernel::Cast {
            from,
            to,
            groups,
            rows,
            cols,
            ..
        } => format!("cast {groups}x{rows}x{cols} {from:?}->{to:?}"),
    }
}

fn attention_kind(kind: AttentionKind) -> String {
    match kind {
        AttentionKind::Materialized => "materialized".to_string(),
        AttentionKind::Flash { key_block } => format!("flash keys {key_block}"),
    }
}

/// ` pv fp8` for an attention whose `PV` product takes FP8 inputs; nothing
/// for FP16 (the shape of an FP16 attention, as before FP8 `PV` existed).
fn value_product_inputs(inputs: crate::numerics::dot::ProductInputs) -> &'static str {
    match inputs {
        crate::numerics::dot::ProductInputs::Fp16 => "",
        crate::numerics::dot::ProductInputs::Fp8 { .. } => " pv fp8",
    }
}

/// The program's compute steps in the profile's order (Repeat bodies once).
fn compute_steps<'program>(steps: &'program [Step], into: &mut Vec<&'program Step>) {
    for step in steps {
        match step {
            Step::Repeat { body, .. } => compute_steps(body, into),
            Step::Checkpoint { .. } | Step::Exchange { .. } => {}
            _ => into.push(step),
        }
    }
}

/// Every compute step's key and record, in program order.
pub fn sheets(
    session: &Session,
    profile: &ProgramProfile,
    detail: Detail,
) -> Result<Vec<(String, Sheet)>, RecordError> {
    let groups = session
        .phase_groups()
        .map_err(crate::session::BackendError::from)?;
    let mut steps = Vec::new();
    compute_steps(&groups.steps, &mut steps);
    let entries: Vec<_> = profile
        .entries
        .iter()
        .filter(|entry| entry.kind.is_compute())
        .collect();
    if entries.len() != steps.len() {
        return Err(RecordError::Inconsistent(format!(
            "the profile has {} compute steps and the program {}",
            entries.len(),
            steps.len()
        )));
    }
    let mut sheets = Vec::with_capacity(steps.len());
    for (entry, step) in entries.into_iter().zip(steps) {
        let mut sheet = Sheet::titled(format!("compute {}", entry.key));
        sheet.section("compute");
        sheet.fact("op", &entry.op);
        sheet.fact("kind", entry.kind.name());
        sheet.count("executions", entry.executions);
        let mut lines = Vec::new();
        // Runs by tile and shape, never by allocation number (global
        // numbers move when another op's allocations change).
        let mut content = crate::cache::key::StableHasher::default();
        match (entry.kind, step) {
            (StepKind::Kernels, Step::Kernels { runs, .. }) => {
                let mut shapes: BTreeMap<String, (u64, std::collections::BTreeSet<u32>)> =
                    BTreeMap::new();
                for run in runs {
                    let text = kernel_shape(&run.kernel);
                    (run.tile, &text).hash(&mut content);
                    if detail == Detail::Full {
                        lines.push((format!("tile {}", run.tile), text.clone()));
                    }
                    let shape = shapes.entry(text).or_default();
                    shape.0 += 1;
                    shape.1.insert(run.tile);
                }
                sheet.count("kernel runs", runs.len() as u64);
                for (shape, (count, tiles)) in &shapes {
                    sheet.fact(
                        shape,
                        format!(
                            "{} runs on {} tiles",
                            thousands(*count),
                            thousands(tiles.len() as u64)
                        ),
                    );
                }
            }
            (StepKind::Copies, Step::Copies { copies, .. }) => {
                for copy in copies {
                    (
                        copy.tile,
                        copy.rows,
                        copy.row_bytes,
                        copy.source_stride,
                        copy.destination_stride,
                        copy.source.offset,
                        copy.destination.offset,
                    )
                        .hash(&mut content);
                }
                sheet.count("copies", copies.len() as u64);
                sheet.count(
                    "bytes",
                    copies
                        .iter()
                        .map(|copy| u64::from(copy.row_bytes) * u64::from(copy.rows))
                        .sum(),
                );
                sheet.fact(
                    "copies by bytes",
                    histogram(
                        copies
                            .iter()
                            .map(|copy| u64::from(copy.row_bytes) * u64::from(copy.rows)),
                    ),
                );
                if detail == Detail::Full {
                    for copy in copies {
                        lines.push((
                            format!("tile {}", copy.tile),
                            format!(
                                "{} rows of {} B, strides {} / {}",
                                copy.rows,
                                copy.row_bytes,
                                copy.source_stride,
                                copy.destination_stride
                            ),
                        ));
                    }
                }
            }
            (StepKind::Fills, Step::Fills { fills, .. }) => {
                for fill in fills {
                    (
                        fill.tile,
                        fill.rows,
                        fill.row_bytes,
                        fill.stride,
                        fill.destination.offset,
                    )
                        .hash(&mut content);
                }
                sheet.count("fills", fills.len() as u64);
                sheet.count(
                    "bytes",
                    fills
                        .iter()
                        .map(|fill| u64::from(fill.row_bytes) * u64::from(fill.rows))
                        .sum(),
                );
                if detail == Detail::Full {
                    for fill in fills {
                        lines.push((
                            format!("tile {}", fill.tile),
                            format!(
                                "{} rows of {} B, stride {}",
                                fill.rows, fill.row_bytes, fill.stride
                            ),
                        ));
                    }
                }
            }
            _ => {
                return Err(RecordError::Inconsistent(format!(
                    "compute step {} is a {} step in the profile but not in the program",
                    entry.key,
                    entry.kind.name()
                )));
            }
        }
        sheet.count("busy tiles", u64::from(entry.busy_tiles));
        sheet.fact("content digest", hex16(&content.digest().0));
        sheet.section("estimate");
        sheet.count("cycles per execution", entry.cycles);
        sheet.count("busy tile-cycles", entry.busy_tile_cycles);
        sheet.count("total cycles", entry.total_cycles);
        if !lines.is_empty() {
            sheet.section("runs");
            for (label, value) in lines {
                sheet.fact(&label, value);
            }
        }
        sheets.push((entry.key.clone(), sheet));
    }
    Ok(sheets)
}
