//! Visiting every location a step names (for remapping allocation
//! references at assembly and for checks).

use super::program::{Kernel, Location, MatMulOutput, Operand, Step};

fn operand(operand: &mut Operand, visit: &mut impl FnMut(&mut Location)) {
    visit(&mut operand.location);
}

pub fn kernel_locations_mut(kernel: &mut Kernel, visit: &mut impl FnMut(&mut Location)) {
    match kernel {
        Kernel::MatMul {
            a, weight, output, ..
        } => {
            operand(a, visit);
            operand(weight, visit);
            match output {
                MatMulOutput::Partial(partial) => operand(partial, visit),
                MatMulOutput::Final { output, bias, .. } => {
                    operand(output, visit);
                    operand(bias, visit);
                }
            }
        }
        Kernel::ReduceBias {
            local,
            received,
            bias,
            output,
            ..
        } => {
            operand(local, visit);
            operand(received, visit);
            operand(bias, visit);
            operand(output, visit);
        }
        Kernel::LayerNorm {
            input,
            gamma,
            beta,
            output,
            ..
        } => {
            operand(input, visit);
            operand(gamma, visit);
            operand(beta, visit);
            operand(output, visit);
        }
        Kernel::Gelu { input, output, .. }
        | Kernel::Rotary { input, output, .. }
        | Kernel::Cast { input, output, .. } => {
            operand(input, visit);
            operand(output, visit);
        }
        Kernel::AttentionPartial {
            query,
            key,
            value,
            partial,
            ..
        } => {
            operand(query, visit);
            operand(key, visit);
            operand(value, visit);
            visit(partial);
        }
        Kernel::AttentionCombine {
            local,
            received,
            output,
            ..
        } => {
            visit(local);
            visit(received);
            operand(output, visit);
        }
        Kernel::Add { a, b, output, .. } => {
            operand(a, visit);
            operand(b, visit);
            operand(output, visit);
        }
        Kernel::Attention {
            query,
            key,
            value,
            output,
            scratch,
            ..
        } => {
            operand(query, visit);
            operand(key, visit);
            operand(value, visit);
            operand(output, visit);
            visit(scratch);
        }
    }
}

/// Calls `visit` on every location in `step` (recursing into Repeat bodies).
pub fn step_locations_mut(step: &mut Step, visit: &mut impl FnMut(&mut Location)) {
    match step {
        Step::Kernels { runs, .. } => {
            for run in runs {
                kernel_locations_mut(&mut run.kernel, visit);
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
