//! Refitting the kernel cost table to measured calls: family by family, in
//! a fixed order (the shared vector call first, from the adds), each
//! family's free constants by least squares on relative error over its own
//! points, the constants fitted before held fixed. Every formula is linear
//! in its constants (`super::formulas`), so each step is a small linear
//! system; a family with too few or degenerate points keeps its constants
//! and says so. Deterministic: the same points give the same table.

use super::formulas::{KernelCall, ProductOutput, kernel_cost};
use super::points::CalibrationPoint;
use super::table::{Constant, CostTable};
use crate::target::costs::BULK_PATCHER_THRESHOLD_WORDS;

/// One step of the fit: a family's points and the constants they determine.
struct FitStep {
    name: &'static str,
    free: &'static [Constant],
    selects: fn(&KernelCall) -> bool,
}

const STEPS: [FitStep; 14] = [
    FitStep {
        name: "add",
        free: &[Constant::VectorCall, Constant::AddPerElement],
        selects: |call| matches!(call, KernelCall::Add { .. }),
    },
    FitStep {
        name: "gelu",
        free: &[Constant::GeluPerElement],
        selects: |call| matches!(call, KernelCall::Gelu { .. }),
    },
    FitStep {
        name: "bias-gelu",
        free: &[Constant::BiasGeluPerRow, Constant::BiasGeluPerElement],
        selects: |call| matches!(call, KernelCall::BiasGelu { .. }),
    },
    FitStep {
        name: "layernorm",
        free: &[Constant::LayerNormPerElement],
        selects: |call| matches!(call, KernelCall::LayerNorm { .. }),
    },
    FitStep {
        name: "layernorm-statistics",
        free: &[Constant::LayerNormStatisticsPerElement],
        selects: |call| matches!(call, KernelCall::LayerNormStatistics { .. }),
    },
    FitStep {
        name: "add-layernorm",
        free: &[Constant::AddLayerNormPerElement],
        selects: |call| matches!(call, KernelCall::AddLayerNorm { .. }),
    },
    FitStep {
        name: "softmax-split",
        free: &[Constant::SoftmaxPerWorkerElement],
        selects: |call| matches!(call, KernelCall::SoftmaxSplit { .. }),
    },
    FitStep {
        name: "softmax-segmented",
        free: &[Constant::SoftmaxSegmentCombine],
        selects: |call| matches!(call, KernelCall::SoftmaxSegmented { .. }),
    },
    FitStep {
        name: "reduce",
        free: &[
            Constant::ReducePerElement,
            Constant::ReducePerPartialElement,
        ],
        selects: |call| matches!(call, KernelCall::Reduce { .. }),
    },
    FitStep {
        name: "cast row-major",
        free: &[Constant::CastRowMajorPerElement],
        selects: |call| matches!(call, KernelCall::Cast { into, .. } if *into == super::formulas::CastInto::RowMajor),
    },
    FitStep {
        name: "cast panels",
        free: &[Constant::CastPanelsPerElement],
        selects: |call| matches!(call, KernelCall::Cast { into, .. } if *into == super::formulas::CastInto::Panels),
    },
    FitStep {
        name: "matmul",
        free: &[
            Constant::MatMulCall,
            Constant::MatMulPerPanel,
            Constant::MatMulPerRowPanel,
        ],
        selects: |call| matches!(call, KernelCall::MatMul { output, .. } if *output == ProductOutput::Native),
    },
    FitStep {
        name: "matmul packed",
        free: &[Constant::MatMulPackedPerElement],
        selects: |call| matches!(call, KernelCall::MatMul { output, .. } if *output == ProductOutput::Packed),
    },
    FitStep {
        name: "patch",
        free: &[Constant::PatchBulkCall, Constant::PatchBulkPerWord],
        selects: |call| matches!(call, KernelCall::Patch { words } if *words >= BULK_PATCHER_THRESHOLD_WORDS),
    },
];

/// What one step of the fit did.
#[derive(Clone, Debug, PartialEq)]
pub struct StepOutcome {
    /// The family (`add`, `matmul`, ...).
    pub family: &'static str,
    /// Its points in the file.
    pub points: usize,
    /// The constants it fits.
    pub constants: Vec<Constant>,
    /// `None` when fitted; otherwise why the constants were kept.
    pub kept_because: Option<String>,
}

/// Why the points cannot be fitted at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error(
        "the {family} points give `{constant}` = {value:.4}, below 0: the points disagree with the formula's shape (check lines {lines})"
    )]
    Negative {
        family: &'static str,
        constant: &'static str,
        value: f64,
        lines: String,
    },
}

/// The table fitted to `points`, starting from `base` (constants no point
/// determines keep their `base` value), and what each step did.
pub fn fit_table(
    points: &[CalibrationPoint],
    base: &CostTable,
) -> Result<(CostTable, Vec<StepOutcome>), FitError> {
    let mut table = *base;
    let mut outcomes = Vec::new();
    for step in &STEPS {
        let selected: Vec<&CalibrationPoint> = points
            .iter()
            .filter(|point| (step.selects)(&point.call))
            .collect();
        let mut outcome = StepOutcome {
            family: step.name,
            points: selected.len(),
            constants: step.free.to_vec(),
            kept_because: None,
        };
        if selected.len() < step.free.len() {
            outcome.kept_because = Some(format!(
                "{} point(s) for {} constant(s)",
                selected.len(),
                step.free.len()
            ));
            outcomes.push(outcome);
            continue;
        }
        match solve_step(step, &selected, &table) {
            Some(values) => {
                for (&constant, &value) in step.free.iter().zip(&values) {
                    if value < 0.0 {
                        return Err(FitError::Negative {
                            family: step.name,
                            constant: constant.name(),
                            value,
                            lines: selected
                                .iter()
                                .map(|point| point.line.to_string())
                                .collect::<Vec<_>>()
                                .join(", "),
                        });
                    }
                }
                for (&constant, value) in step.free.iter().zip(values) {
                    table.set(constant, value);
                }
            }
            None => {
                outcome.kept_because = Some(
                    "the points do not tell the constants apart (shapes too alike)".to_string(),
                );
            }
        }
        outcomes.push(outcome);
    }
    Ok((table, outcomes))
}

/// The least-squares values of `step.free` on relative error, or `None`
/// when the normal equations are singular.
fn solve_step(step: &FitStep, points: &[&CalibrationPoint], table: &CostTable) -> Option<Vec<f64>> {
    let size = step.free.len();
    let mut normal = vec![vec![0.0f64; size + 1]; size];
    for point in points {
        let cost = kernel_cost(point.call, table);
        let mut features = vec![0.0f64; size];
        let mut fixed = 0.0;
        for term in &cost.terms {
            match term
                .constant
                .and_then(|constant| step.free.iter().position(|&free| free == constant))
            {
                Some(index) => features[index] += term.count,
                None => fixed += term.cycles,
            }
        }
        // Relative error: each row divided by the measurement.
        let weight = 1.0 / (point.measured_cycles * point.measured_cycles);
        let target = point.measured_cycles - fixed;
        for row in 0..size {
            for column in 0..size {
                normal[row][column] += weight * features[row] * features[column];
            }
            normal[row][size] += weight * features[row] * target;
        }
    }
    solve(normal)
}

/// Gaussian elimination with partial pivoting on an augmented `n x (n+1)`
/// system; `None` when it is singular.
fn solve(mut system: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let size = system.len();
    let scale = system
        .iter()
        .flat_map(|row| row[..size].iter())
        .fold(0.0f64, |largest, value| largest.max(value.abs()));
    if scale == 0.0 {
        return None;
    }
    for column in 0..size {
        let pivot = (column..size)
            .max_by(|&a, &b| system[a][column].abs().total_cmp(&system[b][column].abs()))?;
        if system[pivot][column].abs() <= scale * 1e-13 {
            return None;
        }
        system.swap(column, pivot);
        let (upper, lower) = system.split_at_mut(column + 1);
        let pivot_row = &upper[column];
        for row in lower.iter_mut() {
            let factor = row[column] / pivot_row[column];
            for (value, pivot_value) in row[column..].iter_mut().zip(&pivot_row[column..]) {
                *value -= factor * pivot_value;
            }
        }
    }
    let mut values = vec![0.0; size];
    for row in (0..size).rev() {
        let known: f64 = (row + 1..size)
            .map(|column| system[row][column] * values[column])
            .sum();
        values[row] = (system[row][size] - known) / system[row][row];
    }
    Some(values)
}

/// A point's modelled cycles under `table` and its relative error.
pub fn point_error(point: &CalibrationPoint, table: &CostTable) -> (u64, f64) {
    let modelled = kernel_cost(point.call, table).cycles;
    let error = (modelled as f64 - point.measured_cycles) / point.measured_cycles;
    (modelled, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::kernel_cost::points::{parse_points, shipped_points};
    use crate::target::kernel_cost::table::CONSTANTS;

    #[test]
    fn refitting_the_shipped_points_reproduces_the_shipped_table() {
        let mut perturbed = CostTable::shipped();
        for constant in CONSTANTS {
            perturbed.set(constant, perturbed.get(constant) * 1.7 + 3.0);
        }
        let (fitted, outcomes) = fit_table(&shipped_points(), &perturbed).unwrap();
        assert!(
            outcomes
                .iter()
                .all(|outcome| outcome.kept_because.is_none())
        );
        for constant in CONSTANTS {
            let (got, shipped) = (fitted.get(constant), constant.shipped());
            assert!(
                (got - shipped).abs() <= shipped.abs() * 1e-9,
                "{}: refitted {got:?}, shipped {shipped:?}",
                constant.name()
            );
        }
    }

    #[test]
    fn every_calibration_point_is_reproduced_within_five_percent() {
        let table = CostTable::shipped();
        let mut report = String::new();
        let mut worst: f64 = 0.0;
        for point in shipped_points() {
            let (modelled, error) = point_error(&point, &table);
            report.push_str(&format!(
                "line {:>2} {:<22} measured {:>6} modelled {:>6} error {:+.2}%\n",
                point.line,
                point.kernel,
                point.measured_cycles,
                modelled,
                error * 100.0
            ));
            worst = worst.max(error.abs());
        }
        println!("{report}");
        assert!(
            worst <= 0.05,
            "worst error {:.2}%:\n{report}",
            worst * 100.0
        );
    }

    #[test]
    fn a_family_without_enough_points_keeps_its_constants() {
        let points = parse_points(
            "kernel,shape,cycles\nadd,elements=100,500\nadd,elements=100,520\ngelu,elements=1000,6000\n",
        )
        .unwrap();
        let (fitted, outcomes) = fit_table(&points, &CostTable::shipped()).unwrap();
        let add = outcomes
            .iter()
            .find(|outcome| outcome.family == "add")
            .unwrap();
        assert!(
            add.kept_because
                .as_deref()
                .unwrap()
                .contains("tell the constants apart")
        );
        let matmul = outcomes
            .iter()
            .find(|outcome| outcome.family == "matmul")
            .unwrap();
        assert_eq!(
            matmul.kept_because.as_deref(),
            Some("0 point(s) for 3 constant(s)")
        );
        assert_eq!(
            fitted.get(Constant::MatMulCall),
            Constant::MatMulCall.shipped()
        );
        // GELU is refitted against the kept (shipped) vector call.
        let expected = (6000.0 - Constant::VectorCall.shipped()) / 1000.0;
        assert!((fitted.get(Constant::GeluPerElement) - expected).abs() < 1e-9);
    }

    #[test]
    fn points_that_need_a_negative_constant_are_refused() {
        let points =
            parse_points("kernel,shape,cycles\nadd,elements=4,5000\nadd,elements=4000,400\n")
                .unwrap();
        assert!(matches!(
            fit_table(&points, &CostTable::shipped()),
            Err(FitError::Negative {
                constant: "add_per_element",
                ..
            })
        ));
    }
}
