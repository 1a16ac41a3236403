//! The kernel cost formulas: one per kernel family, each a sum of named
//! terms that are either machine facts (the matrix unit's work at its
//! rate, IPU21.md) or a fitted constant of [`CostTable`] times a count read
//! off the call's shape. Every term is linear in its constant, which is what
//! lets `super::fit` refit the table by least squares.

use super::table::{Constant, CostTable};
use crate::target::costs::{
    ARITHMETIC_PATCH_CYCLES_PER_WORD, BULK_PATCHER_THRESHOLD_WORDS, MATRIX_FP8_MACS_PER_CYCLE,
    MATRIX_FP16_MACS_PER_CYCLE, WORKERS_PER_TILE,
};

/// The matrix unit's input precision (both operands; CALIBRATION.md: there
/// is no FP16 x FP8 mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixInputs {
    /// Both operands FP8 (F143): 128 MACs per cycle, K32 x C16 panels.
    Fp8,
    /// Both operands FP16: 64 MACs per cycle, K16 x C16 panels.
    Fp16,
}

impl MatrixInputs {
    pub fn name(self) -> &'static str {
        match self {
            MatrixInputs::Fp8 => "fp8",
            MatrixInputs::Fp16 => "fp16",
        }
    }

    /// Multiply-accumulates per cycle (IPU21.md, "Chip": AMP).
    pub fn macs_per_cycle(self) -> u64 {
        match self {
            MatrixInputs::Fp8 => MATRIX_FP8_MACS_PER_CYCLE,
            MatrixInputs::Fp16 => MATRIX_FP16_MACS_PER_CYCLE,
        }
    }

    /// Reduction depth of one coefficient panel (CALIBRATION.md: the
    /// coefficient store holds one K32 x C16 FP8 panel or K16 x C16 FP16 panel).
    pub fn panel_depth(self) -> u64 {
        match self {
            MatrixInputs::Fp8 => 32,
            MatrixInputs::Fp16 => 16,
        }
    }
}

/// Output columns of one coefficient panel (CALIBRATION.md: C16).
pub const PANEL_COLUMNS: u64 = 16;

/// How a product writes its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProductOutput {
    /// The matrix unit's native row layout (every product the compiler emits).
    Native,
    /// Packed rows (CALIBRATION.md's packed-output check).
    Packed,
}

/// Where a cast to FP8 writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CastInto {
    RowMajor,
    Panels,
}

/// One call of one kernel on one tile: the family and its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelCall {
    MatMul {
        rows: u64,
        reduction: u64,
        cols: u64,
        inputs: MatrixInputs,
        output: ProductOutput,
    },
    /// Softmax over `keys` of each of `rows` rows, in whichever variant is
    /// cheaper (rows split over the workers, or each row segmented).
    Softmax {
        rows: u64,
        keys: u64,
    },
    /// Softmax with whole rows dealt to the six workers.
    SoftmaxSplit {
        rows: u64,
        keys: u64,
    },
    /// Softmax with each row segmented over the six workers and combined.
    SoftmaxSegmented {
        rows: u64,
        keys: u64,
    },
    LayerNorm {
        rows: u64,
        width: u64,
    },
    LayerNormStatistics {
        rows: u64,
        width: u64,
    },
    AddLayerNorm {
        rows: u64,
        width: u64,
    },
    Gelu {
        elements: u64,
    },
    BiasGelu {
        rows: u64,
        width: u64,
    },
    Add {
        elements: u64,
    },
    /// The sum of `parts` partial slices of `elements` each.
    Reduce {
        elements: u64,
        parts: u64,
    },
    Cast {
        rows: u64,
        cols: u64,
        into: CastInto,
    },
    /// Repeat patching of `words` exchange words on one tile.
    Patch {
        words: u64,
    },
}

/// One term of a call's cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Term {
    /// What the term is (`matrix unit`, `panels`, ...).
    pub name: &'static str,
    /// The fitted constant it multiplies, or `None` for a machine fact.
    pub constant: Option<Constant>,
    /// The count the constant multiplies (1 for a per-call constant).
    pub count: f64,
    /// Its cycles.
    pub cycles: f64,
}

/// A call's modelled cost: its terms and their sum rounded to cycles.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelCost {
    /// The family's name (`matmul`, `softmax`, ...).
    pub kernel: &'static str,
    /// The variant the formula chose, where the family has more than one.
    pub variant: Option<&'static str>,
    pub terms: Vec<Term>,
    pub cycles: u64,
}

/// The terms of a call as they are priced: summed always, and kept only
/// when a caller wants to show them (pricing a whole program allocates
/// nothing per kernel run).
struct Terms<'table> {
    table: &'table CostTable,
    terms: Vec<Term>,
    total: f64,
    keep: bool,
}

impl Terms<'_> {
    fn fitted(&mut self, name: &'static str, constant: Constant, count: u64) {
        let count = count as f64;
        let cycles = self.table.get(constant) * count;
        self.total += cycles;
        if self.keep {
            self.terms.push(Term {
                name,
                constant: Some(constant),
                count,
                cycles,
            });
        }
    }

    fn fact(&mut self, name: &'static str, cycles: u64) {
        let cycles = cycles as f64;
        self.total += cycles;
        if self.keep {
            self.terms.push(Term {
                name,
                constant: None,
                count: 1.0,
                cycles,
            });
        }
    }

    fn finish(self, kernel: &'static str, variant: Option<&'static str>) -> KernelCost {
        KernelCost {
            kernel,
            variant,
            terms: self.terms,
            cycles: self.total.round().max(0.0) as u64,
        }
    }
}

/// Coefficient panels of a `reduction x cols` operand at `inputs`.
pub fn panels(reduction: u64, cols: u64, inputs: MatrixInputs) -> u64 {
    reduction.div_ceil(inputs.panel_depth()) * cols.div_ceil(PANEL_COLUMNS)
}

/// The matrix unit's own cycles: every row through every panel, panels
/// padded to whole depths and columns (IPU21.md, "Chip": AMP rates).
pub fn matrix_unit_cycles(rows: u64, reduction: u64, cols: u64, inputs: MatrixInputs) -> u64 {
    let panel_macs = inputs.panel_depth() * PANEL_COLUMNS;
    (rows * panels(reduction, cols, inputs) * panel_macs).div_ceil(inputs.macs_per_cycle())
}

/// The modelled cost of one call, with its terms.
pub fn kernel_cost(call: KernelCall, table: &CostTable) -> KernelCost {
    priced(call, table, true)
}

fn priced(call: KernelCall, table: &CostTable, keep: bool) -> KernelCost {
    let mut terms = Terms {
        table,
        terms: Vec::new(),
        total: 0.0,
        keep,
    };
    let workers = u64::from(WORKERS_PER_TILE);
    match call {
        KernelCall::MatMul {
            rows,
            reduction,
            cols,
            inputs,
            output,
        } => {
            terms.fact(
                "matrix unit",
                matrix_unit_cycles(rows, reduction, cols, inputs),
            );
            terms.fitted("call", Constant::MatMulCall, 1);
            terms.fitted(
                "panels",
                Constant::MatMulPerPanel,
                panels(reduction, cols, inputs),
            );
            terms.fitted(
                "row panels",
                Constant::MatMulPerRowPanel,
                rows * cols.div_ceil(PANEL_COLUMNS),
            );
            if output == ProductOutput::Packed {
                terms.fitted(
                    "packed output",
                    Constant::MatMulPackedPerElement,
                    rows * cols,
                );
            }
            terms.finish("matmul", Some(inputs.name()))
        }
        KernelCall::Softmax { rows, keys } => {
            let split = priced(KernelCall::SoftmaxSplit { rows, keys }, table, keep);
            let segmented = priced(KernelCall::SoftmaxSegmented { rows, keys }, table, keep);
            let chosen = if segmented.cycles < split.cycles {
                segmented
            } else {
                split
            };
            KernelCost {
                kernel: "softmax",
                ..chosen
            }
        }
        KernelCall::SoftmaxSplit { rows, keys } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted(
                "busiest worker's elements",
                Constant::SoftmaxPerWorkerElement,
                rows.div_ceil(workers) * keys,
            );
            terms.finish("softmax-split", Some("split rows"))
        }
        KernelCall::SoftmaxSegmented { rows, keys } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted(
                "busiest worker's elements",
                Constant::SoftmaxPerWorkerElement,
                rows * keys.div_ceil(workers),
            );
            terms.fitted("segment combines", Constant::SoftmaxSegmentCombine, rows);
            terms.finish("softmax-segmented", Some("segmented rows"))
        }
        KernelCall::LayerNorm { rows, width } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted("elements", Constant::LayerNormPerElement, rows * width);
            terms.finish("layernorm", None)
        }
        KernelCall::LayerNormStatistics { rows, width } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted(
                "elements",
                Constant::LayerNormStatisticsPerElement,
                rows * width,
            );
            terms.finish("layernorm-statistics", None)
        }
        KernelCall::AddLayerNorm { rows, width } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted("elements", Constant::AddLayerNormPerElement, rows * width);
            terms.finish("add-layernorm", None)
        }
        KernelCall::Gelu { elements } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted("elements", Constant::GeluPerElement, elements);
            terms.finish("gelu", None)
        }
        KernelCall::BiasGelu { rows, width } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted("rows", Constant::BiasGeluPerRow, rows);
            terms.fitted("elements", Constant::BiasGeluPerElement, rows * width);
            terms.finish("bias-gelu", None)
        }
        KernelCall::Add { elements } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted("elements", Constant::AddPerElement, elements);
            terms.finish("add", None)
        }
        KernelCall::Reduce { elements, parts } => {
            terms.fitted("call", Constant::VectorCall, 1);
            terms.fitted("elements", Constant::ReducePerElement, elements);
            terms.fitted(
                "partial elements",
                Constant::ReducePerPartialElement,
                elements * parts,
            );
            terms.finish("reduce", None)
        }
        KernelCall::Cast { rows, cols, into } => {
            terms.fitted("call", Constant::VectorCall, 1);
            let (constant, variant) = match into {
                CastInto::RowMajor => (Constant::CastRowMajorPerElement, "row-major"),
                CastInto::Panels => (Constant::CastPanelsPerElement, "panels"),
            };
            terms.fitted("elements", constant, rows * cols);
            terms.finish("cast", Some(variant))
        }
        KernelCall::Patch { words } => {
            if words >= BULK_PATCHER_THRESHOLD_WORDS {
                terms.fitted("call", Constant::PatchBulkCall, 1);
                terms.fitted("words", Constant::PatchBulkPerWord, words);
                terms.finish("patch", Some("six-worker bulk"))
            } else {
                terms.fact(
                    "words (supervisor loop)",
                    words.saturating_mul(ARITHMETIC_PATCH_CYCLES_PER_WORD),
                );
                terms.finish("patch", Some("supervisor loop"))
            }
        }
    }
}

/// Cycles of one call (the sum of [`kernel_cost`]'s terms, without them).
pub fn call_cycles(call: KernelCall, table: &CostTable) -> u64 {
    priced(call, table, false).cycles
}
