//! The low-program interpreter: loads weights and the input into their
//! value allocations, executes every step (kernels in parallel over tiles,
//! exchanges with bulk-synchronous semantics, affine copies and fills, the
//! Repeat with per-iteration bindings) and reads the output value back.

use rayon::prelude::*;
use serde::Serialize;

use super::host::host_writes;
use super::kernels::{KernelNotes, execute};
use super::memory::{Memory, Reader, SimError, Writer, resolve};
use super::weight_scales::WeightScales;
use crate::expand::program::{AllocationId, LowProgram, Step};
use crate::layout::format::TensorFormat;
use crate::layout::plan::Layouts;
use crate::model::graph::Precision;
use crate::model::weights::Weights;
use crate::numerics::fp8;
use crate::numerics::half_float::{from_f16_bits, to_f16_bits};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExecutionCounts {
    pub kernel_runs: u64,
    pub transfers: u64,
    pub words_received: u64,
    pub copy_rows: u64,
    pub fills: u64,
    /// Activations rounded to FP8 for FP8 x FP8 products, and those beyond
    /// the format's range at their scale (saturated).
    pub fp8_activations: u64,
    pub saturated_activations: u64,
}

/// The buffers one kernel run writes, taken out of memory while it runs.
type TakenBuffers = Vec<(AllocationId, Vec<u8>)>;

struct Interpreter<'program> {
    program: &'program LowProgram,
    memory: Memory,
    scales: WeightScales,
    counts: ExecutionCounts,
}

/// Writes the logical tensor `values` (and FP8 `codes`) into every
/// block-replica allocation of `format`, at instance `instance`.
fn store_value(
    memory: &mut Memory,
    program: &LowProgram,
    allocations: &[AllocationId],
    format: &TensorFormat,
    values: &[f32],
    codes: &[u8],
    instance: u32,
) {
    for (slot, &allocation) in allocations.iter().enumerate() {
        let base = instance as usize * program.allocation(allocation).bytes as usize;
        let buffer = &mut memory.buffers[allocation.0 as usize];
        format.for_each_element(slot as u32 / format.replicas, |offset, index| {
            let offset = base + offset;
            match format.precision {
                Precision::F8 => buffer[offset] = codes[index],
                Precision::F8Activation { scale } => {
                    buffer[offset] = fp8::encode(values[index], i32::from(scale))
                }
                Precision::F16 => buffer[offset..offset + 2]
                    .copy_from_slice(&to_f16_bits(values[index]).to_le_bytes()),
                Precision::F32 => {
                    buffer[offset..offset + 4].copy_from_slice(&values[index].to_le_bytes())
                }
            }
        });
    }
}

/// Reads a whole logical value from its first replica of every block.
fn load_value(memory: &Memory, allocations: &[AllocationId], format: &TensorFormat) -> Vec<f32> {
    let mut values = vec![0.0f32; format.shape.elements() as usize];
    for block in 0..format.block_count() {
        let allocation = allocations[(block * format.replicas) as usize];
        let buffer = &memory.buffers[allocation.0 as usize];
        format.for_each_element(block, |offset, index| {
            values[index] = match format.precision {
                Precision::F32 => f32::from_le_bytes([
                    buffer[offset],
                    buffer[offset + 1],
                    buffer[offset + 2],
                    buffer[offset + 3],
                ]),
                Precision::F16 => {
                    from_f16_bits(u16::from_le_bytes([buffer[offset], buffer[offset + 1]]))
                }
                Precision::F8 => buffer[offset] as f32,
                Precision::F8Activation { scale } => fp8::decode(buffer[offset], i32::from(scale)),
            };
        });
    }
    values
}

impl Interpreter<'_> {
    fn run_steps(&mut self, steps: &[Step], iteration: u32) -> Result<(), SimError> {
        for step in steps {
            match step {
                Step::Kernels { runs, .. } => {
                    let mut taken: Vec<TakenBuffers> = Vec::with_capacity(runs.len());
                    for run in runs {
                        let mut outputs = Vec::new();
                        for id in run.kernel.writes() {
                            outputs.push((
                                id,
                                std::mem::take(&mut self.memory.buffers[id.0 as usize]),
                            ));
                        }
                        taken.push(outputs);
                    }
                    let allocations = &self.program.allocations;
                    let reader = Reader {
                        buffers: &self.memory.buffers,
                        allocations,
                        iteration,
                    };
                    let scales = &self.scales;
                    let results: Vec<Result<(TakenBuffers, KernelNotes), SimError>> = runs
                        .par_iter()
                        .zip(taken.into_par_iter())
                        .map(|(run, outputs)| {
                            let mut writer = Writer {
                                outputs,
                                allocations,
                                iteration,
                            };
                            let table = scales
                                .table(&run.kernel, iteration)
                                .map_err(SimError::Weights)?;
                            let notes = execute(&run.kernel, &reader, &mut writer, table)?;
                            Ok((writer.outputs, notes))
                        })
                        .collect();
                    let mut first_error = None;
                    // Put every buffer back before reporting, so memory stays whole.
                    for result in results {
                        match result {
                            Ok((outputs, notes)) => {
                                self.counts.fp8_activations += notes.fp8_activations;
                                self.counts.saturated_activations += notes.saturated_activations;
                                for (id, buffer) in outputs {
                                    self.memory.buffers[id.0 as usize] = buffer;
                                }
                            }
                            Err(error) => {
                                first_error.get_or_insert(error);
                            }
                        }
                    }
                    if let Some(error) = first_error {
                        return Err(error);
                    }
                    self.counts.kernel_runs += runs.len() as u64;
                }
                Step::Exchange { transfers, .. } => {
                    // Bulk-synchronous: every send reads memory as it was
                    // before the phase, so stage all payloads first.
                    let mut staged = Vec::with_capacity(transfers.total_words() as usize * 4);
                    let mut starts = Vec::with_capacity(transfers.len());
                    for index in 0..transfers.len() {
                        let bytes = transfers.words[index] as usize * 4;
                        let reader = Reader {
                            buffers: &self.memory.buffers,
                            allocations: &self.program.allocations,
                            iteration,
                        };
                        starts.push(staged.len());
                        staged.extend_from_slice(
                            reader.bytes(transfers.source_location[index], bytes)?,
                        );
                    }
                    for index in 0..transfers.len() {
                        let bytes = transfers.words[index] as usize * 4;
                        let payload = &staged[starts[index]..starts[index] + bytes];
                        for destination in transfers.destinations_of(index) {
                            let location = destination.location;
                            let start =
                                resolve(&self.program.allocations, location, iteration) as usize;
                            let buffer = &mut self.memory.buffers[location.allocation.0 as usize];
                            let size = buffer.len();
                            let target = buffer.get_mut(start..start + bytes).ok_or(
                                SimError::OutOfBounds {
                                    tile: destination.tile,
                                    allocation: location.allocation.0,
                                    offset: start as u64,
                                    length: bytes,
                                    bytes: size,
                                },
                            )?;
                            target.copy_from_slice(payload);
                            self.counts.words_received += bytes as u64 / 4;
                        }
                    }
                    self.counts.transfers += transfers.len() as u64;
                }
                Step::Copies { copies, .. } => {
                    for copy in copies {
                        for row in 0..copy.rows {
                            let mut source = copy.source;
                            source.offset += row * copy.source_stride;
                            let mut destination = copy.destination;
                            destination.offset += row * copy.destination_stride;
                            let reader = Reader {
                                buffers: &self.memory.buffers,
                                allocations: &self.program.allocations,
                                iteration,
                            };
                            let bytes = reader.bytes(source, copy.row_bytes as usize)?.to_vec();
                            let start =
                                resolve(&self.program.allocations, destination, iteration) as usize;
                            let buffer =
                                &mut self.memory.buffers[destination.allocation.0 as usize];
                            let size = buffer.len();
                            buffer
                                .get_mut(start..start + bytes.len())
                                .ok_or(SimError::OutOfBounds {
                                    tile: copy.tile,
                                    allocation: destination.allocation.0,
                                    offset: start as u64,
                                    length: bytes.len(),
                                    bytes: size,
                                })?
                                .copy_from_slice(&bytes);
                        }
                        self.counts.copy_rows += copy.rows as u64;
                    }
                }
                Step::Fills { fills, .. } => {
                    for fill in fills {
                        for row in 0..fill.rows {
                            let mut destination = fill.destination;
                            destination.offset += row * fill.stride;
                            let start =
                                resolve(&self.program.allocations, destination, iteration) as usize;
                            let buffer =
                                &mut self.memory.buffers[destination.allocation.0 as usize];
                            let size = buffer.len();
                            buffer
                                .get_mut(start..start + fill.row_bytes as usize)
                                .ok_or(SimError::OutOfBounds {
                                    tile: fill.tile,
                                    allocation: destination.allocation.0,
                                    offset: start as u64,
                                    length: fill.row_bytes as usize,
                                    bytes: size,
                                })?
                                .fill(0);
                        }
                        self.counts.fills += 1;
                    }
                }
                Step::Repeat { iterations, body } => {
                    for iteration in 0..*iterations {
                        self.run_steps(body, iteration)?;
                    }
                }
                Step::Checkpoint { .. } => {}
            }
        }
        Ok(())
    }
}

/// The interpreter's result: the output value (logical row-major) and what ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Interpretation {
    pub output: Vec<f32>,
    pub counts: ExecutionCounts,
}

/// Runs `program` (expanded from `layouts`) on `weights`.
pub fn interpret(
    program: &LowProgram,
    layouts: &Layouts,
    weights: &Weights,
) -> Result<Interpretation, SimError> {
    let mut memory = Memory::new(&program.allocations);
    for write in host_writes(program, layouts, weights)? {
        store_value(
            &mut memory,
            program,
            write.allocations,
            write.format,
            write.values,
            write.codes,
            write.instance,
        );
    }
    let mut interpreter = Interpreter {
        program,
        memory,
        scales: WeightScales::new(program, layouts, weights),
        counts: ExecutionCounts::default(),
    };
    interpreter.run_steps(&program.steps, 0)?;
    let output = layouts.value(layouts.output);
    Ok(Interpretation {
        output: load_value(
            &interpreter.memory,
            &program.values[layouts.output.0 as usize].allocations,
            &output.format,
        ),
        counts: interpreter.counts,
    })
}
