//! `superstep search [QUERY]`: the layout search by the compiled program's
//! own estimate (`crate::studies::layout_search`). Prints the accepted
//! steps (op, partition before and after, the estimate before and after,
//! the trials it took and what the accepted trial recomputed), the
//! figures of the search (trials, trials per minute, rejected trials),
//! keeps the best plan in the cache as the plan of its configuration
//! (`crate::session::searched_layouts`: later builds of that
//! configuration use it), builds that plan once through the cache (so
//! that the next build of the configuration, here or from the remote
//! tier, compiles nothing), and with `--write-overrides FILE` writes the
//! chosen plan as a `[[layout.override]]` fragment whose entries hold for
//! the configuration searched (`when`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{finish_cache, load, open_session_as_written};
use super::progress::quiet;
use crate::build_file::validate::layout::Configuration;
use crate::layout::overrides::overrides_toml;
use crate::session::Session;
use crate::session::searched_layouts::{keep_searched_plan, with_plan};
use crate::studies::layout_search::trials::{SearchShard, Shard};
use crate::studies::layout_search::{
    BeamSettings, SearchOutcome, SearchProgress, SearchSettings, TrialSharing, cached_search,
    search_layouts, store_search,
};
use crate::target::costs::cycles_to_ms as cycles_to_milliseconds;
use crate::text::thousands;

/// The flags of `superstep search`.
#[derive(Debug, clap::Args)]
pub struct SearchArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// States the beam keeps per op (0, the default: no beam, the local
    /// steps start from the build's layouts; on SigLIP, PE-Core and
    /// ViT-B/16 the beam's plan did not lead to a better result, see
    /// docs/commands/search.md).
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=256))]
    pub beam_width: u32,
    /// The thorough search: two passes over every op, the six cheapest
    /// partitions and three per alignment (the defaults of
    /// --rounds 2 --cheapest 6 --aligned 3 --min-share 0). Without it the
    /// search is quick: one pass over the ops that cost at least 1% of the
    /// estimate, the two cheapest partitions and the tile orders, no
    /// aligned ones. A flag given beside it wins.
    #[arg(long)]
    pub thorough: bool,
    /// Passes over the operators (a pass that improves nothing ends the
    /// search) [default: 1; 2 with --thorough].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub rounds: Option<u32>,
    /// Partitions per operator that the cost model ranks cheapest
    /// [default: 2; 6 with --thorough].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub cheapest: Option<u32>,
    /// Partitions per alignment with a neighbour's blocks or whole heads
    /// [default: 0; 3 with --thorough].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=64))]
    pub aligned: Option<u32>,
    /// Leave every op whose planned cost (the cost model's cycles times its
    /// executions) is under PERCENT of the starting estimate at its
    /// partition: no change of it can save much more than it costs
    /// [default: 1; 0 with --thorough: every op is searched].
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub min_share: Option<u32>,
    /// Do not try other tile orders of the accepted partitions.
    #[arg(long)]
    pub no_orders: bool,
    /// Write the chosen plan as a [[layout.override]] fragment to FILE,
    /// each entry with a `when` naming the configuration searched (batch,
    /// layers, tiles, matrix_inputs): a build of another configuration
    /// skips them.
    #[arg(long, value_name = "FILE")]
    pub write_overrides: Option<PathBuf>,
    /// Compile only shard I of N of the trials (0 <= I < N): of the
    /// search's candidates, in their deterministic order, the I-th, the
    /// (I+N)-th and so on; the others are read from the cache as the other
    /// shards keep them (--cache-remote, with a writer's key, shares them
    /// between machines). Every shard takes the same steps and ends with
    /// the plan the unsharded search picks; run N shards as a job array,
    /// then any `superstep search` of the same settings finds it cached.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// With --shard: seconds to wait, with no trial from another shard,
    /// before taking the others for gone and compiling their trials here.
    #[arg(long, value_name = "SECONDS", default_value_t = 120, requires = "shard",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub shard_wait: u64,
    /// MiB of resident memory above which the trials' session is dropped
    /// for a fresh one (checked before each trial; 0: never). The trials'
    /// compiled values stay in memory until then; a fresh session costs
    /// one cold build of the next trial (the calibration is cached).
    #[arg(long, value_name = "MIB", default_value_t = 1280,
          value_parser = clap::value_parser!(u64).range(0..=1 << 30))]
    pub memory_budget: u64,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

impl SearchArguments {
    /// The search's settings from the flags: the quick or the thorough
    /// search, each flag given in its place; no beam at width 0, every
    /// other tile order unless --no-orders.
    pub fn settings(&self) -> SearchSettings {
        let base = if self.thorough {
            SearchSettings::thorough()
        } else {
            SearchSettings::default()
        };
        let cheapest = self.cheapest.unwrap_or(base.cheapest);
        let aligned = self.aligned.unwrap_or(base.aligned);
        SearchSettings {
            beam: (self.beam_width > 0).then_some(BeamSettings {
                width: self.beam_width,
                cheapest,
                aligned,
            }),
            rounds: self.rounds.unwrap_or(base.rounds),
            cheapest,
            aligned,
            orders: !self.no_orders,
            min_share_basis_points: self.min_share.unwrap_or(base.min_share_basis_points),
        }
    }
}

/// A `--min-share` value that is not a percentage this flag takes.
#[derive(Debug, thiserror::Error)]
pub enum PercentError {
    #[error("`{0}` is not a percentage (write e.g. 1 or 0.5)")]
    NotANumber(String),
    #[error("{0}% is not between 0 and 100")]
    OutOfRange(f64),
    #[error("{0}% has more than two decimals (write e.g. 0.25)")]
    TooPrecise(f64),
}

/// `--min-share PERCENT`: a percentage from 0 to 100 with at most two
/// decimals, in hundredths of a percent.
fn parse_percent(text: &str) -> Result<u32, PercentError> {
    let value: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| PercentError::NotANumber(text.to_string()))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(PercentError::OutOfRange(value));
    }
    let basis_points = value * 100.0;
    if (basis_points - basis_points.round()).abs() > 1e-6 {
        return Err(PercentError::TooPrecise(value));
    }
    Ok(basis_points.round() as u32)
}

/// A bar with the trial count and the best estimate so far.
struct Bar(Option<ProgressBar>);

impl SearchProgress for Bar {
    fn trial(&self, trials: u32, best_cycles: u64, op: &str) {
        if let Some(bar) = &self.0 {
            bar.set_position(u64::from(trials));
            bar.set_message(format!(
                "best {:.4} ms; trying {op}",
                cycles_to_milliseconds(best_cycles)
            ));
        }
    }
}

pub fn run(arguments: &SearchArguments) -> Result<(), CommandError> {
    let settings = arguments.settings();
    let query = load(&arguments.query)?;
    let mut session = open_session_as_written(&arguments.query, &query)?;
    if let Some(cache) = session.cache() {
        cache.begin_command(
            &format!("search {settings:?}"),
            &crate::build_file::package_build_key(&query),
        );
    }
    let cached = session
        .cache()
        .and_then(|cache| cached_search(cache, &query, settings));
    let loaded = cached.is_some();
    let outcome = match cached {
        Some(outcome) => outcome,
        None => {
            // The trials run in a session of their own that keeps only
            // the calibration in the persistent cache (their schedules
            // stay in memory); what each trial compiled to is kept.
            let mut trials = Session::for_search(&query, session.shared_cache());
            let bar = (std::io::stderr().is_terminal() && !quiet()).then(|| {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner} search: {pos} trials, {elapsed} ({msg})",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.enable_steady_tick(Duration::from_millis(120));
                bar
            });
            let progress = Bar(bar);
            let sharing = TrialSharing {
                cache: session.shared_cache(),
                shard: arguments.shard.map(|shard| SearchShard {
                    shard,
                    patience: Duration::from_secs(arguments.shard_wait),
                }),
                memory_budget: (arguments.memory_budget > 0)
                    .then_some(arguments.memory_budget << 20),
            };
            if arguments.shard.is_some() && sharing.cache.is_none() {
                return Err(CommandError::Input(String::from(
                    "error: --shard needs a cache to share the trials through; \
                     drop --no-cache (and give every shard the same --cache or --cache-remote)",
                )));
            }
            let outcome = search_layouts(&mut trials, &query, settings, &progress, sharing)
                .map_err(|error| CommandError::Input(format!("error: {error}")))?;
            if let Some(bar) = progress.0 {
                bar.finish_and_clear();
            }
            if let Some(cache) = session.cache() {
                store_search(cache, &query, settings, &outcome);
            }
            outcome
        }
    };
    // The plan of this configuration for every later build (kept unless
    // a plan kept there already estimates no more).
    let kept = session
        .cache()
        .is_some_and(|cache| keep_searched_plan(cache, &query, &outcome));
    // The trials' values stayed in memory, unchecked (they only priced
    // candidates): the plan builds use now is built once more in this
    // session, which validates its schedules and checks its rows, and
    // through the cache (and its remote tier) when there is one, so that
    // the next build of this configuration, here or on a machine reading
    // the remote, compiles nothing.
    let warmed = if loaded {
        None
    } else {
        let started = std::time::Instant::now();
        // The kept plan (this search's, or a better one kept before) as a
        // build of the configuration finds it; without a cache, this
        // search's plan.
        let planned = match session.shared_cache() {
            Some(cache) => Session::with_cache(&query, Some(cache)).effective_query(&query),
            None => with_plan(&query, &outcome),
        };
        session.update(&planned);
        session.build().map_err(|error| {
            CommandError::Input(format!("error: the searched plan does not build: {error}"))
        })?;
        Some(started.elapsed())
    };
    if arguments.json {
        // The document holds no wall time (docs/cli-conventions.md): the
        // search's and the beam's seconds stay in the text.
        let mut document = serde_json::to_value(&outcome)
            .map_err(|error| CommandError::Internal(error.to_string()))?;
        if let Some(record) = document.as_object_mut() {
            record.remove("seconds");
            if let Some(beam) = record.get_mut("beam").and_then(|beam| beam.as_object_mut()) {
                beam.remove("seconds");
            }
        }
        let text = serde_json::to_string_pretty(&document)
            .map_err(|error| CommandError::Internal(error.to_string()))?;
        print_line!("{text}");
    } else {
        print_outcome(&query.name, &outcome, loaded);
        if !quiet() {
            print_line!("{}", kept_line(session.cache().is_some(), kept));
            match (warmed, session.cache().is_some()) {
                (Some(elapsed), true) => print_line!(
                    "built: the plan builds use, checked (schedules validated, rows checked), into \
                     the cache in {:.1} s (the next build of this configuration compiles nothing)",
                    elapsed.as_secs_f64()
                ),
                (Some(elapsed), false) => print_line!(
                    "built: the searched plan, checked (schedules validated, rows checked), in \
                     {:.1} s",
                    elapsed.as_secs_f64()
                ),
                (None, _) => {}
            }
        }
    }
    if let Some(path) = &arguments.write_overrides {
        let text = format!(
            "# Layout overrides found by `superstep search` for {} (estimate {} -> {} cycles).\n\
             # Each holds only for the configuration searched (its `when`); a build of another\n\
             # configuration skips it. Builds over the same cache use the searched plan without\n\
             # these pins; paste them to pin the plan where no cache holds it.\n\n{}",
            query.name,
            thousands(outcome.baseline_cycles),
            thousands(outcome.best_cycles),
            overrides_toml(
                &outcome.layout_overrides(),
                Some(&configuration_of(&query).when_toml()),
            )
        );
        super::common::write_output(path, text.as_bytes())?;
        if !quiet() {
            print_note!("wrote {}", path.display());
        }
    }
    finish_cache(session.cache());
    Ok(())
}

/// What became of the plan: kept for later builds, or not.
fn kept_line(has_cache: bool, kept: bool) -> &'static str {
    match (has_cache, kept) {
        (false, _) => {
            "kept: nothing (no cache); builds keep the planner's layouts (--write-overrides pins them)"
        }
        (true, true) => {
            "kept: this plan is now the one builds of this configuration use (layouts: searched)"
        }
        (true, false) => {
            "kept: a plan kept earlier for this configuration estimates no more; builds keep using it"
        }
    }
}

/// The configuration a `when` names, of `query`.
fn configuration_of(query: &crate::build_file::BuildQuery) -> Configuration {
    Configuration {
        batch: query.workload.batch,
        layers: query.workload.model.layers,
        tiles: query.machine.tiles,
        matrix_inputs: query.planning.matrix_inputs,
    }
}

fn print_outcome(name: &str, outcome: &SearchOutcome, loaded: bool) {
    let minutes = outcome.seconds / 60.0;
    print_line!(
        "superstep search {name}: {} -> {} cycles ({:.4} -> {:.4} ms, {:+.2}%)",
        thousands(outcome.baseline_cycles),
        thousands(outcome.best_cycles),
        cycles_to_milliseconds(outcome.baseline_cycles),
        cycles_to_milliseconds(outcome.best_cycles),
        (outcome.best_cycles as f64 / outcome.baseline_cycles.max(1) as f64 - 1.0) * 100.0
    );
    print_line!(
        "trials: {} ({} compiled in this run, {} placed, {} did not build or fit; {} fresh sessions) in {:.1} s, {:.1} trials per minute{}",
        outcome.trials,
        outcome.compiled_here,
        outcome.placed,
        outcome.rejected,
        outcome.fresh_sessions,
        outcome.seconds,
        f64::from(outcome.trials) / minutes.max(1e-9),
        if loaded {
            "; this outcome was loaded from the cache (nothing searched now)"
        } else {
            ""
        }
    );
    if quiet() {
        return;
    }
    if !outcome.unsearched.is_empty() {
        let shares: Vec<String> = outcome
            .unsearched
            .iter()
            .map(|small| {
                format!(
                    "{} {:.2}%",
                    small.op,
                    small.planned_cycles as f64 / outcome.baseline_cycles.max(1) as f64 * 100.0
                )
            })
            .collect();
        print_line!(
            "not searched: {} {} whose planned cost is under the minimum share of the estimate \
             (--min-share 0 or --thorough searches them): {}",
            outcome.unsearched.len(),
            if outcome.unsearched.len() == 1 {
                "op"
            } else {
                "ops"
            },
            shares.join(", ")
        );
    }
    if let Some(beam) = &outcome.beam {
        print_line!(
            "beam: {} states priced in {:.1} s; proxy {} -> {} cycles; its plan compiles to {} cycles ({})",
            beam.states,
            beam.seconds,
            thousands(beam.start_price),
            thousands(beam.best_price),
            if beam.best_cycles == u64::MAX {
                String::from("-")
            } else {
                thousands(beam.best_cycles)
            },
            if beam.taken {
                "taken: the local steps start from it"
            } else {
                "not better than the build's plan: the local steps start from the build's"
            }
        );
    }
    if !outcome.calibration.is_empty() {
        let (proxy, real) = outcome
            .calibration
            .iter()
            .fold((0u64, 0u64), |(proxy, real), row| {
                (proxy + row.proxy_cycles, real + row.real_cycles)
            });
        print_line!(
            "beam proxy against the schedules (conversion-only phases of the chosen plan, per execution): {} against {} cycles in all ({:+.1}%)",
            thousands(proxy),
            thousands(real),
            (proxy as f64 / real.max(1) as f64 - 1.0) * 100.0
        );
        print_line!(
            "  {:<44} {:>5} {:>10} {:>10} {:>8}",
            "phase",
            "ops",
            "proxy",
            "scheduled",
            "error"
        );
        for row in &outcome.calibration {
            print_line!(
                "  {:<44} {:>5} {:>10} {:>10} {:>+7.1}%",
                row.phase,
                row.conversions,
                thousands(row.proxy_cycles),
                thousands(row.real_cycles),
                (row.proxy_cycles as f64 / row.real_cycles.max(1) as f64 - 1.0) * 100.0
            );
        }
    }
    if !outcome.operators.is_empty() {
        let (predicted, compiled) =
            outcome
                .operators
                .iter()
                .fold((0u64, 0u64), |(predicted, compiled), row| {
                    (
                        predicted + row.predicted_cycles,
                        compiled + row.compiled_cycles,
                    )
                });
        print_line!(
            "planner's price against the compiled program (products and attention of the chosen plan: kernels, own exchanges and barriers, per execution): {} against {} cycles in all ({:+.1}%)",
            thousands(predicted),
            thousands(compiled),
            (predicted as f64 / compiled.max(1) as f64 - 1.0) * 100.0
        );
        print_line!(
            "  {:<30} {:>14} {:>10} {:>10} {:>8}",
            "op",
            "partition",
            "predicted",
            "compiled",
            "error"
        );
        for row in &outcome.operators {
            print_line!(
                "  {:<30} {:>14} {:>10} {:>10} {:>+7.1}%",
                row.op,
                row.partition,
                thousands(row.predicted_cycles),
                thousands(row.compiled_cycles),
                (row.predicted_cycles as f64 / row.compiled_cycles.max(1) as f64 - 1.0) * 100.0
            );
        }
    }
    if outcome.steps.is_empty() {
        print_line!("no step improved the estimate: the build's layouts are kept");
        return;
    }
    print_line!(
        "{:<4} {:<22} {:>14} {:>14} {:>14} {:>14} {:>7} {:>10} {:>10}",
        "step",
        "op",
        "from",
        "to",
        "before",
        "after",
        "trials",
        "queries",
        "schedules"
    );
    for (index, step) in outcome.steps.iter().enumerate() {
        print_line!(
            "{:<4} {:<22} {:>14} {:>14} {:>14} {:>14} {:>7} {:>10} {:>10}",
            index + 1,
            step.op,
            step.from,
            step.to,
            thousands(step.cycles_before),
            thousands(step.cycles_after),
            step.trials,
            step.recomputed_queries,
            step.recomputed_schedules
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_share_takes_percentages_in_hundredths() {
        assert_eq!(parse_percent("1").expect("1"), 100);
        assert_eq!(parse_percent("0.25%").expect("0.25%"), 25);
        assert_eq!(parse_percent("0").expect("0"), 0);
        assert!(matches!(
            parse_percent("half"),
            Err(PercentError::NotANumber(_))
        ));
        assert!(matches!(
            parse_percent("101"),
            Err(PercentError::OutOfRange(_))
        ));
        assert!(matches!(
            parse_percent("0.125"),
            Err(PercentError::TooPrecise(_))
        ));
    }
}
