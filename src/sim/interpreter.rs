//! The low-program interpreter: loads weights and the input into their
//! value allocations, executes every step (kernels in parallel over tiles,
//! exchanges with bulk-synchronous semantics, affine copies and fills, the
//! Repeat with per-iteration bindings) and reads the output value back.

use rayon::prelude::*;
use serde::Serialize;

use std::borrow::Cow;

use super::host::{HostWrite, host_writes};
use super::kernels::{KernelNotes, execute};
use super::memory::{KernelRead, Memory, Reader, SimError, Writer, describe_read, resolve};
use super::weight_scales::WeightScales;
use super::written::WrittenBytes;
use crate::expand::program::{AllocationId, Kernel, Location, LowProgram, Step};
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

/// A kernel run's buffers, what it noticed, and the ranges it wrote.
type RunResult = (TakenBuffers, KernelNotes, Vec<(AllocationId, usize, usize)>);

struct Interpreter<'program> {
    program: &'program LowProgram,
    memory: Memory,
    written: WrittenBytes,
    scales: WeightScales,
    counts: ExecutionCounts,
}

/// Writes one host write's logical tensor (and FP8 codes) into every
/// block-replica allocation of its format, at its instance.
fn store_value(
    memory: &mut Memory,
    written: &mut WrittenBytes,
    program: &LowProgram,
    write: &HostWrite<'_>,
) {
    let format = write.format;
    for (slot, &allocation) in write.allocations.iter().enumerate() {
        let bytes = program.allocation(allocation).bytes as usize;
        let base = write.instance as usize * bytes;
        // The host writes whole block images: padding is defined (zero).
        written.mark(allocation, base, bytes);
        let buffer = &mut memory.buffers[allocation.0 as usize];
        format.for_each_element(slot as u32 / format.replicas, |offset, index| {
            let offset = base + offset;
            match format.precision {
                Precision::F8 => buffer[offset] = write.codes[index],
                Precision::F8Activation { scale } => {
                    buffer[offset] = fp8::encode(write.values[index], i32::from(scale))
                }
                Precision::F16 => buffer[offset..offset + 2]
                    .copy_from_slice(&to_f16_bits(write.values[index]).to_le_bytes()),
                Precision::F32 => {
                    buffer[offset..offset + 4].copy_from_slice(&write.values[index].to_le_bytes())
                }
            }
        });
    }
}

/// A kernel run's reads: the buffers as the step found them, refusing any
/// byte the program never wrote into the read allocation.
struct KernelReader<'run> {
    reader: &'run Reader<'run>,
    written: &'run WrittenBytes,
    program: &'run LowProgram,
    kernel: &'run Kernel,
    op: &'run str,
    tile: u32,
}

impl KernelRead for KernelReader<'_> {
    fn bytes(&self, location: Location, length: usize) -> Result<Cow<'_, [u8]>, SimError> {
        let bytes = self.reader.bytes(location, length)?;
        let start = resolve(self.reader.allocations, location, self.reader.iteration) as usize;
        if let Some(byte) = self
            .written
            .first_unwritten(location.allocation, start, length)
        {
            return Err(SimError::Undefined(format!(
                "tile {}: {} at byte {byte} of its buffer, which the program never wrote: \
                 the program leaves this padding undefined",
                self.tile,
                describe_read(self.program, self.kernel, self.op, location.allocation),
            )));
        }
        Ok(Cow::Borrowed(bytes))
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
                Step::Kernels { runs, provenance } => {
                    let op = self
                        .program
                        .names
                        .get(provenance.op as usize)
                        .map_or("-", String::as_str);
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
                    let (program, written) = (self.program, &self.written);
                    let results: Vec<Result<RunResult, SimError>> = runs
                        .par_iter()
                        .zip(taken.into_par_iter())
                        .map(|(run, outputs)| {
                            let mut writer = Writer {
                                outputs,
                                allocations,
                                iteration,
                                written: Vec::new(),
                            };
                            let reads = KernelReader {
                                reader: &reader,
                                written,
                                program,
                                kernel: &run.kernel,
                                op,
                                tile: run.tile,
                            };
                            let table = scales
                                .table(&run.kernel, iteration)
                                .map_err(SimError::Weights)?;
                            let notes = execute(&run.kernel, &reads, &mut writer, table)?;
                            Ok((writer.outputs, notes, writer.written))
                        })
                        .collect();
                    let mut first_error = None;
                    // Put every buffer back before reporting, so memory stays whole.
                    for result in results {
                        match result {
                            Ok((outputs, notes, ranges)) => {
                                self.counts.fp8_activations += notes.fp8_activations;
                                self.counts.saturated_activations += notes.saturated_activations;
                                for (id, buffer) in outputs {
                                    self.memory.buffers[id.0 as usize] = buffer;
                                }
                                for (id, start, length) in ranges {
                                    self.written.mark(id, start, length);
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
                    // Receives carry the written-ness of the bytes sent.
                    let mut partially_written = Vec::new();
                    for index in 0..transfers.len() {
                        let bytes = transfers.words[index] as usize * 4;
                        let reader = Reader {
                            buffers: &self.memory.buffers,
                            allocations: &self.program.allocations,
                            iteration,
                        };
                        starts.push(staged.len());
                        let source = transfers.source_location[index];
                        staged.extend_from_slice(reader.bytes(source, bytes)?);
                        let start = resolve(&self.program.allocations, source, iteration) as usize;
                        if let Some(mask) = self.written.partial(source.allocation, start, bytes) {
                            partially_written.push((index, mask));
                        }
                    }
                    let mut partial = partially_written.iter().peekable();
                    for index in 0..transfers.len() {
                        let bytes = transfers.words[index] as usize * 4;
                        let payload = &staged[starts[index]..starts[index] + bytes];
                        let mask = partial
                            .next_if(|(transfer, _)| *transfer == index)
                            .map(|(_, mask)| mask.as_slice());
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
                            self.written.moved(location.allocation, start, bytes, mask);
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
                            let from =
                                resolve(&self.program.allocations, source, iteration) as usize;
                            let mask = self.written.partial(source.allocation, from, bytes.len());
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
                            // Copies move padding too: written-ness moves with the bytes.
                            self.written.moved(
                                destination.allocation,
                                start,
                                bytes.len(),
                                mask.as_deref(),
                            );
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
                            self.written.mark(
                                destination.allocation,
                                start,
                                fill.row_bytes as usize,
                            );
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
    let mut written = WrittenBytes::new(&program.allocations);
    for write in host_writes(program, layouts, weights)? {
        store_value(&mut memory, &mut written, program, &write);
    }
    let mut interpreter = Interpreter {
        program,
        memory,
        written,
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
