//! The quantisation report of a command that read weights: a line per FP8
//! tensor kind (its scales, relative RMS error, saturated elements) on
//! standard output, and a warning on standard error for every tensor
//! instance that saturated under the build's `workload.fp8_scale`; and the
//! activations a run rounded to FP8 (`planning.matrix_inputs = "fp8"`),
//! with a warning when any saturated at their products' activation scales.

use crate::model::quantisation::{report_lines, saturation_warnings};
use crate::model::weights::Weights;

/// The FP8 activations line (nothing under FP16 matrix inputs) and, when
/// any saturated, a warning on standard error.
pub fn report_activations(fp8_activations: u64, saturated: u64, indent: &str) {
    if fp8_activations == 0 {
        return;
    }
    let share = saturated as f64 / fp8_activations as f64 * 100.0;
    print_line!(
        "{indent}FP8 activations: {fp8_activations} rounded before FP8 x FP8 products, {saturated} saturated ({share:.4}%)"
    );
    if saturated > 0 {
        eprintln!(
            "warning: {saturated} of {fp8_activations} activations ({share:.4}%) were beyond FP8's range at their products' activation scales and saturated; a larger planning.activation_scale, or calibration on a representative input (workload.calibration = FILE), makes room"
        );
    }
}

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
