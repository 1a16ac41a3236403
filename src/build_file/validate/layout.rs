//! `[[layout.override]]`: per-operator partitions, each entry with an op
//! and a well-formed partition (and order) of the kind its numbers say,
//! each op overridden once. Whether the op exists and the partition fits
//! its product needs the graph: the planner checks that, and the CLI points
//! its error back at the entry (`crate::build_file::layout_override_error`).

use std::ops::Range;

use super::Resolver;
use crate::build_file::error::{Issue, Origin};
use crate::build_file::schema::{LayoutOverrideEntry, QueryFile};
use crate::layout::overrides::{LayoutOverride, Partition};

impl Resolver<'_> {
    pub(super) fn layout_overrides(&self, file: &QueryFile) -> Result<Vec<LayoutOverride>, Issue> {
        let mut resolved: Vec<LayoutOverride> = Vec::new();
        let mut first_seen: Vec<(String, String, Origin)> = Vec::new();
        for (index, entry) in file.layout.overrides.iter().enumerate() {
            let entry_path = format!("layout.override[{index}]");
            let origin_of = |field_span: Range<usize>| entry_origin(entry, field_span);
            let Some(op_field) = &entry.op else {
                let span = entry.partition.as_ref().map_or(0..0, toml::Spanned::span);
                return Err(Issue::new(
                    format!("{entry_path}.op"),
                    origin_of(span),
                    format!("{entry_path} has no `op`"),
                )
                .label("this override names no op")
                .help("add op = \"PROVENANCE\", e.g. op = \"layer.mlp.down\" (`superstep build --ops` lists them)"));
            };
            let op = op_field.get_ref().trim().to_string();
            let op_origin = origin_of(op_field.span());
            if op.is_empty() || op.chars().any(char::is_whitespace) || op.contains('#') {
                return Err(Issue::new(
                    format!("{entry_path}.op"),
                    op_origin,
                    format!("{entry_path}.op = \"{op}\" is not an op name"),
                )
                .label("expected an op's provenance path")
                .help("an op is named by its provenance, e.g. \"layer.mlp.down\" (no `#`: that names a phase)"));
            }
            let Some(partition_field) = &entry.partition else {
                return Err(Issue::new(
                    format!("{entry_path}.partition"),
                    op_origin,
                    format!("{entry_path} (op \"{op}\") has no `partition`"),
                )
                .label("this override names no partition")
                .help("add partition = \"ROWSxCOLSxREDUCTION\" for a matrix product (e.g. \"8x46x4\") or \"QUERIESxKEYS\" for attention (e.g. \"23x4\")"));
            };
            let text = match &entry.order {
                Some(order) => format!(
                    "{}/{}",
                    partition_field.get_ref().trim(),
                    order.get_ref().trim()
                ),
                None => partition_field.get_ref().trim().to_string(),
            };
            let partition = Partition::parse(&text).map_err(|message| {
                let (path, span) = match (&entry.order, message.contains("tile order")) {
                    (Some(order), true) => (format!("{entry_path}.order"), order.span()),
                    _ => (format!("{entry_path}.partition"), partition_field.span()),
                };
                Issue::new(path, origin_of(span), message).label("not a partition of this kind")
            })?;
            if let Some((_, first_path, first_origin)) =
                first_seen.iter().find(|(seen, _, _)| *seen == op)
            {
                return Err(Issue::new(
                    format!("{entry_path}.op"),
                    op_origin,
                    format!(
                        "{entry_path}.op = \"{op}\" overrides the same op as {first_path}.op; \
                         each op may be overridden once"
                    ),
                )
                .label("second override of this op")
                .related("first override of this op", first_origin.clone())
                .help("keep one [[layout.override]] entry per op"));
            }
            first_seen.push((op.clone(), entry_path, op_origin));
            resolved.push(LayoutOverride { op, partition });
        }
        resolved.sort();
        Ok(resolved)
    }
}

/// Where an entry's field came from: its `--set` argument, or the file.
fn entry_origin(entry: &LayoutOverrideEntry, field_span: Range<usize>) -> Origin {
    match &entry.set_argument {
        Some(argument) => Origin::Set(argument.clone()),
        None => Origin::File(field_span),
    }
}
