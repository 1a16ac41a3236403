//! Liveness of allocations over the flattened step sequence: every step
//! (Repeat bodies inlined once) gets an index, and an allocation is live from
//! its first to its last touching step. An allocation touched inside a
//! Repeat is live for the whole Repeat when its value crosses iterations or
//! the Repeat's boundary: when it is also touched outside the Repeat, or when
//! its first touch in the body is a read (carried from the previous
//! iteration). An allocation only used inside the body and written before it
//! is read there is recomputed by every iteration, so its live range is its
//! span within the body, which lets body temporaries share storage. Iterated allocations (per-layer weights) and
//! allocations first read before any write (weights, the program input,
//! loaded by the host) are live from the start; allocations whose last touch
//! is a write (the program output, read back by the host) stay live to the
//! end. Alias groups are resolved to their root.
//!
//! Owns the live ranges only; it must not assign addresses.

use crate::expand::access::AccessRole;
use crate::expand::program::{Kernel, Location, LowProgram, Step};

/// Live step range `[first, last]` per allocation root (`None` for
/// allocations never touched and for non-root alias members).
pub struct Liveness {
    pub ranges: Vec<Option<(u32, u32)>>,
    /// Flattened step count.
    pub steps: u32,
}

#[derive(Clone, Copy, Default)]
struct Touches {
    /// First and last touching steps in program order.
    first: u32,
    last: u32,
    touched: bool,
    first_is_read: bool,
    last_is_write: bool,
    /// Touched outside every Repeat.
    outside: bool,
    /// Union of the flattened ranges of the Repeats it is touched in.
    repeat: Option<(u32, u32)>,
    /// Its first touch inside a Repeat reads (a value carried into the body).
    carried: bool,
}

struct Walker<'program> {
    program: &'program LowProgram,
    touches: Vec<Touches>,
    next: u32,
    /// The outermost Repeat's flattened range while inside it.
    repeat: Option<(u32, u32)>,
}

/// Flattened step count of `steps`: every step once, Repeat bodies inlined once.
pub fn flat_count(steps: &[Step]) -> u32 {
    steps
        .iter()
        .map(|step| match step {
            Step::Repeat { body, .. } => flat_count(body),
            _ => 1,
        })
        .sum()
}

impl Walker<'_> {
    fn touch(&mut self, location: Location, write: bool, index: u32) {
        let id = location.allocation.0 as usize;
        let Some(allocation) = self.program.allocations.get(id) else {
            return;
        };
        let root = allocation.alias_group as usize;
        let root = if root < self.touches.len() { root } else { id };
        let repeat = self.repeat;
        let entry = &mut self.touches[root];
        if let Some((start, end)) = repeat {
            if entry.repeat.is_none() {
                entry.carried = !write;
            }
            entry.repeat = Some(entry.repeat.map_or((start, end), |(first, last)| {
                (first.min(start), last.max(end))
            }));
        } else {
            entry.outside = true;
        }
        if !entry.touched {
            entry.touched = true;
            entry.first = index;
            entry.last = index;
            entry.first_is_read = !write;
            entry.last_is_write = write;
            return;
        }
        if index > entry.last {
            entry.last = index;
            entry.last_is_write = write;
        } else if index == entry.last {
            entry.last_is_write |= write;
        }
    }

    fn kernel(&mut self, kernel: &Kernel, index: u32) {
        let accesses = kernel.accesses();
        // Reads first, then results and scratch: an operand in an
        // allocation the run also writes counts as the write only.
        for access in accesses.iter() {
            if access.role == AccessRole::Read
                && !accesses.writes_allocation(access.location.allocation)
            {
                self.touch(access.location, false, index);
            }
        }
        for access in accesses.iter() {
            if access.role != AccessRole::Read {
                self.touch(access.location, true, index);
            }
        }
    }

    fn walk(&mut self, steps: &[Step]) {
        for step in steps {
            if let Step::Repeat { body, .. } = step {
                let outer = self.repeat;
                if outer.is_none() {
                    let count = flat_count(body);
                    self.repeat = Some((self.next, (self.next + count).saturating_sub(1)));
                }
                self.walk(body);
                self.repeat = outer;
                continue;
            }
            let index = self.next;
            self.next += 1;
            match step {
                Step::Kernels { runs, .. } => {
                    runs.iter().for_each(|run| self.kernel(&run.kernel, index))
                }
                Step::Copies { copies, .. } => {
                    for copy in copies {
                        self.touch(copy.source, false, index);
                        self.touch(copy.destination, true, index);
                    }
                }
                Step::Fills { fills, .. } => fills
                    .iter()
                    .for_each(|fill| self.touch(fill.destination, true, index)),
                Step::Exchange { transfers, .. } => {
                    for &location in &transfers.source_location {
                        self.touch(location, false, index);
                    }
                    for destination in &transfers.destinations {
                        self.touch(destination.location, true, index);
                    }
                }
                Step::Repeat { .. } | Step::Checkpoint { .. } => {}
            }
        }
    }
}

/// Live ranges of every allocation root of `program` over `steps`.
pub fn liveness(program: &LowProgram, steps: &[Step]) -> Liveness {
    let count = flat_count(steps);
    let mut walker = Walker {
        program,
        touches: vec![Touches::default(); program.allocations.len()],
        next: 0,
        repeat: None,
    };
    walker.walk(steps);
    let end = count.saturating_sub(1);
    let ranges = walker
        .touches
        .iter()
        .enumerate()
        .map(|(id, touches)| {
            let allocation = &program.allocations[id];
            if allocation.alias_group as usize != id
                && (allocation.alias_group as usize) < program.allocations.len()
            {
                return None;
            }
            if !touches.touched {
                return None;
            }
            let first = if touches.first_is_read || allocation.iterations > 1 {
                0
            } else {
                touches.first
            };
            let last = if touches.last_is_write || allocation.iterations > 1 {
                end
            } else {
                touches.last
            };
            Some((first, last))
        })
        .collect();
    Liveness {
        ranges,
        steps: count,
    }
}
