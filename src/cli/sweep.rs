//! `superstep sweep [QUERY]`: every exchange phase under a set of (policy,
//! width) configurations, each point scheduled, validated, encoded, checked
//! and patched (memoized and kept in the persistent cache, so a second
//! sweep is near instant); the Pareto frontier per phase; the savings of
//! two per-phase selections, weighted by executions; the outputs under
//! `outputs.directory/NAME/sweep/`; optionally the selection as a
//! `[[schedule.override]]` fragment (`--write-overrides`) or applied and
//! rebuilt (`--apply`), with the real estimate, exchange table and peak
//! SRAM next to the per-phase predictions.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{
    artifacts_directory, backend_error, build_checked, build_phase_groups_checked, finish_cache,
    load, open_session,
};
use super::{preflight, progress};
use crate::build_file::{BuildQuery, PhaseOverride};
use crate::report::sweep::fragment::overrides_fragment;
use crate::report::sweep::{write_sweep, write_text};
use crate::schedule::vocabulary::policy_text;
use crate::schedule::{SchedulePolicy, TransferWidth};
use crate::session::{BackOutcome, BuildError, Session};
use crate::studies::sweep::{
    ConfigList, DEFAULT_WINDOW_BYTES, Selection, SelectionRule, Shard, Sweep, SweepOutcome,
    chosen_configs, frontier, select,
};
use crate::target::costs::cycles_to_ms;
use crate::text::thousands;

/// Which selection a flag means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SelectionLetter {
    /// Neither max row bytes nor total row bytes may grow.
    A,
    /// The max row may grow by up to --window bytes.
    B,
}

/// The flags of `superstep sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// A configuration to measure, POLICY or POLICY/WIDTH (latency,
    /// list, matching, auto, S<W>, B<W>; WIDTH word32, paired64 or
    /// auto); POLICY alone means both word32 and paired64. Repeatable;
    /// default: latency, S64, S256, S1024, B64, B256, B1024 and B4096 (the
    /// seed study's) and matching, list and B16 (the rest of what `auto`
    /// considers), each at word32 and paired64. A paired64 configuration is measured
    /// only on phases where some piece may move paired.
    #[arg(long = "config", value_name = "P[/WIDTH]")]
    pub configs: Vec<ConfigList>,
    /// Selection (b)'s window: how many bytes each phase's max row may
    /// grow by.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_WINDOW_BYTES)]
    pub window: u64,
    /// Write the selection chosen by --select as [[schedule.override]]
    /// entries (phase, policy, width) to FILE, to append to a build file
    /// that does not already override those phases. FILE's folder must exist.
    #[arg(long, value_name = "FILE")]
    pub write_overrides: Option<PathBuf>,
    /// The selection --write-overrides writes: a (no storage growth) or
    /// b (max row within --window).
    #[arg(long, value_enum, default_value = "a", value_name = "a|b")]
    pub select: SelectionLetter,
    /// Apply selection a or b as per-phase overrides, rebuild the whole
    /// program and print the real estimate, exchange table and peak SRAM
    /// (after sharing and placement) next to the per-phase predictions
    /// and the difference; also writes sweep/applied.json.
    #[arg(long, value_enum, value_name = "a|b")]
    pub apply: Option<SelectionLetter>,
    /// Measure only shard I of N (0 <= I < N): every N-th point of the
    /// sweep's deterministic order, starting at the I-th, into the
    /// cache (local and --cache-remote); no reports. Run N shards as a
    /// job array against one remote cache, then `superstep sweep`
    /// without --shard: it finds every point cached and writes them.
    #[arg(long, value_name = "I/N", conflicts_with_all = ["apply", "write_overrides"])]
    pub shard: Option<Shard>,
    /// Print one JSON document instead of the text: the configurations,
    /// every phase's points, both selections and where the build's own
    /// suggestions stand (`--apply`'s figures are in sweep/applied.json).
    #[arg(long, conflicts_with = "shard")]
    pub json: bool,
}

/// The three figures a selection predicts and a rebuild measures (the
/// estimate, the exchange table and peak SRAM), read from the build's
/// [`crate::session::Headline`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SelectionFigures {
    pub estimate_cycles: u64,
    pub exchange_table_bytes: u64,
    pub peak_sram_bytes: u64,
}

impl SelectionFigures {
    fn of(back: &BackOutcome) -> SelectionFigures {
        SelectionFigures {
            estimate_cycles: back.headline.estimate.total_cycles,
            exchange_table_bytes: back.headline.exchange_table_bytes_per_tile_max,
            peak_sram_bytes: back.headline.peak_sram_bytes_per_tile,
        }
    }
}

/// One applied override, as `applied.json` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AppliedOverride {
    pub phase: String,
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub width: TransferWidth,
    pub predicted_horizon: u64,
    pub real_horizon: u64,
}

/// `applied.json`: what `--apply` changed and measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Applied {
    pub selection: String,
    pub overrides: Vec<AppliedOverride>,
    pub built: SelectionFigures,
    /// The build's figures moved by the sum of per-phase predictions: the
    /// estimate less the selection's saving; the exchange table and peak
    /// SRAM plus every selected phase's max-row growth (an upper bound:
    /// rows are shared across phases).
    pub predicted: SelectionFigures,
    pub real: SelectionFigures,
}

pub fn run(arguments: &SweepArguments) -> Result<(), CommandError> {
    if arguments.json {
        super::stdout::set_json_document();
    }
    let mut query = load(&arguments.query)?;
    let directory = artifacts_directory(&query).join("sweep");
    // A shard writes no reports, so it needs no output folder.
    if arguments.shard.is_none() {
        preflight::check_output_directory("outputs.directory", &directory)?;
    }
    if let Some(path) = &arguments.write_overrides {
        preflight::check_output_file("sweep --write-overrides", path)?;
    }
    let mut session = open_session(&arguments.query, &mut query)?;
    if let Some(cache) = session.cache() {
        let command = match arguments.shard {
            Some(shard) => format!("sweep shard {shard:?} {:?}", arguments.configs),
            None => format!("sweep {:?}", arguments.configs),
        };
        cache.begin_command(&command, &crate::build_file::package_build_key(&query));
    }
    let configs = chosen_configs(&arguments.configs);
    if let Some(shard) = arguments.shard {
        // A shard needs the phase groups, not the placed program: the
        // merge run builds that (from the phases the shards cached).
        build_phase_groups_checked(&mut session, &query, &arguments.query)?;
        return run_shard(&session, &query.name, &configs, shard);
    }
    let outcome = build_checked(&mut session, &query, &arguments.query)?;
    let built = outcome
        .back
        .as_ref()
        .map(SelectionFigures::of)
        .ok_or_else(|| CommandError::Internal("the build has no back half".to_string()))?;
    let sweep = crate::studies::sweep::sweep(&session, &configs)
        .map_err(|error| CommandError::Internal(error.to_string()))?;
    let no_growth = select(&sweep, SelectionRule::NoStorageGrowth);
    let window = select(
        &sweep,
        SelectionRule::MaxRowWindow {
            bytes: arguments.window,
        },
    );
    let written = write_sweep(&directory, &query.name, &sweep, &no_growth, &window)
        .map_err(|error| CommandError::Internal(error.to_string()))?;
    print_summary(&query.name, &sweep, &built, &[&no_growth, &window]);
    let mut suggestions = Vec::new();
    if !progress::quiet() || arguments.json {
        let measured = crate::studies::suggestions::suggestions(
            &session,
            Some(crate::studies::suggestions::SUGGESTION_CANDIDATES),
        )
        .map_err(|error| CommandError::Internal(error.to_string()))?;
        suggestions = suggestion_lines(&sweep, &measured, &[&no_growth, &window]);
        for line in &suggestions {
            print_line!("{line}");
        }
    }
    if arguments.json {
        let selections = [&no_growth, &window].map(|selection| {
            serde_json::json!({
                "rule": selection.rule.describe(),
                "saving_cycles": selection.saving_cycles(),
                "phases": selection.phases,
            })
        });
        let document = serde_json::json!({
            "schema_version": crate::report::REPORT_SCHEMA_VERSION,
            "compiler": crate::report::compiler_version(),
            "build": query.name,
            "as_built": built,
            "configurations": sweep.configs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "phases": sweep.phases,
            "selections": selections,
            "suggestions": suggestions,
            "written": written,
        });
        super::stdout::write_document(&document)
            .map_err(|error| CommandError::Internal(error.to_string()))?;
    }
    for path in &written {
        if !progress::quiet() {
            print_note!("wrote {}", path.display());
        }
    }
    let chosen = |letter: SelectionLetter| match letter {
        SelectionLetter::A => &no_growth,
        SelectionLetter::B => &window,
    };
    if let Some(path) = &arguments.write_overrides {
        let selection = chosen(arguments.select);
        write_text(path, &overrides_fragment(&query.name, selection))
            .map_err(|error| CommandError::Internal(error.to_string()))?;
        print_note!(
            "wrote {} ({} overrides of selection ({}))",
            path.display(),
            selection.chosen().count(),
            selection.rule.letter()
        );
    }
    let result = match arguments.apply {
        Some(letter) => apply(
            &mut session,
            &query,
            &sweep,
            chosen(letter),
            &built,
            &directory,
        ),
        None => Ok(()),
    };
    finish_cache(session.cache());
    result
}

/// `--shard I/N`: this shard's points measured into the caches (local and
/// remote); the reports are the unsharded sweep's.
fn run_shard(
    session: &Session,
    name: &str,
    configs: &[crate::studies::sweep::SweepConfig],
    shard: Shard,
) -> Result<(), CommandError> {
    let outcome = crate::studies::sweep::sweep_points(session, configs, Some(shard))
        .map_err(|error| CommandError::Internal(error.to_string()))?;
    if let SweepOutcome::Shard {
        points,
        computed,
        failed,
        ..
    } = outcome
    {
        print_line!(
            "superstep sweep {name} --shard {shard}: {computed} of the {points} points measured \
             into the cache ({failed} failed); run `superstep sweep` without --shard, against \
             the same cache, to write the reports"
        );
    }
    finish_cache(session.cache());
    Ok(())
}

fn print_summary(name: &str, sweep: &Sweep, built: &SelectionFigures, selections: &[&Selection]) {
    let failed = sweep.point_count() - sweep.validated_count();
    let frontier_points: usize = sweep.phases.iter().map(|phase| frontier(phase).len()).sum();
    let paired = sweep
        .phases
        .iter()
        .filter(|phase| phase.pairing_eligible)
        .count();
    let paired_configs = sweep
        .configs
        .iter()
        .filter(|config| config.width == TransferWidth::Paired64)
        .count();
    print_line!(
        "superstep sweep {name}: {} exchange phases x {} configurations, the {paired_configs} \
         paired64 ones only on the {paired} phases with eligible pieces: {} points; \
         {} validated (PASS), {failed} failed; {frontier_points} on the per-phase frontiers",
        sweep.phases.len(),
        sweep.configs.len(),
        thousands(sweep.point_count() as u64),
        thousands(sweep.validated_count() as u64),
    );
    print_line!(
        "as built: {} cycles = {:.4} ms at 1.5 GHz; exchange table {} B/tile; peak SRAM {} B/tile",
        thousands(built.estimate_cycles),
        cycles_to_ms(built.estimate_cycles),
        thousands(built.exchange_table_bytes),
        thousands(built.peak_sram_bytes)
    );
    for selection in selections {
        let saving = selection.saving_cycles();
        print_line!(
            "saving {}: {} cycles = {:.4} ms ({:.2}% of the estimate) over {} phases, weighted by executions",
            selection.rule.describe(),
            thousands(saving),
            cycles_to_ms(saving),
            if built.estimate_cycles == 0 {
                0.0
            } else {
                saving as f64 * 100.0 / built.estimate_cycles as f64
            },
            selection.chosen().count()
        );
        if progress::quiet() {
            continue;
        }
        let mut largest: Vec<_> = selection.chosen().collect();
        largest
            .sort_by_key(|(phase, chosen)| (std::cmp::Reverse(chosen.saving_cycles), phase.index));
        for (phase, chosen) in largest.into_iter().take(5) {
            print_line!(
                "  {:>5} {:<44} {:<16} {} -> {} cycles x {} = {} saved; max row {} -> {} B, total row {} -> {} B",
                phase.step,
                phase.key,
                chosen.config.to_string(),
                thousands(chosen.built_cycles),
                thousands(chosen.cycles),
                phase.executions,
                thousands(chosen.saving_cycles),
                thousands(sweep.phases[phase.index].built.figures.max_row_bytes),
                thousands(chosen.figures.max_row_bytes),
                thousands(sweep.phases[phase.index].built.figures.total_row_bytes),
                thousands(chosen.figures.total_row_bytes)
            );
        }
    }
    print_line!(
        "  (per-phase savings: horizon and Repeat patching; sharing patches and placement are \
         measured by --apply)"
    );
}

/// Where each of the build's own suggestions stands in the sweep: chosen by
/// a selection, refused by one (and why), or not among its configurations.
fn suggestion_lines(
    sweep: &Sweep,
    suggestions: &[crate::studies::suggestions::Suggestion],
    selections: &[&Selection],
) -> Vec<String> {
    let mut lines = Vec::new();
    if suggestions.is_empty() {
        return lines;
    }
    lines.push(format!(
        "the build's suggestions ({} of the {} most expensive exchange phases), against the sweep:",
        suggestions.len(),
        crate::studies::suggestions::SUGGESTION_CANDIDATES
    ));
    for suggestion in suggestions {
        let head = format!(
            "  {} = {} (saves {} cycles)",
            suggestion.phase,
            suggestion.policy,
            thousands(suggestion.saving_cycles)
        );
        let Some(phase) = sweep
            .phases
            .iter()
            .find(|phase| phase.key == suggestion.phase)
        else {
            lines.push(format!("{head}: the sweep has no such phase"));
            continue;
        };
        let best = phase
            .points
            .iter()
            .filter(|point| point.config.policy == suggestion.policy)
            .filter_map(|point| Some((point.config, point.figures()?, point.cycles()?)))
            .min_by_key(|(_, _, cycles)| *cycles);
        let Some((config, figures, _)) = best else {
            lines.push(format!(
                "{head}: not among the sweep's configurations (add --config {})",
                suggestion.policy
            ));
            continue;
        };
        let fates: Vec<String> = selections
            .iter()
            .map(|selection| {
                let letter = selection.rule.letter();
                let chosen = selection
                    .phases
                    .iter()
                    .find(|entry| entry.index == phase.index)
                    .and_then(|entry| entry.chosen.as_ref());
                match (selection.rule.refusal(phase, figures), chosen) {
                    (Some(reason), _) => format!("outside ({letter}): {reason}"),
                    (None, Some(chosen)) if chosen.config == config => {
                        format!("chosen by ({letter})")
                    }
                    (None, Some(chosen)) => {
                        format!("({letter}) chose {}, which saves more", chosen.config)
                    }
                    (None, None) => format!("admitted by ({letter}), not chosen"),
                }
            })
            .collect();
        lines.push(format!("{head} as {config}: {}", fates.join("; ")));
    }
    lines
}

/// `query` with `overrides` replacing any override of the same phases.
pub fn with_overrides(query: &BuildQuery, overrides: &[PhaseOverride]) -> BuildQuery {
    let mut applied = query.clone();
    applied
        .overrides
        .retain(|existing| overrides.iter().all(|entry| entry.phase != existing.phase));
    applied.overrides.extend(overrides.iter().cloned());
    applied
}

fn apply(
    session: &mut Session,
    query: &BuildQuery,
    sweep: &Sweep,
    selection: &Selection,
    built: &SelectionFigures,
    directory: &Path,
) -> Result<(), CommandError> {
    let overrides = selection.overrides();
    let applied_query = with_overrides(query, &overrides);
    session.update(&applied_query);
    let outcome = session.build().map_err(|error| match error {
        BuildError::Backend(error) => backend_error(error, Some(query.machine.tiles)),
        // The sweep's own overrides name the sweep's own phases.
        error => CommandError::Internal(error.to_string()),
    })?;
    let back = outcome
        .back
        .as_ref()
        .ok_or_else(|| CommandError::Internal("the rebuild has no back half".to_string()))?;
    let real = SelectionFigures::of(back);
    let growth: u64 = selection
        .chosen()
        .map(|(phase, chosen)| {
            let before = sweep
                .phases
                .get(phase.index)
                .map_or(0, |swept| swept.built.figures.max_row_bytes);
            chosen.figures.max_row_bytes.saturating_sub(before)
        })
        .sum();
    let predicted = SelectionFigures {
        estimate_cycles: built
            .estimate_cycles
            .saturating_sub(selection.saving_cycles()),
        exchange_table_bytes: built.exchange_table_bytes + growth,
        peak_sram_bytes: built.peak_sram_bytes + growth,
    };
    let applied = Applied {
        selection: selection.rule.letter().to_string(),
        overrides: selection
            .chosen()
            .map(|(phase, chosen)| AppliedOverride {
                phase: phase.key.clone(),
                policy: chosen.config.policy,
                width: chosen.config.width,
                predicted_horizon: u64::from(chosen.figures.horizon),
                real_horizon: back
                    .phases
                    .get(phase.index)
                    .map_or(0, |figures| u64::from(figures.horizon)),
            })
            .collect(),
        built: built.clone(),
        predicted,
        real,
    };
    print_applied(&applied);
    let path = directory.join("applied.json");
    super::common::write_json(&path, &applied)?;
    if !progress::quiet() {
        print_note!("wrote {}", path.display());
    }
    Ok(())
}

fn print_applied(applied: &Applied) {
    print_line!(
        "applied selection ({}): {} overrides, whole program rebuilt (sharing and placement included)",
        applied.selection,
        applied.overrides.len()
    );
    print_line!(
        "  {:<28} {:>14} {:>14} {:>14} {:>18}",
        "",
        "as built",
        "predicted",
        "real",
        "real - predicted"
    );
    let line = |label: &str, built: u64, predicted: u64, real: u64| {
        print_line!(
            "  {:<28} {:>14} {:>14} {:>14} {:>18}",
            label,
            thousands(built),
            thousands(predicted),
            thousands(real),
            signed(real as i128 - predicted as i128)
        );
    };
    line(
        "estimate (cycles)",
        applied.built.estimate_cycles,
        applied.predicted.estimate_cycles,
        applied.real.estimate_cycles,
    );
    line(
        "exchange table (B/tile)",
        applied.built.exchange_table_bytes,
        applied.predicted.exchange_table_bytes,
        applied.real.exchange_table_bytes,
    );
    line(
        "peak SRAM (B/tile)",
        applied.built.peak_sram_bytes,
        applied.predicted.peak_sram_bytes,
        applied.real.peak_sram_bytes,
    );
    print_line!(
        "  (predicted: the estimate less the per-phase savings; table and peak SRAM plus each selected \
         phase's max-row growth, an upper bound since rows are shared)"
    );
    let mismatched = applied
        .overrides
        .iter()
        .filter(|entry| entry.predicted_horizon != entry.real_horizon)
        .count();
    print_line!(
        "  per-phase horizons: {} of {} as predicted",
        applied.overrides.len() - mismatched,
        applied.overrides.len()
    );
}

fn signed(value: i128) -> String {
    if value < 0 {
        format!("-{}", thousands(value.unsigned_abs()))
    } else {
        format!("+{}", thousands(value as u128))
    }
}
