//! `superstep explain QUERY --phase KEY`: everything about one exchange
//! phase — provenance, transfers, schedule, rows per tile, patches, and why
//! its policy is what it is.

use std::collections::BTreeMap;

use super::QueryArguments;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_session};
use crate::patch::BaseChoice;
use crate::schedule::CandidateOutcome;
use crate::schedule::candidates::BASELINE_POLICY;
use crate::session::PolicySource;

fn bucket(bytes: u64) -> String {
    if bytes == 0 {
        return "idle".to_string();
    }
    let upper = bytes.next_power_of_two().max(64);
    format!("{}..{} B", upper / 2 + 1, upper)
}

pub fn run(arguments: &QueryArguments, phase: &str) -> Result<(), CommandError> {
    let query = load(arguments)?;
    let mut session = open_session(arguments, &query)?;
    build_checked(&mut session, &query, arguments)?;
    if let Some(line) = finish_cache(session.cache()) {
        eprintln!("{line}");
    }
    let Some(view) = session.phase(phase) else {
        let phases = session.phases();
        let known: Vec<&str> = phases.iter().map(|phase| phase.key()).collect();
        let nearest = super::overrides::nearest_keys(phase, &known, 5);
        return Err(CommandError::Input(format!(
            "error: --phase {phase}: no such phase in {}; did you mean `{}`? nearest keys: {} \
             (all {} are listed by `superstep phases --kind exchange` and in {}/{}/phases.csv)",
            query.name,
            nearest.first().copied().unwrap_or("-"),
            nearest.join(", "),
            known.len(),
            query.outputs.directory.display(),
            query.name
        )));
    };
    let internal = |error: &dyn std::fmt::Display| CommandError::Internal(error.to_string());
    let record = view.record().map_err(|error| internal(&error))?;
    let problem = view.problem().map_err(|error| internal(&error))?;
    let schedule = view.schedule().map_err(|error| internal(&error))?;
    let rows = view.rows().map_err(|error| internal(&error))?;
    let patches = view.patches().map_err(|error| internal(&error))?;
    let policy = view.policy();

    print_line!("phase {phase} of {}", query.name);
    print_line!("  provenance: {}", record.merged_from.join(" + "));
    print_line!(
        "  runs {} time(s){}",
        record.executions,
        if record.in_repeat {
            " (in the layer Repeat)"
        } else {
            ""
        }
    );
    let mut sent = vec![0u64; problem.tiles as usize];
    let mut received = vec![0u64; problem.tiles as usize];
    for piece in 0..problem.pieces() {
        let words = problem.words[piece] as u64;
        sent[problem.source_tile[piece] as usize] += words;
        for receive in problem.receives_of(piece) {
            received[problem.destination_tile[receive] as usize] += words;
        }
    }
    print_line!(
        "  transfers: {} pieces to {} destinations, {} words; largest {} words; {} sending tiles, {} receiving tiles; max {} words sent / {} received by one tile",
        problem.pieces(),
        problem.receives(),
        problem.words.iter().map(|&words| words as u64).sum::<u64>(),
        problem.words.iter().copied().max().unwrap_or(0),
        sent.iter().filter(|&&words| words > 0).count(),
        received.iter().filter(|&&words| words > 0).count(),
        sent.iter().copied().max().unwrap_or(0),
        received.iter().copied().max().unwrap_or(0),
    );
    let why = match &policy.source {
        PolicySource::Default => format!(
            "the build's schedule.policy = \"{}\"",
            query.schedule.policy
        ),
        PolicySource::Override => match query
            .overrides
            .iter()
            .position(|entry| entry.phase == phase)
        {
            Some(index) => format!(
                "override {} in [[schedule.override]] (phase = \"{}\", policy = \"{}\")",
                index + 1,
                query.overrides[index].phase,
                query.overrides[index].policy
            ),
            None => String::from("an override in [[schedule.override]]"),
        },
    };
    print_line!(
        "  policy: {} ({why}); order {}; width {:?} (asked {:?})",
        policy.policy,
        schedule.chosen,
        schedule.width,
        policy.width
    );
    print_line!(
        "  schedule: horizon {} events; endpoint bound {} ({:.2}x); latency-aware bound {} ({:.2}x)",
        schedule.horizon,
        schedule.lower_bound,
        schedule.horizon as f64 / schedule.lower_bound.max(1) as f64,
        schedule.latency_bound,
        schedule.horizon as f64 / schedule.latency_bound.max(1) as f64
    );
    print_candidates(&schedule.candidates, policy.row_allowance);
    let mut histogram: BTreeMap<u64, (String, usize)> = BTreeMap::new();
    for row in &rows.rows {
        let bytes = row.bytes();
        let key = if bytes == 0 {
            0
        } else {
            bytes.next_power_of_two().max(64)
        };
        histogram.entry(key).or_insert_with(|| (bucket(bytes), 0)).1 += 1;
    }
    print_line!(
        "  rows: {} B on the largest tile, {} B in total; tiles by row size:",
        rows.max_bytes(),
        rows.total_bytes()
    );
    for (label, count) in histogram.values() {
        print_line!("    {label:>16} {count:>6} tiles");
    }
    let moving = patches
        .tiles
        .iter()
        .filter(|tile| matches!(tile.base, BaseChoice::Moving { .. }))
        .count();
    print_line!(
        "  Repeat patches: {} words on {} tiles (max {} on one tile, {} cycles); moving base on {} tiles, zero base saved {} words",
        patches.words(),
        patches.calls(),
        patches.max_words(),
        patches.cycles(),
        moving,
        patches
            .tiles
            .iter()
            .map(|tile| tile.zero_base_words as u64)
            .sum::<u64>()
            .saturating_sub(patches.words())
    );
    Ok(())
}

/// The `auto` policy's candidates: figures, the storage guard and the winner.
fn print_candidates(candidates: &[CandidateOutcome], row_allowance: u32) {
    if candidates.is_empty() {
        return;
    }
    let reference = candidates
        .iter()
        .filter(|candidate| candidate.policy == BASELINE_POLICY)
        .map(|candidate| candidate.max_row_words)
        .min()
        .unwrap_or(0);
    print_line!(
        "  auto: {} candidates tried, best horizon, then max row, then total row; a candidate's \
         max row may exceed the baseline {BASELINE_POLICY}'s ({reference} words) by at most \
         {row_allowance} B:",
        candidates.len(),
    );
    print_line!(
        "    {:<10} {:<9} {:>9} {:>13} {:>15}  verdict",
        "order",
        "pairing",
        "horizon",
        "max row words",
        "total row words"
    );
    for candidate in candidates {
        if candidate.pruned {
            print_line!(
                "    {:<10} {:<9} {:>9} {:>13} {:>15}  pruned: bound to exceed the best horizon before it",
                candidate.policy.to_string(),
                format!("{:?}", candidate.pairing).to_lowercase(),
                format!(">={}", candidate.horizon),
                "-",
                "-"
            );
            continue;
        }
        let verdict = if candidate.chosen {
            "chosen"
        } else if !candidate.admitted {
            "over the row allowance"
        } else {
            ""
        };
        print_line!(
            "    {:<10} {:<9} {:>9} {:>13} {:>15}  {verdict}",
            candidate.policy.to_string(),
            format!("{:?}", candidate.pairing).to_lowercase(),
            candidate.horizon,
            candidate.max_row_words,
            candidate.total_row_words
        );
    }
}
