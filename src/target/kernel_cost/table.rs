//! The kernel cost table: every fitted constant of the kernel cost model, its
//! shipped value and where that value comes from. A [`CostTable`] is the
//! shipped table or one a user refitted to their own profiles
//! (`superstep calibrate`) and named in a build (`machine.calibration`).
//! This module owns the constants' names, their sources and the calibration
//! file's text form; the formulas that use them are in `super::formulas`.

use std::fmt::Write as _;

/// One fitted constant of the kernel cost model (cycles, or cycles per unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Constant {
    /// A vector kernel's supervisor call with six-worker setup.
    VectorCall,
    /// An FP16 add, per element.
    AddPerElement,
    /// An FP16 GELU, per element.
    GeluPerElement,
    /// A fused bias + GELU, per row (the bias row's setup).
    BiasGeluPerRow,
    /// A fused bias + GELU, per element.
    BiasGeluPerElement,
    /// LayerNorm (FP32 statistics, FP16 in and out), per element.
    LayerNormPerElement,
    /// LayerNorm statistics only, per element.
    LayerNormStatisticsPerElement,
    /// A residual add fused with LayerNorm, per element.
    AddLayerNormPerElement,
    /// Softmax with rows split over the workers, per element of the busiest worker.
    SoftmaxPerWorkerElement,
    /// Segmented softmax (one row split over the workers), per row: the workers' combine.
    SoftmaxSegmentCombine,
    /// A partial-sum reduction, per output element.
    ReducePerElement,
    /// A partial-sum reduction, per output element and partial.
    ReducePerPartialElement,
    /// A cast FP16 -> FP8 written row-major, per element.
    CastRowMajorPerElement,
    /// A cast FP16 -> FP8 written into matrix-unit panels, per element.
    CastPanelsPerElement,
    /// A matrix-unit product's call: supervisor, worker setup, pipeline fill and drain.
    MatMulCall,
    /// A matrix-unit product, per coefficient panel (load and switch).
    MatMulPerPanel,
    /// A matrix-unit product, per row and column panel (output write).
    MatMulPerRowPanel,
    /// A matrix-unit product with packed output, per output element.
    MatMulPackedPerElement,
    /// The six-worker bulk Repeat patcher's call.
    PatchBulkCall,
    /// The six-worker bulk Repeat patcher, per patched word.
    PatchBulkPerWord,
}

/// Every constant, in table order (the order of the calibration file).
pub const CONSTANTS: [Constant; 20] = [
    Constant::VectorCall,
    Constant::AddPerElement,
    Constant::GeluPerElement,
    Constant::BiasGeluPerRow,
    Constant::BiasGeluPerElement,
    Constant::LayerNormPerElement,
    Constant::LayerNormStatisticsPerElement,
    Constant::AddLayerNormPerElement,
    Constant::SoftmaxPerWorkerElement,
    Constant::SoftmaxSegmentCombine,
    Constant::ReducePerElement,
    Constant::ReducePerPartialElement,
    Constant::CastRowMajorPerElement,
    Constant::CastPanelsPerElement,
    Constant::MatMulCall,
    Constant::MatMulPerPanel,
    Constant::MatMulPerRowPanel,
    Constant::MatMulPackedPerElement,
    Constant::PatchBulkCall,
    Constant::PatchBulkPerWord,
];

impl Constant {
    /// The constant's name in calibration files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Constant::VectorCall => "vector_call",
            Constant::AddPerElement => "add_per_element",
            Constant::GeluPerElement => "gelu_per_element",
            Constant::BiasGeluPerRow => "bias_gelu_per_row",
            Constant::BiasGeluPerElement => "bias_gelu_per_element",
            Constant::LayerNormPerElement => "layernorm_per_element",
            Constant::LayerNormStatisticsPerElement => "layernorm_statistics_per_element",
            Constant::AddLayerNormPerElement => "add_layernorm_per_element",
            Constant::SoftmaxPerWorkerElement => "softmax_per_worker_element",
            Constant::SoftmaxSegmentCombine => "softmax_segment_combine",
            Constant::ReducePerElement => "reduce_per_element",
            Constant::ReducePerPartialElement => "reduce_per_partial_element",
            Constant::CastRowMajorPerElement => "cast_row_major_per_element",
            Constant::CastPanelsPerElement => "cast_panels_per_element",
            Constant::MatMulCall => "matmul_call",
            Constant::MatMulPerPanel => "matmul_per_panel",
            Constant::MatMulPerRowPanel => "matmul_per_row_panel",
            Constant::MatMulPackedPerElement => "matmul_packed_per_element",
            Constant::PatchBulkCall => "patch_bulk_call",
            Constant::PatchBulkPerWord => "patch_bulk_per_word",
        }
    }

    /// The constant a calibration file's name stands for.
    pub fn from_name(name: &str) -> Option<Constant> {
        CONSTANTS
            .into_iter()
            .find(|constant| constant.name() == name)
    }

    /// Where the shipped value comes from: the calibration points it is
    /// fitted to (`calibration/ipu21.csv`, from design/CALIBRATION.md).
    pub fn source(self) -> &'static str {
        match self {
            Constant::VectorCall | Constant::AddPerElement => {
                "fitted to the adds of 4 and 1,152 values (CALIBRATION.md, vector kernels)"
            }
            Constant::GeluPerElement => "fitted to the FP16 GELU of 2,208 elements",
            Constant::BiasGeluPerRow | Constant::BiasGeluPerElement => {
                "fitted to the bias + GELU calls of 16 and 2,152 values"
            }
            Constant::LayerNormPerElement => "fitted to LayerNorm 1 x 1152",
            Constant::LayerNormStatisticsPerElement => "fitted to LayerNorm statistics 1 x 1152",
            Constant::AddLayerNormPerElement => "fitted to residual add + LayerNorm 1 x 1152",
            Constant::SoftmaxPerWorkerElement => "fitted to softmax, split rows, 8 x 729",
            Constant::SoftmaxSegmentCombine => "fitted to softmax, segmented, 1 x 729",
            Constant::ReducePerElement | Constant::ReducePerPartialElement => {
                "fitted to the reductions of 2,624 x 6 and 2,208 x 4"
            }
            Constant::CastRowMajorPerElement => {
                "fitted to the row-major casts 164 x 384 and 97 x 512"
            }
            Constant::CastPanelsPerElement => "fitted to the cast into panels 164 x 384",
            Constant::MatMulCall | Constant::MatMulPerPanel | Constant::MatMulPerRowPanel => {
                "fitted to the six native-output products (QKV, MLP up and down, attention output, PV, QK)"
            }
            Constant::MatMulPackedPerElement => "fitted to the packed-output check R128 K64 C64",
            Constant::PatchBulkCall | Constant::PatchBulkPerWord => {
                "fitted to the bulk patcher's 24, 78 and 1,024 words"
            }
        }
    }

    /// The shipped value: the fit of `calibration/ipu21.csv` (the test
    /// `refitting_the_shipped_points_reproduces_the_shipped_table` holds
    /// them equal).
    pub fn shipped(self) -> f64 {
        match self {
            Constant::VectorCall => 374.55052264808336,
            Constant::AddPerElement => 0.8623693379790942,
            Constant::GeluPerElement => 4.792323132858658,
            Constant::BiasGeluPerRow => 105.44947735191717,
            Constant::BiasGeluPerElement => 3.7499999999999996,
            Constant::LayerNormPerElement => 5.518619337979095,
            Constant::LayerNormStatisticsPerElement => 2.2582026713124277,
            Constant::AddLayerNormPerElement => 6.945702671312429,
            Constant::SoftmaxPerWorkerElement => 14.681378242353855,
            Constant::SoftmaxSegmentCombine => 3066.3213317847462,
            Constant::ReducePerElement => 1.0332081983143746,
            Constant::ReducePerPartialElement => 0.26246895102737533,
            Constant::CastRowMajorPerElement => 0.25614375159556074,
            Constant::CastPanelsPerElement => 0.3779130061825444,
            Constant::MatMulCall => 441.04533033855944,
            Constant::MatMulPerPanel => 155.04631020665903,
            Constant::MatMulPerRowPanel => 0.05415638186831913,
            Constant::MatMulPackedPerElement => 1.0657331102097551,
            Constant::PatchBulkCall => 233.5090444387422,
            Constant::PatchBulkPerWord => 9.01457319437037,
        }
    }
}

/// A value for every constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostTable {
    values: [f64; CONSTANTS.len()],
}

impl Default for CostTable {
    fn default() -> Self {
        CostTable::shipped()
    }
}

impl std::hash::Hash for CostTable {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for value in self.values {
            value.to_bits().hash(state);
        }
    }
}

impl Eq for CostTable {}

/// Why a calibration file's text is not a cost table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("line {line}: `{text}` is not `name = value`")]
    NotAnAssignment { line: usize, text: String },
    #[error("line {line}: `{name}` is not a constant of the kernel cost model (known: {known})")]
    UnknownConstant {
        line: usize,
        name: String,
        known: String,
    },
    #[error("line {line}: `{name}` = `{value}` is not a finite number of cycles at least 0")]
    BadValue {
        line: usize,
        name: String,
        value: String,
    },
    #[error("line {line}: `{name}` is given twice")]
    Repeated { line: usize, name: String },
    #[error("`{name}` is missing (a calibration file lists every constant)")]
    Missing { name: String },
}

impl CostTable {
    /// The table shipped with the target.
    pub fn shipped() -> CostTable {
        CostTable {
            values: CONSTANTS.map(Constant::shipped),
        }
    }

    pub fn get(&self, constant: Constant) -> f64 {
        self.values[constant as usize]
    }

    pub fn set(&mut self, constant: Constant, value: f64) {
        self.values[constant as usize] = value;
    }

    /// The calibration file's text: a comment, then `name = value` per
    /// constant with its source as a comment, in table order. Values are
    /// written with Rust's shortest round-trip formatting, so reading the
    /// text back gives this table exactly.
    pub fn to_text(&self, origin: &str) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# superstep kernel cost calibration (cycles at 1.5 GHz); {origin}"
        );
        for constant in CONSTANTS {
            let _ = writeln!(text, "# {}", constant.source());
            let _ = writeln!(text, "{} = {:?}", constant.name(), self.get(constant));
        }
        text
    }

    /// Reads a calibration file's text (see [`CostTable::to_text`]): every
    /// constant exactly once, `#` comments and blank lines ignored.
    pub fn from_text(text: &str) -> Result<CostTable, TableError> {
        let mut values: [Option<f64>; CONSTANTS.len()] = [None; CONSTANTS.len()];
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let Some((name, value)) = content.split_once('=') else {
                return Err(TableError::NotAnAssignment {
                    line,
                    text: content.to_string(),
                });
            };
            let (name, value) = (name.trim(), value.trim());
            let constant =
                Constant::from_name(name).ok_or_else(|| TableError::UnknownConstant {
                    line,
                    name: name.to_string(),
                    known: CONSTANTS.map(Constant::name).join(", "),
                })?;
            let parsed = value
                .parse::<f64>()
                .ok()
                .filter(|parsed| parsed.is_finite() && *parsed >= 0.0)
                .ok_or_else(|| TableError::BadValue {
                    line,
                    name: name.to_string(),
                    value: value.to_string(),
                })?;
            let slot = &mut values[constant as usize];
            if slot.is_some() {
                return Err(TableError::Repeated {
                    line,
                    name: name.to_string(),
                });
            }
            *slot = Some(parsed);
        }
        let mut table = CostTable::shipped();
        for constant in CONSTANTS {
            let value = values[constant as usize].ok_or_else(|| TableError::Missing {
                name: constant.name().to_string(),
            })?;
            table.set(constant, value);
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_in_discriminant_order_with_unique_names() {
        for (index, constant) in CONSTANTS.into_iter().enumerate() {
            assert_eq!(constant as usize, index);
            assert_eq!(Constant::from_name(constant.name()), Some(constant));
        }
    }

    #[test]
    fn the_text_form_reads_back_exactly() {
        let mut table = CostTable::shipped();
        table.set(Constant::MatMulCall, 123.456_789_012_345_67);
        let text = table.to_text("test");
        assert_eq!(CostTable::from_text(&text), Ok(table));
    }

    #[test]
    fn bad_calibration_files_name_the_line() {
        let shipped = CostTable::shipped().to_text("test");
        let unknown = format!("{shipped}bogus = 1\n");
        assert!(matches!(
            CostTable::from_text(&unknown),
            Err(TableError::UnknownConstant { name, .. }) if name == "bogus"
        ));
        let negative = shipped.replace("matmul_call = ", "matmul_call = -");
        assert!(matches!(
            CostTable::from_text(&negative),
            Err(TableError::BadValue { name, .. }) if name == "matmul_call"
        ));
        let missing: String = shipped
            .lines()
            .filter(|line| !line.starts_with("vector_call"))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(matches!(
            CostTable::from_text(&missing),
            Err(TableError::Missing { name }) if name == "vector_call"
        ));
        let repeated = format!("{shipped}vector_call = 1\n");
        assert!(matches!(
            CostTable::from_text(&repeated),
            Err(TableError::Repeated { .. })
        ));
    }
}
