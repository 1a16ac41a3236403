//! Measuring a sweep: every (phase, configuration that applies) pair is one
//! memoized, persistent-cached point (`Phase::measure_under`), measured in
//! parallel by the session (`Session::map_phase_items`).

use super::config::SweepConfig;
use super::points::{BuiltPoint, Sweep, SweepPhase, SweepPoint};
use crate::session::{PhaseError, PointFigures, Session};

/// Every exchange phase under every configuration of `configs` that
/// applies to it (a `paired64` one only where some piece may move paired),
/// next to the phase as built. A point that fails to schedule or to
/// validate is recorded with its error; a phase whose built figures are
/// missing fails the sweep.
pub fn sweep(session: &Session, configs: &[SweepConfig]) -> Result<Sweep, PhaseError> {
    match sweep_points(session, configs, None)? {
        SweepOutcome::Whole(sweep) => Ok(sweep),
        SweepOutcome::Shard { .. } => Err(PhaseError::Stage(
            "the sweep measured a shard where the whole sweep was asked for".to_string(),
        )),
    }
}

/// [`sweep`], or with `shard` only that shard's points, measured into the
/// caches and counted.
pub fn sweep_points(
    session: &Session,
    configs: &[SweepConfig],
    shard: Option<Shard>,
) -> Result<SweepOutcome, PhaseError> {
    // A shard measures the built figures of its own phases only (every
    // N-th, so that the shards together leave all of them cached).
    let headers: Vec<(Option<BuiltPoint>, u64, bool)> = session
        .map_phases(|phase| {
            let eligible = phase.pairing_eligible()?;
            if shard.is_some_and(|shard| !shard.owns(phase.index)) {
                let executions = u64::from(phase.record()?.executions);
                return Ok::<_, PhaseError>((None, executions, eligible));
            }
            let figures = phase.figures()?;
            let patches = phase.patches()?;
            let built = BuiltPoint {
                policy: figures.policy,
                figures: PointFigures {
                    chosen: figures.chosen,
                    width: figures.width,
                    horizon: figures.horizon,
                    endpoint_bound: figures.endpoint_bound,
                    max_row_bytes: figures.max_row_bytes,
                    total_row_bytes: figures.total_row_bytes,
                    repeat_patch_words: patches.words(),
                    repeat_patch_cycles: patches.cycles(),
                },
            };
            Ok((Some(built), u64::from(figures.executions), eligible))
        })
        .into_iter()
        .collect::<Result<_, _>>()?;
    let work: Vec<(usize, SweepConfig)> = headers
        .iter()
        .enumerate()
        .flat_map(|(index, (_, _, eligible))| {
            configs
                .iter()
                .filter(|config| config.applies(*eligible))
                .map(move |&config| (index, config))
        })
        .collect();
    if let Some(shard) = shard {
        let mine: Vec<(usize, SweepConfig)> = work
            .iter()
            .enumerate()
            .filter(|(point, _)| shard.owns(*point))
            .map(|(_, item)| *item)
            .collect();
        let outcomes = measure_points(session, &mine);
        return Ok(SweepOutcome::Shard {
            shard,
            points: work.len(),
            computed: outcomes.len(),
            failed: outcomes
                .iter()
                .filter(|point| point.outcome.is_err())
                .count(),
        });
    }
    let mut outcomes = measure_points(session, &work).into_iter();
    let built_phases = session.phases();
    let mut phases = Vec::with_capacity(headers.len());
    for (index, (built, executions, eligible)) in headers.into_iter().enumerate() {
        let built = built.ok_or_else(|| {
            PhaseError::Stage(format!(
                "phase {index}: its built figures were not measured"
            ))
        })?;
        let count = configs
            .iter()
            .filter(|config| config.applies(eligible))
            .count();
        let phase = built_phases.get(index);
        phases.push(SweepPhase {
            index,
            step: phase.map_or(usize::MAX, |phase| phase.step()),
            key: phase
                .map(|phase| phase.key().to_string())
                .unwrap_or_default(),
            executions,
            pairing_eligible: eligible,
            built,
            points: outcomes.by_ref().take(count).collect(),
        });
    }
    Ok(SweepOutcome::Whole(Sweep {
        configs: configs.to_vec(),
        phases,
    }))
}

/// Every point of `work` (phase index, configuration), measured in
/// parallel, in order.
fn measure_points(session: &Session, work: &[(usize, SweepConfig)]) -> Vec<SweepPoint> {
    session.map_phase_items("sweep points", work, |phase, &config| SweepPoint {
        config,
        outcome: phase.measure_under(config.policy, config.width),
    })
}

/// One shard of a sweep: point `p` (in the sweep's deterministic order:
/// phases in program order, each phase's configurations in the order
/// given) belongs to shard `p mod count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn owns(&self, point: usize) -> bool {
        point % self.count as usize == self.index as usize
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}/{}", self.index, self.count)
    }
}

/// A `--shard` that is not `I/N` with `0 <= I < N`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a shard; give I/N with 0 <= I < N, e.g. 0/3 \
     (the job array's index and its size)"
)]
pub struct ShardParseError {
    /// What was given.
    pub text: String,
}

impl std::str::FromStr for Shard {
    type Err = ShardParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || ShardParseError {
            text: text.to_string(),
        };
        let (index, count) = text.split_once('/').ok_or_else(usage)?;
        let index: u32 = index.trim().parse().map_err(|_| usage())?;
        let count: u32 = count.trim().parse().map_err(|_| usage())?;
        if count == 0 || index >= count {
            return Err(usage());
        }
        Ok(Shard { index, count })
    }
}

/// A whole sweep, or what one shard of it computed.
pub enum SweepOutcome {
    Whole(Sweep),
    /// Only this shard's points were measured (into the caches).
    Shard {
        shard: Shard,
        /// Points of the whole sweep.
        points: usize,
        computed: usize,
        failed: usize,
    },
}
