//! A schedule override that names a phase the build does not have: the
//! session refuses it while building (`BuildError::UnknownOverride`); this
//! renders that refusal as an input error (exit code 2) pointing at the
//! override in the build file or at its `--set`, with the nearest existing
//! phase keys.

use super::arguments::QueryArguments;
use super::command_error::{CommandError, query_path};
use crate::build_file::error::render_query_error;
use crate::build_file::{BuildQuery, override_error};
use crate::session::UnknownPhase;

/// The input error for the override of `unknown.key`.
pub fn unknown_override_error(
    query: &BuildQuery,
    arguments: &QueryArguments,
    unknown: &UnknownPhase,
) -> CommandError {
    let quoted: Vec<String> = unknown
        .nearest
        .iter()
        .map(|key| format!("`{key}`"))
        .collect();
    let help = match unknown.nearest.first() {
        Some(best) => format!(
            "did you mean `{best}`? nearest phase keys: {}; `superstep phases --kind exchange` lists every key (so does {}/{}/phases.csv after a build)",
            quoted.join(", "),
            query.outputs.directory.display(),
            query.name
        ),
        None => String::from("this build has no exchange phases to override"),
    };
    let error = override_error(
        &query_path(arguments),
        &arguments.sets,
        &unknown.key,
        format!(
            "schedule override of phase \"{}\": {} has no such phase ({} phases)",
            unknown.key, query.name, unknown.known
        ),
        "no phase has this key",
        help,
    );
    CommandError::Diagnostic(render_query_error(&error))
}
