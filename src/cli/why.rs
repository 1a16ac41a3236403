//! `superstep build --why`: where the last successful build is recorded,
//! and reading that record to build on it and explain the rebuild (`build`
//! itself writes the record after every successful build).

use std::sync::Arc;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{backend_error, build_cold};
use super::unknown_override::unknown_override_error;
use crate::build_file::BuildQuery;
use crate::cache::PersistentCache;
use crate::report::last_build::{LastBuild, last_build_path};
use crate::session::{BuildError, BuildOutcome, Session};
use crate::watch::why::rebuild_from;

/// Builds `query` on top of the recorded previous build, and returns the
/// explanation to print; without a usable record, builds it cold and says
/// why there is no explanation.
pub fn build_on_last_build(
    arguments: &QueryArguments,
    query: &BuildQuery,
    cache: Option<Arc<PersistentCache>>,
) -> Result<(Session, BuildOutcome, String), CommandError> {
    let cold = |note: String| -> Result<_, CommandError> {
        let (session, outcome) = build_cold(arguments, query, cache.clone())?;
        Ok((session, outcome, note))
    };
    let path = last_build_path(query);
    let previous = match LastBuild::load(&path) {
        Ok(Some(record)) => record.query(),
        Ok(None) => {
            return cold(format!(
                "why: no previous build of {} is recorded ({} does not exist); this was a cold build\n",
                query.name,
                path.display()
            ));
        }
        Err(error) => Err(error),
    };
    let previous = match previous {
        Ok(previous) => previous,
        Err(error) => {
            return cold(format!(
                "why: the previous build record is unusable ({error}); this was a cold build\n"
            ));
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
    Ok((rebuild.session, rebuild.outcome, explanation))
}
