//! Calibration points: measured cycles of one kernel call of a given shape,
//! read from a CSV file (`kernel,shape,cycles[,source]`, the shape as
//! space-separated `key=value` pairs named like `superstep cost`'s flags).
//! The points the shipped table is fitted to are `calibration/ipu21.csv`
//! (CALIBRATION.md's hardware measurements), compiled in.

use std::collections::BTreeMap;

use super::formulas::{CastInto, KernelCall, MatrixInputs, ProductOutput};

/// The shipped calibration points (CALIBRATION.md).
pub const SHIPPED_POINTS: &str = include_str!("../../../calibration/ipu21.csv");

/// The largest measurement file `superstep calibrate` reads.
pub const MAXIMUM_POINTS_BYTES: u64 = 4 << 20;

/// One measured call.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationPoint {
    /// The line of the file it was read from (1-based).
    pub line: usize,
    /// The kernel name as written.
    pub kernel: String,
    pub call: KernelCall,
    pub measured_cycles: f64,
    /// What the measurement is (the file's fourth column), if given.
    pub source: String,
}

/// Why a measurement file is not a list of calibration points.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointsError {
    #[error(
        "line 1: the header must be `kernel,shape,cycles` (optionally `,source`), not `{found}`"
    )]
    Header { found: String },
    #[error("line {line}: missing column `{column}` (a row is `kernel,shape,cycles[,source]`)")]
    MissingColumn { line: usize, column: &'static str },
    #[error("line {line}: unknown kernel `{kernel}` (known: {known})")]
    UnknownKernel {
        line: usize,
        kernel: String,
        known: &'static str,
    },
    #[error("line {line}: {kernel} needs `{key}=...` in its shape (it takes {keys})")]
    MissingShape {
        line: usize,
        kernel: String,
        key: &'static str,
        keys: &'static str,
    },
    #[error("line {line}: `{pair}` is not a `key=value` shape pair")]
    NotAPair { line: usize, pair: String },
    #[error("line {line}: {kernel} takes no `{key}` (it takes {keys})")]
    UnknownShapeKey {
        line: usize,
        kernel: String,
        key: String,
        keys: &'static str,
    },
    #[error("line {line}: `{key}={value}` must be {expected}")]
    BadShapeValue {
        line: usize,
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("line {line}: cycles `{value}` must be a finite number of cycles above 0")]
    BadCycles { line: usize, value: String },
    #[error("the file holds no calibration points")]
    Empty,
}

/// The kernel names a measurement file may use.
pub const KERNEL_NAMES: &str = "matmul, softmax, softmax-split, softmax-segmented, layernorm, \
                                layernorm-statistics, add-layernorm, gelu, bias-gelu, add, reduce, \
                                cast, patch";

/// Reads a measurement file's text.
pub fn parse_points(text: &str) -> Result<Vec<CalibrationPoint>, PointsError> {
    let mut lines = text.lines().enumerate();
    let header = lines
        .by_ref()
        .find(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|(_, line)| line.trim())
        .ok_or(PointsError::Empty)?;
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    if columns.len() < 3 || columns[..3] != ["kernel", "shape", "cycles"] {
        return Err(PointsError::Header {
            found: header.to_string(),
        });
    }
    let mut points = Vec::new();
    for (index, raw) in lines {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut fields = trimmed.splitn(4, ',').map(str::trim);
        let kernel = fields.next().unwrap_or("");
        let shape = fields.next().ok_or(PointsError::MissingColumn {
            line,
            column: "shape",
        })?;
        let cycles = fields.next().ok_or(PointsError::MissingColumn {
            line,
            column: "cycles",
        })?;
        let source = fields.next().unwrap_or("").to_string();
        let call = parse_call(line, kernel, shape)?;
        let measured_cycles = cycles
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite() && *value > 0.0)
            .ok_or_else(|| PointsError::BadCycles {
                line,
                value: cycles.to_string(),
            })?;
        points.push(CalibrationPoint {
            line,
            kernel: kernel.to_string(),
            call,
            measured_cycles,
            source,
        });
    }
    if points.is_empty() {
        return Err(PointsError::Empty);
    }
    Ok(points)
}

/// The shipped points.
pub fn shipped_points() -> Vec<CalibrationPoint> {
    parse_points(SHIPPED_POINTS).expect("calibration/ipu21.csv is a valid measurement file")
}

/// The shape of a call as `key=value` pairs, named like the flags.
pub fn shape_pairs(call: KernelCall) -> Vec<(&'static str, String)> {
    match call {
        KernelCall::MatMul {
            rows,
            reduction,
            cols,
            inputs,
            output,
        } => vec![
            ("rows", rows.to_string()),
            ("reduction", reduction.to_string()),
            ("cols", cols.to_string()),
            ("inputs", inputs.name().to_string()),
            (
                "output",
                match output {
                    ProductOutput::Native => "native",
                    ProductOutput::Packed => "packed",
                }
                .to_string(),
            ),
        ],
        KernelCall::Softmax { rows, keys }
        | KernelCall::SoftmaxSplit { rows, keys }
        | KernelCall::SoftmaxSegmented { rows, keys } => {
            vec![("rows", rows.to_string()), ("keys", keys.to_string())]
        }
        KernelCall::LayerNorm { rows, width }
        | KernelCall::LayerNormStatistics { rows, width }
        | KernelCall::AddLayerNorm { rows, width }
        | KernelCall::BiasGelu { rows, width } => {
            vec![("rows", rows.to_string()), ("width", width.to_string())]
        }
        KernelCall::Gelu { elements } | KernelCall::Add { elements } => {
            vec![("elements", elements.to_string())]
        }
        KernelCall::Reduce { elements, parts } => vec![
            ("elements", elements.to_string()),
            ("parts", parts.to_string()),
        ],
        KernelCall::Cast { rows, cols, into } => vec![
            ("rows", rows.to_string()),
            ("cols", cols.to_string()),
            (
                "into",
                match into {
                    CastInto::RowMajor => "row-major",
                    CastInto::Panels => "panels",
                }
                .to_string(),
            ),
        ],
        KernelCall::Patch { words } => vec![("words", words.to_string())],
    }
}

struct Shape<'text> {
    line: usize,
    kernel: &'text str,
    keys: &'static str,
    pairs: BTreeMap<&'text str, &'text str>,
}

impl<'text> Shape<'text> {
    fn count(&mut self, key: &'static str) -> Result<u64, PointsError> {
        let value = self.text(key)?;
        value
            .parse::<u64>()
            .ok()
            .filter(|count| (1..=1 << 32).contains(count))
            .ok_or_else(|| PointsError::BadShapeValue {
                line: self.line,
                key: key.to_string(),
                value: value.to_string(),
                expected: "a whole number from 1 to 2^32",
            })
    }

    fn text(&mut self, key: &'static str) -> Result<&'text str, PointsError> {
        self.pairs
            .remove(key)
            .ok_or_else(|| PointsError::MissingShape {
                line: self.line,
                kernel: self.kernel.to_string(),
                key,
                keys: self.keys,
            })
    }

    fn optional(&mut self, key: &'static str) -> Option<&'text str> {
        self.pairs.remove(key)
    }

    fn bad(&self, key: &str, value: &str, expected: &'static str) -> PointsError {
        PointsError::BadShapeValue {
            line: self.line,
            key: key.to_string(),
            value: value.to_string(),
            expected,
        }
    }

    fn finish(self, call: KernelCall) -> Result<KernelCall, PointsError> {
        match self.pairs.into_keys().next() {
            Some(key) => Err(PointsError::UnknownShapeKey {
                line: self.line,
                kernel: self.kernel.to_string(),
                key: key.to_string(),
                keys: self.keys,
            }),
            None => Ok(call),
        }
    }
}

fn shape_keys(kernel: &str) -> Option<&'static str> {
    Some(match kernel {
        "matmul" => "rows, reduction, cols, inputs (fp8|fp16), output (native|packed)",
        "softmax" | "softmax-split" | "softmax-segmented" => "rows, keys",
        "layernorm" | "layernorm-statistics" | "add-layernorm" | "bias-gelu" => "rows, width",
        "gelu" | "add" => "elements",
        "reduce" => "elements, parts",
        "cast" => "rows, cols, into (row-major|panels)",
        "patch" => "words",
        _ => return None,
    })
}

fn parse_call(line: usize, kernel: &str, shape_text: &str) -> Result<KernelCall, PointsError> {
    let keys = shape_keys(kernel).ok_or_else(|| PointsError::UnknownKernel {
        line,
        kernel: kernel.to_string(),
        known: KERNEL_NAMES,
    })?;
    let mut pairs = BTreeMap::new();
    for pair in shape_text.split_whitespace() {
        let (key, value) = pair.split_once('=').ok_or_else(|| PointsError::NotAPair {
            line,
            pair: pair.to_string(),
        })?;
        pairs.insert(key, value);
    }
    let mut shape = Shape {
        line,
        kernel,
        keys,
        pairs,
    };
    let call = match kernel {
        "matmul" => {
            let (rows, reduction, cols) = (
                shape.count("rows")?,
                shape.count("reduction")?,
                shape.count("cols")?,
            );
            let inputs = match shape.text("inputs")? {
                "fp8" => MatrixInputs::Fp8,
                "fp16" => MatrixInputs::Fp16,
                other => return Err(shape.bad("inputs", other, "fp8 or fp16")),
            };
            let output = match shape.optional("output") {
                None | Some("native") => ProductOutput::Native,
                Some("packed") => ProductOutput::Packed,
                Some(other) => return Err(shape.bad("output", other, "native or packed")),
            };
            KernelCall::MatMul {
                rows,
                reduction,
                cols,
                inputs,
                output,
            }
        }
        "softmax" | "softmax-split" | "softmax-segmented" => {
            let (rows, keys) = (shape.count("rows")?, shape.count("keys")?);
            match kernel {
                "softmax" => KernelCall::Softmax { rows, keys },
                "softmax-split" => KernelCall::SoftmaxSplit { rows, keys },
                _ => KernelCall::SoftmaxSegmented { rows, keys },
            }
        }
        "layernorm" | "layernorm-statistics" | "add-layernorm" | "bias-gelu" => {
            let (rows, width) = (shape.count("rows")?, shape.count("width")?);
            match kernel {
                "layernorm" => KernelCall::LayerNorm { rows, width },
                "layernorm-statistics" => KernelCall::LayerNormStatistics { rows, width },
                "add-layernorm" => KernelCall::AddLayerNorm { rows, width },
                _ => KernelCall::BiasGelu { rows, width },
            }
        }
        "gelu" => KernelCall::Gelu {
            elements: shape.count("elements")?,
        },
        "add" => KernelCall::Add {
            elements: shape.count("elements")?,
        },
        "reduce" => KernelCall::Reduce {
            elements: shape.count("elements")?,
            parts: shape.count("parts")?,
        },
        "cast" => {
            let (rows, cols) = (shape.count("rows")?, shape.count("cols")?);
            let into = match shape.text("into")? {
                "row-major" => CastInto::RowMajor,
                "panels" => CastInto::Panels,
                other => return Err(shape.bad("into", other, "row-major or panels")),
            };
            KernelCall::Cast { rows, cols, into }
        }
        _ => KernelCall::Patch {
            words: shape.count("words")?,
        },
    };
    shape.finish(call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_points_are_calibration_mds_table() {
        let points = shipped_points();
        // 7 products, 2 softmaxes, 3 LayerNorms, GELU, 2 bias-GELUs, 2 adds,
        // 2 reductions, 3 casts and 3 patch lists.
        assert_eq!(points.len(), 25);
        assert!(points.iter().any(|point| point.call
            == KernelCall::MatMul {
                rows: 82,
                reduction: 192,
                cols: 160,
                inputs: MatrixInputs::Fp8,
                output: ProductOutput::Native,
            }
            && point.measured_cycles == 29_508.0));
    }

    #[test]
    fn bad_measurement_files_name_their_line() {
        let header = "kernel,shape,cycles\n";
        type Expected = fn(&PointsError) -> bool;
        let cases: [(&str, Expected); 7] = [
            ("conv,rows=1,5\n", |error| {
                matches!(error, PointsError::UnknownKernel { line: 2, .. })
            }),
            ("add,elements=4\n", |error| {
                matches!(
                    error,
                    PointsError::MissingColumn {
                        line: 2,
                        column: "cycles"
                    }
                )
            }),
            ("add,elements=4,-3\n", |error| {
                matches!(error, PointsError::BadCycles { line: 2, .. })
            }),
            ("add,,7\n", |error| {
                matches!(
                    error,
                    PointsError::MissingShape {
                        line: 2,
                        key: "elements",
                        ..
                    }
                )
            }),
            ("add,elements=4 rows=2,7\n", |error| {
                matches!(error, PointsError::UnknownShapeKey { line: 2, .. })
            }),
            ("cast,rows=2 cols=3 into=diagonal,7\n", |error| {
                matches!(error, PointsError::BadShapeValue { line: 2, .. })
            }),
            ("add,elements,7\n", |error| {
                matches!(error, PointsError::NotAPair { line: 2, .. })
            }),
        ];
        for (row, expected) in cases {
            let error = parse_points(&format!("{header}{row}")).unwrap_err();
            assert!(expected(&error), "{row}: {error}");
        }
        assert!(matches!(
            parse_points("name,cycles\nadd,4\n"),
            Err(PointsError::Header { .. })
        ));
        assert_eq!(parse_points(header), Err(PointsError::Empty));
    }
}
