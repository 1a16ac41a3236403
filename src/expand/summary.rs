//! Counts over a low program (what `superstep build` prints and snapshots
//! record): allocations, kernel runs, local copies, fills, exchanges and
//! transfers, in total and per Repeat body.

use serde::Serialize;

use super::program::{LowProgram, Step};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct StepCounts {
    pub kernel_runs: u64,
    pub local_copies: u64,
    pub copy_rows: u64,
    pub zero_fills: u64,
    pub exchanges: u64,
    pub transfers: u64,
    pub transfer_destinations: u64,
    pub transfer_words: u64,
}

impl StepCounts {
    pub fn add_step(&mut self, step: &Step) {
        match step {
            Step::Kernels { runs, .. } => self.kernel_runs += runs.len() as u64,
            Step::Copies { copies, .. } => {
                self.local_copies += copies.len() as u64;
                self.copy_rows += copies.iter().map(|copy| copy.rows as u64).sum::<u64>();
            }
            Step::Fills { fills, .. } => self.zero_fills += fills.len() as u64,
            Step::Exchange { transfers, .. } => {
                self.exchanges += 1;
                self.transfers += transfers.len() as u64;
                self.transfer_destinations += transfers.destinations.len() as u64;
                self.transfer_words += transfers.total_words();
            }
            Step::Repeat { body, .. } => body.iter().for_each(|inner| self.add_step(inner)),
            Step::Checkpoint { .. } => {}
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ProgramSummary {
    pub tiles: u32,
    pub allocations: u64,
    pub allocated_bytes: u64,
    /// Everything in the program, with the Repeat body counted once.
    pub total: StepCounts,
    /// The Repeat body alone (counted once), and its iteration count.
    pub repeat_body: StepCounts,
    pub repeat_iterations: u32,
    /// Exchange phases executed at run time (body phases times iterations).
    pub executed_exchanges: u64,
}

pub fn summarize(program: &LowProgram) -> ProgramSummary {
    let mut summary = ProgramSummary {
        tiles: program.tiles,
        allocations: program.allocations.len() as u64,
        allocated_bytes: program
            .allocations
            .iter()
            .map(|allocation| allocation.bytes as u64 * allocation.iterations as u64)
            .sum(),
        ..ProgramSummary::default()
    };
    for step in &program.steps {
        summary.total.add_step(step);
        if let Step::Repeat { iterations, body } = step {
            summary.repeat_iterations = *iterations;
            for inner in body {
                summary.repeat_body.add_step(inner);
            }
        }
    }
    summary.executed_exchanges = summary.total.exchanges
        + summary.repeat_body.exchanges * summary.repeat_iterations.saturating_sub(1) as u64;
    summary
}
