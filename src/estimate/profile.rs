//! The program's modelled profile: every exchange phase and compute step of
//! the phase-grouped program, in program order, with what one execution
//! costs, how often it runs and (for compute) how busy the tiles are; and
//! the modelled timeline those costs make, to find the step that covers a
//! given cycle.
//!
//! It charges exactly what the estimate charges (an exchange: horizon, the
//! sync above it and the patching before it; a compute step: its busiest
//! tile), so the rows' totals add up to the estimate's total. Pure: it
//! takes the steps and lookups of the costs.

use std::collections::HashMap;

use serde::Serialize;

use super::PhaseCost;
use super::compute::StepLoad;
use crate::expand::program::Step;
use crate::target::costs::PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES;

/// What a profile entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Exchange,
    Kernels,
    Copies,
    Fills,
}

impl StepKind {
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Exchange => "exchange",
            StepKind::Kernels => "kernels",
            StepKind::Copies => "copies",
            StepKind::Fills => "fills",
        }
    }

    pub fn is_compute(self) -> bool {
        self != StepKind::Exchange
    }
}

/// One exchange phase or compute step of the program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProfileEntry {
    /// Stable key: the phase key (`op#ordinal`) of an exchange; for a
    /// compute step `op:kind#ordinal` (its ordinal among that op's steps of
    /// that kind).
    pub key: String,
    pub kind: StepKind,
    /// The op that made it.
    pub op: String,
    /// The step's position in program order among every exchange phase and
    /// compute step (the Repeat body once): the one index `phases`,
    /// `explain`, the trace and the report show.
    pub step: usize,
    /// Internal lookup: an exchange's phase index (into the phase lists and
    /// figures), a compute step's index among compute steps.
    #[serde(skip)]
    pub index: usize,
    pub executions: u64,
    /// Cycles of one execution, as the estimate charges them.
    pub cycles: u64,
    /// `cycles × executions`.
    pub total_cycles: u64,
    /// Exchange only: the scheduled horizon and the patching before it
    /// (both inside `cycles`, with the sync above the horizon).
    pub horizon: u64,
    pub patch_cycles: u64,
    /// Compute only: tiles with work, and the sum of every tile's busy
    /// cycles in one execution.
    pub busy_tiles: u32,
    pub busy_tile_cycles: u64,
}

impl ProfileEntry {
    /// Compute only: busy tile-cycles over (tiles × step cycles).
    pub fn occupancy(&self, tiles: u32) -> Option<f64> {
        if !self.kind.is_compute() || self.cycles == 0 || tiles == 0 {
            return None;
        }
        Some(self.busy_tile_cycles as f64 / (tiles as f64 * self.cycles as f64))
    }
}

/// The timeline's structure: an entry, or a Repeat of a body.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Span {
    Entry {
        entry: usize,
        cycles: u64,
    },
    Repeat {
        iterations: u64,
        body: Vec<Span>,
        body_cycles: u64,
    },
}

fn spans_cycles(spans: &[Span]) -> u64 {
    spans
        .iter()
        .map(|span| match span {
            Span::Entry { cycles, .. } => *cycles,
            Span::Repeat {
                iterations,
                body_cycles,
                ..
            } => iterations * body_cycles,
        })
        .sum()
}

/// Where one execution of an entry sits on the modelled timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Placed {
    pub entry: usize,
    /// First cycle of this execution.
    pub start: u64,
    /// The Repeat iteration of each enclosing Repeat, outermost first.
    pub iterations: Vec<u64>,
}

/// The program's entries in order, and its timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramProfile {
    pub entries: Vec<ProfileEntry>,
    pub tiles: u32,
    timeline: Vec<Span>,
}

impl ProgramProfile {
    /// Cycles of the whole timeline (the estimate's total).
    pub fn total_cycles(&self) -> u64 {
        spans_cycles(&self.timeline)
    }

    /// The execution that covers `cycle` of the timeline, if any.
    pub fn at_offset(&self, cycle: u64) -> Option<Placed> {
        let mut iterations = Vec::new();
        let mut base = 0u64;
        let mut spans = self.timeline.as_slice();
        let mut offset = cycle;
        'descend: loop {
            for span in spans {
                match span {
                    Span::Entry { entry, cycles } => {
                        if offset < *cycles {
                            return Some(Placed {
                                entry: *entry,
                                start: base,
                                iterations,
                            });
                        }
                        offset -= cycles;
                        base += cycles;
                    }
                    Span::Repeat {
                        iterations: count,
                        body,
                        body_cycles,
                    } => {
                        let whole = count * body_cycles;
                        if offset < whole {
                            let iteration = offset / body_cycles;
                            iterations.push(iteration);
                            offset -= iteration * body_cycles;
                            base += iteration * body_cycles;
                            spans = body;
                            continue 'descend;
                        }
                        offset -= whole;
                        base += whole;
                    }
                }
            }
            return None;
        }
    }

    /// Every execution of every entry in timeline order, with its start
    /// cycle (`visit(entry, start, cycles)`). Repeats are unrolled: this is
    /// proportional to the executions, not to the entries.
    pub fn for_each_execution(&self, visit: &mut dyn FnMut(usize, u64, u64)) {
        fn walk(spans: &[Span], base: &mut u64, visit: &mut dyn FnMut(usize, u64, u64)) {
            for span in spans {
                match span {
                    Span::Entry { entry, cycles } => {
                        visit(*entry, *base, *cycles);
                        *base += cycles;
                    }
                    Span::Repeat {
                        iterations, body, ..
                    } => {
                        for _ in 0..*iterations {
                            walk(body, base, visit);
                        }
                    }
                }
            }
        }
        walk(&self.timeline, &mut 0, visit);
    }
}

/// Every program step of `steps` in order, the one step index `phases`
/// shows (exchange phases and compute steps, the Repeat body once,
/// checkpoints left out), each with its flattened position as liveness
/// numbers steps (checkpoints counted).
pub fn program_steps(steps: &[Step]) -> Vec<(usize, &Step)> {
    fn walk<'steps>(
        steps: &'steps [Step],
        flat: &mut usize,
        kept: &mut Vec<(usize, &'steps Step)>,
    ) {
        for step in steps {
            match step {
                Step::Repeat { body, .. } => walk(body, flat, kept),
                Step::Checkpoint { .. } => *flat += 1,
                _ => {
                    kept.push((*flat, step));
                    *flat += 1;
                }
            }
        }
    }
    let mut kept = Vec::new();
    walk(steps, &mut 0, &mut kept);
    kept
}

/// Each exchange step's number, by step path: its position in program order
/// among every exchange phase and compute step (the Repeat body once,
/// checkpoints not counted), the `step` [`profile`] gives its entry. It
/// reads only the steps, so a command that forms the phase groups without
/// scheduling them (`packing`, `sweep`) numbers them as `phases` does.
pub fn exchange_steps(steps: &[Step]) -> HashMap<Vec<u32>, usize> {
    fn walk(
        steps: &[Step],
        path: &mut Vec<u32>,
        next: &mut usize,
        numbers: &mut HashMap<Vec<u32>, usize>,
    ) {
        for (position, step) in steps.iter().enumerate() {
            path.push(position as u32);
            match step {
                Step::Repeat { body, .. } => walk(body, path, next, numbers),
                Step::Checkpoint { .. } => {}
                Step::Exchange { .. } => {
                    numbers.insert(path.clone(), *next);
                    *next += 1;
                }
                Step::Kernels { .. } | Step::Copies { .. } | Step::Fills { .. } => *next += 1,
            }
            path.pop();
        }
    }
    let mut numbers = HashMap::new();
    walk(steps, &mut Vec::new(), &mut 0, &mut numbers);
    numbers
}

/// What the profile needs of an exchange phase, by step path.
#[derive(Clone, Copy, Debug)]
pub struct PhaseEntry<'key> {
    pub index: usize,
    pub key: &'key str,
    pub cost: PhaseCost,
}

/// The profile of `steps`: `phases` gives each exchange's index, key and
/// cost by step path, `loads` each compute step's load by step path.
pub fn profile(
    steps: &[Step],
    names: &[String],
    phases: &HashMap<Vec<u32>, PhaseEntry<'_>>,
    loads: &HashMap<Vec<u32>, StepLoad>,
    tiles: u32,
) -> ProgramProfile {
    struct Walker<'input> {
        names: &'input [String],
        phases: &'input HashMap<Vec<u32>, PhaseEntry<'input>>,
        loads: &'input HashMap<Vec<u32>, StepLoad>,
        entries: Vec<ProfileEntry>,
        ordinals: HashMap<(u32, StepKind), u32>,
        compute_index: usize,
    }
    impl Walker<'_> {
        fn name(&self, op: u32) -> String {
            self.names
                .get(op as usize)
                .cloned()
                .unwrap_or_else(|| format!("op{op}"))
        }

        fn walk(&mut self, steps: &[Step], path: &mut Vec<u32>, executions: u64) -> Vec<Span> {
            let mut spans = Vec::new();
            for (position, step) in steps.iter().enumerate() {
                path.push(position as u32);
                let (kind, provenance) = match step {
                    Step::Repeat { iterations, body } => {
                        let count = u64::from(*iterations);
                        let body = self.walk(body, path, executions * count);
                        let body_cycles = spans_cycles(&body);
                        spans.push(Span::Repeat {
                            iterations: count,
                            body,
                            body_cycles,
                        });
                        path.pop();
                        continue;
                    }
                    Step::Checkpoint { .. } => {
                        path.pop();
                        continue;
                    }
                    Step::Exchange { provenance, .. } => (StepKind::Exchange, provenance),
                    Step::Kernels { provenance, .. } => (StepKind::Kernels, provenance),
                    Step::Copies { provenance, .. } => (StepKind::Copies, provenance),
                    Step::Fills { provenance, .. } => (StepKind::Fills, provenance),
                };
                let op = self.name(provenance.op);
                let entry = if kind == StepKind::Exchange {
                    let phase = self.phases.get(path.as_slice()).copied();
                    let cost = phase.map(|phase| phase.cost).unwrap_or_default();
                    let cycles =
                        cost.horizon + PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES + cost.patch_cycles;
                    ProfileEntry {
                        key: phase.map_or_else(|| format!("{op}#?"), |phase| phase.key.to_string()),
                        kind,
                        op,
                        step: self.entries.len(),
                        index: phase.map_or(usize::MAX, |phase| phase.index),
                        executions,
                        cycles,
                        total_cycles: cycles * executions,
                        horizon: cost.horizon,
                        patch_cycles: cost.patch_cycles,
                        busy_tiles: 0,
                        busy_tile_cycles: 0,
                    }
                } else {
                    let load = self.loads.get(path.as_slice()).copied().unwrap_or_default();
                    let ordinal = self.ordinals.entry((provenance.op, kind)).or_insert(0);
                    let key = format!("{op}:{}#{ordinal}", kind.name());
                    *ordinal += 1;
                    let index = self.compute_index;
                    self.compute_index += 1;
                    ProfileEntry {
                        key,
                        kind,
                        op,
                        step: self.entries.len(),
                        index,
                        executions,
                        cycles: load.cycles,
                        total_cycles: load.cycles * executions,
                        horizon: 0,
                        patch_cycles: 0,
                        busy_tiles: load.busy_tiles,
                        busy_tile_cycles: load.busy_tile_cycles,
                    }
                };
                spans.push(Span::Entry {
                    entry: self.entries.len(),
                    cycles: entry.cycles,
                });
                self.entries.push(entry);
                path.pop();
            }
            spans
        }
    }
    let mut walker = Walker {
        names,
        phases,
        loads,
        entries: Vec::new(),
        ordinals: HashMap::new(),
        compute_index: 0,
    };
    let timeline = walker.walk(steps, &mut Vec::new(), 1);
    ProgramProfile {
        entries: walker.entries,
        tiles,
        timeline,
    }
}

#[cfg(test)]
mod tests;
