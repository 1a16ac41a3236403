//! The located error of a model that does not fit the machine: pointed at
//! the field the user would change first (`workload.batch`, else
//! `workload.layers`, else `workload.model`), in the build file or as the
//! `--set` argument that gave it, with the `[[layout.override]]` entry at
//! fault shown beside it when an override is what no longer fits.
//!
//! This module owns locating only. What fits, and the advice, come from the
//! caller (the layout planner, the placement and the command line's search
//! of what would fit); it never judges a value.

use std::path::Path;

use super::error::{Issue, Origin, QueryError};
use super::{schema, set};

/// The fields a fit error may point at, in order of preference: the first
/// one the file or a `--set` gives is the one shown. At batch 1 the batch
/// is not what to change, so it is not pointed at.
const FIT_FIELDS: [&str; 3] = ["workload.batch", "workload.layers", "workload.model"];

/// A "does not fit" for the build file at `path` with `sets`: `message`
/// says what does not fit, `label` is shown at the field, `help` what to
/// change. `override_op` names the layout override that no longer fits,
/// shown as a second place. Without a file or field to point at, the error
/// names `workload.batch` as a `--set`-style problem. `batch` is the
/// build's batch.
pub fn fit_error(
    path: &Path,
    sets: &[String],
    batch: u32,
    message: String,
    label: &dyn Fn(&str) -> String,
    help: String,
    override_op: Option<&str>,
) -> QueryError {
    let plain = |message: String, help: String| {
        QueryError::set(
            "workload.batch",
            Some("workload.batch"),
            message,
            Some(help),
        )
    };
    let Ok(text) = super::read_build_file(path) else {
        return plain(message, help);
    };
    let Ok((file, origins)) = super::query_file(&path.display().to_string(), &text, sets) else {
        return plain(message, help);
    };
    let Some((field, origin)) = FIT_FIELDS
        .iter()
        .filter(|field| batch > 1 || **field != "workload.batch")
        .find_map(|field| field_origin(&file, &origins, field).map(|origin| (*field, origin)))
    else {
        return plain(message, help);
    };
    let mut issue = Issue::new(field, origin, message)
        .label(label(field))
        .help(help);
    if let Some(op) = override_op
        && let Some(origin) = override_origin(&file, op)
    {
        issue = issue.related(format!("the override of `{op}` that does not fit"), origin);
    }
    issue.into_error(&path.display().to_string(), &text)
}

/// Where `field` (one of [`FIT_FIELDS`]) got its value, if it has one.
fn field_origin(
    file: &schema::QueryFile,
    origins: &set::SetOrigins,
    field: &str,
) -> Option<Origin> {
    if let Some(argument) = origins.get(field) {
        return Some(Origin::Set(argument.clone()));
    }
    let workload = file.workload.as_ref()?.get_ref();
    let span = match field {
        "workload.batch" => workload.batch.as_ref()?.span(),
        "workload.layers" => workload.layers.as_ref()?.span(),
        "workload.model" => workload.model.as_ref()?.span(),
        _ => return None,
    };
    Some(Origin::File(span))
}

/// Where the layout override of `op` is: its partition in the file, or its
/// `--set` argument.
fn override_origin(file: &schema::QueryFile, op: &str) -> Option<Origin> {
    let entry = file.layout.overrides.iter().find(|entry| {
        entry
            .op
            .as_ref()
            .is_some_and(|field| field.get_ref().trim() == op)
    })?;
    if let Some(argument) = &entry.set_argument {
        return Some(Origin::Set(argument.clone()));
    }
    let field = entry.partition.as_ref().or(entry.op.as_ref())?;
    Some(Origin::File(field.span()))
}
