//! One exchange phase of a session's build, as the facade hands it out: its
//! key, step and id, lazily each of its products (problem, policy,
//! schedule, rows, patches, figures), and the phase measured other ways
//! for the studies (under another policy and width, its packing
//! counterfactuals, its alternatives), every one a memoized query read.
//! Users of the session (CLI, watch, capture, replay, reports, studies)
//! read phases through this handle and never name a query.

use std::sync::Arc;

use salsa::plumbing::AsId;

use crate::incremental::CompilerDatabase;
use crate::incremental::alternatives::{
    PhaseAlternatives, alternative_key, alternative_outcome, alternative_policies,
    phase_alternatives,
};
use crate::incremental::packing::packing_study;
use crate::incremental::phases::{
    PhaseFigures, PhaseKey, PhaseProblem, phase_figures, phase_patches, phase_policy,
    phase_problem, phase_steps, phase_work,
};
use crate::incremental::schedules::{
    EffectivePolicy, PhaseError, PolicyKey, encoded_rows, validated_schedule,
};
use crate::incremental::sweep::{PointFigures, pairing_eligible, sweep_point};
use crate::patch::PhasePatches;
use crate::rows::PhaseRows;
use crate::schedule::packing::{MeasureError, PackingStudy, endpoint_fragments};
use crate::schedule::{ExchangeProblem, Schedule, SchedulePolicy, TransferWidth};
use crate::text::nearest_keys;

/// An exchange phase of a built session.
#[derive(Clone, Copy)]
pub struct Phase<'session> {
    pub(super) db: &'session CompilerDatabase,
    pub(super) key: PhaseKey<'session>,
    /// Position among the exchange phases (an internal lookup: what the
    /// commands show is [`Phase::step`]).
    pub index: usize,
}

impl<'session> Phase<'session> {
    /// The stable key, `op#ordinal`.
    pub fn key(&self) -> &'session str {
        self.key.key(self.db)
    }

    /// The id the phase's executions carry (`Execution::key` of its
    /// per-phase queries), to read the event log by phase.
    pub fn id(&self) -> salsa::Id {
        self.key.as_id()
    }

    /// The phase's step: its position in program order among every exchange
    /// phase and compute step, the index every command shows beside the key.
    pub fn step(&self) -> usize {
        phase_steps(self.db, self.key.build(self.db))
            .get(self.index)
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// Executions, Repeat membership, merged keys and the global
    /// allocation of each of the problem's local allocations.
    pub fn record(&self) -> Result<&'session PhaseProblem<'session>, PhaseError> {
        phase_problem(self.db, self.key)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The exchange problem (shared by every phase with the same content).
    pub fn problem(&self) -> Result<&'session Arc<ExchangeProblem>, PhaseError> {
        Ok(self.record()?.problem.problem(self.db))
    }

    /// The phase's effective policy and where it came from.
    pub fn policy(&self) -> &'session EffectivePolicy {
        phase_policy(self.db, self.key)
    }

    /// The validated schedule (loads or computes the full schedule; the
    /// figures alone are cheaper).
    pub fn schedule(&self) -> Result<Arc<Schedule>, PhaseError> {
        let (problem, policy) = phase_work(self.db, self.key)?;
        validated_schedule(self.db, problem, policy).clone()
    }

    /// The encoded and checked rows.
    pub fn rows(&self) -> Result<Arc<PhaseRows>, PhaseError> {
        let (problem, policy) = phase_work(self.db, self.key)?;
        encoded_rows(self.db, problem, policy).clone()
    }

    /// The Repeat patch lists.
    pub fn patches(&self) -> Result<Arc<PhasePatches>, PhaseError> {
        phase_patches(self.db, self.key).clone()
    }

    /// The headline figures (horizon, bounds, rows, patches, policy).
    pub fn figures(&self) -> Result<PhaseFigures, PhaseError> {
        phase_figures(self.db, self.key).clone()
    }
}

impl Phase<'_> {
    /// The phase under each standard policy, measured by scheduling it.
    pub fn alternatives(&self) -> Result<PhaseAlternatives, PhaseError> {
        phase_alternatives(self.db, self.key).clone()
    }

    /// The standard policies [`Phase::alternatives`] measures: every one
    /// but the policy that made the phase's schedule.
    pub fn alternative_policies(&self) -> Result<Vec<SchedulePolicy>, PhaseError> {
        Ok(alternative_policies(self.db, self.key)?
            .into_iter()
            .map(|(policy, _)| policy)
            .collect())
    }

    /// Measures the phase under the standard `policy` as far as it could
    /// beat the phase as built (memoized: [`Phase::alternatives`] then
    /// reads it), so that a study can measure many in parallel first.
    pub fn measure_alternative(&self, policy: SchedulePolicy) -> Result<(), PhaseError> {
        let key = alternative_key(self.db, self.key, policy);
        alternative_outcome(self.db, self.key, key)
            .as_ref()
            .map(|_| ())
            .map_err(Clone::clone)
    }

    /// Whether some piece of the phase may move paired (so that a paired
    /// width can differ from a single-word one).
    pub fn pairing_eligible(&self) -> Result<bool, PhaseError> {
        Ok(pairing_eligible(self.db, self.record()?.problem))
    }

    /// The phase scheduled, validated, encoded and patched under `policy`
    /// and `width` (with the phase's own row allowance for `auto`): one
    /// memoized, persistent-cached point of a sweep.
    pub fn measure_under(
        &self,
        policy: SchedulePolicy,
        width: TransferWidth,
    ) -> Result<PointFigures, PhaseError> {
        let key = PolicyKey::from_config(self.db, policy, width, self.policy().row_allowance);
        sweep_point(self.db, self.key, key).clone()
    }

    /// The most piece endpoints (sends plus receives) on one tile, and
    /// that tile.
    pub fn endpoint_fragments(&self) -> Result<(u64, u32), PhaseError> {
        Ok(endpoint_fragments(self.problem()?))
    }

    /// The packing counterfactuals of the phase under `policy`
    /// (memoized and persistent-cached).
    pub fn packing_study(&self, policy: &EffectivePolicy) -> Result<PackingStudy, PhaseStudyError> {
        let record = self.record()?;
        Ok(packing_study(self.db, record.problem, PolicyKey::of(self.db, policy)).clone()?)
    }
}

/// Why a phase's study could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PhaseStudyError {
    /// The phase itself is not available.
    #[error(transparent)]
    Phase(#[from] PhaseError),
    /// A counterfactual could not be measured.
    #[error(transparent)]
    Measure(#[from] MeasureError),
}

/// How many nearest phase keys a message names.
pub const SUGGESTIONS: usize = 5;

/// A phase key the build does not have, with the nearest keys it does have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the build has no such exchange phase ({known} phases){}", nearest_text(.nearest))]
pub struct UnknownPhase {
    /// The key asked for.
    pub key: String,
    /// The build's nearest keys (at most [`SUGGESTIONS`]), nearest
    /// first; empty when the build has no exchange phases.
    pub nearest: Vec<String>,
    /// How many exchange phases the build has.
    pub known: usize,
}

impl UnknownPhase {
    /// `key`, missing from the build's `known` phase keys.
    pub(super) fn among(key: &str, known: &[&str]) -> UnknownPhase {
        UnknownPhase {
            key: key.to_string(),
            nearest: nearest_keys(key, known, SUGGESTIONS)
                .into_iter()
                .map(str::to_string)
                .collect(),
            known: known.len(),
        }
    }
}

/// A `--phase` that names no exchange phase of the build: neither a phase's
/// key nor the step of one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the build has no exchange phase with key or step `{selector}`: give a phase's key \
     (`op#ordinal`) or its step (the first column of `superstep phases --kind exchange`); {}{}",
    steps_text(.steps),
    nearest_text(.nearest)
)]
pub struct UnknownPhaseSelector {
    /// What was asked for.
    pub selector: String,
    /// The build's nearest keys (at most [`super::SUGGESTIONS`]), nearest
    /// first.
    pub nearest: Vec<String>,
    /// Every exchange phase's step, in program order.
    pub steps: Vec<usize>,
}

/// The most steps an [`UnknownPhaseSelector`] lists.
const STEPS_LISTED: usize = 16;

fn steps_text(steps: &[usize]) -> String {
    if steps.is_empty() {
        return String::from("the build has no exchange phases");
    }
    format!(
        "its {} exchange phases are steps {}",
        steps.len(),
        crate::text::first_of(steps, STEPS_LISTED)
    )
}

fn nearest_text(nearest: &[String]) -> String {
    if nearest.is_empty() {
        String::new()
    } else {
        format!("; nearest: {}", nearest.join(", "))
    }
}
