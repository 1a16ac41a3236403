//! `build --why`'s core: rebuild the previous query in a fresh session,
//! apply the current one, rebuild, and explain the difference (changed
//! settings, the queries that re-ran by stage with op names, the metric
//! changes). It costs a second build: the previous query is built first
//! (cold) so the current one can be built incrementally on top of it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::metrics::{WatchMetrics, render_metrics};
use super::report::{render_changes, render_runs};
use crate::build_file::BuildQuery;
use crate::build_file::settings::setting_changes;
use crate::cache::PersistentCache;
use crate::session::BuildError;
use crate::session::{BuildOutcome, Session};

/// The session after the explained rebuild, its outcome and the explanation.
pub struct WhyRebuild {
    pub session: Session,
    pub outcome: BuildOutcome,
    /// How long building the previous query took.
    pub warm_up: Duration,
    pub explanation: String,
}

/// Op names by the salsa id of their `OpKey`, for the session's current ops.
pub fn op_names(session: &Session) -> BTreeMap<salsa::Id, String> {
    session.op_names_by_id()
}

/// Builds `previous`, then `current` on top of it, and explains what re-ran.
/// A failing previous build is noted and does not stop the current one.
pub fn rebuild_from(
    previous: &BuildQuery,
    current: &BuildQuery,
    cache: Option<Arc<PersistentCache>>,
) -> Result<WhyRebuild, BuildError> {
    let started = Instant::now();
    let mut session = Session::with_cache(previous, cache);
    let before = session.build();
    let warm_up = started.elapsed();
    let changed = session.update(current);
    let outcome = session.build()?;
    let mut explanation = String::new();
    let previous_metrics = match &before {
        Ok(outcome) => Some(WatchMetrics::from_outcome(outcome)),
        Err(error) => {
            explanation.push_str(&format!("the previous query fails today: {error}\n"));
            None
        }
    };
    explanation.push_str(&render_changes(
        &changed,
        &setting_changes(previous, current),
    ));
    explanation.push_str(&render_runs(&outcome.executions, Some(&op_names(&session))));
    explanation.push_str("headline metrics:\n");
    explanation.push_str(&render_metrics(
        &WatchMetrics::from_outcome(&outcome),
        previous_metrics.as_ref(),
    ));
    Ok(WhyRebuild {
        session,
        outcome,
        warm_up,
        explanation,
    })
}
