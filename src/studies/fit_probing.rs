//! Fit probing: what would make a model that does not fit fit, found by
//! building candidates through placement (the stage that decides whether
//! a program fits) in one session: the largest batch and the largest
//! layer count that fit (by bisection: fitting is monotone in both), and
//! whether flash attention, all of the c600's tiles, half the planner's
//! reservation or no layout overrides would. A candidate total bytes
//! already rule out is not built. Nothing is guessed: the advice
//! `superstep build` gives (`crate::cli::fit`) names only what was built
//! and fitted.

use std::time::Instant;

use crate::build_file::validate::Capacity;
use crate::build_file::{ActivationScale, AttentionChoice, BuildQuery};
use crate::session::Session;
use crate::target::mapping::C600_TILES;

/// The searches' findings.
pub struct Findings {
    /// The largest smaller batch that fits (with the query's layers), when
    /// the batch can be smaller: `Some(None)` when even batch 1 does not.
    pub batch: Option<Option<u32>>,
    /// The largest smaller layer count that fits at the query's batch.
    pub layers: Option<Option<u32>>,
    /// Other levers, each tried once: what was set and whether it fits.
    pub levers: Vec<(String, bool)>,
    /// When a layout override is what does not fit: the largest batch (up
    /// to the query's) that fits without any override.
    pub without_overrides: Option<Option<u32>>,
    pub probes: Probes,
    pub seconds: f64,
}

/// Candidates tried: built through placement, or ruled out by total bytes
/// (the build file's capacity check, a necessary condition) without a
/// build.
#[derive(Clone, Copy, Debug, Default)]
pub struct Probes {
    pub builds: usize,
    pub ruled_out: usize,
}

/// Whether `query` builds through placement in `session` (which it now
/// holds). A candidate total bytes rule out (`Capacity`) does not fit and
/// is not built: a batch of a million, or a model on too few tiles, would
/// take long to plan only to fail. Its FP8 activations take one fixed scale: a scale changes no
/// byte of any allocation, and calibrating each candidate would run the
/// FP32 reference of every batch and layer count the search tries.
fn fits(session: &mut Session, query: &BuildQuery, probes: &mut Probes) -> bool {
    if !Capacity::of(&query.workload, &query.machine, &query.planning).passes() {
        probes.ruled_out += 1;
        return false;
    }
    probes.builds += 1;
    let mut candidate = query.clone();
    candidate.planning.activation_scale = ActivationScale::Fixed(PROBE_SCALE);
    session.update(&candidate);
    session.build().is_ok()
}

/// The fixed activation scale of the candidates `fits` builds (F143 at
/// 2^-4 holds magnitudes up to 15; for fitting, any scale would do).
const PROBE_SCALE: i8 = -4;

/// The largest value in `1..limit` for which `fits` holds, by bisection:
/// fitting is monotone (a smaller batch or fewer layers need no more
/// memory), and `limit` is known not to fit. `None` when 1 does not fit.
fn largest_fitting(limit: u32, mut fits: impl FnMut(u32) -> bool) -> Option<u32> {
    let (mut low, mut high) = (0u32, limit);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if fits(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    (low > 0).then_some(low)
}

/// The largest smaller batch of `query` that fits (see [`Findings::batch`]).
pub fn largest_batch(
    session: &mut Session,
    query: &BuildQuery,
    probes: &mut Probes,
) -> Option<Option<u32>> {
    (query.workload.batch > 1).then(|| {
        largest_fitting(query.workload.batch, |batch| {
            let mut candidate = query.clone();
            candidate.workload.batch = batch;
            fits(session, &candidate, probes)
        })
    })
}

/// Tries the other levers of `query` in `session`, after the batch search
/// (its answer `batch`, `probes` tried since `started`).
pub fn other_levers(
    session: &mut Session,
    query: &BuildQuery,
    overrides_at_fault: bool,
    batch: Option<Option<u32>>,
    mut probes: Probes,
    started: Instant,
) -> Findings {
    let layers = (query.workload.model.layers > 1).then(|| {
        largest_fitting(query.workload.model.layers, |layers| {
            let mut candidate = query.clone();
            candidate.workload.model.layers = layers;
            fits(session, &candidate, &mut probes)
        })
    });
    let mut levers = Vec::new();
    let mut lever = |label: String, candidate: BuildQuery, probes: &mut Probes| {
        let fitted = fits(session, &candidate, probes);
        levers.push((label, fitted));
    };
    if query.workload.attention != AttentionChoice::Flash {
        let mut candidate = query.clone();
        candidate.workload.attention = AttentionChoice::Flash;
        lever(
            String::from("workload.attention = \"flash\""),
            candidate,
            &mut probes,
        );
    }
    if query.machine.tiles < C600_TILES {
        let mut candidate = query.clone();
        candidate.machine.tiles = C600_TILES;
        lever(
            format!("machine.tiles = {C600_TILES}"),
            candidate,
            &mut probes,
        );
    }
    let reserved = query.planning.reserved_bytes_per_tile;
    if reserved >= 2048 {
        let mut candidate = query.clone();
        candidate.planning.reserved_bytes_per_tile = reserved / 2;
        lever(
            format!(
                "planning.reserved_bytes_per_tile = {} (half; the planner keeps that back for \
                 the exchange tables and patch lists, placement uses what they really need)",
                reserved / 2
            ),
            candidate,
            &mut probes,
        );
    }
    let mut without_overrides = None;
    if overrides_at_fault && !query.planning.layout_overrides.is_empty() {
        let mut candidate = query.clone();
        candidate.planning.layout_overrides.clear();
        without_overrides = Some(if fits(session, &candidate, &mut probes) {
            Some(query.workload.batch)
        } else {
            largest_batch(session, &candidate, &mut probes).flatten()
        });
    }
    Findings {
        batch,
        layers,
        levers,
        without_overrides,
        probes,
        seconds: started.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::largest_fitting;

    #[test]
    fn bisection_finds_the_largest_value_that_fits_and_tries_few() {
        for limit in 1..40u32 {
            for threshold in 0..limit {
                let mut tried = Vec::new();
                let found = largest_fitting(limit, |value| {
                    tried.push(value);
                    value <= threshold
                });
                assert_eq!(
                    found,
                    (threshold > 0).then_some(threshold),
                    "{limit} {threshold}"
                );
                assert!(tried.iter().all(|value| (1..limit).contains(value)));
                assert!(tried.len() <= (u32::BITS - limit.leading_zeros()) as usize);
            }
        }
    }
}
