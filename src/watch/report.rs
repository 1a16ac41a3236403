//! Text for one rebuild, shared by `superstep watch` and `superstep build
//! --why`: the inputs that changed (with old -> new settings), the queries
//! that re-ran grouped by stage, the time per stage and the headline metrics
//! with their change. Rendering only; nothing here builds or reads files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::stages::group_by_stage;
use crate::build_file::settings::SettingChange;
use crate::session::Execution;
use crate::session::{StageTime, TrackedQuery};

/// Queries whose key is an op (`OpKey`), listed by op name when names are known.
pub const OP_KEYED_QUERIES: &[TrackedQuery] = &[TrackedQuery::PlannedOp, TrackedQuery::OpExpansion];

/// `changed inputs: fp8_scale` and one line per changed setting.
pub fn render_changes(changed_inputs: &[&'static str], settings: &[SettingChange]) -> String {
    let mut out = String::new();
    if changed_inputs.is_empty() {
        out.push_str("changed inputs: none\n");
        return out;
    }
    let _ = writeln!(out, "changed inputs: {}", changed_inputs.join(", "));
    for change in settings {
        let show =
            |value: &Option<String>| value.clone().unwrap_or_else(|| String::from("(unset)"));
        let _ = writeln!(
            out,
            "  {:<34} {} -> {}",
            change.key,
            show(&change.old),
            show(&change.new)
        );
    }
    out
}

/// The re-ran queries by stage with counts; with `op_names`, the ops whose
/// op-keyed queries ran, in execution order.
pub fn render_runs(
    executions: &[Execution],
    op_names: Option<&BTreeMap<salsa::Id, String>>,
) -> String {
    let mut out = String::new();
    if executions.is_empty() {
        out.push_str("re-ran queries: none (every result was reused)\n");
        return out;
    }
    let _ = writeln!(out, "re-ran queries: {}", executions.len());
    for stage in group_by_stage(executions) {
        let queries: Vec<String> = stage
            .queries
            .iter()
            .map(|(query, count)| format!("{query} {count}"))
            .collect();
        let _ = writeln!(
            out,
            "  {:<12} {:>6}  ({})",
            stage.stage.name(),
            stage.total,
            queries.join(", ")
        );
        let Some(names) = op_names else { continue };
        for query in stage.queries.keys() {
            if !OP_KEYED_QUERIES.contains(query) {
                continue;
            }
            let mut seen = BTreeSet::new();
            let ops: Vec<String> = executions
                .iter()
                .filter(|execution| execution.query == *query && seen.insert(execution.key))
                .map(|execution| {
                    names
                        .get(&execution.key)
                        .cloned()
                        .unwrap_or_else(|| format!("{:?}", execution.key))
                })
                .collect();
            out.push_str(&wrap_list(&format!("      {query}: "), &ops));
        }
    }
    out
}

/// Width at which op lists wrap.
const LINE_WIDTH: usize = 100;

/// `prefix` then `items` joined by ", ", wrapped at `LINE_WIDTH` with
/// continuation lines indented like the first item.
fn wrap_list(prefix: &str, items: &[String]) -> String {
    let indent = " ".repeat(prefix.len());
    let mut out = String::from(prefix);
    let mut line_length = prefix.len();
    for (index, item) in items.iter().enumerate() {
        let separator = if index + 1 < items.len() { "," } else { "" };
        if index > 0 {
            if line_length + 1 + item.len() + separator.len() > LINE_WIDTH {
                out.push('\n');
                out.push_str(&indent);
                line_length = indent.len();
            } else {
                out.push(' ');
                line_length += 1;
            }
        }
        out.push_str(item);
        out.push_str(separator);
        line_length += item.len() + separator.len();
    }
    out.push('\n');
    out
}

/// One line per stage, `  graph   0.012 ms`.
pub fn render_times(times: &[StageTime]) -> String {
    let mut out = String::from("stage times:\n");
    for time in times {
        let _ = writeln!(
            out,
            "  {:<12} {:>10.3} ms",
            time.stage,
            time.elapsed.as_secs_f64() * 1e3
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execution(query: TrackedQuery, bits: u64) -> Execution {
        Execution {
            query,
            key: salsa::Id::from_bits(bits),
        }
    }

    #[test]
    fn lists_op_names_for_op_keyed_queries() {
        let executions = [
            execution(TrackedQuery::PlannedOp, 1),
            execution(TrackedQuery::OpExpansion, 1),
            execution(TrackedQuery::LowProgram, 9),
        ];
        let names = BTreeMap::from([(salsa::Id::from_bits(1), String::from("layer.mlp.up"))]);
        let text = render_runs(&executions, Some(&names));
        assert!(text.contains("expansion         2"), "{text}");
        assert!(text.contains("op_expansion: layer.mlp.up"), "{text}");
        assert!(
            text.contains("program           1  (low_program 1)"),
            "{text}"
        );
    }

    #[test]
    fn wraps_long_op_lists() {
        let items: Vec<String> = (0..40).map(|index| format!("layer.op{index}")).collect();
        let text = wrap_list("      op_expansion: ", &items);
        assert!(text.lines().count() > 1, "{text}");
        assert!(text.lines().all(|line| line.len() <= LINE_WIDTH), "{text}");
        assert_eq!(text.matches("layer.op").count(), 40);
        assert!(text.ends_with("layer.op39\n"), "{text}");
    }

    #[test]
    fn says_when_nothing_changed_or_ran() {
        assert_eq!(render_changes(&[], &[]), "changed inputs: none\n");
        assert!(render_runs(&[], None).contains("none"));
    }
}
