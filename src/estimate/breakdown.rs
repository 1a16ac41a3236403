//! Compute cycles per op: every compute step's cost (its busiest tile, as
//! the estimate charges it) times its executions, attributed to the op that
//! made the step, with the multiply-accumulates its kernels perform on the
//! matrix unit and the roofline those MACs allow on the whole machine.
//!
//! It owns the attribution and the roofline arithmetic; the per-step cycles
//! come from the estimate's own table, so the per-op totals add up to the
//! estimate's compute cycles exactly.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::expand::program::{Kernel, Step};
use crate::numerics::dot::ProductInputs;
use crate::target::costs::MatrixPrecision;

/// One op's compute over a whole run of the program.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpCompute {
    pub op: String,
    /// Compute steps of this op executed (Repeat iterations counted).
    pub steps: u64,
    /// Runs of the op in one run of the program: its Repeat's iterations
    /// (1 outside the layer loop).
    pub executions: u64,
    /// Cycles the estimate charges this op's compute steps.
    pub cycles: u64,
    /// Of `cycles`: kernel steps, local-copy steps and zero-fill steps.
    pub kernel_cycles: u64,
    pub copy_cycles: u64,
    pub fill_cycles: u64,
    /// Multiply-accumulates with both inputs FP8 (products and attention's
    /// `PV` under `planning.matrix_inputs = "fp8"`), all tiles.
    pub fp8_macs: u64,
    /// Multiply-accumulates at the FP16 rate (matrix products with widened
    /// FP8 weights, attention's `QK^T` and FP16 `PV` products), all tiles.
    pub fp16_macs: u64,
    /// Cycles those MACs need with every tile's matrix unit busy.
    pub roofline_cycles: u64,
}

/// Multiply-accumulates of one kernel run on the matrix unit, by the rate
/// they run at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatrixMacs {
    /// Both inputs FP8.
    pub fp8: u64,
    /// Both inputs FP16.
    pub fp16: u64,
}

impl MatrixMacs {
    fn at(macs: u64, inputs: ProductInputs) -> MatrixMacs {
        match inputs {
            ProductInputs::Fp16 => MatrixMacs { fp8: 0, fp16: macs },
            ProductInputs::Fp8 { .. } => MatrixMacs { fp8: macs, fp16: 0 },
        }
    }
}

/// Multiply-accumulates of one kernel run on the matrix unit and the rates
/// they run at: a product of FP16 activations and FP8 weights widens the
/// weights and runs at the FP16 rate (CALIBRATION.md: no FP16 x FP8 mode);
/// one of FP8 activations runs at the FP8 rate. Attention's `QK^T` runs at
/// the FP16 rate, its `PV` product at its kernel's inputs' rate.
pub fn kernel_matrix_macs(kernel: &Kernel) -> MatrixMacs {
    match *kernel {
        Kernel::MatMul {
            rows,
            reduction,
            cols,
            inputs,
            ..
        } => MatrixMacs::at(rows as u64 * reduction as u64 * cols as u64, inputs),
        Kernel::Attention {
            groups,
            queries,
            keys,
            dimension,
            value_product,
            ..
        }
        | Kernel::AttentionPartial {
            groups,
            queries,
            keys,
            dimension,
            value_product,
            ..
        } => {
            let product = groups as u64 * queries as u64 * keys as u64 * dimension as u64;
            let weighted = MatrixMacs::at(product, value_product);
            MatrixMacs {
                fp8: weighted.fp8,
                fp16: product + weighted.fp16,
            }
        }
        _ => MatrixMacs::default(),
    }
}

/// Cycles `fp8_macs` and `fp16_macs` take with all `tiles` matrix units busy.
pub fn roofline_cycles(fp8_macs: u64, fp16_macs: u64, tiles: u32) -> u64 {
    let tiles = u64::from(tiles.max(1));
    let rate = |precision: MatrixPrecision| precision.macs_per_cycle() * tiles;
    fp8_macs.div_ceil(rate(MatrixPrecision::Float8))
        + fp16_macs.div_ceil(rate(MatrixPrecision::Float16))
}

/// Per-op compute of `steps`, given each compute step's cycles by step path
/// (the estimate's table) and the program's names; sorted by cycles, most first.
pub fn compute_by_op(
    steps: &[Step],
    names: &[String],
    step_cycles: &HashMap<Vec<u32>, u64>,
    tiles: u32,
) -> Vec<OpCompute> {
    #[derive(Default)]
    struct Totals {
        steps: u64,
        executions: u64,
        cycles: u64,
        kernel_cycles: u64,
        copy_cycles: u64,
        fill_cycles: u64,
        fp8_macs: u64,
        fp16_macs: u64,
    }
    fn walk(
        steps: &[Step],
        step_cycles: &HashMap<Vec<u32>, u64>,
        executions: u64,
        path: &mut Vec<u32>,
        totals: &mut BTreeMap<u32, Totals>,
    ) {
        for (index, step) in steps.iter().enumerate() {
            path.push(index as u32);
            let provenance = match step {
                Step::Repeat { iterations, body } => {
                    walk(
                        body,
                        step_cycles,
                        executions * *iterations as u64,
                        path,
                        totals,
                    );
                    None
                }
                Step::Kernels { provenance, .. }
                | Step::Copies { provenance, .. }
                | Step::Fills { provenance, .. } => Some(provenance),
                Step::Exchange { .. } | Step::Checkpoint { .. } => None,
            };
            if let Some(provenance) = provenance {
                let entry = totals.entry(provenance.op).or_default();
                entry.steps += executions;
                entry.executions = entry.executions.max(executions);
                let cycles = step_cycles.get(path.as_slice()).copied().unwrap_or(0) * executions;
                entry.cycles += cycles;
                match step {
                    Step::Kernels { .. } => entry.kernel_cycles += cycles,
                    Step::Copies { .. } => entry.copy_cycles += cycles,
                    _ => entry.fill_cycles += cycles,
                }
                if let Step::Kernels { runs, .. } = step {
                    for run in runs {
                        let macs = kernel_matrix_macs(&run.kernel);
                        entry.fp8_macs += macs.fp8 * executions;
                        entry.fp16_macs += macs.fp16 * executions;
                    }
                }
            }
            path.pop();
        }
    }
    let mut totals = BTreeMap::new();
    walk(steps, step_cycles, 1, &mut Vec::new(), &mut totals);
    let mut ops: Vec<OpCompute> = totals
        .into_iter()
        .map(|(op, totals)| OpCompute {
            op: names
                .get(op as usize)
                .cloned()
                .unwrap_or_else(|| format!("op {op}")),
            steps: totals.steps,
            executions: totals.executions,
            cycles: totals.cycles,
            kernel_cycles: totals.kernel_cycles,
            copy_cycles: totals.copy_cycles,
            fill_cycles: totals.fill_cycles,
            fp8_macs: totals.fp8_macs,
            fp16_macs: totals.fp16_macs,
            roofline_cycles: roofline_cycles(totals.fp8_macs, totals.fp16_macs, tiles),
        })
        .collect();
    ops.sort_by(|a, b| b.cycles.cmp(&a.cycles).then_with(|| a.op.cmp(&b.op)));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::program::{
        AllocationId, KernelRun, Location, MatMulOutput, Operand, Provenance, Reason,
    };
    use crate::numerics::dot::Accumulation;

    fn operand() -> Operand {
        Operand {
            location: Location {
                allocation: AllocationId(0),
                offset: 0,
            },
            line: 0,
            matrix: 0,
        }
    }

    #[test]
    fn ops_add_up_over_repeats_and_count_their_macs() {
        let matmul = Kernel::MatMul {
            a: operand(),
            weight: operand(),
            output: MatMulOutput::Partial(operand()),
            rows: 4,
            reduction: 16,
            cols: 8,
            valid_rows: 4,
            valid_reduction: 16,
            valid_cols: 8,
            accumulation: Accumulation::F32,
            inputs: crate::numerics::dot::ProductInputs::Fp16,
            activations: crate::numerics::dot::ActivationStore::F16,
        };
        let provenance = |op| Provenance {
            op,
            value: None,
            reason: Reason::Compute,
        };
        let steps = vec![
            Step::Kernels {
                provenance: provenance(0),
                runs: vec![KernelRun {
                    tile: 0,
                    kernel: matmul,
                }],
            },
            Step::Repeat {
                iterations: 3,
                body: vec![Step::Kernels {
                    provenance: provenance(1),
                    runs: vec![
                        KernelRun {
                            tile: 0,
                            kernel: matmul,
                        },
                        KernelRun {
                            tile: 1,
                            kernel: matmul,
                        },
                    ],
                }],
            },
        ];
        let mut cycles = HashMap::new();
        cycles.insert(vec![0], 100);
        cycles.insert(vec![1, 0], 70);
        let names = vec!["first".to_string(), "second".to_string()];
        let ops = compute_by_op(&steps, &names, &cycles, 2);
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].op, "second");
        assert_eq!((ops[0].steps, ops[0].cycles), (3, 210));
        assert_eq!(ops[0].kernel_cycles, 210);
        assert_eq!(ops[0].copy_cycles + ops[0].fill_cycles, 0);
        // Products of FP16 activations and FP8 weights run at the FP16 rate.
        assert_eq!(ops[0].fp8_macs, 0);
        assert_eq!(ops[0].fp16_macs, 3 * 2 * 4 * 16 * 8);
        assert_eq!(ops[0].roofline_cycles, (3 * 2 * 512u64).div_ceil(128));
        assert_eq!((ops[1].op.as_str(), ops[1].cycles), ("first", 100));
        assert_eq!((ops[1].fp8_macs, ops[1].fp16_macs), (0, 4 * 16 * 8));
        assert_eq!(roofline_cycles(0, 128 * 3, 2), 3);
    }
}
