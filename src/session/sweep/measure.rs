//! Measuring a sweep: every (phase, configuration that applies) pair is one
//! memoized, persistent-cached `sweep_point` query, computed in parallel
//! over cloned database handles (the only parallelism is here, at the top).

use crate::session::fan_out::fan_out;

use super::super::Session;
use super::config::SweepConfig;
use super::points::{BuiltPoint, Sweep, SweepPhase, SweepPoint};
use crate::incremental::phases::{PhaseKey, phase_keys};
use crate::incremental::schedules::{PhaseError, PolicyKey};
use crate::incremental::sweep::{pairing_eligible, sweep_point};

impl Session {
    /// Every exchange phase under every configuration of `configs` that
    /// applies to it (a `paired64` one only where some piece may move
    /// paired), next to the phase as built. A point that fails to schedule
    /// or to validate is recorded with its error; a phase whose built
    /// figures are missing fails the sweep.
    pub fn sweep(&self, configs: &[SweepConfig]) -> Result<Sweep, PhaseError> {
        match self.sweep_points(configs, None)? {
            SweepOutcome::Whole(sweep) => Ok(sweep),
            SweepOutcome::Shard { .. } => Err(PhaseError::Stage(
                "the sweep measured a shard where the whole sweep was asked for".to_string(),
            )),
        }
    }

    /// [`Session::sweep`], or with `shard` only that shard's points,
    /// measured into the caches and counted.
    pub fn sweep_points(
        &self,
        configs: &[SweepConfig],
        shard: Option<Shard>,
    ) -> Result<SweepOutcome, PhaseError> {
        // A shard measures the built figures of its own phases only (every
        // N-th, so that the shards together leave all of them cached).
        let headers: Vec<(Option<BuiltPoint>, u64, bool, u32)> = self
            .map_phases(|phase| {
                let eligible = pairing_eligible(phase.db, phase.record()?.problem);
                let row_allowance = phase.policy().row_allowance;
                if shard.is_some_and(|shard| !shard.owns(phase.index)) {
                    let executions = u64::from(phase.record()?.executions);
                    return Ok::<_, PhaseError>((None, executions, eligible, row_allowance));
                }
                let figures = phase.figures()?;
                let patches = phase.patches()?;
                let built = BuiltPoint {
                    policy: figures.policy,
                    chosen: figures.chosen,
                    width: figures.width,
                    horizon: u64::from(figures.horizon),
                    endpoint_bound: figures.endpoint_bound,
                    max_row_bytes: figures.max_row_bytes,
                    total_row_bytes: figures.total_row_bytes,
                    repeat_patch_words: patches.words(),
                    repeat_patch_cycles: patches.cycles(),
                };
                Ok((
                    Some(built),
                    u64::from(figures.executions),
                    eligible,
                    row_allowance,
                ))
            })
            .into_iter()
            .collect::<Result<_, _>>()?;
        let keys = phase_keys(&self.db, self.inputs).clone();
        let work: Vec<(usize, SweepConfig, u32)> = headers
            .iter()
            .enumerate()
            .flat_map(|(index, (_, _, eligible, row_allowance))| {
                configs
                    .iter()
                    .filter(|config| config.applies(*eligible))
                    .map(move |&config| (index, config, *row_allowance))
            })
            .collect();
        if let Some(shard) = shard {
            let mine: Vec<(usize, SweepConfig, u32)> = work
                .iter()
                .enumerate()
                .filter(|(point, _)| shard.owns(*point))
                .map(|(_, item)| *item)
                .collect();
            let outcomes = self.measure_points(&keys, &mine);
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
        let outcomes = self.measure_points(&keys, &work);
        let mut outcomes = outcomes.into_iter();
        let steps = self.phase_steps();
        let mut phases = Vec::with_capacity(headers.len());
        for (index, (built, executions, eligible, _)) in headers.into_iter().enumerate() {
            let built = built.ok_or_else(|| {
                PhaseError::Stage(format!(
                    "phase {index}: its built figures were not measured"
                ))
            })?;
            let count = configs
                .iter()
                .filter(|config| config.applies(eligible))
                .count();
            phases.push(SweepPhase {
                index,
                step: steps.get(index).copied().unwrap_or(usize::MAX),
                key: keys
                    .get(index)
                    .map(|key| key.key(&self.db).clone())
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

    /// Every point of `work` (phase index, configuration, `auto`'s row
    /// allowance), measured in parallel, in order.
    fn measure_points(
        &self,
        keys: &[PhaseKey<'_>],
        work: &[(usize, SweepConfig, u32)],
    ) -> Vec<SweepPoint> {
        let progress = self.progress.clone();
        progress.begin("sweep points", Some(work.len() as u64));
        let outcomes: Vec<SweepPoint> =
            fan_out(&self.db, work, |db, _, &(index, config, row_allowance)| {
                let policy = PolicyKey::from_config(db, config.policy, config.width, row_allowance);
                let outcome = match keys.get(index) {
                    Some(&key) => sweep_point(db, key, policy)
                        .clone()
                        .map_err(|error| error.to_string()),
                    None => Err(format!("phase {index} is not in the program")),
                };
                progress.advance(1);
                SweepPoint { config, outcome }
            });
        progress.end();
        outcomes
    }
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

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || {
            format!(
                "`{text}` is not a shard; give I/N with 0 <= I < N, e.g. 0/3 \
                 (the job array's index and its size)"
            )
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
