//! The session owns how deep a build goes and the rules that hold at each
//! depth: phase keys resolve (or name the nearest ones), and a schedule
//! override naming no phase stops every build that forms the phase groups,
//! whichever caller asked (the CLI, watch, `--why`, a sweep shard).

use superstep::session::TrackedQuery;
use superstep::session::{BuildError, Session};

use crate::common::{counts, query};

const TINY: &str = "queries/vit-tiny.toml";

#[test]
fn a_phase_key_resolves_or_names_the_nearest_keys() {
    let mut session = Session::new(&query(TINY, &[]));
    session.build_phase_groups().expect("phase groups");
    let phases = session.phases();
    let down = phases
        .iter()
        .find(|phase| phase.key() == "layer.mlp.down#0")
        .expect("the tiny build reduces its MLP down projection");
    let found = session.phase("layer.mlp.down#0").expect("a known key");
    assert_eq!(found.index, down.index);
    assert_eq!(found.key(), "layer.mlp.down#0");

    let unknown = session
        .phase("layer.mlp.dwn#0")
        .err()
        .expect("a misspelt key is unknown");
    assert_eq!(unknown.key, "layer.mlp.dwn#0");
    assert_eq!(unknown.known, phases.len());
    assert_eq!(
        unknown.nearest.first().map(String::as_str),
        Some("layer.mlp.down#0")
    );
    assert!(unknown.nearest.len() <= superstep::session::SUGGESTIONS);
    assert!(
        unknown.to_string().contains("nearest: layer.mlp.down#0"),
        "{unknown}"
    );
}

#[test]
fn an_override_of_a_missing_phase_stops_the_build_before_its_back_half() {
    let sets = ["schedule.override.layer.mlp.dwn#0=latency"];
    for depth in ["phase groups", "whole"] {
        let mut session = Session::new(&query(TINY, &sets));
        let result = match depth {
            "phase groups" => session.build_phase_groups(),
            _ => session.build(),
        };
        let Err(BuildError::UnknownOverride(unknown)) = result else {
            panic!("{depth}: the override is refused, got {result:?}");
        };
        assert_eq!(unknown.key, "layer.mlp.dwn#0");
        assert_eq!(
            unknown.nearest.first().map(String::as_str),
            Some("layer.mlp.down#0")
        );
        // Refused after the phase groups (whose fusion pricing schedules
        // candidate merges) and before the back half.
        let ran = counts(&session.take_executions());
        assert!(
            ran.contains_key(&TrackedQuery::PhaseGroups),
            "{depth}: {ran:?}"
        );
        for back in [
            TrackedQuery::PhaseFigures,
            TrackedQuery::RowTable,
            TrackedQuery::Placement,
            TrackedQuery::BuildEstimate,
        ] {
            assert!(!ran.contains_key(&back), "{depth}: {back} ran: {ran:?}");
        }
    }
}

#[test]
fn a_valid_override_is_checked_as_its_own_stage_and_applied() {
    let mut session = Session::new(&query(
        TINY,
        &["schedule.override.layer.mlp.down#0=latency"],
    ));
    let outcome = session.build().expect("a known phase builds");
    let stages: Vec<&str> = outcome.times.iter().map(|time| time.stage.name()).collect();
    let overrides = stages.iter().position(|stage| *stage == "overrides");
    let groups = stages.iter().position(|stage| *stage == "phase groups");
    let schedules = stages.iter().position(|stage| *stage == "schedules");
    assert!(
        groups < overrides && overrides < schedules && groups.is_some(),
        "{stages:?}"
    );
    let policy = session
        .phase("layer.mlp.down#0")
        .expect("phase")
        .policy()
        .clone();
    assert_eq!(policy.policy.to_string(), "latency", "{policy:?}");

    // Without overrides there is no such stage.
    let mut plain = Session::new(&query(TINY, &[]));
    let outcome = plain.build().expect("builds");
    assert!(
        outcome
            .times
            .iter()
            .all(|time| time.stage != superstep::session::TimedStage::Overrides)
    );
}

/// Cancels the build it watches when `stage` begins (on the build thread,
/// in the middle of a build: the clones fanned out next unwind too).
struct CancelAt {
    stage: &'static str,
    canceller: std::sync::Mutex<Option<superstep::session::Canceller>>,
}

impl superstep::session::progress::Progress for CancelAt {
    fn begin(&self, stage: &str, _: Option<u64>) {
        if stage == self.stage
            && let Some(canceller) = self.canceller.lock().expect("lock").as_ref()
        {
            canceller.cancel();
        }
    }
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}

/// A build cancelled half way unwinds with salsa's `Cancelled` (not a
/// panic), leaves the session usable (it builds again, to the figures of
/// a fresh session) and the persistent cache without a partial entry (a
/// later session warm from it builds the same figures).
#[test]
fn a_cancelled_build_unwinds_and_leaves_the_session_and_cache_whole() {
    use std::panic::AssertUnwindSafe;
    use std::sync::{Arc, Mutex};

    let directory = crate::common::scratch("session", "cancelled");
    let cache = Arc::new(
        superstep::cache::PersistentCache::open(&directory.join("cache"), 1 << 30).expect("cache"),
    );
    let tiny = query(TINY, &[]);
    let fresh = Session::new(&tiny)
        .build()
        .expect("builds")
        .back
        .expect("back half")
        .headline;
    for stage in ["schedules", "placement"] {
        let mut session = Session::with_cache(&tiny, Some(cache.clone()));
        let observer = Arc::new(CancelAt {
            stage,
            canceller: Mutex::new(None),
        });
        session.set_progress(observer.clone());
        *observer.canceller.lock().expect("lock") = Some(session.begin_cancellable());
        let cancelled = salsa::Cancelled::catch(AssertUnwindSafe(|| session.build()));
        assert!(cancelled.is_err(), "{stage}: the build was cancelled");
        session.end_cancellable();
        let again = session.build().expect("builds after the cancel");
        assert_eq!(again.back.expect("back half").headline, fresh, "{stage}");
    }
    let mut warm = Session::with_cache(&tiny, Some(cache.clone()));
    let warm = warm.build().expect("builds from the cache");
    assert_eq!(warm.back.expect("back half").headline, fresh);
    let _ = std::fs::remove_dir_all(&directory);
}
