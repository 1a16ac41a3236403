//! Exchange quality of a build, from its per-phase figures: how far the
//! schedules are from their lower bounds, weighted by how often each phase
//! runs. Pure arithmetic over `PhaseFigures`; it must not schedule anything.

use serde::Serialize;

use crate::session::PhaseFigures;

/// Weighted horizons against both lower bounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExchangeQuality {
    /// Σ horizon × executions over every phase.
    pub horizon_cycles: u64,
    /// Σ endpoint bound × executions.
    pub endpoint_bound_cycles: u64,
    /// Σ latency-aware bound × executions.
    pub latency_bound_cycles: u64,
    /// `horizon_cycles / endpoint_bound_cycles`.
    pub endpoint_ratio: f64,
    /// `horizon_cycles / latency_bound_cycles`.
    pub latency_ratio: f64,
    /// The phase furthest above its latency-aware bound, and that ratio.
    pub worst_phase: String,
    pub worst_latency_ratio: f64,
}

fn ratio(numerator: u64, denominator: u64) -> f64 {
    numerator as f64 / denominator.max(1) as f64
}

impl ExchangeQuality {
    pub fn of(phases: &[PhaseFigures]) -> ExchangeQuality {
        let weighted = |value: fn(&PhaseFigures) -> u32| -> u64 {
            phases
                .iter()
                .map(|phase| u64::from(value(phase)) * u64::from(phase.executions))
                .sum()
        };
        let horizon_cycles = weighted(|phase| phase.horizon);
        let endpoint_bound_cycles = weighted(|phase| phase.endpoint_bound);
        let latency_bound_cycles = weighted(|phase| phase.latency_bound);
        let (worst_phase, worst_latency_ratio) = phases
            .iter()
            .map(|phase| {
                (
                    phase.key.clone(),
                    ratio(u64::from(phase.horizon), u64::from(phase.latency_bound)),
                )
            })
            .fold((String::new(), 0.0), |best, next| {
                if next.1 > best.1 { next } else { best }
            });
        ExchangeQuality {
            horizon_cycles,
            endpoint_bound_cycles,
            latency_bound_cycles,
            endpoint_ratio: ratio(horizon_cycles, endpoint_bound_cycles),
            latency_ratio: ratio(horizon_cycles, latency_bound_cycles),
            worst_phase,
            worst_latency_ratio,
        }
    }
}

/// The concrete choice of a phase for reports: the policy, and under `auto`
/// the pairing of the winning candidate (`matching/selected`).
pub fn chosen_label(phase: &PhaseFigures) -> String {
    match phase.candidates.iter().find(|candidate| candidate.chosen) {
        Some(candidate) => format!(
            "{}/{}",
            candidate.policy,
            format!("{:?}", candidate.pairing).to_lowercase()
        ),
        None => phase.chosen.to_string(),
    }
}
