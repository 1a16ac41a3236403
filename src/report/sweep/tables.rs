//! The sweep's CSV files: `results.csv` (every point), `frontier.csv` (the
//! Pareto points of each phase) and `selection.csv` (what selections (a)
//! and (b) take per phase). Rows in program order, then configuration
//! order; figures as plain integers, so a rerun writes the same bytes.

use std::fmt::Write;

use crate::studies::sweep::{Selection, Sweep, SweepPhase, SweepPoint, frontier};

const POINT_COLUMNS: &str = "step,phase,executions,config,policy,width,chosen,\
schedule_width,horizon,endpoint_bound,max_row_bytes,total_row_bytes,repeat_patch_words,\
repeat_patch_cycles";

/// A CSV field: quoted (quotes doubled) when it holds a comma, quote or line break.
pub fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The point columns of one point (figures empty when it has none).
fn point_fields(phase: &SweepPhase, point: &SweepPoint) -> String {
    let head = format!(
        "{},{},{},{},{},{}",
        phase.step,
        field(&phase.key),
        phase.executions,
        point.config,
        point.config.policy,
        point.config.width.name()
    );
    match point.figures() {
        Some(figures) => format!(
            "{head},{},{},{},{},{},{},{},{}",
            figures.chosen,
            figures.width.name(),
            figures.horizon,
            figures.endpoint_bound,
            figures.max_row_bytes,
            figures.total_row_bytes,
            figures.repeat_patch_words,
            figures.repeat_patch_cycles
        ),
        None => format!("{head},,,,,,,,"),
    }
}

/// `results.csv`: every point, with `validated` (PASS: the schedule
/// validator and the row checker accepted it), `frontier` and the error of
/// a failed point.
pub fn results_csv(sweep: &Sweep) -> String {
    let mut text = format!("{POINT_COLUMNS},validated,frontier,error\n");
    for phase in &sweep.phases {
        let on_frontier = frontier(phase);
        for (index, point) in phase.points.iter().enumerate() {
            let _ = writeln!(
                text,
                "{},{},{},{}",
                point_fields(phase, point),
                if point.outcome.is_ok() {
                    "PASS"
                } else {
                    "FAIL"
                },
                on_frontier.contains(&index),
                field(
                    &point
                        .outcome
                        .as_ref()
                        .err()
                        .map_or_else(String::new, ToString::to_string),
                )
            );
        }
    }
    text
}

/// `frontier.csv`: each phase's non-dominated points.
pub fn frontier_csv(sweep: &Sweep) -> String {
    let mut text = format!("{POINT_COLUMNS}\n");
    for phase in &sweep.phases {
        for index in frontier(phase) {
            if let Some(point) = phase.points.get(index) {
                let _ = writeln!(text, "{}", point_fields(phase, point));
            }
        }
    }
    text
}

/// `selection.csv`: per rule and phase, the phase as built and the point
/// taken (`config` empty: the phase keeps its schedule).
pub fn selection_csv(sweep: &Sweep, selections: &[&Selection]) -> String {
    let mut text = String::from(
        "rule,step,phase,executions,built_policy,built_chosen,built_width,built_horizon,\
         built_cycles,built_max_row_bytes,built_total_row_bytes,config,horizon,cycles,\
         max_row_bytes,total_row_bytes,saving_cycles\n",
    );
    for selection in selections {
        for (phase, selected) in sweep.phases.iter().zip(&selection.phases) {
            let built = &phase.built;
            let (config, horizon, cycles, max_row, total_row, saving) = match &selected.chosen {
                Some(chosen) => (
                    chosen.config.to_string(),
                    u64::from(chosen.figures.horizon),
                    chosen.cycles,
                    chosen.figures.max_row_bytes,
                    chosen.figures.total_row_bytes,
                    chosen.saving_cycles,
                ),
                None => (
                    String::new(),
                    u64::from(built.figures.horizon),
                    built.cycles(),
                    built.figures.max_row_bytes,
                    built.figures.total_row_bytes,
                    0,
                ),
            };
            let _ = writeln!(
                text,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                selection.rule.letter(),
                phase.step,
                field(&phase.key),
                phase.executions,
                built.policy,
                built.figures.chosen,
                built.figures.width,
                built.figures.horizon,
                built.cycles(),
                built.figures.max_row_bytes,
                built.figures.total_row_bytes,
                config,
                horizon,
                cycles,
                max_row,
                total_row,
                saving
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_when_needed() {
        assert_eq!(field("layer.mlp.up#0"), "layer.mlp.up#0");
        assert_eq!(field("a, \"b\""), "\"a, \"\"b\"\"\"");
    }
}
