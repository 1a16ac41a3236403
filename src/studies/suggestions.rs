//! Suggestions: the overrides a build could take, each proved by
//! scheduling the phase under every standard policy
//! (`Phase::alternatives`, pruned by the phase's current cost), with the
//! per-phase saving it brings and the exact `--set` that applies it.

use serde::Serialize;

use std::collections::BTreeSet;

use crate::schedule::SchedulePolicy;
use crate::schedule::vocabulary::policy_text;
use crate::session::process_memory::return_freed_memory;
use crate::session::{PhaseError, Session};
use crate::target::costs::cycles_to_ms;

/// Exchange phases a build measures under every standard policy for its
/// suggestions: this many of the most expensive.
pub const SUGGESTION_CANDIDATES: usize = 4;

/// One override worth trying.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Suggestion {
    pub phase: String,
    pub index: usize,
    /// The policy the phase has now, and the one suggested.
    #[serde(with = "policy_text")]
    pub current_policy: SchedulePolicy,
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub executions: u64,
    /// Horizon plus Repeat patching per execution, now and with the override.
    pub current_cycles: u64,
    pub predicted_cycles: u64,
    /// Over every execution.
    pub saving_cycles: u64,
    pub saving_milliseconds: f64,
    /// The flag that applies it.
    pub set: String,
}

/// Measures every (phase, standard policy) pair that the alternatives of
/// the phases at `indices` read, as one flat parallel pass: a phase's
/// policies then run side by side instead of one after another inside its
/// alternatives query, which afterwards only reads memos.
fn warm_alternatives(session: &Session, indices: &BTreeSet<usize>) -> Result<(), PhaseError> {
    let phases = session.phases();
    let mut work = Vec::new();
    for &index in indices {
        let Some(phase) = phases.get(index) else {
            continue;
        };
        let pieces = phase.problem()?.pieces();
        for policy in phase.alternative_policies()? {
            work.push((index, (pieces, policy)));
        }
    }
    // Largest problems first, so that the longest schedules start early.
    work.sort_by_key(|&(_, (pieces, _))| std::cmp::Reverse(pieces));
    // A failure here is the alternatives query's to report.
    session.map_phase_items("suggestions (schedules)", &work, |phase, &(_, policy)| {
        let _ = phase.measure_alternative(policy);
    });
    Ok(())
}

/// The phases [`suggestions`] measures: the `candidates` most expensive by
/// total cycles (`None`: every phase).
fn suggestion_phases(
    session: &Session,
    candidates: Option<usize>,
) -> Result<BTreeSet<usize>, PhaseError> {
    let mut phases: Vec<(u64, usize)> = session
        .map_phases(|phase| {
            let cost = phase.figures().map(|figures| {
                (u64::from(figures.horizon) + phase.patches().map_or(0, |patches| patches.cycles()))
                    * u64::from(figures.executions)
            });
            cost.map(|cost| (cost, phase.index))
        })
        .into_iter()
        .collect::<Result<_, _>>()?;
    phases.sort_by_key(|&(cost, index)| (std::cmp::Reverse(cost), index));
    phases.truncate(candidates.unwrap_or(usize::MAX));
    Ok(phases.iter().map(|&(_, index)| index).collect())
}

/// How many standard policies the suggestions of `candidates` measured in
/// full and how many their cutoff pruned: (measured, pruned).
pub fn suggestion_pruning(
    session: &Session,
    candidates: Option<usize>,
) -> Result<(usize, usize), PhaseError> {
    let chosen = suggestion_phases(session, candidates)?;
    let mut counts = (0, 0);
    for phase in session.phases() {
        if chosen.contains(&phase.index) {
            let alternatives = phase.alternatives()?;
            counts.0 += alternatives.alternatives.len();
            counts.1 += alternatives.pruned.len();
        }
    }
    Ok(counts)
}

/// The best override of each phase that has one, most saving first.
/// `candidates` limits the phases measured to that many of the most
/// expensive by total cycles (`None`: every phase).
pub fn suggestions(
    session: &Session,
    candidates: Option<usize>,
) -> Result<Vec<Suggestion>, PhaseError> {
    // The alternatives schedule on top of what the memo holds: what the
    // build freed before (the package a command wrote, the candidate
    // schedules) goes back to the system first, rather than staying
    // resident beside them.
    return_freed_memory();
    let chosen = suggestion_phases(session, candidates)?;
    warm_alternatives(session, &chosen)?;
    let measured = session.map_phases(|phase| {
        if !chosen.contains(&phase.index) {
            return Ok::<_, PhaseError>(None);
        }
        let alternatives = phase.alternatives()?;
        Ok(alternatives.best().map(|(outcome, saving)| Suggestion {
            phase: phase.key().to_string(),
            index: phase.index,
            current_policy: alternatives.current.policy,
            policy: outcome.policy,
            executions: alternatives.executions,
            current_cycles: alternatives.current.cycles(),
            predicted_cycles: outcome.cycles(),
            saving_cycles: saving,
            saving_milliseconds: cycles_to_ms(saving),
            set: format!("schedule.override.{}={}", phase.key(), outcome.policy),
        }))
    });
    let mut suggestions = Vec::new();
    for outcome in measured {
        if let Some(suggestion) = outcome? {
            suggestions.push(suggestion);
        }
    }
    suggestions.sort_by(|a, b| {
        b.saving_cycles
            .cmp(&a.saving_cycles)
            .then(a.index.cmp(&b.index))
    });
    Ok(suggestions)
}
