//! `superstep packing`'s query: one exchange problem's packing
//! counterfactuals (`crate::schedule::packing`) under one policy key, each
//! transformed, checked against the original, then scheduled, validated,
//! encoded and row-checked through the same memoized, persistent-cached
//! `schedule_figures` and `encoded_rows` queries a build uses (the
//! transformed problems are interned like any phase's). The study's
//! figures are kept in a small cache entry of their own, so a second study
//! in a new process transforms and schedules nothing.

use std::sync::Arc;

use super::database::Db;
use super::on_disk::{cache_on_disk, persisted_by_bincode};
use super::schedules::{PolicyKey, ProblemKey, encoded_rows, problem_digest, schedule_figures};
use crate::cache::CacheKey;
use crate::schedule::ExchangeProblem;
use crate::schedule::packing::{Alternative, ExchangeMeasure, MeasureError, PackingStudy, study};

persisted_by_bincode! { PackingStudy => PackingStudy }

/// The study of `problem` under `policy`; `Err` only when the original
/// itself does not schedule or encode.
#[salsa::tracked(returns(ref))]
pub fn packing_study<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<PackingStudy, MeasureError> {
    let _span = tracing::debug_span!(
        "packing_study",
        pieces = problem.problem(db).pieces(),
        policy = %policy.policy(db)
    )
    .entered();
    cache_on_disk(
        db,
        || {
            Ok(CacheKey::of(
                "packing study",
                &(
                    problem_digest(db, problem),
                    policy.policy(db),
                    policy.width(db),
                    policy.row_allowance(db),
                ),
            ))
        },
        |cached: &PackingStudy, _| {
            if cached.alternatives.len() == Alternative::ALL.len() {
                Ok(())
            } else {
                Err(crate::cache::Refusal::Shape(format!(
                    "{} counterfactuals where {} are studied",
                    cached.alternatives.len(),
                    Alternative::ALL.len()
                )))
            }
        },
        || {
            let original = problem.problem(db);
            // The alternatives are interned like any phase's problem.
            study(
                original,
                || measure(db, problem, policy),
                |content: ExchangeProblem| {
                    measure(db, ProblemKey::new(db, Arc::new(content)), policy)
                },
            )
        },
    )
}

/// `problem` under `policy`: scheduled and validated, encoded and checked.
fn measure<'db>(
    db: &'db dyn Db,
    problem: ProblemKey<'db>,
    policy: PolicyKey<'db>,
) -> Result<ExchangeMeasure, MeasureError> {
    let figures = schedule_figures(db, problem, policy)
        .clone()
        .map_err(|error| MeasureError::Scheduling(error.to_string()))?;
    let rows = encoded_rows(db, problem, policy)
        .clone()
        .map_err(|error| MeasureError::Rows(error.to_string()))?;
    Ok(ExchangeMeasure::of(
        problem.problem(db),
        &figures,
        rows.max_bytes(),
        rows.total_bytes(),
    ))
}
