//! `superstep build --why`'s file plumbing: where the last successful
//! build is recorded, reading that record to explain a rebuild, and writing
//! it after every successful build.

use std::path::PathBuf;
use std::sync::Arc;

use super::QueryArguments;
use super::command_error::{CommandError, query_path};
use super::common::{artifacts_directory, backend_error, build_checked};
use super::overrides::unknown_override_error;
use crate::build_file::BuildQuery;
use crate::cache::PersistentCache;
use crate::report::last_build::{LastBuild, STATE_FILE};
use crate::session::{BuildError, BuildOutcome, Session};
use crate::watch::why::rebuild_from;

/// `artifacts/NAME/last-build.json` for `query`.
pub fn state_path(query: &BuildQuery) -> PathBuf {
    artifacts_directory(query).join(STATE_FILE)
}

/// Builds `query`; with `why`, on top of the recorded previous build, and
/// returns the explanation to print (or why there is none).
pub fn build_session(
    arguments: &QueryArguments,
    query: &BuildQuery,
    why: bool,
    cache: Option<Arc<PersistentCache>>,
) -> Result<(Session, BuildOutcome, Option<String>), CommandError> {
    let cold = |note: Option<String>| -> Result<_, CommandError> {
        let mut session = Session::with_cache(query, cache.clone());
        session.set_progress(super::progress::bars());
        let outcome = build_checked(&mut session, query, arguments)?;
        Ok((session, outcome, note))
    };
    if !why {
        return cold(None);
    }
    let path = state_path(query);
    let previous = match LastBuild::load(&path) {
        Ok(Some(record)) => record.query(),
        Ok(None) => {
            return cold(Some(format!(
                "why: no previous build of {} is recorded ({} does not exist); this was a cold build\n",
                query.name,
                path.display()
            )));
        }
        Err(error) => Err(error),
    };
    let previous = match previous {
        Ok(previous) => previous,
        Err(error) => {
            return cold(Some(format!(
                "why: the previous build record is unusable ({error}); this was a cold build\n"
            )));
        }
    };
    let rebuild = rebuild_from(&previous, query, cache.clone()).map_err(|error| match error {
        BuildError::UnknownOverride(unknown) => unknown_override_error(query, arguments, &unknown),
        BuildError::Backend(error) => backend_error(error, Some(query.machine.tiles)),
    })?;
    let explanation = format!(
        "why: compared with the last successful build recorded in {} (built first, in {:.3} s)\n{}",
        path.display(),
        rebuild.warm_up.as_secs_f64(),
        rebuild.explanation
    );
    Ok((rebuild.session, rebuild.outcome, Some(explanation)))
}

/// Records `query` as the last successful build; a failure only warns.
pub fn record_build(arguments: &QueryArguments, query: &BuildQuery) -> Option<PathBuf> {
    let file = query_path(arguments);
    let record = std::fs::read_to_string(&file)
        .map(|text| LastBuild::new(&file, &text, &arguments.sets, query))
        .map_err(|error| format!("cannot read {}: {error}", file.display()))
        .and_then(|record| {
            record
                .save(&state_path(query))
                .map_err(|error| error.to_string())
        });
    match record {
        Ok(()) => Some(state_path(query)),
        Err(error) => {
            eprintln!("warning: the build was not recorded for --why: {error}");
            None
        }
    }
}
