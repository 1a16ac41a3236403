//! `superstep cost KERNEL --shape...`: one kernel call on one tile priced by
//! the kernel cost model (the shipped table, or a calibration file), with
//! the formula's terms, for comparing the model with a profile.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::command_error::CommandError;
use crate::target::costs::CYCLES_PER_MILLISECOND;
use crate::target::kernel_cost::points::MAXIMUM_POINTS_BYTES;
use crate::target::kernel_cost::{
    CastInto, CostTable, KernelCall, KernelCost, MatrixInputs, ProductOutput, kernel_cost,
};
use crate::text::thousands;

/// The flags of `superstep cost`.
#[derive(Debug, clap::Args)]
pub struct CostArguments {
    #[command(subcommand)]
    pub kernel: CostKernel,
    /// Print one JSON object: kernel, variant, shape, cycles and the terms.
    #[arg(long, global = true)]
    pub json: bool,
    /// Price with the constants of a calibration file (written by
    /// `superstep calibrate`) instead of the shipped table.
    #[arg(long, global = true, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum InputsFlag {
    Fp8,
    Fp16,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum OutputFlag {
    Native,
    Packed,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum IntoFlag {
    RowMajor,
    Panels,
}

/// A count flag: 1 to 2^32.
fn count() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=1 << 32)
}

/// The kernel families the model prices.
#[derive(Debug, clap::Subcommand)]
pub enum CostKernel {
    /// A matrix-unit product of an R x K block and a K x C block, both
    /// operands at --inputs (there is no mixed FP16 x FP8 mode).
    Matmul {
        #[arg(long, value_parser = count())]
        rows: u64,
        #[arg(long, value_parser = count())]
        reduction: u64,
        #[arg(long, value_parser = count())]
        cols: u64,
        #[arg(long, value_enum)]
        inputs: InputsFlag,
        #[arg(long, value_enum, default_value = "native")]
        output: OutputFlag,
    },
    /// Softmax of R rows over N keys (FP16 scores, FP32 statistics), in the
    /// cheaper of its two variants (rows split over the workers, or each
    /// row segmented).
    Softmax {
        #[arg(long, value_parser = count())]
        rows: u64,
        #[arg(long, value_parser = count())]
        keys: u64,
    },
    /// LayerNorm of R rows of width W (FP16 in and out, FP32 statistics).
    Layernorm {
        #[arg(long, value_parser = count())]
        rows: u64,
        #[arg(long, value_parser = count())]
        width: u64,
    },
    /// LayerNorm's statistics only (mean and variance) of R rows of width W.
    LayernormStatistics {
        #[arg(long, value_parser = count())]
        rows: u64,
        #[arg(long, value_parser = count())]
        width: u64,
    },
    /// A residual add fused with LayerNorm, R rows of width W.
    AddLayernorm {
        #[arg(long, value_parser = count())]
        rows: u64,
        #[arg(long, value_parser = count())]
        width: u64,
    },
    /// GELU (FP16) of N elements.
    Gelu {
        #[arg(long, value_parser = count())]
        elements: u64,
    },
    /// Bias + GELU fused (FP16), R rows of width W.
    BiasGelu {
        #[arg(long, value_parser = count())]
        rows: u64,
        #[arg(long, value_parser = count())]
        width: u64,
    },
    /// An FP16 add of N elements.
    Add {
        #[arg(long, value_parser = count())]
        elements: u64,
    },
    /// A partial-sum reduction of P partials of N elements each (FP16 out).
    Reduce {
        #[arg(long, value_parser = count())]
        elements: u64,
        #[arg(long, value_parser = count())]
        parts: u64,
    },
    /// A cast FP16 -> FP8 of R x C, written row-major or into matrix-unit panels.
    Cast {
        #[arg(long, value_parser = count())]
        rows: u64,
        #[arg(long, value_parser = count())]
        cols: u64,
        #[arg(long, value_enum)]
        into: IntoFlag,
    },
    /// Repeat patching of N exchange words on one tile.
    Patch {
        #[arg(long, value_parser = count())]
        words: u64,
    },
}

impl CostKernel {
    fn call(&self) -> KernelCall {
        match *self {
            CostKernel::Matmul {
                rows,
                reduction,
                cols,
                inputs,
                output,
            } => KernelCall::MatMul {
                rows,
                reduction,
                cols,
                inputs: match inputs {
                    InputsFlag::Fp8 => MatrixInputs::Fp8,
                    InputsFlag::Fp16 => MatrixInputs::Fp16,
                },
                output: match output {
                    OutputFlag::Native => ProductOutput::Native,
                    OutputFlag::Packed => ProductOutput::Packed,
                },
            },
            CostKernel::Softmax { rows, keys } => KernelCall::Softmax { rows, keys },
            CostKernel::Layernorm { rows, width } => KernelCall::LayerNorm { rows, width },
            CostKernel::LayernormStatistics { rows, width } => {
                KernelCall::LayerNormStatistics { rows, width }
            }
            CostKernel::AddLayernorm { rows, width } => KernelCall::AddLayerNorm { rows, width },
            CostKernel::Gelu { elements } => KernelCall::Gelu { elements },
            CostKernel::BiasGelu { rows, width } => KernelCall::BiasGelu { rows, width },
            CostKernel::Add { elements } => KernelCall::Add { elements },
            CostKernel::Reduce { elements, parts } => KernelCall::Reduce { elements, parts },
            CostKernel::Cast { rows, cols, into } => KernelCall::Cast {
                rows,
                cols,
                into: match into {
                    IntoFlag::RowMajor => CastInto::RowMajor,
                    IntoFlag::Panels => CastInto::Panels,
                },
            },
            CostKernel::Patch { words } => KernelCall::Patch { words },
        }
    }
}

/// The calibration file `path` names, or the shipped table.
pub fn load_table(path: Option<&PathBuf>) -> Result<(CostTable, String), CommandError> {
    let Some(path) = path else {
        return Ok((CostTable::shipped(), "shipped".to_string()));
    };
    let text = read_bounded_text(path, "calibration file")?;
    let table = CostTable::from_text(&text).map_err(|error| {
        CommandError::Input(format!(
            "error: {}: {error}\n  help: write a calibration file with `superstep calibrate MEASUREMENTS.csv -o FILE`",
            path.display()
        ))
    })?;
    Ok((table, path.display().to_string()))
}

/// Reads a calibration or measurement file whole through the one input
/// rule (`crate::input_file`: opened without blocking, a regular file, at
/// most 4 MiB).
pub fn read_bounded_text(path: &Path, what: &'static str) -> Result<String, CommandError> {
    crate::input_file::read_text(path, MAXIMUM_POINTS_BYTES, what)
        .map_err(|error| CommandError::Input(format!("error: {error}")))
}

#[derive(Serialize)]
struct TermDocument {
    name: &'static str,
    constant: Option<&'static str>,
    value: Option<f64>,
    count: f64,
    cycles: f64,
}

#[derive(Serialize)]
struct CostDocument {
    kernel: &'static str,
    variant: Option<&'static str>,
    shape: std::collections::BTreeMap<&'static str, String>,
    cycles: u64,
    microseconds: f64,
    terms: Vec<TermDocument>,
    calibration: String,
}

pub fn run(arguments: &CostArguments) -> Result<(), CommandError> {
    let (table, calibration) = load_table(arguments.calibration.as_ref())?;
    let call = arguments.kernel.call();
    let cost = kernel_cost(call, &table);
    let microseconds = cost.cycles as f64 / CYCLES_PER_MILLISECOND * 1000.0;
    if arguments.json {
        super::stdout::set_json_document();
        let document = CostDocument {
            kernel: cost.kernel,
            variant: cost.variant,
            shape: crate::target::kernel_cost::points::shape_pairs(call)
                .into_iter()
                .collect(),
            cycles: cost.cycles,
            microseconds,
            terms: cost
                .terms
                .iter()
                .map(|term| TermDocument {
                    name: term.name,
                    constant: term.constant.map(|constant| constant.name()),
                    value: term.constant.map(|constant| table.get(constant)),
                    count: term.count,
                    cycles: term.cycles,
                })
                .collect(),
            calibration,
        };
        return super::stdout::write_document(&document)
            .map_err(|error| CommandError::Internal(error.to_string()));
    }
    print_cost(call, &cost, &table, &calibration, microseconds);
    Ok(())
}

fn print_cost(
    call: KernelCall,
    cost: &KernelCost,
    table: &CostTable,
    calibration: &str,
    microseconds: f64,
) {
    let shape: Vec<String> = crate::target::kernel_cost::points::shape_pairs(call)
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    let variant = cost
        .variant
        .map(|variant| format!(" ({variant})"))
        .unwrap_or_default();
    print_line!(
        "{}{variant} {}: {} cycles = {microseconds:.3} us at 1.5 GHz (one call on one tile; {calibration} calibration)",
        cost.kernel,
        shape.join(" "),
        thousands(cost.cycles)
    );
    for term in &cost.terms {
        let how = match term.constant {
            Some(constant) => format!(
                "{} {:.4} x {}",
                constant.name(),
                table.get(constant),
                term.count
            ),
            None => "machine fact (IPU21.md)".to_string(),
        };
        print_line!(
            "  {:<26} {:>12}  {how}",
            term.name,
            thousands(term.cycles.round() as u64)
        );
    }
    if let KernelCall::MatMul {
        rows,
        reduction,
        cols,
        inputs,
        ..
    } = call
    {
        let macs = rows * reduction * cols;
        let rate = macs as f64 / cost.cycles.max(1) as f64;
        print_line!(
            "  rate: {rate:.1} MACs per cycle, {:.1}% of the {} peak of {}",
            rate / inputs.macs_per_cycle() as f64 * 100.0,
            inputs.name().to_uppercase(),
            inputs.macs_per_cycle()
        );
    }
}
