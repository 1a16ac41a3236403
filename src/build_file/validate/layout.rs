//! `[[layout.override]]`: per-operator partitions, each entry with an op
//! and a well-formed partition (and order) of the kind its numbers say,
//! each op overridden once among the entries that apply. An entry's
//! `when = { batch = 1, layers = 27, tiles = 1472, matrix_inputs = "fp8" }`
//! limits it to the configurations it names ([`WHEN_KEYS`]); an entry whose
//! `when` does not match is left out and counted. Whether the op exists and the partition fits
//! its product needs the graph: the planner checks that, and the CLI points
//! its error back at the entry (`crate::build_file::layout_override_error`).

use std::ops::Range;

use super::Resolver;
use super::keys::*;
use crate::build_file::error::{Issue, Origin};
use crate::build_file::schema::{LayoutOverrideEntry, QueryFile};
use crate::layout::overrides::{LayoutOverride, Partition};
use crate::target::kernel_cost::MatrixInputs;

/// The configuration keys a `when` may name, with the build file key each
/// stands for.
pub const WHEN_KEYS: [(&str, &str); 4] = [
    ("batch", WORKLOAD_BATCH),
    ("layers", WORKLOAD_LAYERS),
    ("tiles", MACHINE_TILES),
    ("matrix_inputs", PLANNING_MATRIX_INPUTS),
];

/// The build's configuration as a `when` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Configuration {
    pub batch: u32,
    pub layers: u32,
    pub tiles: u32,
    pub matrix_inputs: MatrixInputs,
}

impl Configuration {
    /// The `when` table naming exactly this configuration, as
    /// `superstep search --write-overrides` writes it.
    pub fn when_toml(&self) -> String {
        format!(
            "{{ batch = {}, layers = {}, tiles = {}, matrix_inputs = \"{}\" }}",
            self.batch,
            self.layers,
            self.tiles,
            self.matrix_inputs.name()
        )
    }
}

impl Resolver<'_> {
    /// The entries that apply to `configuration` (sorted by op) and how
    /// many a `when` left out.
    pub(super) fn layout_overrides(
        &self,
        file: &QueryFile,
        configuration: &Configuration,
    ) -> Result<(Vec<LayoutOverride>, u32), Issue> {
        let mut resolved: Vec<LayoutOverride> = Vec::new();
        let mut skipped = 0u32;
        let mut first_seen: Vec<(String, String, Origin)> = Vec::new();
        for (index, entry) in file.layout.overrides.iter().enumerate() {
            let entry_path = format!("layout.override[{index}]");
            let origin_of = |field_span: Range<usize>| entry_origin(entry, field_span);
            if let Some(when) = &entry.when
                && !matches_when(&entry_path, when, origin_of(when.span()), configuration)?
            {
                skipped += 1;
                continue;
            }
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
            let partition = Partition::parse(&text).map_err(|error| {
                let (path, span) = match (&entry.order, error.is_about_the_order()) {
                    (Some(order), true) => (format!("{entry_path}.order"), order.span()),
                    _ => (format!("{entry_path}.partition"), partition_field.span()),
                };
                Issue::new(path, origin_of(span), error.to_string())
                    .label("not a partition of this kind")
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
        Ok((resolved, skipped))
    }
}

/// Whether `configuration` is one `when` names: every key it gives holds.
/// An unknown key, or a value of the wrong kind, is an issue naming the
/// known keys.
fn matches_when(
    entry_path: &str,
    when: &toml::Spanned<toml::Table>,
    origin: Origin,
    configuration: &Configuration,
) -> Result<bool, Issue> {
    let path = format!("{entry_path}.when");
    let known = WHEN_KEYS
        .iter()
        .map(|(key, field)| format!("`{key}` ({field})"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut matches = true;
    for (key, value) in when.get_ref() {
        let number = |actual: u32| match value.as_integer() {
            Some(wanted) => Ok(i64::from(actual) == wanted),
            None => Err(Issue::new(
                format!("{path}.{key}"),
                origin.clone(),
                format!("{path}.{key} = {value} is not a whole number"),
            )
            .label("expected a whole number")
            .help(format!("write e.g. {key} = 1"))),
        };
        let holds = match key.as_str() {
            "batch" => number(configuration.batch)?,
            "layers" => number(configuration.layers)?,
            "tiles" => number(configuration.tiles)?,
            "matrix_inputs" => match value.as_str() {
                Some(name @ ("fp8" | "fp16")) => name == configuration.matrix_inputs.name(),
                _ => {
                    return Err(Issue::new(
                        format!("{path}.matrix_inputs"),
                        origin.clone(),
                        format!("{path}.matrix_inputs = {value} is not \"fp8\" or \"fp16\""),
                    )
                    .label("expected \"fp8\" or \"fp16\"")
                    .help("write matrix_inputs = \"fp8\" or matrix_inputs = \"fp16\""));
                }
            },
            _ => {
                return Err(Issue::new(
                    format!("{path}.{key}"),
                    origin.clone(),
                    format!(
                        "{path} names `{key}`, which is not a configuration key a `when` knows"
                    ),
                )
                .label("unknown `when` key")
                .help(format!("a `when` may name {known}")));
            }
        };
        matches &= holds;
    }
    Ok(matches)
}

/// Where an entry's field came from: its `--set` argument, or the file.
fn entry_origin(entry: &LayoutOverrideEntry, field_span: Range<usize>) -> Origin {
    match &entry.set_argument {
        Some(argument) => Origin::Set(argument.clone()),
        None => Origin::File(field_span),
    }
}
