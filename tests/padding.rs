//! Padding is part of the program: a program whose padding is not defined
//! is refused by both simulators, each with its own record of written
//! bytes.

use crate::common::query;
use superstep::direct::load_weights;
use superstep::expand::program::{Reason, Step};
use superstep::session::Session;
use superstep::sim::interpreter::interpret;
use superstep::sim::memory::SimError;
use superstep::sim::package::{SimulationOptions, simulate, simulate_with};

/// A tiny ViT whose cost model's own plan splits the attention's keys (6
/// query x 9 key parts, 45 x 29 blocks): the partial attention kernels
/// read whole 45-row query blocks, the last of which holds fewer valid
/// rows, and the program zeroes those padding rows.
pub const PADDED_ATTENTION: &[&str] = &[
    "workload.patches=256",
    "workload.heads=2",
    "workload.width=160",
    "workload.mlp=320",
    "machine.tiles=128",
];

/// Removes every padding fill (`Reason::Padding`) from `steps`, Repeat
/// bodies included; returns how many fills it removed.
fn drop_padding_fills(steps: &mut [Step]) -> usize {
    let mut removed = 0;
    for step in steps {
        match step {
            Step::Fills { provenance, fills } if provenance.reason == Reason::Padding => {
                removed += fills.len();
                fills.clear();
            }
            Step::Repeat { body, .. } => removed += drop_padding_fills(body),
            _ => {}
        }
    }
    removed
}

/// A program that leaves padding undefined: the zero fills of the query
/// padding the partial attention kernels read, taken out of the low
/// program and of its package. The interpreter (its own written-byte
/// record per allocation) and the package simulator (its per-tile bitmap
/// and ownership map) each refuse it, naming the kernel, the operand and
/// its value, the tile and the byte; with `--poisoned`'s options the
/// package simulator counts the reads instead and reads them as NaN.
#[test]
fn undefined_padding_is_refused_by_both_simulators() {
    let query = query("queries/vit-tiny.toml", PADDED_ATTENTION);
    let mut session = Session::new(&query);
    session.build().expect("build");
    let weights = load_weights(&query, session.graph()).expect("weights");
    let layouts = session.layouts().expect("layouts");
    let mut program = (*session.low_program().expect("program")).clone();
    let removed = drop_padding_fills(&mut program.steps);
    assert!(removed > 0, "the build has no padding fills");
    let mut package = session.package().expect("package");
    assert_eq!(drop_padding_fills(&mut package.steps), removed);
    let named = "the partial attention kernel of `layer.attn.core` reads operand `query` \
                 (value `layer.attn.split_q`";

    let error = interpret(&program, &layouts, &weights)
        .expect_err("the interpreter refuses undefined padding");
    println!("interpreter: {error}");
    assert!(matches!(error, SimError::Undefined(_)), "{error}");
    let error = error.to_string();
    assert!(error.starts_with("tile "), "{error}");
    assert!(error.contains(named), "{error}");
    assert!(error.contains("never wrote"), "{error}");

    let fault = simulate(&package, &program, &layouts, &weights)
        .expect_err("the package simulator refuses undefined padding");
    println!("package simulator: {fault}");
    assert!(fault.tile.is_some(), "{fault}");
    assert!(fault.message.contains(named), "{fault}");
    assert!(fault.message.contains(" at 0x"), "{fault}");

    let run = simulate_with(
        &package,
        &program,
        &layouts,
        &weights,
        SimulationOptions {
            strict: false,
            poisoned: true,
        },
    )
    .expect("counted, not refused");
    println!("{:?}", run.counts);
    assert!(run.counts.unwritten_kernel_reads + run.counts.foreign_kernel_reads > 0);
}
