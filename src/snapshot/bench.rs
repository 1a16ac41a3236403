//! The schedule bench of imported phases (`superstep bench-snapshot`).
//!
//! Per phase and policy: schedule and encode rows `iterations` times (timed:
//! minimum, median, maximum), then check the last result once (timed as
//! validation): the independent schedule validator, decode-and-compare of
//! the encoded rows, and a replay of the finalized rows on simulated tile
//! memories (every word, or a deterministic sample). A failure of any step
//! is reported in the record, never as a panic. This module must not change
//! the problem it is given; it owns measuring only.

use std::time::Instant;

use serde::Serialize;

use super::PhaseSnapshot;
use crate::build_file::{SchedulePolicy, TransferWidth};
use crate::rows::{ConsecutivePlacement, PhaseRows, RowError, check_phase, encode_phase};
use crate::schedule::vocabulary::policy_text;
use crate::schedule::{Schedule, ScheduleError, ValidationError, schedule, validate};
use crate::sim::replay::{ReplayError, replay_phase};

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub policies: Vec<SchedulePolicy>,
    pub width: TransferWidth,
    /// Timed repetitions of schedule + encode (at least 1).
    pub iterations: usize,
    /// Words checked by the replay (`None`: every word).
    pub sample: Option<u64>,
}

/// Minimum, median and maximum of repeated timings, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Timing {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Timing {
    fn of(mut samples: Vec<f64>) -> Timing {
        samples.sort_by(f64::total_cmp);
        let Some(&max) = samples.last() else {
            return Timing::default();
        };
        Timing {
            min: samples[0],
            median: samples[samples.len() / 2],
            max,
        }
    }
}

/// A measurement's wall times, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct WallTimes {
    /// Schedule and encode, over the iterations.
    pub schedule_encode_ms: Timing,
    /// Validator, row decode-and-check and replay of the last result.
    pub validation_ms: f64,
}

/// One (phase, policy) measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchRecord {
    pub phase: u32,
    pub key: Option<String>,
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    /// The width the schedule chose (`word32` or `paired64`); `None`, and
    /// written empty, when scheduling or encoding failed.
    #[serde(serialize_with = "width_or_empty")]
    pub width: Option<TransferWidth>,
    /// Pieces scheduled (snapshot transfers, split at the logical limit).
    pub transfers: usize,
    pub destinations: usize,
    pub horizon: u32,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    pub endpoint_bound: u32,
    /// Cycles the horizon is above the lower bound, `horizon -
    /// endpoint_bound` (`phases` gives the ratio of the two as its `gap`).
    pub above_bound: i64,
    pub row_words_total: u64,
    pub row_words_max: u64,
    /// The wall times measured, apart from the figures (the figures are
    /// the same on every run; these are not).
    pub wall_times: WallTimes,
    /// `PASS`, or the first failure.
    pub invariants: String,
}

/// Writes a chosen width as its text, and no width as the empty text.
fn width_or_empty<S: serde::Serializer>(
    width: &Option<TransferWidth>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(width.map_or("", TransferWidth::name))
}

impl BenchRecord {
    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.invariants == "PASS"
    }

    /// The one-line terminal form.
    pub fn line(&self) -> String {
        format!(
            "phase {:>4} {:<40} {:<8} transfers {:>7} destinations {:>8} horizon {:>7} bound {:>7} above bound {:>6} \
             row words {:>9} max {:>6} schedule+encode ms {:>9.2} {:>9.2} {:>9.2} validation ms {:>9.2} \
             invariants={}",
            self.phase,
            self.key.as_deref().unwrap_or("-"),
            self.policy.to_string(),
            self.transfers,
            self.destinations,
            self.horizon,
            self.endpoint_bound,
            self.above_bound,
            self.row_words_total,
            self.row_words_max,
            self.wall_times.schedule_encode_ms.min,
            self.wall_times.schedule_encode_ms.median,
            self.wall_times.schedule_encode_ms.max,
            self.wall_times.validation_ms,
            self.invariants,
        )
    }
}

fn milliseconds(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Measures one phase under every policy of `options`.
pub fn bench_phase(phase: &PhaseSnapshot, options: &BenchOptions) -> Vec<BenchRecord> {
    options
        .policies
        .iter()
        .map(|&policy| bench_policy(phase, policy, options))
        .collect()
}

fn bench_policy(
    phase: &PhaseSnapshot,
    policy: SchedulePolicy,
    options: &BenchOptions,
) -> BenchRecord {
    let _span = tracing::info_span!(
        "bench phase",
        phase = phase.phase,
        key = %phase.provenance.key.as_deref().unwrap_or("-"),
        policy = %policy
    )
    .entered();
    let problem = &phase.problem;
    let mut record = BenchRecord {
        phase: phase.phase,
        key: phase.provenance.key.clone(),
        policy,
        width: None,
        transfers: problem.pieces(),
        destinations: problem.receives(),
        horizon: 0,
        endpoint_bound: 0,
        above_bound: 0,
        row_words_total: 0,
        row_words_max: 0,
        wall_times: WallTimes::default(),
        invariants: String::new(),
    };
    let mut samples = Vec::with_capacity(options.iterations.max(1));
    let mut last: Option<(Schedule, PhaseRows)> = None;
    for _ in 0..options.iterations.max(1) {
        let start = Instant::now();
        let result = schedule(problem, policy, options.width)
            .map_err(BenchFailure::Schedule)
            .and_then(|scheduled| {
                let rows = encode_phase(problem, &scheduled).map_err(BenchFailure::Encode)?;
                Ok((scheduled, rows))
            });
        samples.push(milliseconds(start));
        match result {
            Ok(done) => last = Some(done),
            Err(failure) => {
                record.invariants = failure.to_string();
                record.wall_times.schedule_encode_ms = Timing::of(samples);
                return record;
            }
        }
    }
    record.wall_times.schedule_encode_ms = Timing::of(samples);
    let Some((scheduled, rows)) = last else {
        return record;
    };
    record.width = Some(scheduled.width);
    record.horizon = scheduled.horizon;
    record.endpoint_bound = scheduled.endpoint_bound;
    record.above_bound = i64::from(scheduled.horizon) - i64::from(scheduled.endpoint_bound);
    let words = rows.rows.iter().map(|row| row.words.len() as u64);
    record.row_words_total = words.clone().sum();
    record.row_words_max = words.max().unwrap_or(0);
    let start = Instant::now();
    record.invariants = match check(phase, &scheduled, &rows, options.sample) {
        Ok(()) => "PASS".to_string(),
        Err(failure) => failure.to_string(),
    };
    record.wall_times.validation_ms = milliseconds(start);
    record
}

/// The step of a phase's bench that failed, with its error; shown as the
/// record's `invariants` (`FAIL validate: ...`).
#[derive(Debug, thiserror::Error)]
enum BenchFailure {
    #[error("FAIL schedule: {0}")]
    Schedule(ScheduleError),
    #[error("FAIL encode: {0}")]
    Encode(RowError),
    #[error("FAIL validate: {0}")]
    Validate(ValidationError),
    #[error("FAIL rows: {0}")]
    Rows(RowError),
    #[error("FAIL placement: {0}")]
    Placement(RowError),
    #[error("FAIL finalize: {0}")]
    Finalize(RowError),
    #[error("FAIL replay: {0}")]
    Replay(ReplayError),
}

/// The checks of a phase's last schedule and rows, in order: the schedule
/// validator, the rows against the schedule, a consecutive placement, the
/// finalized words, and their replay.
fn check(
    phase: &PhaseSnapshot,
    scheduled: &Schedule,
    rows: &PhaseRows,
    sample: Option<u64>,
) -> Result<(), BenchFailure> {
    let problem = &phase.problem;
    validate(problem, scheduled).map_err(BenchFailure::Validate)?;
    check_phase(problem, scheduled, rows).map_err(BenchFailure::Rows)?;
    let placement = ConsecutivePlacement::new(problem).map_err(BenchFailure::Placement)?;
    let words = rows
        .finalize(|allocation, offset| placement.resolve(allocation, offset))
        .map_err(BenchFailure::Finalize)?;
    replay_phase(problem, &words, &placement, sample).map_err(BenchFailure::Replay)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record writes its policy as the build file does, and a width the
    /// schedule never chose (it failed) as the empty text.
    #[test]
    fn a_record_writes_its_policy_and_width_as_text() {
        let mut record = BenchRecord {
            phase: 3,
            key: None,
            policy: SchedulePolicy::Balanced { words: 1024 },
            width: None,
            transfers: 0,
            destinations: 0,
            horizon: 0,
            endpoint_bound: 0,
            above_bound: 0,
            row_words_total: 0,
            row_words_max: 0,
            wall_times: WallTimes::default(),
            invariants: "FAIL schedule: none".to_string(),
        };
        let json = serde_json::to_value(&record).expect("serialises");
        assert_eq!(json["policy"], "B1024");
        assert_eq!(json["width"], "");
        record.width = Some(TransferWidth::Paired64);
        let json = serde_json::to_value(&record).expect("serialises");
        assert_eq!(json["width"], "paired64");
        assert!(record.line().contains(" B1024    transfers"));
    }

    /// A failed check is named by its step, then its error's own words.
    #[test]
    fn a_failure_names_its_step() {
        let slot = RowError::SlotOutOfRange { word: 9 };
        let cases = [
            (BenchFailure::Encode(slot.clone()), "encode"),
            (BenchFailure::Rows(slot.clone()), "rows"),
            (BenchFailure::Placement(slot.clone()), "placement"),
            (BenchFailure::Finalize(slot.clone()), "finalize"),
            (
                BenchFailure::Replay(ReplayError::Row(slot.clone())),
                "replay",
            ),
        ];
        for (failure, step) in cases {
            assert_eq!(
                failure.to_string(),
                format!("FAIL {step}: relocation slot names word 9, past the row's end")
            );
        }
        let schedule_failure =
            BenchFailure::Schedule(ScheduleError::DuplicateReceiver { piece: 1, tile: 2 });
        assert_eq!(
            schedule_failure.to_string(),
            "FAIL schedule: piece 1: tile 2 appears twice among its destinations"
        );
        let validate_failure = BenchFailure::Validate(ValidationError::Shape { what: "starts" });
        assert_eq!(
            validate_failure.to_string(),
            "FAIL validate: schedule arrays do not match the problem: starts"
        );
    }
}
