//! `superstep phases [QUERY]`: one line per exchange phase and compute step
//! of the program, in program order, with what each costs per execution,
//! how often it runs, its share of the estimate and (exchanges) its
//! horizon, bound, policy, rows and patches or (compute) its busy tiles and
//! occupancy; filters and sorts in the spirit of the seed system's
//! `profile-phases`; `--suggest` lists the overrides that would save time.
//!
//! Every figure is the program's modelled cost (the estimate's), not a
//! hardware measurement.

use std::cmp::Ordering;

use serde::Serialize;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_session};
use crate::schedule::vocabulary::policy_text;
use crate::schedule::{SchedulePolicy, TransferWidth};
use crate::session::{PhaseFigures, ProgramProfile, Session, StepKind};
use crate::studies::suggestions::Suggestion;
use crate::target::costs::cycles_to_ms;
use crate::text::thousands;

/// How `phases` orders its lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Program order.
    Order,
    /// Cycles of one execution, most first.
    Cycles,
    /// Share of the estimate (total cycles over every execution), most first.
    Share,
    /// Exchange horizon over its endpoint lower bound, largest first.
    Gap,
    /// Compute occupancy, lowest first.
    Occupancy,
}

/// Which lines `phases` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KindFilter {
    Exchange,
    Compute,
}

/// A value that is not a fraction in 0..=1.
#[derive(Debug, thiserror::Error)]
enum FractionError {
    #[error("`{0}` is not a number; give a fraction such as 0.1")]
    NotANumber(String),
    #[error("{0} is outside 0..=1")]
    OutOfRange(f64),
}

/// A fraction in 0..=1.
fn parse_fraction(text: &str) -> Result<f64, FractionError> {
    let value: f64 = text
        .parse()
        .map_err(|_| FractionError::NotANumber(text.to_string()))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(FractionError::OutOfRange(value))
    }
}

/// The flags of `superstep phases`.
#[derive(Debug, clap::Args)]
pub struct PhasesArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// Order of the lines.
    #[arg(long, value_enum, default_value = "order")]
    pub sort_by: SortKey,
    /// Only lines whose one execution takes at most N cycles.
    #[arg(long, value_name = "N")]
    pub max_cycles: Option<u64>,
    /// Only compute steps whose occupancy is at most F (0..=1).
    #[arg(long, value_name = "F", value_parser = parse_fraction)]
    pub max_occupancy: Option<f64>,
    /// Only exchange phases, or only compute steps.
    #[arg(long, value_enum)]
    pub kind: Option<KindFilter>,
    /// Only the step whose execution covers this cycle of the modelled
    /// timeline (Repeat iterations unrolled).
    #[arg(long, value_name = "CYCLE", conflicts_with_all = ["sort_by", "top", "suggest"])]
    pub at_offset: Option<u64>,
    /// At most N lines (after sorting).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Print the selected lines as JSON.
    #[arg(long)]
    pub json: bool,
    /// Instead of the lines: every phase whose cost (horizon plus Repeat
    /// patching) a standard policy (latency, S64, S256, B256, B1024,
    /// list, matching at the build's width) beats, measured by
    /// scheduling it, with the saving and the `--set` that applies it.
    #[arg(long)]
    pub suggest: bool,
}

/// One line of `phases` (and one record of its JSON).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseLine {
    /// The step's position in program order among every exchange phase and
    /// compute step (`explain --phase` takes it as well as the key).
    pub step: usize,
    pub key: String,
    pub kind: StepKind,
    pub executions: u64,
    pub cycles: u64,
    pub total_cycles: u64,
    /// `total_cycles` over the estimate's total.
    pub share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeDetail>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute: Option<ComputeDetail>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExchangeDetail {
    pub horizon: u64,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    pub endpoint_bound: u32,
    /// Horizon over the endpoint bound.
    pub gap: f64,
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub policy_source: crate::session::PolicySource,
    #[serde(with = "policy_text")]
    pub chosen: SchedulePolicy,
    /// The schedule's width (`word32`, or `paired64` when some piece moves
    /// paired), as the build file writes it.
    pub width: TransferWidth,
    pub max_row_bytes: u64,
    pub total_row_bytes: u64,
    pub patch_words: u64,
    pub patch_cycles: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComputeDetail {
    pub busy_tiles: u32,
    /// Modelled busy tile-cycles over (tiles × step cycles).
    pub occupancy: f64,
}

/// Every line of the session's built program, in program order, with each
/// exchange's figures.
pub fn session_lines(
    session: &Session,
    profile: &ProgramProfile,
    total_cycles: u64,
) -> Result<Vec<PhaseLine>, CommandError> {
    let figures: Vec<PhaseFigures> = session
        .map_phases(|phase| phase.figures())
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|error| CommandError::Internal(error.to_string()))?;
    Ok(phase_lines(profile, &figures, total_cycles))
}

/// Every line of the program, in program order.
pub fn phase_lines(
    profile: &ProgramProfile,
    figures: &[PhaseFigures],
    total_cycles: u64,
) -> Vec<PhaseLine> {
    profile
        .entries
        .iter()
        .map(|entry| {
            let exchange = (entry.kind == StepKind::Exchange)
                .then(|| figures.get(entry.index))
                .flatten()
                .map(|figures| ExchangeDetail {
                    horizon: u64::from(figures.horizon),
                    endpoint_bound: figures.endpoint_bound,
                    gap: if figures.endpoint_bound == 0 {
                        1.0
                    } else {
                        f64::from(figures.horizon) / f64::from(figures.endpoint_bound)
                    },
                    policy: figures.policy,
                    policy_source: figures.policy_source,
                    chosen: figures.chosen,
                    width: figures.width,
                    max_row_bytes: figures.max_row_bytes,
                    total_row_bytes: figures.total_row_bytes,
                    patch_words: figures.patch_words,
                    patch_cycles: entry.patch_cycles,
                });
            let compute = entry
                .occupancy(profile.tiles)
                .map(|occupancy| ComputeDetail {
                    busy_tiles: entry.busy_tiles,
                    occupancy,
                });
            PhaseLine {
                step: entry.step,
                key: entry.key.clone(),
                kind: entry.kind,
                executions: entry.executions,
                cycles: entry.cycles,
                total_cycles: entry.total_cycles,
                share: if total_cycles == 0 {
                    0.0
                } else {
                    entry.total_cycles as f64 / total_cycles as f64
                },
                exchange,
                compute,
            }
        })
        .collect()
}

/// The lines the flags select, in the order they ask for.
pub fn select(lines: Vec<PhaseLine>, arguments: &PhasesArguments) -> Vec<PhaseLine> {
    let mut kept: Vec<PhaseLine> = lines
        .into_iter()
        .filter(|line| match arguments.kind {
            Some(KindFilter::Exchange) => line.kind == StepKind::Exchange,
            Some(KindFilter::Compute) => line.kind != StepKind::Exchange,
            None => true,
        })
        .filter(|line| {
            arguments
                .max_cycles
                .is_none_or(|limit| line.cycles <= limit)
        })
        .filter(|line| {
            arguments.max_occupancy.is_none_or(|limit| {
                line.compute
                    .as_ref()
                    .is_some_and(|compute| compute.occupancy <= limit)
            })
        })
        .collect();
    let descending = |a: f64, b: f64| b.partial_cmp(&a).unwrap_or(Ordering::Equal);
    match arguments.sort_by {
        SortKey::Order => {}
        SortKey::Cycles => kept.sort_by_key(|line| std::cmp::Reverse(line.cycles)),
        SortKey::Share => kept.sort_by_key(|line| std::cmp::Reverse(line.total_cycles)),
        SortKey::Gap => kept.sort_by(|a, b| {
            let gap = |line: &PhaseLine| line.exchange.as_ref().map_or(0.0, |detail| detail.gap);
            descending(gap(a), gap(b))
        }),
        SortKey::Occupancy => kept.sort_by(|a, b| {
            let occupancy = |line: &PhaseLine| {
                line.compute
                    .as_ref()
                    .map_or(f64::INFINITY, |compute| compute.occupancy)
            };
            occupancy(a)
                .partial_cmp(&occupancy(b))
                .unwrap_or(Ordering::Equal)
        }),
    }
    if let Some(top) = arguments.top {
        kept.truncate(top);
    }
    kept
}

fn render_line(line: &PhaseLine) -> String {
    let head = format!(
        "{:>5}  {:<44} {:<8} {:>5} x {:>10} = {:>12}  {:>6.2}%",
        line.step,
        line.key,
        line.kind.name(),
        line.executions,
        thousands(line.cycles),
        thousands(line.total_cycles),
        line.share * 100.0
    );
    match (&line.exchange, &line.compute) {
        (Some(exchange), _) => format!(
            "{head}  horizon {} bound {} gap {:.2}x  {} ({}{})  rows max {} B total {} B  patch {} words",
            thousands(exchange.horizon),
            thousands(exchange.endpoint_bound),
            exchange.gap,
            exchange.policy,
            exchange.policy_source.name(),
            if exchange.chosen != exchange.policy {
                format!(", chose {}", exchange.chosen)
            } else {
                String::new()
            },
            thousands(exchange.max_row_bytes),
            thousands(exchange.total_row_bytes),
            thousands(exchange.patch_words)
        ),
        (None, Some(compute)) => format!(
            "{head}  busy tiles {}  occupancy {:.3}",
            thousands(u64::from(compute.busy_tiles)),
            compute.occupancy
        ),
        (None, None) => head,
    }
}

/// The suggestions as lines a user can act on.
pub fn render_suggestions(suggestions: &[Suggestion]) -> Vec<String> {
    suggestions
        .iter()
        .map(|suggestion| {
            format!(
                "  --set {}   saves {} cycles = {:.4} ms on this phase ({} -> {} cycles x {}; was {})",
                suggestion.set,
                thousands(suggestion.saving_cycles),
                suggestion.saving_milliseconds,
                thousands(suggestion.current_cycles),
                thousands(suggestion.predicted_cycles),
                suggestion.executions,
                suggestion.current_policy
            )
        })
        .collect()
}

/// What the suggestions' savings cover, printed under them.
pub const SUGGESTION_NOTE: &str = "  (per-phase savings: horizon and Repeat patching of that phase, measured by scheduling it \
     under each standard policy; sharing patches and placement may move a little when applied)";

pub fn run(arguments: &PhasesArguments) -> Result<(), CommandError> {
    let mut query = load(&arguments.query)?;
    let mut session = open_session(&arguments.query, &mut query)?;
    build_checked(&mut session, &query, &arguments.query)?;
    let result = report(&session, &query.name, arguments);
    finish_cache(session.cache());
    result
}

fn report(session: &Session, name: &str, arguments: &PhasesArguments) -> Result<(), CommandError> {
    let internal = |error: &dyn std::fmt::Display| CommandError::Internal(error.to_string());
    if arguments.suggest {
        let suggestions = crate::studies::suggestions::suggestions(session, None)
            .map_err(|error| internal(&error))?;
        if arguments.json {
            print_line!(
                "{}",
                serde_json::to_string_pretty(&suggestions).map_err(|error| internal(&error))?
            );
            return Ok(());
        }
        print_line!(
            "superstep phases {name} --suggest: {} phases have a cheaper standard policy",
            suggestions.len()
        );
        for line in render_suggestions(&suggestions) {
            print_line!("{line}");
        }
        print_line!("{SUGGESTION_NOTE}");
        return Ok(());
    }
    let profile = session.profile()?;
    let estimate = session.estimate()?;
    let lines = session_lines(session, &profile, estimate.total_cycles)?;
    let count = lines.len();
    let selected = match arguments.at_offset {
        Some(cycle) => {
            let Some(placed) = profile.at_offset(cycle) else {
                return Err(CommandError::Input(format!(
                    "error: --at-offset {cycle}: the modelled program ends at cycle {} \
                     ({:.3} ms at 1.5 GHz)\n  help: give a cycle below {}",
                    thousands(profile.total_cycles()),
                    cycles_to_ms(profile.total_cycles()),
                    thousands(profile.total_cycles())
                )));
            };
            if !arguments.json {
                print_line!(
                    "cycle {} is in execution {} of `{}`, which starts at cycle {}{}",
                    thousands(cycle),
                    placed
                        .iterations
                        .iter()
                        .map(|iteration| (iteration + 1).to_string())
                        .collect::<Vec<_>>()
                        .join("."),
                    profile.entries[placed.entry].key,
                    thousands(placed.start),
                    if placed.iterations.is_empty() {
                        String::new()
                    } else {
                        " (Repeat iteration, counted from 1)".to_string()
                    }
                );
            }
            lines.into_iter().skip(placed.entry).take(1).collect()
        }
        None => select(lines, arguments),
    };
    if arguments.json {
        print_line!(
            "{}",
            serde_json::to_string_pretty(&selected).map_err(|error| internal(&error))?
        );
        return Ok(());
    }
    let shown: u64 = selected.iter().map(|line| line.total_cycles).sum();
    print_line!(
        "superstep phases {name}: {} of {count} lines (exchange phases and compute steps), \
         {:.2}% of the estimate's {} cycles ({:.3} ms, modelled)",
        selected.len(),
        if estimate.total_cycles == 0 {
            0.0
        } else {
            shown as f64 * 100.0 / estimate.total_cycles as f64
        },
        thousands(estimate.total_cycles),
        estimate.milliseconds
    );
    print_line!(
        "{:>5}  {:<44} {:<8} {:>5}   {:>10}   {:>12}  {:>7}",
        "step",
        "key",
        "kind",
        "execs",
        "cycles",
        "total",
        "share"
    );
    for line in &selected {
        print_line!("{}", render_line(line));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A saving too small for three decimals of a millisecond still shows:
    /// the line leads with cycles.
    #[test]
    fn a_suggestion_line_gives_the_saving_in_cycles_and_milliseconds() {
        let suggestion = Suggestion {
            phase: String::from("layer.attn.split_q#0"),
            index: 16,
            current_policy: SchedulePolicy::Latency,
            policy: SchedulePolicy::List,
            executions: 2,
            current_cycles: 1_052,
            predicted_cycles: 679,
            saving_cycles: 746,
            saving_milliseconds: cycles_to_ms(746),
            set: String::from("schedule.override.layer.attn.split_q#0=list"),
        };
        let lines = render_suggestions(&[suggestion]);
        assert_eq!(
            lines,
            [
                "  --set schedule.override.layer.attn.split_q#0=list   saves 746 cycles = 0.0005 ms \
              on this phase (1,052 -> 679 cycles x 2; was latency)"
            ]
        );
    }
}
