//! `superstep explain QUERY --phase KEY`: everything about one line of
//! `superstep phases`. An exchange phase: provenance, transfers, schedule,
//! rows per tile, patches, and why its policy is what it is. A compute step
//! (kernels, copies, fills): its cost, how busy the tiles are, and the op's
//! plan and compute. KEY is the line's key or its step number; `--json`
//! prints the same figures as one JSON object.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_session};
use super::phases::{PhaseLine, session_lines};
use crate::build_file::BuildQuery;
use crate::patch::BaseChoice;
use crate::report::{REPORT_SCHEMA_VERSION, compiler_version, describe_plan};
use crate::schedule::CandidateOutcome;
use crate::schedule::candidates::BASELINE_POLICY;
use crate::session::{PolicySource, SUGGESTIONS, Session, StepKind};
use crate::text::nearest_keys;

/// The flags of `superstep explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// The line: an exchange phase's key (`op#ordinal`), a compute
    /// step's key (`op:kernels#ordinal`, `:copies`, `:fills`), or its
    /// step number (the first column of `superstep phases`).
    #[arg(long, value_name = "KEY|STEP")]
    pub phase: String,
    /// Print the figures as one JSON object (schema_version, compiler,
    /// the phases line, and the exchange's or compute step's detail).
    #[arg(long)]
    pub json: bool,
}

fn bucket(bytes: u64) -> String {
    if bytes == 0 {
        return "idle".to_string();
    }
    let upper = bytes.next_power_of_two().max(64);
    format!("{}..{} B", upper / 2 + 1, upper)
}

pub fn run(arguments: &ExplainArguments) -> Result<(), CommandError> {
    let mut query = load(&arguments.query)?;
    let mut session = open_session(&arguments.query, &mut query)?;
    build_checked(&mut session, &query, &arguments.query)?;
    let result = explain(&session, &query, &arguments.phase, arguments.json);
    finish_cache(session.cache());
    result
}

fn internal(error: &dyn std::fmt::Display) -> CommandError {
    CommandError::Internal(error.to_string())
}

/// Every line `superstep phases` shows, in program order.
fn lines(session: &Session) -> Result<Vec<PhaseLine>, CommandError> {
    let profile = session.profile()?;
    let estimate = session.estimate()?;
    session_lines(session, &profile, estimate.total_cycles)
}

/// The line `selector` names: its key, or its step number.
fn select(lines: &[PhaseLine], selector: &str, query: &BuildQuery) -> Result<usize, CommandError> {
    let by_step = selector
        .parse::<usize>()
        .ok()
        .filter(|step| *step < lines.len());
    if let Some(found) = by_step.or_else(|| lines.iter().position(|line| line.key == selector)) {
        return Ok(found);
    }
    let known: Vec<&str> = lines.iter().map(|line| line.key.as_str()).collect();
    let nearest = nearest_keys(selector, &known, SUGGESTIONS);
    let quoted: Vec<String> = nearest.iter().map(|key| format!("`{key}`")).collect();
    Err(CommandError::Input(format!(
        "error: --phase {selector}: {} has no exchange phase or compute step with this key, and \
         no step of this number (it has steps 0 to {})\n  help: did you mean {}? \
         `superstep phases` lists every key and step (so does {}/{}/phases.csv after a build)",
        query.name,
        lines.len().saturating_sub(1),
        if quoted.is_empty() {
            "-".to_string()
        } else {
            quoted.join(", ")
        },
        query.outputs.directory.display(),
        query.name
    )))
}

fn explain(
    session: &Session,
    query: &BuildQuery,
    selector: &str,
    json: bool,
) -> Result<(), CommandError> {
    let lines = lines(session)?;
    let line = &lines[select(&lines, selector, query)?];
    let detail = if line.kind == StepKind::Exchange {
        exchange(session, query, &line.key, json)?
    } else {
        compute(session, query, line, json)?
    };
    if json {
        let record = json!({
            "schema_version": REPORT_SCHEMA_VERSION,
            "compiler": compiler_version(),
            "build": query.name,
            "line": line,
            "detail": detail,
        });
        super::stdout::write_document(&record).map_err(|error| internal(&error))?;
    }
    Ok(())
}

/// A compute step: its cost and occupancy, and its op's plan and compute.
fn compute(
    session: &Session,
    query: &BuildQuery,
    line: &PhaseLine,
    json: bool,
) -> Result<Value, CommandError> {
    let op = line.key.split(':').next().unwrap_or(&line.key).to_string();
    let layouts = session.layouts()?;
    let plan = layouts
        .ops
        .iter()
        .find(|planned| planned.name == op)
        .map(|planned| describe_plan(&planned.plan));
    let breakdown = session.compute_breakdown()?;
    let op_compute = breakdown.iter().find(|entry| entry.op == op);
    let busy_tiles = line
        .compute
        .as_ref()
        .map_or(0, |compute| compute.busy_tiles);
    let occupancy = line
        .compute
        .as_ref()
        .map_or(0.0, |compute| compute.occupancy);
    if !json {
        print_line!(
            "step {} of {}: {} ({} step of op {op})",
            line.step,
            query.name,
            line.key,
            line.kind.name()
        );
        print_line!(
            "  runs {} time(s) x {} cycles = {} cycles, {:.2}% of the estimate (its busiest tile)",
            line.executions,
            line.cycles,
            line.total_cycles,
            line.share * 100.0
        );
        print_line!(
            "  tiles: {busy_tiles} of {} busy; occupancy {occupancy:.3} (busy tile-cycles over tiles x step cycles)",
            query.machine.tiles
        );
        if let Some(plan) = &plan {
            print_line!("  plan of {op}: {plan}");
        }
        if let Some(figures) = op_compute {
            print_line!(
                "  op {op} in all: {} compute steps, {} cycles (kernels {}, copies {}, fills {}); \
                 {} FP8 and {} FP16 multiply-accumulates, matrix roofline {} cycles",
                figures.steps,
                figures.cycles,
                figures.kernel_cycles,
                figures.copy_cycles,
                figures.fill_cycles,
                figures.fp8_macs,
                figures.fp16_macs,
                figures.roofline_cycles
            );
        }
    }
    Ok(json!({
        "kind": "compute",
        "op": op,
        "busy_tiles": busy_tiles,
        "tiles": query.machine.tiles,
        "occupancy": occupancy,
        "plan": plan,
        "op_compute": op_compute,
    }))
}

/// An exchange phase: provenance, transfers, policy, schedule, rows, patches.
fn exchange(
    session: &Session,
    query: &BuildQuery,
    phase: &str,
    json: bool,
) -> Result<Value, CommandError> {
    let view = session
        .phase(phase)
        .map_err(|error| internal(&format!("phase {phase} is listed but has no view: {error}")))?;
    let record = view.record().map_err(|error| internal(&error))?;
    let problem = view.problem().map_err(|error| internal(&error))?;
    let schedule = view.schedule().map_err(|error| internal(&error))?;
    let rows = view.rows().map_err(|error| internal(&error))?;
    let patches = view.patches().map_err(|error| internal(&error))?;
    let policy = view.policy();
    // Text unless --json (which returns the same figures).
    macro_rules! say {
        ($($argument:tt)*) => {
            if !json {
                print_line!($($argument)*);
            }
        };
    }

    say!("phase {phase} of {}", query.name);
    say!("  provenance: {}", record.merged_from.join(" + "));
    say!(
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
    say!(
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
    let mut pairable = (0usize, 0u64);
    let mut refusals: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for piece in 0..problem.pieces() {
        let words = u64::from(problem.words[piece]);
        let slot = match problem.pairing_refusal(piece) {
            None => &mut pairable,
            Some(reason) => refusals.entry(reason).or_default(),
        };
        slot.0 += 1;
        slot.1 += words;
    }
    let refused: Vec<String> = refusals
        .iter()
        .map(|(reason, (pieces, words))| format!("{reason} {pieces} ({words} words)"))
        .collect();
    say!(
        "  pairing: {} pieces ({} words) may move as paired 64-bit items{}{}",
        pairable.0,
        pairable.1,
        if refused.is_empty() { "" } else { "; not: " },
        refused.join(", ")
    );
    say!(
        "  policy: {} ({why}); order {}; width {} (asked {})",
        policy.policy,
        schedule.chosen,
        schedule.width,
        policy.width
    );
    say!(
        "  schedule: horizon {} events; endpoint bound {} ({:.2}x); latency-aware bound {} ({:.2}x)",
        schedule.horizon,
        schedule.endpoint_bound,
        schedule.horizon as f64 / schedule.endpoint_bound.max(1) as f64,
        schedule.latency_bound,
        schedule.horizon as f64 / schedule.latency_bound.max(1) as f64
    );
    if !json {
        print_candidates(&schedule.candidates, policy.row_allowance);
    }
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
    say!(
        "  rows: {} B on the largest tile, {} B in total; tiles by row size:",
        rows.max_bytes(),
        rows.total_bytes()
    );
    for (label, count) in histogram.values() {
        say!("    {label:>16} {count:>6} tiles");
    }
    let moving = patches
        .tiles
        .iter()
        .filter(|tile| matches!(tile.base, BaseChoice::Moving { .. }))
        .count();
    say!(
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
    let moving_base_tiles = moving;
    Ok(json!({
        "kind": "exchange",
        "provenance": record.merged_from,
        "executions": record.executions,
        "in_repeat": record.in_repeat,
        "transfers": {
            "pieces": problem.pieces(),
            "destinations": problem.receives(),
            "words": problem.words.iter().map(|&words| words as u64).sum::<u64>(),
            "largest_words": problem.words.iter().copied().max().unwrap_or(0),
            "sending_tiles": sent.iter().filter(|&&words| words > 0).count(),
            "receiving_tiles": received.iter().filter(|&&words| words > 0).count(),
            "max_words_sent_by_a_tile": sent.iter().copied().max().unwrap_or(0),
            "max_words_received_by_a_tile": received.iter().copied().max().unwrap_or(0),
            "pairable_pieces": pairable.0,
            "pairable_words": pairable.1,
            "not_pairable": refusals
                .iter()
                .map(|(reason, (pieces, words))| {
                    (reason.to_string(), serde_json::json!({"pieces": pieces, "words": words}))
                })
                .collect::<serde_json::Map<String, Value>>(),
        },
        "policy": {
            "policy": policy.policy.to_string(),
            "why": why,
            "chosen": schedule.chosen.to_string(),
            "width": schedule.width.to_string(),
        },
        "schedule": {
            "horizon": schedule.horizon,
            "endpoint_bound": schedule.endpoint_bound,
            "latency_bound": schedule.latency_bound,
            "candidates": schedule.candidates,
        },
        "rows": {
            "max_bytes": rows.max_bytes(),
            "total_bytes": rows.total_bytes(),
            "tiles_by_size": histogram.values().map(|(label, count)| json!({"bytes": label, "tiles": count})).collect::<Vec<_>>(),
        },
        "patches": {
            "words": patches.words(),
            "tiles": patches.calls(),
            "max_words": patches.max_words(),
            "cycles": patches.cycles(),
            "moving_base_tiles": moving_base_tiles,
        },
    }))
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
