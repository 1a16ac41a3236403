//! Visiting every location a step names (for remapping allocation
//! references at assembly and for checks); a kernel's operands come from
//! its one access description (`access`).

use super::program::{Location, Step};

/// Calls `visit` on every location in `step` (recursing into Repeat bodies).
pub fn step_locations_mut(step: &mut Step, visit: &mut impl FnMut(&mut Location)) {
    match step {
        Step::Kernels { runs, .. } => {
            for run in runs {
                run.kernel
                    .visit_accesses_mut(&mut |_, _, location| visit(location));
            }
        }
        Step::Copies { copies, .. } => {
            for copy in copies {
                visit(&mut copy.source);
                visit(&mut copy.destination);
            }
        }
        Step::Fills { fills, .. } => {
            for fill in fills {
                visit(&mut fill.destination);
            }
        }
        Step::Exchange { transfers, .. } => {
            for location in &mut transfers.source_location {
                visit(location);
            }
            for destination in &mut transfers.destinations {
                visit(&mut destination.location);
            }
        }
        Step::Repeat { body, .. } => {
            for inner in body {
                step_locations_mut(inner, visit);
            }
        }
        Step::Checkpoint { .. } => {}
    }
}
