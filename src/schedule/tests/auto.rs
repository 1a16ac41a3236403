//! Tests of `auto`: the candidate it keeps and the record of every one
//! tried, pruning by bounds (never a different schedule), and the storage
//! guard's row allowance (per merged exchange).

use super::*;

#[test]
fn auto_keeps_the_best_admitted_candidate_and_records_all() {
    let mut stage_two = 0;
    let mut pruned = 0;
    for seed in 0..20 {
        let problem = random_problem(100 + seed, 16, 40);
        let chosen = schedule(&problem, SchedulePolicy::Auto, TransferWidth::Auto).unwrap();
        validate(&problem, &chosen).unwrap();
        assert_eq!(chosen.policy, SchedulePolicy::Auto);
        let winners: Vec<_> = chosen.candidates.iter().filter(|c| c.chosen).collect();
        assert_eq!(winners.len(), 1, "seed {seed}: exactly one winner");
        let winner = winners[0];
        assert!(winner.admitted);
        assert_eq!(winner.policy, chosen.chosen);
        assert_eq!(winner.horizon, chosen.horizon);
        for candidate in chosen.candidates.iter().filter(|c| c.admitted) {
            assert!(
                (winner.horizon, winner.max_row_words)
                    <= (candidate.horizon, candidate.max_row_words),
                "seed {seed}: {winner:?} chosen over {candidate:?}"
            );
        }
        // Every candidate's horizon is what that order alone produces; a
        // pruned one's is a lower bound of it, above the winner's.
        for candidate in &chosen.candidates {
            if candidate.pairing == pairing::Pairing::None {
                let alone = schedule(&problem, candidate.policy, TransferWidth::Word32).unwrap();
                if candidate.pruned {
                    assert!(
                        candidate.horizon <= alone.horizon && alone.horizon > winner.horizon,
                        "seed {seed}: {candidate:?} alone {}",
                        alone.horizon
                    );
                    pruned += 1;
                } else {
                    assert_eq!(
                        alone.horizon, candidate.horizon,
                        "seed {seed}: {candidate:?}"
                    );
                }
            }
        }
        let baseline = chosen
            .candidates
            .iter()
            .find(|c| {
                c.policy == candidates::BASELINE_POLICY && c.pairing == pairing::Pairing::None
            })
            .expect("the baseline is always tried");
        assert!(winner.horizon <= baseline.horizon || !baseline.admitted);
        if chosen
            .candidates
            .iter()
            .any(|c| c.policy == SchedulePolicy::List)
        {
            stage_two += 1;
        }
    }
    assert!(stage_two > 0, "some random phases need the second stage");
    assert!(pruned > 0, "some later-stage candidates are pruned");
}

/// Pruning auto's later candidates (and the cutoff a suggestion's policy
/// is placed under) changes which candidates run to the end, never the
/// schedule chosen.
#[test]
fn pruning_by_bounds_never_changes_a_schedule() {
    let unpruned = AutoSettings {
        prune_by_bounds: false,
        ..AutoSettings::default()
    };
    let mut differing_records = 0;
    for seed in 0..30 {
        let problem = random_problem(300 + seed, 16, 30 + seed as usize);
        for width in WIDTHS {
            let pruned = schedule(&problem, SchedulePolicy::Auto, width).unwrap();
            let full = schedule_with(&problem, SchedulePolicy::Auto, width, &unpruned).unwrap();
            assert_eq!(
                Schedule {
                    candidates: Vec::new(),
                    ..pruned.clone()
                },
                Schedule {
                    candidates: Vec::new(),
                    ..full.clone()
                },
                "seed {seed} {width:?}"
            );
            differing_records += usize::from(pruned.candidates != full.candidates);
            for policy in POLICIES.into_iter().filter(|&p| p != SchedulePolicy::Auto) {
                let alone = schedule(&problem, policy, width).unwrap();
                for cutoff in [alone.horizon, alone.horizon + 1, alone.horizon / 2] {
                    let below = schedule_below(&problem, policy, width, cutoff).unwrap();
                    match below {
                        Some(schedule) => assert_eq!(schedule, alone, "seed {seed} {policy}"),
                        None => assert!(alone.horizon >= cutoff, "seed {seed} {policy}"),
                    }
                }
                assert_eq!(
                    schedule_below(&problem, policy, width, alone.horizon + 1).unwrap(),
                    Some(alone.clone()),
                    "seed {seed} {policy}: a schedule under its cutoff is never pruned"
                );
            }
        }
    }
    assert!(differing_records > 0, "pruning stopped some candidates");
}

/// `auto` under `row_allowance_bytes` (32-bit words), and the baseline
/// B1024's largest row in words.
fn auto_with_allowance(problem: &ExchangeProblem, row_allowance_bytes: u32) -> (Schedule, u64) {
    let settings = AutoSettings {
        row_allowance_bytes,
        ..AutoSettings::default()
    };
    let chosen = schedule_with(
        problem,
        SchedulePolicy::Auto,
        TransferWidth::Word32,
        &settings,
    )
    .unwrap();
    let baseline = chosen
        .candidates
        .iter()
        .find(|c| c.policy == candidates::BASELINE_POLICY)
        .unwrap()
        .max_row_words;
    (chosen, baseline)
}

#[test]
fn a_zero_allowance_admits_nothing_with_larger_rows_than_the_baseline() {
    let problem = random_problem(7, 16, 60);
    let (chosen, baseline) = auto_with_allowance(&problem, 0);
    for candidate in &chosen.candidates {
        assert_eq!(
            candidate.admitted,
            candidate.max_row_words <= baseline,
            "{candidate:?}"
        );
    }
}

/// A phase that merged n exchanges admits candidates whose largest row
/// exceeds the baseline's by up to n allowances: each exchange keeps the
/// allowance it had as a phase of its own.
#[test]
fn each_merged_exchange_keeps_its_row_allowance() {
    let admitted_under = |problem: &ExchangeProblem| {
        let (chosen, baseline) = auto_with_allowance(problem, 16);
        chosen
            .candidates
            .iter()
            .filter(|candidate| !candidate.pruned)
            .map(|candidate| (candidate.admitted, candidate.max_row_words, baseline))
            .collect::<Vec<_>>()
    };
    let mut wider = 0;
    for seed in 0..20 {
        let mut problem = random_problem(500 + seed, 16, 60);
        for (admitted, words, baseline) in admitted_under(&problem) {
            assert_eq!(admitted, words <= baseline + 4, "{words} over {baseline}");
        }
        // Three exchanges merged (segments that start at pieces 20 and 40).
        problem.segment_starts = vec![20, 40];
        for (admitted, words, baseline) in admitted_under(&problem) {
            assert_eq!(admitted, words <= baseline + 12, "{words} over {baseline}");
            wider += usize::from(admitted && words > baseline + 4);
        }
    }
    assert!(
        wider > 0,
        "some candidate is admitted only with the merged allowance"
    );
}

/// A concrete order at width `auto` (an override of one phase) is placed
/// under the pairings `auto` tries for every order (none, every eligible
/// piece, the per-piece selection) and keeps the shortest horizon: width
/// `auto` is "paired where it shortens the phase" for every policy,
/// compact ones included.
#[test]
fn a_concrete_order_at_width_auto_keeps_its_shortest_pairing() {
    use crate::schedule::pairing::select_paired;
    use crate::schedule::prepared::Prepared;
    let mut shortened = 0;
    for seed in 0..12 {
        let problem = random_problem(300 + seed, 16, 40);
        let prepared = Prepared::new(&problem);
        for policy in [
            SchedulePolicy::Matching,
            SchedulePolicy::Balanced { words: 64 },
            SchedulePolicy::Stream { words: 256 },
            SchedulePolicy::Latency,
        ] {
            let chosen = schedule(&problem, policy, TransferWidth::Auto).unwrap();
            validate(&problem, &chosen).unwrap();
            let ordinary = schedule(&problem, policy, TransferWidth::Word32).unwrap();
            let mut shortest = ordinary.horizon;
            if prepared.any_eligible() {
                let paired = schedule(&problem, policy, TransferWidth::Paired64).unwrap();
                shortest = shortest.min(paired.horizon);
                let selected = select_paired(&problem, &prepared.eligible);
                if selected.contains(&true) {
                    let placed = prepared
                        .place(policy, &selected, TransferWidth::Paired64)
                        .unwrap();
                    shortest = shortest.min(placed.horizon);
                }
            }
            assert_eq!(chosen.horizon, shortest, "seed {seed}, {policy:?}");
            shortened += u32::from(chosen.horizon < ordinary.horizon);
        }
    }
    assert!(shortened > 0, "pairing shortens some order of some phase");
}
