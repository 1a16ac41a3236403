//! The package simulator: executes a finished [`Package`] on one 624 KiB
//! memory image per tile at the IPU21 addresses.
//!
//! - Weights and the input are written at their placed addresses
//!   ([`load`]); the output is read back from its placed blocks.
//! - Kernels run through the shared `crate::sim::kernels::execute` (one
//!   implementation of kernel semantics) over tile images ([`access`]),
//!   in parallel over tiles within a step.
//! - Copies and fills move bytes at their absolute addresses.
//! - A Repeat runs its body per iteration; an allocation with
//!   `iterations > 1` is bound in iteration `i` at `address + i * bytes`.
//! - Exchange phases run from the tiles' stored rows after the sharing
//!   patches ([`sharing`]), decoded and Repeat-patched
//!   ([`exchange`]), not from the transfer lists, which serve only as the
//!   check of where receives land.
//!
//! Checks, each reported with tile, step path, Repeat iteration and phase
//! key ([`PackageFault`]): reads of bytes another allocation overwrote
//! after the reader wrote them (the ownership map of [`ownership`], a
//! check of placement independent of the placer's liveness analysis);
//! reads of never-written memory (a written-byte bitmap per tile) and of
//! bytes only another allocation wrote (strict runs; counted otherwise);
//! accesses outside the named allocation's placed
//! instance and receives outside the tile's placed allocations, receives
//! landing where the transfer list does not send (or from the wrong
//! source), and patches producing addresses outside the row or the tile's
//! memory.

pub mod access;
pub mod admission;
pub mod exchange;
pub mod image;
pub mod load;
pub mod ownership;
pub mod rows_check;
pub mod sharing;

pub use admission::{Admitted, Refusal, admit};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::expand::program::{KernelRun, Location, LowProgram, Step};
use crate::layout::plan::Layouts;
use crate::model::weights::Weights;
use crate::package::Package;
use crate::sim::kernels::execute;
use crate::sim::weight_scales::WeightScales;

use access::{Taken, TileReader, TileWriter, bind};
use exchange::{PhaseExecution, TileFault, run_phase};
use image::{PlacedIntervals, TileImage};
use ownership::{ForeignReads, Owners};

/// A failed check or execution error, with where it happened.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "{}step {step} (iteration {iteration}), phase `{phase}`: {message}",
    tile.map_or(String::new(), |tile| format!("tile {tile}, "))
)]
pub struct PackageFault {
    pub tile: Option<u32>,
    /// Path of the step in `Package::steps` (`/`-separated indices).
    pub step: String,
    pub iteration: u32,
    /// The running exchange phase, or for other steps the last phase run
    /// (`-` before the first).
    pub phase: String,
    pub message: String,
}

/// What the simulation did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PackageCounts {
    pub kernel_runs: u64,
    pub phases_run: u64,
    pub deliveries: u64,
    pub words_received: u64,
    /// Sum over phase executions of the longest row (events).
    pub exchange_events: u64,
    pub patched_words: u64,
    /// Row words rewritten by sharing patches before phases ran.
    pub sharing_patched_words: u64,
    pub copy_rows: u64,
    pub fills: u64,
    /// Kernel operand reads touching never-written bytes (non-strict runs).
    pub unwritten_kernel_reads: u64,
    /// Kernel operand reads touching bytes the read allocation never wrote
    /// but another did (non-strict runs): padding whose value depends on
    /// placement.
    pub foreign_kernel_reads: u64,
    /// Activations rounded to FP8 for FP8 x FP8 products, and those beyond
    /// the format's range at their scale (saturated).
    pub fp8_activations: u64,
    pub saturated_activations: u64,
    /// Paired receives (per pair and phase execution) whose two members'
    /// pointers differ: IPU21.md requires one address, so a run that finds
    /// one stops with an error and a finished run reports 0.
    pub paired_receives_at_split_addresses: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PackageRun {
    pub output: Vec<f32>,
    pub counts: PackageCounts,
    /// Where the first foreign kernel read happened (non-strict runs).
    pub first_foreign_read: Option<String>,
}

struct Simulator<'a> {
    package: &'a Package,
    program: &'a LowProgram,
    images: Vec<TileImage>,
    placed: PlacedIntervals,
    phase_of_path: HashMap<Vec<u32>, usize>,
    scales: WeightScales,
    counts: PackageCounts,
    last_phase: String,
    strict: bool,
    unwritten_reads: std::sync::atomic::AtomicU64,
    foreign_reads: ForeignReads,
    poisoned: bool,
    shared_rows: sharing::SharedRows,
    /// Alias root of every allocation (ownership is per root).
    roots: Vec<u32>,
    /// Every step run so far, described (index 0: the host load).
    log: Vec<String>,
}

impl Simulator<'_> {
    fn owners(&self) -> Owners<'_> {
        Owners::current(&self.roots, &self.log)
    }

    fn fail(&self, path: &[u32], iteration: u32, fault: TileFault) -> PackageFault {
        PackageFault {
            tile: fault.tile,
            step: path
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("/"),
            iteration,
            phase: self.last_phase.clone(),
            message: fault.message,
        }
    }

    fn image_range(
        &self,
        tile: u32,
        location: Location,
        length: usize,
        iteration: u32,
    ) -> Result<usize, TileFault> {
        let address =
            bind(self.package, tile, location, length, iteration).map_err(|error| TileFault {
                tile: Some(tile),
                message: error.to_string(),
            })?;
        TileImage::index(address, length).ok_or(TileFault {
            tile: Some(tile),
            message: format!("{address:#x} is outside the tile's memory"),
        })
    }

    fn kernels(&mut self, op: &str, runs: &[KernelRun], iteration: u32) -> Result<(), TileFault> {
        let mut by_tile: Vec<Vec<&KernelRun>> = vec![Vec::new(); self.images.len()];
        for run in runs {
            let list = by_tile.get_mut(run.tile as usize).ok_or(TileFault {
                tile: Some(run.tile),
                message: "kernel on a tile the package does not have".into(),
            })?;
            list.push(run);
        }
        let package = self.package;
        let program = self.program;
        let scales = &self.scales;
        let (strict, unwritten_reads) = (self.strict, &self.unwritten_reads);
        let foreign_reads = &self.foreign_reads;
        let poisoned = self.poisoned;
        let owners = Owners::current(&self.roots, &self.log);
        let (fp8_activations, saturated_activations) = (AtomicU64::new(0), AtomicU64::new(0));
        self.images
            .par_iter_mut()
            .zip(by_tile.par_iter())
            .enumerate()
            .try_for_each(|(tile, (image, runs))| {
                let tile = tile as u32;
                let failure = |message: String| TileFault {
                    tile: Some(tile),
                    message,
                };
                for run in runs {
                    let ids = run.kernel.writes();
                    let mut taken = Vec::with_capacity(ids.len());
                    for &id in &ids {
                        let placed = package
                            .allocations
                            .get(id.0 as usize)
                            .ok_or_else(|| failure(format!("unknown allocation {}", id.0)))?;
                        let instance = if placed.iterations > 1 { iteration } else { 0 };
                        let address = u64::from(placed.address)
                            + u64::from(instance) * u64::from(placed.bytes);
                        let start =
                            TileImage::index(address, placed.bytes as usize).ok_or_else(|| {
                                failure(format!(
                                    "allocation {} at {address:#x} is outside the tile's memory",
                                    id.0
                                ))
                            })?;
                        taken.push(Taken {
                            allocation: id,
                            start,
                            bytes: image.bytes[start..start + placed.bytes as usize].to_vec(),
                            written: Vec::new(),
                        });
                    }
                    let reader = TileReader {
                        package,
                        tile,
                        image,
                        iteration,
                        taken: &ids,
                        strict,
                        unwritten_reads,
                        owners,
                        foreign_reads,
                        poisoned,
                        kernel: &run.kernel,
                        op,
                        program,
                    };
                    let mut writer = TileWriter {
                        package,
                        tile,
                        iteration,
                        taken,
                    };
                    let table = scales
                        .table(&run.kernel, iteration)
                        .map_err(|message| failure(format!("kernel: {message}")))?;
                    let notes = execute(&run.kernel, &reader, &mut writer, table)
                        .map_err(|error| failure(format!("kernel: {error}")))?;
                    fp8_activations.fetch_add(notes.fp8_activations, Ordering::Relaxed);
                    saturated_activations.fetch_add(notes.saturated_activations, Ordering::Relaxed);
                    for taken in writer.taken {
                        image.bytes[taken.start..taken.start + taken.bytes.len()]
                            .copy_from_slice(&taken.bytes);
                        for (offset, length) in taken.written {
                            image.mark_written(taken.start + offset, length);
                            owners.claim(
                                &mut image.ownership,
                                taken.start + offset,
                                length,
                                taken.allocation.0,
                            );
                        }
                    }
                }
                Ok(())
            })?;
        self.counts.kernel_runs += runs.len() as u64;
        self.counts.fp8_activations += fp8_activations.into_inner();
        self.counts.saturated_activations += saturated_activations.into_inner();
        Ok(())
    }

    fn run_steps(
        &mut self,
        steps: &[Step],
        path: &mut Vec<u32>,
        iteration: u32,
    ) -> Result<(), PackageFault> {
        for (index, step) in steps.iter().enumerate() {
            path.push(index as u32);
            let result = self.run_step(step, path, iteration);
            if let Err(fault) = result {
                return Err(self.fail(path, iteration, fault));
            }
            if let Step::Repeat { iterations, body } = step {
                for inner in 0..*iterations {
                    self.run_steps(body, path, inner)?;
                }
            }
            path.pop();
        }
        Ok(())
    }

    fn run_step(&mut self, step: &Step, path: &[u32], iteration: u32) -> Result<(), TileFault> {
        let phase = match step {
            Step::Exchange { .. } => self
                .phase_of_path
                .get(path)
                .map_or("-", |&index| self.package.phases[index].key.as_str()),
            _ => self.last_phase.as_str(),
        };
        let description = format!(
            "step {} (iteration {iteration}), phase `{phase}`",
            path.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("/")
        );
        self.log.push(description);
        match step {
            Step::Kernels { runs, provenance } => {
                // The package's own provenance names the op (read from a
                // file: an index past the names is named `-`).
                let package = self.package;
                let op = package
                    .names
                    .get(provenance.op as usize)
                    .map_or("-", String::as_str);
                self.kernels(op, runs, iteration)?
            }
            Step::Exchange { transfers, .. } => {
                let index = *self.phase_of_path.get(path).ok_or(TileFault {
                    tile: None,
                    message: "exchange step without a package phase".into(),
                })?;
                let phase = &self.package.phases[index];
                self.last_phase = phase.key.clone();
                let (rows, sharing_words) = self.shared_rows.rows_for(phase, index)?;
                self.counts.sharing_patched_words += sharing_words;
                let owners = Owners::current(&self.roots, &self.log);
                let execution = PhaseExecution {
                    phase,
                    transfers,
                    iteration,
                    rows: &rows,
                };
                let run = run_phase(
                    self.package,
                    execution,
                    &mut self.images,
                    &self.placed,
                    owners,
                )?;
                self.counts.phases_run += 1;
                self.counts.deliveries += run.deliveries;
                self.counts.words_received += run.words_received;
                self.counts.exchange_events += run.events;
                self.counts.patched_words += run.patched_words;
                self.counts.paired_receives_at_split_addresses += run.paired_split_addresses;
            }
            Step::Copies { copies, .. } => {
                for copy in copies {
                    let length = copy.row_bytes as usize;
                    for row in 0..copy.rows {
                        let mut source = copy.source;
                        source.offset += row * copy.source_stride;
                        let mut destination = copy.destination;
                        destination.offset += row * copy.destination_stride;
                        let from = self.image_range(copy.tile, source, length, iteration)?;
                        let to = self.image_range(copy.tile, destination, length, iteration)?;
                        let owners = Owners::current(&self.roots, &self.log);
                        // Copies move padding too: written-ness moves with the bytes.
                        let image = &mut self.images[copy.tile as usize];
                        owners
                            .check(&image.ownership, from, length, source.allocation.0)
                            .map_err(|clobber| TileFault {
                                tile: Some(copy.tile),
                                message: format!("copy: {clobber}"),
                            })?;
                        let bytes = image.bytes[from..from + length].to_vec();
                        let mask = image.written_mask_if_partial(from, length);
                        image.write_with(to, &bytes, mask.as_deref());
                        owners.claim(&mut image.ownership, to, length, destination.allocation.0);
                    }
                    self.counts.copy_rows += u64::from(copy.rows);
                }
            }
            Step::Fills { fills, .. } => {
                for fill in fills {
                    let length = fill.row_bytes as usize;
                    let zeros = vec![0u8; length];
                    for row in 0..fill.rows {
                        let mut destination = fill.destination;
                        destination.offset += row * fill.stride;
                        let to = self.image_range(fill.tile, destination, length, iteration)?;
                        let owners = Owners::current(&self.roots, &self.log);
                        let image = &mut self.images[fill.tile as usize];
                        image.write(to, &zeros);
                        owners.claim(&mut image.ownership, to, length, destination.allocation.0);
                    }
                    self.counts.fills += 1;
                }
            }
            Step::Repeat { .. } | Step::Checkpoint { .. } => {}
        }
        Ok(())
    }
}

/// How strictly to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimulationOptions {
    /// Fail on kernel reads of bytes the read allocation never wrote
    /// (never-written memory, or another allocation's bytes); otherwise
    /// count them in [`PackageCounts`].
    pub strict: bool,
    /// Start every tile's memory filled with a NaN pattern instead of
    /// zeros (NaN in every FP32 and FP16 word and in every other FP8 code),
    /// and have kernels read bytes that only another allocation wrote as
    /// that pattern too (stale memory may hold anything). Any result that
    /// depends on bytes its operands never defined then differs from the
    /// interpreter's (whose buffers start at zero).
    pub poisoned: bool,
}

impl Default for SimulationOptions {
    fn default() -> SimulationOptions {
        SimulationOptions {
            strict: true,
            poisoned: false,
        }
    }
}

/// Simulates `package` (assembled from `program`, expanded from `layouts`)
/// on `weights`; returns the output value (logical row-major). Strict:
/// a kernel reading bytes it never wrote fails.
pub fn simulate(
    package: &Package,
    program: &LowProgram,
    layouts: &Layouts,
    weights: &Weights,
) -> Result<PackageRun, PackageFault> {
    simulate_with(
        package,
        program,
        layouts,
        weights,
        SimulationOptions::default(),
    )
}

/// As [`simulate`], with `options`.
pub fn simulate_with(
    package: &Package,
    program: &LowProgram,
    layouts: &Layouts,
    weights: &Weights,
    options: SimulationOptions,
) -> Result<PackageRun, PackageFault> {
    // Nothing of the package is used before it is admitted.
    let admitted = admit(package, program).map_err(|refusal| {
        setup_fault(format!(
            "the package cannot be executed for this program: {refusal}"
        ))
    })?;
    simulate_admitted(admitted, program, layouts, weights, options)
}

/// A fault before any step ran.
fn setup_fault(message: String) -> PackageFault {
    PackageFault {
        tile: None,
        step: "-".into(),
        iteration: 0,
        phase: "-".into(),
        message,
    }
}

/// [`simulate_with`] of a package already admitted for `program`.
pub fn simulate_admitted(
    admitted: Admitted<'_>,
    program: &LowProgram,
    layouts: &Layouts,
    weights: &Weights,
    options: SimulationOptions,
) -> Result<PackageRun, PackageFault> {
    let package = admitted.package();
    if package.fp8_scale != weights.fp8_scale {
        return Err(setup_fault(format!(
            "the package was built with fp8_scale = {}, but the weights are quantised with \
             fp8_scale = {}; build and run with the same workload.fp8_scale",
            package.fp8_scale, weights.fp8_scale
        )));
    }
    let strict = options.strict;
    let roots: Vec<u32> = program
        .allocations
        .iter()
        .enumerate()
        .map(|(id, allocation)| {
            if (allocation.alias_group as usize) < program.allocations.len() {
                allocation.alias_group
            } else {
                id as u32
            }
        })
        .collect();
    let log = vec!["the host load".to_string()];
    let mut images: Vec<TileImage> = (0..package.tiles)
        .into_par_iter()
        .map(|_| TileImage::new(options.poisoned))
        .collect();
    let owners = Owners {
        roots: &roots,
        log: &log,
        step: 0,
    };
    load::load_inputs(&mut images, package, program, layouts, weights, owners)
        .map_err(|error| setup_fault(format!("loading: {error}")))?;
    let mut simulator = Simulator {
        package,
        program,
        images,
        placed: PlacedIntervals::new(package),
        phase_of_path: package
            .phases
            .iter()
            .enumerate()
            .map(|(index, phase)| (phase.step_path.clone(), index))
            .collect(),
        scales: WeightScales::new(program, layouts, weights),
        counts: PackageCounts::default(),
        last_phase: "-".into(),
        strict,
        unwritten_reads: std::sync::atomic::AtomicU64::new(0),
        foreign_reads: ForeignReads::default(),
        poisoned: options.poisoned,
        shared_rows: sharing::SharedRows::new(package),
        roots,
        log,
    };
    simulator.run_steps(&package.steps, &mut Vec::new(), 0)?;
    let output = load::read_output(
        &simulator.images,
        package,
        program,
        layouts,
        simulator.owners(),
    )
    .map_err(|error| setup_fault(format!("output: {error}")))?;
    let mut counts = simulator.counts;
    counts.unwritten_kernel_reads = simulator.unwritten_reads.into_inner();
    let (foreign, first_foreign_read) = simulator.foreign_reads.into_summary();
    counts.foreign_kernel_reads = foreign;
    Ok(PackageRun {
        output,
        counts,
        first_foreign_read,
    })
}
