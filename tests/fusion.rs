//! `planning.fusion` on the tiny ViT (6 exchange boundaries, all movable,
//! every one cross-operator): `across-operators` merges all of them,
//! `auto` merges exactly those whose merged horizon is below the two
//! separate horizons plus the barrier saved, and every variant builds
//! (the stage checkers run on every build) and still runs correctly.

use crate::common;

use common::{query, superstep};
use superstep::group::{Blocker, MotionOutcome, PhaseGroups};
use superstep::session::Session;

const TINY: &str = "queries/vit-tiny.toml";

fn built_groups(fusion: &str) -> PhaseGroups {
    let set = format!("planning.fusion={fusion}");
    let mut session = Session::new(&query(TINY, &[&set]));
    session.build().expect("the build validates");
    let groups = session.phase_groups().expect("phase groups");
    (*groups).clone()
}

fn merged(outcome: &MotionOutcome) -> bool {
    !matches!(outcome, MotionOutcome::Blocked(_))
}

#[test]
fn across_operators_merges_every_tiny_boundary() {
    let same = built_groups("same-operator");
    let across = built_groups("across-operators");
    assert_eq!(same.decisions.len(), 6);
    assert!(same.decisions.iter().all(|decision| decision.outcome
        == MotionOutcome::Blocked(Blocker::DifferentOperators)));
    assert_eq!(
        across
            .decisions
            .iter()
            .filter(|d| merged(&d.outcome))
            .count(),
        6
    );
    assert_eq!(across.phases.len() + 6, same.phases.len());
}

#[test]
fn auto_merges_exactly_where_the_merged_horizon_is_cheaper() {
    let same = built_groups("same-operator");
    let auto = built_groups("auto");
    assert_eq!(auto.decisions.len(), 6);
    let mut merges = 0;
    for decision in &auto.decisions {
        let cost = decision.cost.expect("every tiny boundary is priced");
        assert!(cost.sync_saved > 0);
        // A merge is scheduled unless its bound already rules it out.
        assert!(cost.merged_bound <= cost.merged_horizon.unwrap_or(u64::MAX));
        assert_eq!(cost.merged_horizon.is_none(), !cost.may_merge());
        let cheaper = cost
            .merged_horizon
            .is_some_and(|horizon| horizon < cost.separate_sum + cost.sync_saved);
        assert_eq!(merged(&decision.outcome), cheaper, "{decision:?}");
        if !cheaper {
            assert_eq!(
                decision.outcome,
                MotionOutcome::Blocked(Blocker::NotCheaper)
            );
        }
        merges += usize::from(cheaper);
    }
    assert_eq!(auto.phases.len(), same.phases.len() - merges);
    assert_eq!(auto.original_phase_count(), same.phases.len());
}

#[test]
fn every_fusion_builds_and_runs_on_the_interpreter() {
    for fusion in ["auto", "across-operators"] {
        let set = format!("planning.fusion={fusion}");
        let output = superstep(&["run", TINY, "--no-cache", "--set", &set]);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{fusion}: {text}");
        assert!(text.contains("cosine 0.99"), "{fusion}: {text}");
    }
}

#[test]
fn an_unknown_fusion_names_the_field_and_the_values() {
    let output = superstep(&["build", TINY, "--set", "planning.fusion=fastest"]);
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(text.contains("planning.fusion"), "{text}");
    for value in ["same-operator", "across-operators", "auto"] {
        assert!(text.contains(value), "{text}");
    }
}
