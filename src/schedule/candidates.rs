//! The `auto` policy: every candidate order, with every pairing the width
//! allows, goes through the same placer; the phase keeps the best schedule
//! by measured horizon, then maximum row words, then total row words (rows
//! estimated by `row_words_estimate`), then candidate rank.
//!
//! Candidate orders run in three stages. The first: matching waves and the
//! baseline (balanced waves of 1,024 words). When no admitted candidate so
//! far is within 2% of the latency-aware bound, the second: time-ordered
//! list scheduling. When none is within 10%, the third: the latency order
//! and balanced waves of 16 and 64 words. (No schedule beats the bound, so
//! a candidate within p% leaves at most p% for the others.) Pairings: none (`word32`); every
//! eligible piece (`paired64`); and, under width `auto`, both of those plus
//! the per-piece selection of `pairing`.
//!
//! A storage guard keeps the exchange table from growing: a candidate whose
//! maximum row exceeds the baseline's maximum row by more than the allowance
//! (default 256 bytes per exchange the phase merged: each keeps the
//! allowance it had as a phase of its own) is not admitted. (Measured against the smallest
//! candidate's row instead, the guard picked the latency order at 3.5x the
//! horizon on SigLIP's `split_k`, whose rows happen to be 30% shorter than
//! any order that interleaves senders.) Candidates of a stage run in
//! parallel (rayon) and the choice depends on their figures only, so it is
//! deterministic. Every candidate tried is recorded with its figures, and
//! which won.
//!
//! The second and third stages place each candidate under a cutoff of the
//! best admitted horizon so far (fixed before the stage starts, so the
//! record is deterministic too): a candidate whose running lower bound
//! passes it could only end with a longer horizon, so it can never be
//! chosen, and it stops there, recorded as pruned with the bound it
//! reached (`Placer::set_cutoff`). The schedule chosen is the one an
//! unpruned run chooses.

use rayon::prelude::*;

use super::bound::latency_bound;
use super::pairing::{Pairing, auto_pairings};
use super::prepared::{Prepared, row_words_estimate};
use super::vocabulary::{SchedulePolicy, TransferWidth, policy_text};
use super::{Schedule, ScheduleError};

/// Bytes per row word.
const ROW_WORD_BYTES: u64 = 4;

/// The default storage allowance of `auto` over the smallest candidate's
/// maximum row, in bytes.
pub const DEFAULT_ROW_ALLOWANCE_BYTES: u32 = 256;

/// Settings of the `auto` policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AutoSettings {
    /// How many bytes a candidate's maximum row may exceed the smallest
    /// candidate's maximum row by.
    pub row_allowance_bytes: u32,
    /// Stop a later-stage candidate once its horizon is bound to exceed the
    /// best admitted one (the schedule chosen is the same either way; see
    /// the module notes). Builds always prune; tests compare both.
    pub prune_by_bounds: bool,
}

impl Default for AutoSettings {
    fn default() -> Self {
        AutoSettings {
            row_allowance_bytes: DEFAULT_ROW_ALLOWANCE_BYTES,
            prune_by_bounds: true,
        }
    }
}

/// One candidate tried by `auto`, with its figures.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CandidateOutcome {
    /// The candidate's order; reports write it as the policy text (`B64`).
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub pairing: Pairing,
    pub horizon: u32,
    /// Estimated row words of the fullest tile.
    pub max_row_words: u64,
    /// Estimated row words over all tiles.
    pub total_row_words: u64,
    /// Within the storage guard.
    pub admitted: bool,
    /// The candidate the phase keeps.
    pub chosen: bool,
    /// Stopped early: its horizon was bound to exceed the best admitted
    /// one before its stage (`horizon` is then the bound it reached, and
    /// the row words are 0).
    pub pruned: bool,
}

/// The baseline order: the compact balanced stream the exchange table was
/// sized for before `auto`. Its largest row is the storage guard's
/// reference, so a candidate never grows the table by more than the
/// allowance per phase.
pub const BASELINE_POLICY: SchedulePolicy = SchedulePolicy::Balanced { words: 1024 };

/// The first stage: matching waves (best on most phases) and the baseline.
pub const FIRST_STAGE: [SchedulePolicy; 2] = [SchedulePolicy::Matching, BASELINE_POLICY];

/// The second stage, run only when no admitted candidate so far is within
/// [`NEAR_BOUND_PERCENT`] of the latency-aware bound.
pub const SECOND_STAGE: [SchedulePolicy; 1] = [SchedulePolicy::List];

/// The third stage, run only when no admitted candidate so far is within
/// [`FAR_FROM_BOUND_PERCENT`] of the latency-aware bound.
pub const THIRD_STAGE: [SchedulePolicy; 3] = [
    SchedulePolicy::Latency,
    SchedulePolicy::Balanced { words: 16 },
    SchedulePolicy::Balanced { words: 64 },
];

/// A schedule this close to the latency-aware bound (in percent above it)
/// cannot be improved by more than that: the second stage is skipped.
pub const NEAR_BOUND_PERCENT: u64 = 2;

/// The third stage's orders rarely beat matching waves and list scheduling
/// (on SigLIP so400m once in 51 phases, by 4%); they run only for phases
/// still this far (in percent) above the latency-aware bound.
pub const FAR_FROM_BOUND_PERCENT: u64 = 10;

/// Runs the candidates and returns the best schedule, with the record of
/// every candidate tried in `Schedule::candidates`.
pub fn choose(
    prepared: &Prepared<'_>,
    width: TransferWidth,
    settings: &AutoSettings,
) -> Result<Schedule, ScheduleError> {
    let problem = prepared.problem;
    let owned: Vec<(Pairing, Vec<bool>)> = match width {
        TransferWidth::Word32 => vec![(Pairing::None, vec![false; problem.pieces()])],
        TransferWidth::Paired64 => vec![(Pairing::All, prepared.eligible.clone())],
        TransferWidth::Auto => auto_pairings(problem, &prepared.eligible),
    };
    let pairings: Vec<(Pairing, &[bool])> = owned
        .iter()
        .map(|(pairing, paired)| (*pairing, paired.as_slice()))
        .collect();
    let latency = latency_bound(problem);
    let bound = u64::from(latency);
    let mut tried = run_stage(prepared, &FIRST_STAGE, &pairings, None)?;
    let reference = tried
        .iter()
        .filter(|(_, outcome)| outcome.policy == BASELINE_POLICY)
        .map(|(_, outcome)| outcome.max_row_words)
        .min()
        .unwrap_or(0);
    // Each exchange merged into the phase keeps the allowance it had as a
    // phase of its own.
    let exchanges = 1 + problem.segment_starts.len() as u64;
    let allowance = u64::from(settings.row_allowance_bytes) * exchanges / ROW_WORD_BYTES;
    let admit = |tried: &mut Vec<(Option<Schedule>, CandidateOutcome)>| {
        for (_, outcome) in tried.iter_mut() {
            outcome.admitted = !outcome.pruned && outcome.max_row_words <= reference + allowance;
        }
    };
    admit(&mut tried);
    // A later candidate can only be chosen with a horizon at most the best
    // admitted one's (ties go by rows): one bound to exceed it is pruned.
    let incumbent = |tried: &[(Option<Schedule>, CandidateOutcome)]| {
        tried
            .iter()
            .filter(|(_, outcome)| outcome.admitted)
            .map(|(_, outcome)| outcome.horizon.saturating_add(1))
            .min()
            .filter(|_| settings.prune_by_bounds)
    };
    let within = |tried: &[(Option<Schedule>, CandidateOutcome)], percent: u64| {
        tried.iter().any(|(_, outcome)| {
            outcome.admitted && u64::from(outcome.horizon) * 100 <= bound * (100 + percent)
        })
    };
    for (stage, percent) in [
        (&SECOND_STAGE[..], NEAR_BOUND_PERCENT),
        (&THIRD_STAGE[..], FAR_FROM_BOUND_PERCENT),
    ] {
        if !within(&tried, percent) {
            let cutoff = incumbent(&tried);
            tried.extend(run_stage(prepared, stage, &pairings, cutoff)?);
            admit(&mut tried);
        }
    }
    let best = tried
        .iter()
        .enumerate()
        .filter(|(_, (_, outcome))| outcome.admitted)
        .min_by_key(|(index, (_, outcome))| {
            (
                outcome.horizon,
                outcome.max_row_words,
                outcome.total_row_words,
                *index,
            )
        })
        .map(|(index, _)| index)
        .unwrap_or(0);
    tried[best].1.chosen = true;
    let outcomes: Vec<CandidateOutcome> =
        tried.iter().map(|(_, outcome)| outcome.clone()).collect();
    let (winner, _) = tried.swap_remove(best);
    // The winner is admitted (or the first candidate, which no cutoff
    // applies to), so it was placed in full.
    let Some(mut winner) = winner else {
        unreachable!("a pruned candidate is never chosen");
    };
    winner.policy = SchedulePolicy::Auto;
    winner.candidates = outcomes;
    winner.latency_bound = latency;
    Ok(winner)
}

/// Places every (policy, pairing) combination of one stage, in parallel,
/// and returns them in (policy, pairing) order; under a cutoff, a candidate
/// bound to reach it comes back pruned, without a schedule.
fn run_stage(
    prepared: &Prepared<'_>,
    policies: &[SchedulePolicy],
    pairings: &[(Pairing, &[bool])],
    cutoff: Option<u32>,
) -> Result<Vec<(Option<Schedule>, CandidateOutcome)>, ScheduleError> {
    let combinations: Vec<(SchedulePolicy, Pairing, &[bool])> = policies
        .iter()
        .flat_map(|&policy| {
            pairings
                .iter()
                .map(move |&(pairing, paired)| (policy, pairing, paired))
        })
        .collect();
    combinations
        .par_iter()
        .map(|&(policy, pairing, paired)| {
            let width = if paired.contains(&true) {
                TransferWidth::Paired64
            } else {
                TransferWidth::Word32
            };
            let schedule = match prepared.place_below(policy, paired, width, cutoff) {
                Err(ScheduleError::AboveCutoff { bound, .. }) => {
                    let outcome = CandidateOutcome {
                        policy,
                        pairing,
                        horizon: u32::try_from(bound).unwrap_or(u32::MAX),
                        max_row_words: 0,
                        total_row_words: 0,
                        admitted: false,
                        chosen: false,
                        pruned: true,
                    };
                    return Ok((None, outcome));
                }
                placed => placed?,
            };
            let (max_row_words, total_row_words) = row_words_estimate(prepared.problem, &schedule);
            let outcome = CandidateOutcome {
                policy,
                pairing,
                horizon: schedule.horizon,
                max_row_words,
                total_row_words,
                admitted: false,
                chosen: false,
                pruned: false,
            };
            Ok((Some(schedule), outcome))
        })
        .collect()
}
