//! `superstep packing`: the packing counterfactuals of chosen exchange
//! phases (seed 002's study), each phase's study one memoized,
//! persistent-cached query (`Phase::packing_study`) under the phase's own
//! policy (or one given for every phase), fanned out over the cores by the
//! session. Choosing the phases (by key or step, or the top N by endpoint
//! fragmentation) happens here; the counterfactuals themselves are
//! `crate::schedule::packing`.

use serde::Serialize;

use super::sweep::SweepConfig;
use super::sweep::config::{config_text, optional_config_text};
use crate::session::{EffectivePolicy, PhaseError, PhaseStudyError, Session, UnknownPhaseSelector};

pub use crate::schedule::packing::{
    Alternative, AlternativeOutcome, AlternativeStudy, Conflict, CopyFigures, ExchangeMeasure,
    Independence, PackingStudy, Refusal,
};

/// Which phases to study.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackingRequest {
    /// Phase keys or steps; empty means every phase (or the top `top`).
    pub phases: Vec<String>,
    /// Only the `top` phases by endpoint fragmentation (after `phases`).
    pub top: Option<usize>,
    /// One configuration for every phase and alternative; `None` means
    /// each phase's own effective policy.
    pub config: Option<SweepConfig>,
}

/// A request that names what the build does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PackingRequestError {
    #[error("--phase {selector}: {0}", selector = .0.selector)]
    UnknownPhase(UnknownPhaseSelector),
    #[error("{0}")]
    Phase(#[from] PhaseError),
    /// A chosen phase's study could not be made.
    #[error("{key}: {source}")]
    Study {
        key: String,
        source: PhaseStudyError,
    },
}

/// One studied phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PackingPhase {
    /// Position among the exchange phases (an internal lookup).
    #[serde(skip)]
    pub index: usize,
    /// The phase's step: its position in program order among every exchange
    /// phase and compute step, the index `superstep phases` shows (a
    /// snapshot's phase id, which `capture` writes as the step).
    pub step: usize,
    pub key: String,
    pub executions: u32,
    /// The most piece endpoints (sends plus receives) on one tile.
    pub endpoint_fragments: u64,
    pub fragment_tile: u32,
    /// The configuration every alternative was scheduled under (written
    /// as its text, `B1024/word32`).
    #[serde(serialize_with = "config_text")]
    pub policy: SweepConfig,
    pub study: PackingStudy,
}

/// The whole study.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Packing {
    /// Where the phases come from: "build" or "snapshot".
    pub source: &'static str,
    /// Phases in the build (or the snapshot).
    pub phases_in_build: usize,
    /// The configuration asked for (`None`: each phase's own).
    #[serde(serialize_with = "optional_config_text")]
    pub config: Option<SweepConfig>,
    pub phases: Vec<PackingPhase>,
}

/// Keeps the `top` entries with the most endpoints (all when `None`),
/// ties to the earlier phase, in phase order. Entries are
/// `(index, (endpoints, tile))`.
pub fn keep_top(fragments: &mut Vec<(usize, (u64, u32))>, top: Option<usize>) {
    if let Some(top) = top {
        fragments.sort_by_key(|&(index, (count, _))| (std::cmp::Reverse(count), index));
        fragments.truncate(top);
        fragments.sort_by_key(|&(index, _)| index);
    }
}

/// The packing study of the phases `request` chooses, in program order.
pub fn packing(
    session: &Session,
    request: &PackingRequest,
) -> Result<Packing, PackingRequestError> {
    let phases = session.phases();
    let mut chosen: Vec<usize> = if request.phases.is_empty() {
        (0..phases.len()).collect()
    } else {
        let mut chosen = Vec::with_capacity(request.phases.len());
        for wanted in &request.phases {
            let index = session
                .phase_by_key_or_step(wanted)
                .map_err(PackingRequestError::UnknownPhase)?
                .index;
            if !chosen.contains(&index) {
                chosen.push(index);
            }
        }
        chosen
    };
    let mut fragments = Vec::with_capacity(chosen.len());
    for &index in &chosen {
        fragments.push((index, phases[index].endpoint_fragments()?));
    }
    keep_top(&mut fragments, request.top);
    chosen = fragments.iter().map(|&(index, _)| index).collect();
    let items: Vec<(usize, ())> = chosen.iter().map(|&index| (index, ())).collect();
    let studies = session.map_phase_items("packing studies", &items, |phase, _| {
        let effective = match request.config {
            Some(config) => EffectivePolicy::overriding(
                config.policy,
                config.width,
                phase.policy().row_allowance,
            ),
            None => phase.policy().clone(),
        };
        let study = phase.packing_study(&effective)?;
        let executions = phase.record()?.executions;
        let config = SweepConfig {
            policy: effective.policy,
            width: effective.width,
        };
        Ok::<_, PhaseStudyError>((executions, config, study))
    });
    let mut studied = Vec::with_capacity(chosen.len());
    for ((index, (count, tile)), result) in fragments.into_iter().zip(studies) {
        let phase = &phases[index];
        let (executions, policy, study) = result.map_err(|source| PackingRequestError::Study {
            key: phase.key().to_string(),
            source,
        })?;
        studied.push(PackingPhase {
            index,
            step: phase.step(),
            key: phase.key().to_string(),
            executions,
            endpoint_fragments: count,
            fragment_tile: tile,
            policy,
            study,
        });
    }
    Ok(Packing {
        source: "build",
        phases_in_build: phases.len(),
        config: request.config,
        phases: studied,
    })
}
