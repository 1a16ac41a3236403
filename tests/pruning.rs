//! Pruning by lower bounds (`schedule.prune_by_bounds`, on by default)
//! only skips work that cannot win: fusion merges whose bound rules them
//! out, the separate schedules of merges whose merged horizon already beats
//! the separate bounds, `auto`'s later candidates bound to exceed the best one so far, and
//! suggestion policies bound to exceed the phase as built. Built with and
//! without it, every shipped model's small build and every tiny variant
//! compiles to the same package bytes, the same estimate to the cycle and
//! the same suggestions, and pruning did stop something.

use crate::common;

use common::{TINY_VARIANTS, query};
use superstep::session::Session;

struct Built {
    package: Vec<u8>,
    cycles: u64,
    suggestions: String,
    pruned_candidates: usize,
    pruned_alternatives: usize,
    taken_by_bounds: usize,
}

fn built(file: &str, sets: &[&str], prune: bool) -> Built {
    let flag = format!("schedule.prune_by_bounds={prune}");
    let mut sets = sets.to_vec();
    sets.push(&flag);
    let mut session = Session::new(&query(file, &sets));
    let outcome = session.build().expect("builds");
    let package = session
        .package()
        .expect("package")
        .encode()
        .expect("encodes");
    let suggestions =
        superstep::studies::suggestions::suggestions(&session, None).expect("suggestions");
    let mut pruned_candidates = 0;
    let mut pruned_alternatives = 0;
    for phase in session.phases() {
        let figures = phase.figures().expect("figures");
        pruned_candidates += figures.candidates.iter().filter(|c| c.pruned).count();
        pruned_alternatives += phase.alternatives().expect("alternatives").pruned.len();
    }
    let groups = session.phase_groups().expect("phase groups");
    let taken_by_bounds = groups
        .decisions
        .iter()
        .filter_map(|decision| decision.cost)
        .filter(|cost| cost.taken_by_bounds())
        .count();
    Built {
        package,
        cycles: outcome
            .back
            .expect("back half")
            .headline
            .estimate
            .total_cycles,
        suggestions: format!("{suggestions:?}"),
        pruned_candidates,
        pruned_alternatives,
        taken_by_bounds,
    }
}

fn assert_same(file: &str, sets: &[&str]) -> (usize, usize, usize) {
    let pruned = built(file, sets, true);
    let full = built(file, sets, false);
    assert!(
        pruned.package == full.package,
        "{file} {sets:?}: package bytes differ"
    );
    assert_eq!(pruned.cycles, full.cycles, "{file} {sets:?}");
    assert_eq!(pruned.suggestions, full.suggestions, "{file} {sets:?}");
    assert_eq!(
        full.pruned_alternatives, 0,
        "{file} {sets:?}: nothing pruned when off"
    );
    assert_eq!(
        full.taken_by_bounds, 0,
        "{file} {sets:?}: every merge scheduled apart when off"
    );
    (
        pruned.pruned_candidates,
        pruned.pruned_alternatives,
        pruned.taken_by_bounds,
    )
}

#[test]
fn pruning_changes_no_tiny_build() {
    let mut stopped = (0, 0, 0);
    for sets in std::iter::once(&[][..]).chain(TINY_VARIANTS.iter().copied()) {
        let (candidates, alternatives, taken) = assert_same("queries/vit-tiny.toml", sets);
        stopped.0 += candidates;
        stopped.1 += alternatives;
        stopped.2 += taken;
    }
    assert!(
        stopped.1 > 0,
        "suggestion policies were pruned: {stopped:?}"
    );
    assert!(
        stopped.2 > 0,
        "merges were taken on the separate bounds: {stopped:?}"
    );
}

/// Each shipped model's two-layer build with and without pruning (one test
/// each, so that the three run side by side), and pruning stopped at least
/// one suggestion policy.
fn pruning_changes_no_two_layer_build_of(file: &str) {
    let (_, pruned, _) = assert_same(file, &["workload.layers=2"]);
    assert!(pruned > 0, "{file}: no suggestion policy was pruned");
}

#[test]
fn pruning_changes_no_two_layer_siglip() {
    pruning_changes_no_two_layer_build_of("queries/siglip-so400m.toml");
}

#[test]
fn pruning_changes_no_two_layer_pe_core() {
    pruning_changes_no_two_layer_build_of("queries/pe-core-l14.toml");
}

#[test]
fn pruning_changes_no_two_layer_vit_b16() {
    pruning_changes_no_two_layer_build_of("queries/vit-b16.toml");
}
