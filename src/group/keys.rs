//! Stable phase keys: an exchange is named by its operator's name path and
//! its ordinal among that operator's exchanges (`layer.mlp.down#0`), so that
//! adding, removing or changing one operator never renames another's phases.
//! Owns naming only; it must not reorder or merge steps.

use std::collections::HashMap;

use crate::expand::program::{LowProgram, Step};

/// Keys of every exchange of `steps`, depth-first (Repeat bodies in place).
pub fn exchange_keys(program: &LowProgram, steps: &[Step]) -> Vec<String> {
    let mut ordinals: HashMap<u32, u32> = HashMap::new();
    let mut keys = Vec::new();
    collect(program, steps, &mut ordinals, &mut keys);
    keys
}

fn collect(
    program: &LowProgram,
    steps: &[Step],
    ordinals: &mut HashMap<u32, u32>,
    keys: &mut Vec<String>,
) {
    for step in steps {
        match step {
            Step::Exchange { provenance, .. } => {
                let ordinal = ordinals.entry(provenance.op).or_insert(0);
                let name = program
                    .names
                    .get(provenance.op as usize)
                    .map_or("unnamed", String::as_str);
                keys.push(format!("{name}#{ordinal}"));
                *ordinal += 1;
            }
            Step::Repeat { body, .. } => collect(program, body, ordinals, keys),
            _ => {}
        }
    }
}
