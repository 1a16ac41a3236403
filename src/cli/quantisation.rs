//! The quantisation report of a command that read weights: a line per FP8
//! tensor kind (its scales, relative RMS error, saturated elements) on
//! standard output, and a warning on standard error for every tensor
//! instance that saturated under the build's `workload.fp8_scale`.

use crate::model::quantisation::{report_lines, saturation_warnings};
use crate::model::weights::Weights;

/// Prints the warnings always and, when `detailed`, the report lines (each
/// after `indent`).
pub fn report(weights: &Weights, detailed: bool, indent: &str) {
    if detailed {
        for line in report_lines(weights.fp8_scale, &weights.quantisation) {
            print_line!("{indent}{line}");
        }
    }
    for warning in saturation_warnings(weights.fp8_scale, &weights.quantisation) {
        eprintln!("warning: {warning}");
    }
}
