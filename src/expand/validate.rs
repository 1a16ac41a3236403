//! An independent checker of the low program: every location a step names
//! lies inside its allocation (for every Repeat binding), on the tile the
//! step runs on; transfers move whole 32-bit words; and no two writes of one
//! exchange or copy group land on the same bytes.
//!
//! Written against the program's data only (not the expansion code), so a
//! bug in expansion cannot hide in a shared helper.

use super::program::{AllocationId, Kernel, LowProgram, MatMulOutput, Operand, Step};
use crate::numerics::dot::{ActivationStore, ProductInputs};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramCheckError {
    #[error(
        "step {step} ({op}): tile {tile} names allocation {allocation} which lives on tile {owner}"
    )]
    WrongTile {
        step: usize,
        op: String,
        tile: u32,
        allocation: u32,
        owner: u32,
    },
    #[error(
        "step {step} ({op}): {length} bytes at offset {offset} overrun allocation {allocation} of {bytes} bytes on tile {tile}"
    )]
    OutOfBounds {
        step: usize,
        op: String,
        tile: u32,
        allocation: u32,
        offset: u64,
        length: u64,
        bytes: u64,
    },
    #[error(
        "step {step} ({op}): transfer {transfer} is not word-aligned (offset {offset}, {words} words)"
    )]
    Misaligned {
        step: usize,
        op: String,
        transfer: usize,
        offset: u32,
        words: u32,
    },
    #[error(
        "step {step} ({op}): two writes overlap in allocation {allocation} on tile {tile} at bytes {start}..{end}"
    )]
    OverlappingWrites {
        step: usize,
        op: String,
        tile: u32,
        allocation: u32,
        start: u64,
        end: u64,
    },
    #[error(
        "step {step} ({op}): tile {tile}'s matrix product reads a valid extent {valid:?} (rows, reduction, cols) larger than its block {block:?}"
    )]
    ValidExtent {
        step: usize,
        op: String,
        tile: u32,
        valid: [u32; 3],
        block: [u32; 3],
    },
    #[error(
        "step {step} ({op}): tile {tile}'s matrix product reads activations stored as {store:?} but multiplies {inputs:?}: FP8-stored activations must be read by an FP8 product at their own scale"
    )]
    StoredPrecision {
        step: usize,
        op: String,
        tile: u32,
        store: ActivationStore,
        inputs: ProductInputs,
    },
}

/// Bytes of one stored activation element.
fn stored_bytes(store: ActivationStore) -> u32 {
    match store {
        ActivationStore::F16 => 2,
        ActivationStore::Fp8 { .. } => 1,
    }
}

/// What the checker looked at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramCheck {
    pub steps: u64,
    pub locations: u64,
    pub written_ranges: u64,
}

struct Checker<'program> {
    program: &'program LowProgram,
    check: ProgramCheck,
    step: usize,
    op: String,
}

impl Checker<'_> {
    fn span(
        &mut self,
        tile: u32,
        allocation: AllocationId,
        offset: u64,
        length: u64,
        iterations: u32,
    ) -> Result<(), ProgramCheckError> {
        self.check.locations += 1;
        let record = self.program.allocation(allocation);
        if record.tile != tile {
            return Err(ProgramCheckError::WrongTile {
                step: self.step,
                op: self.op.clone(),
                tile,
                allocation: allocation.0,
                owner: record.tile,
            });
        }
        // Inside a Repeat an iterated allocation is bound per iteration:
        // every binding must stay within its own instance.
        let instance = record.bytes as u64;
        let last_binding = if record.iterations > 1 {
            iterations.max(1) as u64 - 1
        } else {
            0
        };
        let end = last_binding * instance + offset + length;
        if offset + length > instance || end > instance * record.iterations as u64 {
            return Err(ProgramCheckError::OutOfBounds {
                step: self.step,
                op: self.op.clone(),
                tile,
                allocation: allocation.0,
                offset,
                length,
                bytes: instance,
            });
        }
        Ok(())
    }

    fn operand(
        &mut self,
        tile: u32,
        operand: Operand,
        groups: u32,
        lines: u32,
        line_bytes: u32,
        iterations: u32,
    ) -> Result<(), ProgramCheckError> {
        if groups == 0 || lines == 0 {
            return Ok(());
        }
        let extent = (groups as u64 - 1) * operand.matrix as u64
            + (lines as u64 - 1) * operand.line as u64
            + line_bytes as u64;
        self.span(
            tile,
            operand.location.allocation,
            operand.location.offset as u64,
            extent,
            iterations,
        )
    }

    fn kernel(
        &mut self,
        tile: u32,
        kernel: &Kernel,
        iterations: u32,
    ) -> Result<(), ProgramCheckError> {
        match *kernel {
            Kernel::MatMul {
                a,
                weight,
                output,
                rows,
                reduction,
                cols,
                valid_rows: a_rows,
                valid_reduction,
                valid_cols: weight_cols,
                inputs,
                activations,
                ..
            } => {
                let consistent = match (activations, inputs) {
                    (ActivationStore::F16, _) => true,
                    (ActivationStore::Fp8 { scale }, ProductInputs::Fp8 { activation_scale }) => {
                        scale == activation_scale
                    }
                    (ActivationStore::Fp8 { .. }, ProductInputs::Fp16) => false,
                };
                if !consistent {
                    return Err(ProgramCheckError::StoredPrecision {
                        step: self.step,
                        op: self.op.clone(),
                        tile,
                        store: activations,
                        inputs,
                    });
                }
                if a_rows > rows || valid_reduction > reduction || weight_cols > cols {
                    return Err(ProgramCheckError::ValidExtent {
                        step: self.step,
                        op: self.op.clone(),
                        tile,
                        valid: [a_rows, valid_reduction, weight_cols],
                        block: [rows, reduction, cols],
                    });
                }
                let a_bytes = reduction * stored_bytes(activations);
                self.operand(tile, a, 1, rows, a_bytes, iterations)?;
                self.operand(tile, weight, 1, cols, reduction, iterations)?;
                match output {
                    MatMulOutput::Partial(partial) => {
                        self.operand(tile, partial, 1, rows, partial.line, iterations)?
                    }
                    MatMulOutput::Final {
                        output,
                        bias,
                        valid_rows,
                        valid_cols,
                    } => {
                        self.operand(tile, output, 1, valid_rows, valid_cols * 2, iterations)?;
                        self.operand(tile, bias, 1, 1, valid_cols * 2, iterations)?;
                    }
                }
            }
            Kernel::ReduceBias {
                local,
                received,
                received_slice_bytes,
                count,
                bias,
                output,
                rows,
                cols,
                ..
            } => {
                self.operand(tile, local, 1, rows, local.line.min(cols * 4), iterations)?;
                if count > 1 {
                    self.span(
                        tile,
                        received.location.allocation,
                        received.location.offset as u64,
                        (count as u64 - 1) * received_slice_bytes as u64,
                        iterations,
                    )?;
                }
                self.operand(tile, bias, 1, 1, cols * 2, iterations)?;
                self.operand(tile, output, 1, rows, cols * 2, iterations)?;
            }
            Kernel::LayerNorm {
                input,
                gamma,
                beta,
                output,
                rows,
                cols,
                store,
                ..
            } => {
                self.operand(tile, input, 1, rows, cols * 2, iterations)?;
                self.operand(tile, gamma, 1, 1, cols * 2, iterations)?;
                self.operand(tile, beta, 1, 1, cols * 2, iterations)?;
                let output_bytes = cols * stored_bytes(store);
                self.operand(tile, output, 1, rows, output_bytes, iterations)?;
            }
            Kernel::Gelu {
                input,
                output,
                groups,
                rows,
                cols,
                store,
                ..
            } => {
                self.operand(tile, input, groups, rows, cols * 2, iterations)?;
                let output_bytes = cols * stored_bytes(store);
                self.operand(tile, output, groups, rows, output_bytes, iterations)?;
            }
            Kernel::Rotary {
                input,
                output,
                groups,
                rows,
                cols,
                ..
            } => {
                self.operand(tile, input, groups, rows, cols * 2, iterations)?;
                self.operand(tile, output, groups, rows, cols * 2, iterations)?;
            }
            Kernel::Add {
                a,
                b,
                output,
                groups,
                rows,
                cols,
            } => {
                self.operand(tile, a, groups, rows, cols * 2, iterations)?;
                self.operand(tile, b, groups, rows, cols * 2, iterations)?;
                self.operand(tile, output, groups, rows, cols * 2, iterations)?;
            }
            Kernel::Attention {
                query,
                key,
                value,
                output,
                scratch,
                groups,
                queries,
                keys,
                dimension,
                store,
                ..
            } => {
                self.operand(tile, query, groups, queries, dimension * 2, iterations)?;
                self.operand(tile, key, groups, keys, dimension * 2, iterations)?;
                self.operand(tile, value, groups, keys, dimension * 2, iterations)?;
                let output_bytes = dimension * stored_bytes(store);
                self.operand(tile, output, groups, queries, output_bytes, iterations)?;
                self.span(
                    tile,
                    scratch.allocation,
                    scratch.offset as u64,
                    4,
                    iterations,
                )?;
            }
            Kernel::AttentionPartial {
                query,
                key,
                value,
                partial,
                groups,
                stride_groups,
                queries,
                keys,
                dimension,
                ..
            } => {
                self.operand(tile, query, groups, queries, dimension * 2, iterations)?;
                self.operand(tile, key, groups, keys, dimension * 2, iterations)?;
                self.operand(tile, value, groups, keys, dimension * 2, iterations)?;
                let rows = queries.max(1) as u64 * stride_groups as u64;
                self.span(
                    tile,
                    partial.allocation,
                    partial.offset as u64,
                    rows * (dimension as u64 + 2) * 4,
                    iterations,
                )?;
            }
            Kernel::AttentionCombine {
                local,
                received,
                slice_bytes,
                count,
                output,
                groups,
                queries,
                dimension,
                store,
                ..
            } => {
                self.span(
                    tile,
                    local.allocation,
                    local.offset as u64,
                    slice_bytes as u64,
                    iterations,
                )?;
                if count > 1 {
                    self.span(
                        tile,
                        received.allocation,
                        received.offset as u64,
                        (count as u64 - 1) * slice_bytes as u64,
                        iterations,
                    )?;
                }
                let output_bytes = dimension * stored_bytes(store);
                self.operand(tile, output, groups, queries, output_bytes, iterations)?;
            }
            Kernel::Cast {
                input,
                output,
                groups,
                rows,
                cols,
                ..
            } => {
                self.operand(tile, input, groups, rows, cols * 2, iterations)?;
                self.operand(tile, output, groups, rows, cols * 4, iterations)?;
            }
        }
        Ok(())
    }

    fn no_overlaps(
        &mut self,
        mut writes: Vec<(u32, u64, u64, u32)>,
    ) -> Result<(), ProgramCheckError> {
        writes.sort_unstable();
        self.check.written_ranges += writes.len() as u64;
        for pair in writes.windows(2) {
            let (allocation, start, end, tile) = pair[1];
            if pair[0].0 == allocation && start < pair[0].2 {
                return Err(ProgramCheckError::OverlappingWrites {
                    step: self.step,
                    op: self.op.clone(),
                    tile,
                    allocation,
                    start,
                    end,
                });
            }
        }
        Ok(())
    }

    fn steps(&mut self, steps: &[Step], iterations: u32) -> Result<(), ProgramCheckError> {
        for step in steps {
            self.step += 1;
            self.check.steps += 1;
            match step {
                Step::Kernels { provenance, runs } => {
                    self.op = self.program.name(provenance.op).to_string();
                    for run in runs {
                        self.kernel(run.tile, &run.kernel, iterations)?;
                    }
                }
                Step::Copies { provenance, copies } => {
                    self.op = self.program.name(provenance.op).to_string();
                    let mut writes = Vec::new();
                    for copy in copies {
                        let rows = copy.rows.max(1) as u64;
                        let read = (rows - 1) * copy.source_stride as u64 + copy.row_bytes as u64;
                        let written =
                            (rows - 1) * copy.destination_stride as u64 + copy.row_bytes as u64;
                        self.span(
                            copy.tile,
                            copy.source.allocation,
                            copy.source.offset as u64,
                            read,
                            iterations,
                        )?;
                        self.span(
                            copy.tile,
                            copy.destination.allocation,
                            copy.destination.offset as u64,
                            written,
                            iterations,
                        )?;
                        for row in 0..rows {
                            let start = copy.destination.offset as u64
                                + row * copy.destination_stride as u64;
                            writes.push((
                                copy.destination.allocation.0,
                                start,
                                start + copy.row_bytes as u64,
                                copy.tile,
                            ));
                        }
                    }
                    self.no_overlaps(writes)?;
                }
                Step::Fills { provenance, fills } => {
                    self.op = self.program.name(provenance.op).to_string();
                    for fill in fills {
                        let rows = fill.rows.max(1) as u64;
                        let extent = (rows - 1) * fill.stride as u64 + fill.row_bytes as u64;
                        self.span(
                            fill.tile,
                            fill.destination.allocation,
                            fill.destination.offset as u64,
                            extent,
                            iterations,
                        )?;
                    }
                }
                Step::Exchange {
                    provenance,
                    transfers,
                } => {
                    self.op = self.program.name(provenance.op).to_string();
                    let mut writes = Vec::with_capacity(transfers.destinations.len());
                    for index in 0..transfers.len() {
                        let words = transfers.words[index];
                        let source = transfers.source_location[index];
                        if source.offset % 4 != 0 || words == 0 {
                            return Err(ProgramCheckError::Misaligned {
                                step: self.step,
                                op: self.op.clone(),
                                transfer: index,
                                offset: source.offset,
                                words,
                            });
                        }
                        let bytes = words as u64 * 4;
                        self.span(
                            transfers.source_tile[index],
                            source.allocation,
                            source.offset as u64,
                            bytes,
                            iterations,
                        )?;
                        for destination in transfers.destinations_of(index) {
                            let location = destination.location;
                            if location.offset % 4 != 0 {
                                return Err(ProgramCheckError::Misaligned {
                                    step: self.step,
                                    op: self.op.clone(),
                                    transfer: index,
                                    offset: location.offset,
                                    words,
                                });
                            }
                            self.span(
                                destination.tile,
                                location.allocation,
                                location.offset as u64,
                                bytes,
                                iterations,
                            )?;
                            writes.push((
                                location.allocation.0,
                                location.offset as u64,
                                location.offset as u64 + bytes,
                                destination.tile,
                            ));
                        }
                    }
                    self.no_overlaps(writes)?;
                }
                Step::Repeat { iterations, body } => self.steps(body, *iterations)?,
                Step::Checkpoint { .. } => {}
            }
        }
        Ok(())
    }
}

pub fn check_program(program: &LowProgram) -> Result<ProgramCheck, ProgramCheckError> {
    let mut checker = Checker {
        program,
        check: ProgramCheck::default(),
        step: 0,
        op: String::new(),
    };
    checker.steps(&program.steps, 1)?;
    Ok(checker.check)
}
