//! Schedule overrides checked against the compiled build: an override that
//! names a phase the build does not have would silently do nothing, so it is
//! an input error (exit code 2) pointing at the override, with the nearest
//! existing phase keys.
//!
//! The check needs the phase keys, which exist only after the first half of
//! the build; it runs between the two halves (`common::build_checked`).

use super::QueryArguments;
use super::command_error::{CommandError, query_path};
use super::common::render_query_error;
pub use crate::session::unknown_override_phases;
use crate::session::{SUGGESTIONS, Session};
use crate::text::nearest_keys;

use crate::build_file::{BuildQuery, override_error};

/// Every override of `query` must name a phase of the session's build.
pub fn check_override_phases(
    session: &Session,
    query: &BuildQuery,
    arguments: &QueryArguments,
) -> Result<(), CommandError> {
    if query.overrides.is_empty() {
        return Ok(());
    }
    let phases = session.phases();
    if phases.is_empty() {
        // No phase groups (a first-half failure is reported by the build).
        return Ok(());
    }
    let known: Vec<&str> = phases.iter().map(|phase| phase.key()).collect();
    for entry in &query.overrides {
        if known.contains(&entry.phase.as_str()) {
            continue;
        }
        let nearest = nearest_keys(&entry.phase, &known, SUGGESTIONS);
        let quoted: Vec<String> = nearest.iter().map(|key| format!("`{key}`")).collect();
        let help = match nearest.first() {
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
            &entry.phase,
            format!(
                "schedule override of phase \"{}\": {} has no such phase ({} phases)",
                entry.phase,
                query.name,
                known.len()
            ),
            "no phase has this key",
            help,
        );
        return Err(CommandError::Input(render_query_error(&error)));
    }
    Ok(())
}
