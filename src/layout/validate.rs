//! An independent checker of layouts: every format covers its value's
//! elements with blocks on real tiles (replicas of a block on distinct
//! tiles), every op's shapes agree with its kind, and every compute op's
//! operand blocks are on the tile that computes with them.

use super::format::TensorFormat;
use super::plan::{Layouts, OpPlan};
use crate::model::graph::{OpKind, Shape};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutCheckError {
    #[error("value `{value}`: {problem}")]
    Format { value: String, problem: String },
    #[error("op `{op}`: {problem}")]
    Op { op: String, problem: String },
}

fn check_format(name: &str, format: &TensorFormat, tiles: u32) -> Result<(), LayoutCheckError> {
    let problem = |problem: String| LayoutCheckError::Format {
        value: name.to_string(),
        problem,
    };
    if format.block.contains(&0) || format.replicas == 0 {
        return Err(problem(format!(
            "empty block {:?} or no replicas",
            format.block
        )));
    }
    let parts = format.parts();
    let extents = [format.shape.groups, format.shape.rows, format.shape.cols];
    if let Some(starts) = &format.row_starts {
        // Ragged rows: from 0 to the last row, each block non-empty and no
        // larger than the padded block.
        let ordered = starts
            .windows(2)
            .all(|pair| pair[0] < pair[1] && pair[1] - pair[0] <= format.block[1]);
        if starts.first() != Some(&0) || starts.last() != Some(&extents[1]) || !ordered {
            return Err(problem(format!(
                "row starts {:?} do not cut {} rows into blocks of 1 to {}",
                &starts[..starts.len().min(8)],
                extents[1],
                format.block[1]
            )));
        }
    }
    for axis in 0..3 {
        if axis == 1 && format.row_starts.is_some() {
            continue;
        }
        if parts[axis] * format.block[axis] < extents[axis]
            || (parts[axis] - 1) * format.block[axis] >= extents[axis].max(1)
        {
            return Err(problem(format!(
                "axis {axis}: {} blocks of {} do not tile {}",
                parts[axis], format.block[axis], extents[axis]
            )));
        }
    }
    if format.tiles.len() as u64 != format.block_count() as u64 * format.replicas as u64 {
        return Err(problem(format!(
            "{} tile entries for {} blocks x {} replicas",
            format.tiles.len(),
            format.block_count(),
            format.replicas
        )));
    }
    for block in 0..format.block_count() {
        let mut block_tiles: Vec<u32> = (0..format.replicas)
            .map(|replica| format.tile(block, replica))
            .collect();
        if let Some(&tile) = block_tiles.iter().find(|&&tile| tile >= tiles) {
            return Err(problem(format!(
                "block {block} on tile {tile}, beyond the machine's {tiles}"
            )));
        }
        block_tiles.sort_unstable();
        if block_tiles.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(problem(format!(
                "two replicas of block {block} on one tile"
            )));
        }
    }
    Ok(())
}

fn same_shape(
    op: &str,
    what: &str,
    actual: Shape,
    expected: Shape,
) -> Result<(), LayoutCheckError> {
    if actual != expected {
        return Err(LayoutCheckError::Op {
            op: op.to_string(),
            problem: format!("{what} has shape {actual:?}, expected {expected:?}"),
        });
    }
    Ok(())
}

pub fn check_layouts(layouts: &Layouts, tiles: u32) -> Result<(), LayoutCheckError> {
    for value in &layouts.values {
        check_format(&value.name, &value.format, tiles)?;
    }
    for op in &layouts.ops {
        let input = |slot: usize| &layouts.value(op.inputs[slot]).format;
        let output = &layouts.value(op.output).format;
        let problem = |problem: String| LayoutCheckError::Op {
            op: op.name.clone(),
            problem,
        };
        match (&op.plan, &op.kind) {
            (OpPlan::MatMul(plan), OpKind::MatMul { .. }) => {
                let (a, weight) = (input(0), input(1));
                same_shape(
                    &op.name,
                    "weight",
                    weight.shape,
                    Shape::matrix(a.shape.cols, output.shape.cols),
                )?;
                same_shape(
                    &op.name,
                    "output",
                    output.shape,
                    Shape::matrix(a.shape.rows, weight.shape.cols),
                )?;
                for i in 0..plan.row_parts {
                    for j in 0..plan.col_parts {
                        for k in 0..plan.reduction_parts {
                            let tile = plan.tile(i, j, k);
                            if a.tile(a.block_index(0, i, k), j) != tile
                                || weight.tile(weight.block_index(0, k, j), i) != tile
                            {
                                return Err(problem(format!(
                                    "operands of partition ({i}, {j}, {k}) are not on tile {tile}"
                                )));
                            }
                        }
                    }
                }
                // Each output row block is a slice its reduce tile sums:
                // inside the row block of the operand the product read.
                let pk = plan.reduction_parts;
                for row_block in 0..output.parts()[1] {
                    let (first, valid) = (
                        output.block_start(1, row_block),
                        output.valid_extent(output.block_index(0, row_block, 0))[1],
                    );
                    let source = row_block / pk;
                    let (source_first, source_rows) = (
                        a.block_start(1, source),
                        a.valid_extent(a.block_index(0, source, 0))[1],
                    );
                    if source >= plan.row_parts
                        || first < source_first
                        || first + valid > source_first + source_rows
                    {
                        return Err(problem(format!(
                            "output rows {first}..{} are not inside operand row block {source} \
                             ({source_first}..{})",
                            first + valid,
                            source_first + source_rows
                        )));
                    }
                    for j in 0..plan.col_parts {
                        let tile = plan.tile(source, j, row_block % pk);
                        if output.tile(output.block_index(0, row_block, j), 0) != tile {
                            return Err(problem(format!(
                                "output block ({row_block}, {j}) is not on its reduce tile {tile}"
                            )));
                        }
                    }
                }
            }
            (OpPlan::Attention(plan), OpKind::Attention { .. }) => {
                let (query, key, value) = (input(0), input(1), input(2));
                same_shape(&op.name, "value", value.shape, key.shape)?;
                same_shape(&op.name, "output", output.shape, query.shape)?;
                for group_block in 0..query.parts()[0] {
                    for query_block in 0..plan.query_parts {
                        for key_block in 0..plan.key_parts {
                            let tile = plan.tile(group_block, query_block, key_block);
                            let query_tile = query
                                .tile(query.block_index(group_block, query_block, 0), key_block);
                            let key_index = key.block_index(group_block, key_block, 0);
                            if query_tile != tile
                                || key.tile(key_index, query_block) != tile
                                || value.tile(key_index, query_block) != tile
                            {
                                return Err(problem(format!(
                                    "query block {query_block} and key block {key_block} of group block {group_block} are not on tile {tile}"
                                )));
                            }
                        }
                    }
                }
            }
            (OpPlan::Blockwise, kind) => {
                let slots: &[usize] = match kind {
                    OpKind::Add => &[0, 1],
                    OpKind::LayerNorm { .. } => &[0],
                    _ => &[0],
                };
                for &slot in slots {
                    let operand = input(slot);
                    same_shape(&op.name, "operand", operand.shape, output.shape)?;
                    if operand.block != output.block
                        || operand.row_starts != output.row_starts
                        || operand.tiles != output.tiles
                        || operand.replicas != output.replicas
                    {
                        return Err(problem(format!(
                            "operand {slot} is not blocked like the output"
                        )));
                    }
                }
                if let OpKind::LayerNorm { .. } = kind
                    && !output.rows_complete()
                {
                    return Err(problem("LayerNorm needs whole rows on a tile".to_string()));
                }
            }
            (OpPlan::Rearrange { .. }, _) => {
                if op.inputs.is_empty() {
                    return Err(problem("a rearrange without input".to_string()));
                }
            }
            (plan, kind) => {
                return Err(problem(format!("plan {plan:?} does not fit kind {kind:?}")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::layout::format::{ElementOrder, MemoryClass};
    use crate::model::graph::Precision;

    fn rows_cut_at(starts: &[u32], block_rows: u32) -> TensorFormat {
        let uniform = TensorFormat::sequential(
            Shape::matrix(7, 2),
            Precision::F16,
            ElementOrder::RowMajor,
            [1, block_rows, 2],
            1,
            MemoryClass::Standard,
            16,
        );
        let blocks = starts.len() as u32 - 1;
        TensorFormat {
            row_starts: Some(Arc::from(starts.to_vec())),
            tiles: Arc::from((0..blocks).collect::<Vec<u32>>()),
            ..uniform
        }
    }

    #[test]
    fn ragged_row_starts_must_cut_every_row_into_short_enough_blocks() {
        assert_eq!(
            check_format("ragged", &rows_cut_at(&[0, 3, 5, 7], 3), 16),
            Ok(())
        );
        for (starts, block_rows) in [
            (&[0, 3, 3, 7][..], 4), // an empty block
            (&[0, 3, 7][..], 3),    // a block longer than the padded size
            (&[1, 3, 7][..], 4),    // row 0 in no block
            (&[0, 3, 6][..], 4),    // row 6 in no block
        ] {
            let refusal = check_format("ragged", &rows_cut_at(starts, block_rows), 16);
            assert!(
                matches!(&refusal, Err(LayoutCheckError::Format { problem, .. }) if problem.contains("row starts")),
                "{starts:?}: {refusal:?}"
            );
        }
    }
}
