//! `superstep calibrate MEASUREMENTS.csv`: refit the kernel cost model's
//! constants to a user's own profiler measurements (kernel, shape, cycles),
//! print every point's error before and after and every constant's old and
//! new value, and write a calibration file a build can name
//! (`--calibration FILE` of `superstep cost`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::command_error::CommandError;
use crate::output_file::write_atomically;
use crate::target::kernel_cost::{
    CONSTANTS, CalibrationPoint, CostTable, fit_table, parse_points, point_error,
};
use crate::text::thousands;

/// The flags of `superstep calibrate`.
#[derive(Debug, clap::Args)]
pub struct CalibrateArguments {
    /// The measurements: a CSV file with the header `kernel,shape,cycles`
    /// (a fourth column, `source`, is optional), one measured call a row;
    /// the shape is space-separated `key=value` pairs named like `superstep
    /// cost`'s flags, e.g. `matmul,rows=82 reduction=192 cols=160
    /// inputs=fp8,29508`. calibration/ipu21.csv is the shipped set.
    #[arg(value_name = "MEASUREMENTS.csv")]
    pub measurements: PathBuf,
    /// Write the fitted constants to FILE (a calibration file: `name =
    /// value` lines with each constant's source).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Start from (and keep what the points do not determine of) this
    /// calibration file instead of the shipped table.
    #[arg(long, value_name = "FILE")]
    pub base: Option<PathBuf>,
    /// Print one JSON object: the constants and every point's error.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct PointDocument {
    line: usize,
    kernel: String,
    shape: String,
    measured: f64,
    before: u64,
    before_error: f64,
    after: u64,
    after_error: f64,
}

#[derive(Serialize)]
struct ConstantDocument {
    name: &'static str,
    before: f64,
    after: f64,
}

#[derive(Serialize)]
struct CalibrateDocument {
    points: Vec<PointDocument>,
    constants: Vec<ConstantDocument>,
    kept: Vec<String>,
    worst_error_after: f64,
}

fn shape_text(point: &CalibrationPoint) -> String {
    crate::target::kernel_cost::points::shape_pairs(point.call)
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run(arguments: &CalibrateArguments) -> Result<(), CommandError> {
    let text = super::cost::read_bounded_text(&arguments.measurements, "measurement file")?;
    let points = parse_points(&text).map_err(|error| {
        CommandError::Input(format!(
            "error: {}: {error}\n  help: a row is `kernel,shape,cycles[,source]`; see calibration/ipu21.csv",
            arguments.measurements.display()
        ))
    })?;
    if let Some(parent) = arguments
        .output
        .as_deref()
        .and_then(Path::parent)
        .filter(|parent| !parent.as_os_str().is_empty() && !parent.is_dir())
    {
        return Err(CommandError::Input(format!(
            "error: --output: the folder {} does not exist",
            parent.display()
        )));
    }
    let (base, _) = super::cost::load_table(arguments.base.as_ref())?;
    let (fitted, outcomes) = fit_table(&points, &base).map_err(|error| {
        CommandError::Input(format!(
            "error: {}: {error}",
            arguments.measurements.display()
        ))
    })?;
    let kept: Vec<String> = outcomes
        .iter()
        .filter_map(|outcome| {
            outcome.kept_because.as_ref().map(|why| {
                let names: Vec<&str> = outcome.constants.iter().map(|c| c.name()).collect();
                format!("{} kept ({}): {why}", outcome.family, names.join(", "))
            })
        })
        .collect();
    let rows: Vec<PointDocument> = points
        .iter()
        .map(|point| {
            let (before, before_error) = point_error(point, &base);
            let (after, after_error) = point_error(point, &fitted);
            PointDocument {
                line: point.line,
                kernel: point.kernel.clone(),
                shape: shape_text(point),
                measured: point.measured_cycles,
                before,
                before_error,
                after,
                after_error,
            }
        })
        .collect();
    let worst = rows
        .iter()
        .map(|row| row.after_error.abs())
        .fold(0.0, f64::max);
    if let Some(output) = &arguments.output {
        let origin = format!("fitted to {}", arguments.measurements.display());
        write_atomically(output, fitted.to_text(&origin).as_bytes()).map_err(|error| {
            let message = format!("error: {error}");
            if error.is_input() {
                CommandError::Input(message)
            } else {
                CommandError::Internal(message)
            }
        })?;
    }
    if arguments.json {
        super::stdout::set_json_document();
        let document = CalibrateDocument {
            points: rows,
            constants: CONSTANTS
                .iter()
                .map(|&constant| ConstantDocument {
                    name: constant.name(),
                    before: base.get(constant),
                    after: fitted.get(constant),
                })
                .collect(),
            kept,
            worst_error_after: worst,
        };
        return super::stdout::write_document(&document)
            .map_err(|error| CommandError::Internal(error.to_string()));
    }
    print_report(arguments, &rows, &base, &fitted, &kept, worst);
    Ok(())
}

fn print_report(
    arguments: &CalibrateArguments,
    rows: &[PointDocument],
    base: &CostTable,
    fitted: &CostTable,
    kept: &[String],
    worst: f64,
) {
    print_line!(
        "superstep calibrate {}: {} points",
        arguments.measurements.display(),
        rows.len()
    );
    print_line!(
        "{:>5}  {:<22} {:<52} {:>9} {:>9} {:>8} {:>9} {:>8}",
        "line",
        "kernel",
        "shape",
        "measured",
        "before",
        "error",
        "after",
        "error"
    );
    for row in rows {
        print_line!(
            "{:>5}  {:<22} {:<52} {:>9} {:>9} {:>+7.2}% {:>9} {:>+7.2}%",
            row.line,
            row.kernel,
            row.shape,
            thousands(row.measured.round() as u64),
            thousands(row.before),
            row.before_error * 100.0,
            thousands(row.after),
            row.after_error * 100.0
        );
    }
    print_line!("constants:");
    for constant in CONSTANTS {
        let (before, after) = (base.get(constant), fitted.get(constant));
        let changed = (after - before).abs() > before.abs() * 1e-9;
        let mark = if changed { "  (refitted)" } else { "" };
        print_line!(
            "  {:<34} {:>14.6} -> {:>14.6}{mark}",
            constant.name(),
            before,
            after
        );
    }
    for line in kept {
        print_line!("  {line}");
    }
    print_line!("worst error after the fit: {:.2}%", worst * 100.0);
    match &arguments.output {
        Some(output) => print_line!("wrote {}", output.display()),
        None => print_line!("(no file written: -o FILE writes the calibration file)"),
    }
}
