//! `superstep diff A B`: compares two builds, each a `report.json` file or a
//! build query (built here, through the same session path as `build`, with
//! `--set` for both sides and `--set-a` / `--set-b` for one). The comparison
//! itself is `report::diff`; this file reads or builds the two reports and
//! renders the comparison as text or JSON.
//!
//! Two queries that share one persistent cache also share one session: B is
//! applied to the session that built A and built incrementally.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::arguments::{CacheArguments, QueryArguments};
use super::build;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_persistent_cache};
use crate::build_file::BuildQuery;
use crate::cache::PersistentCache;
use crate::report::diff::{
    Aspect, Change, CountChange, PhaseDiff, PhaseSide, PolicySource, ReportDiff, ReportView,
    compare,
};
use crate::session::Session;
use crate::text::thousands;

/// The flags of `superstep diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArguments {
    /// Build A: a report.json file or a build query file.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// Build B: a report.json file or a build query file.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Override one field of both build queries (repeatable; before
    /// --set-a and --set-b, which win).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Override one field of build query A (repeatable).
    #[arg(long = "set-a", value_name = "KEY=VALUE")]
    pub sets_a: Vec<String>,
    /// Override one field of build query B (repeatable).
    #[arg(long = "set-b", value_name = "KEY=VALUE")]
    pub sets_b: Vec<String>,
    /// Calibrate both builds' FP8 activation scales on this photo or .npy
    /// array: the same as `--set workload.calibration=FILE` before every
    /// other --set (see `superstep build --help`).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// At most N phase lines (the largest cycle deltas).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cache: CacheArguments,
}

/// What one side of the comparison is.
#[derive(Clone, Debug)]
enum Input {
    /// A `report.json` written by `superstep build`.
    Report(PathBuf),
    /// A build query to build, with its `--set` overrides.
    Query(QueryArguments),
}

/// One side as the output names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceLabel {
    /// `report` or `query`.
    pub kind: &'static str,
    pub path: String,
    /// The `--set` overrides applied (queries only).
    pub sets: Vec<String>,
}

impl SourceLabel {
    fn of(input: &Input) -> SourceLabel {
        match input {
            Input::Report(path) => SourceLabel {
                kind: "report",
                path: path.display().to_string(),
                sets: Vec::new(),
            },
            Input::Query(arguments) => SourceLabel {
                kind: "query",
                path: arguments
                    .query
                    .as_deref()
                    .map_or_else(String::new, |path| path.display().to_string()),
                sets: arguments.sets.clone(),
            },
        }
    }

    fn describe(&self) -> String {
        let sets: String = self
            .sets
            .iter()
            .map(|set| format!(" --set {set}"))
            .collect();
        format!("{}{sets} ({})", self.path, self.kind)
    }
}

/// What `--json` prints: where A and B came from, then the comparison.
#[derive(Debug, Serialize)]
struct DiffOutput<'diff> {
    sources: Sources,
    #[serde(flatten)]
    diff: &'diff ReportDiff,
}

#[derive(Debug, Serialize)]
struct Sources {
    a: SourceLabel,
    b: SourceLabel,
}

/// A path ending in `.json` is a report; anything else is a build query.
fn is_report_path(path: &Path) -> bool {
    path.extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("json"))
}

/// The input of one side: `side` is `A` or `B`, `own_sets` its `--set-a`
/// or `--set-b` list.
fn input_of(
    arguments: &DiffArguments,
    path: &Path,
    side: char,
    own_sets: &[String],
) -> Result<Input, CommandError> {
    if !is_report_path(path) {
        // A side's own `--set-a`/`--set-b` takes the place of a common
        // `--set` of the same key.
        let key = |set: &String| set.split_once('=').map(|(key, _)| key.trim().to_string());
        let own_keys: Vec<Option<String>> = own_sets.iter().map(key).collect();
        let mut sets: Vec<String> = arguments
            .sets
            .iter()
            .filter(|set| key(set).is_none() || !own_keys.contains(&key(set)))
            .cloned()
            .collect();
        sets.extend_from_slice(own_sets);
        let query = QueryArguments {
            query: Some(path.to_path_buf()),
            sets,
            calibration: None,
            cache: arguments.cache.clone(),
        };
        // Both sides are read and validated before either is built, and
        // a side's own override is blamed by its own flag.
        if let Err(error) = load(&query) {
            let flag = format!("--set-{} ", side.to_ascii_lowercase());
            let relabel = |message: String| {
                let message = own_sets.iter().fold(message, |message, set| {
                    message.replace(&format!("--set {set}"), &format!("{flag}{set}"))
                });
                format!("{side}: {message}")
            };
            return Err(match error {
                CommandError::Diagnostic(rendered) => CommandError::Diagnostic(relabel(rendered)),
                CommandError::Input(message) => CommandError::Input(relabel(message)),
                internal => internal,
            });
        }
        return Ok(Input::Query(query));
    }
    if !own_sets.is_empty() {
        return Err(CommandError::Input(format!(
            "error: --set-{}: {side} ({}) is a report file, not a build query; \
             overrides apply only to a build query (queries/*.toml)",
            side.to_ascii_lowercase(),
            path.display()
        )));
    }
    Ok(Input::Report(path.to_path_buf()))
}

/// Both inputs; `--set` with two report files would do nothing, so it is an error.
fn inputs(arguments: &DiffArguments) -> Result<(Input, Input), CommandError> {
    let a = input_of(arguments, &arguments.a, 'A', &arguments.sets_a)?;
    let b = input_of(arguments, &arguments.b, 'B', &arguments.sets_b)?;
    let both_reports = matches!((&a, &b), (Input::Report(_), Input::Report(_)));
    if both_reports && !arguments.sets.is_empty() {
        return Err(CommandError::Input(String::from(
            "error: --set: A and B are both report files; overrides apply only to a build query (queries/*.toml)",
        )));
    }
    Ok((a, b))
}

/// Reads a `report.json`; a missing, unreadable or foreign file is an input
/// error naming the file.
fn read_report(path: &Path, side: char) -> Result<ReportView, CommandError> {
    let text = crate::input_file::read_text(path, 1 << 30, "a report")
        .map_err(crate::input_file::InputFileError::into_io)
        .map_err(|error| {
            CommandError::Input(format!(
                "error: {side}: cannot read {}: {error}",
                path.display()
            ))
        })?;
    ReportView::parse(&text).map_err(|error| {
        CommandError::Input(format!(
            "error: {side}: {}: {error}\n  help: give a report.json written by `superstep build` \
             (artifacts/NAME/report.json) or a build query (queries/*.toml)",
            path.display()
        ))
    })
}

/// A session and the outputs folder that chose its cache.
struct OpenSession {
    session: Session,
    outputs: PathBuf,
}

/// Builds the query of `arguments` and returns its report view; reuses
/// `open` when it has the same cache, else opens a session (the previous
/// one's cache is finished first).
fn build_query(
    arguments: &QueryArguments,
    open: &mut Option<OpenSession>,
) -> Result<ReportView, CommandError> {
    let written = load(arguments)?;
    let reusable = open
        .as_ref()
        .is_some_and(|open| same_cache(&arguments.cache, &open.outputs, &written));
    // Each side builds with the plan a search kept for its configuration,
    // as `superstep build` would.
    let (query, mut current) = match open.take() {
        Some(mut reused) if reusable => {
            reused.session.update(&written);
            let query = reused.session.effective_query(&written);
            (query, reused)
        }
        previous => {
            if let Some(previous) = previous {
                finish(previous.session.cache());
            }
            let cache = open_persistent_cache(
                &arguments.cache,
                &written.outputs.directory,
                &written.cache,
            )?;
            let session = Session::with_cache(&written, cache);
            let query = session.effective_query(&written);
            (
                query,
                OpenSession {
                    session,
                    outputs: written.outputs.directory.clone(),
                },
            )
        }
    };
    let view = view_of_build(&mut current.session, &query, arguments);
    *open = Some(current);
    view
}

/// Whether `query` would open the cache a session for `outputs` opened.
fn same_cache(cache: &CacheArguments, outputs: &Path, query: &BuildQuery) -> bool {
    cache.no_cache || cache.cache.is_some() || query.outputs.directory == outputs
}

fn view_of_build(
    session: &mut Session,
    query: &BuildQuery,
    arguments: &QueryArguments,
) -> Result<ReportView, CommandError> {
    let outcome = build_checked(session, query, arguments)?;
    let report = build::report_of(session, query, &outcome)?;
    ReportView::of(&report)
        .map_err(|error| CommandError::Internal(format!("the report of {}: {error}", query.name)))
}

/// Prints the cache's warnings and summary to standard error (standard
/// output holds only the comparison).
fn finish(cache: Option<&PersistentCache>) {
    finish_cache(cache);
}

/// A report file's view, read before anything is built (so that a bad file
/// fails at once); `None` for a query.
fn read_if_report(input: &Input, side: char) -> Result<Option<ReportView>, CommandError> {
    match input {
        Input::Report(path) => read_report(path, side).map(Some),
        Input::Query(_) => Ok(None),
    }
}

/// The view of one side: the report already read, or the query built.
fn view_of(
    input: &Input,
    read: Option<ReportView>,
    open: &mut Option<OpenSession>,
) -> Result<ReportView, CommandError> {
    match (read, input) {
        (Some(view), _) => Ok(view),
        (None, Input::Query(arguments)) => build_query(arguments, open),
        (None, Input::Report(path)) => Err(CommandError::Internal(format!(
            "{} was not read",
            path.display()
        ))),
    }
}

/// Both views: report files first, then the queries (sharing a session
/// when they share a cache).
fn views(a: &Input, b: &Input) -> Result<(ReportView, ReportView), CommandError> {
    let read_a = read_if_report(a, 'A')?;
    let read_b = read_if_report(b, 'B')?;
    let mut open: Option<OpenSession> = None;
    let views = view_of(a, read_a, &mut open)
        .and_then(|view_a| Ok((view_a, view_of(b, read_b, &mut open)?)));
    if let Some(open) = &open {
        finish(open.session.cache());
    }
    views
}

pub fn run(arguments: &DiffArguments) -> Result<(), CommandError> {
    let (a, b) = inputs(arguments)?;
    let (view_a, view_b) = views(&a, &b)?;
    let mut diff = compare(&view_a, &view_b);
    if let Some(top) = arguments.top {
        diff.keep_phases(top);
    }
    let sources = Sources {
        a: SourceLabel::of(&a),
        b: SourceLabel::of(&b),
    };
    if arguments.json {
        print_json(&DiffOutput {
            sources,
            diff: &diff,
        })
    } else {
        for line in render(&sources, &diff) {
            print_line!("{line}");
        }
        Ok(())
    }
}

fn print_json(output: &DiffOutput<'_>) -> Result<(), CommandError> {
    let text = serde_json::to_string_pretty(output)
        .map_err(|error| CommandError::Internal(format!("serialising the comparison: {error}")))?;
    print_line!("{text}");
    Ok(())
}

/// `+1,234`, `-56`, `0`.
fn signed(value: i64) -> String {
    let sign = match value.signum() {
        1 => "+",
        -1 => "-",
        _ => "",
    };
    format!("{sign}{}", thousands(value.unsigned_abs()))
}

/// `+12.50%`, `0.00%`, or `n/a` from zero.
fn percentage(percent: Option<f64>) -> String {
    match percent {
        None => String::from("n/a"),
        Some(0.0) => String::from("0.00%"),
        Some(percent) => format!("{percent:+.2}%"),
    }
}

/// The text label of a count total (by its report field name).
fn total_label(field: &str) -> &str {
    match field {
        "total_cycles" => "estimate cycles",
        "compute_cycles" => "compute cycles",
        "exchange_cycles" => "exchange cycles",
        "sync_cycles" => "setup and sync cycles",
        "patch_cycles" => "patching cycles",
        "barriers" => "barriers",
        "exchange_table_bytes_per_tile_max" => "exchange table B (fullest tile)",
        "peak_sram_bytes_per_tile" => "peak SRAM B (fullest tile)",
        "repeat_patch_words" => "Repeat patch words",
        "sharing_patch_words" => "sharing patch words",
        other => other,
    }
}

const TOTALS_HEADER_WIDTH: usize = 32;

fn totals_line(label: &str, a: &str, b: &str, delta: &str, percent: &str) -> String {
    format!("  {label:<TOTALS_HEADER_WIDTH$} {a:>16} {b:>16} {delta:>14} {percent:>9}")
}

fn totals_header() -> String {
    let width = TOTALS_HEADER_WIDTH + 2;
    format!(
        "{:<width$} {:>16} {:>16} {:>14} {:>9}",
        "totals:", "A", "B", "B - A", "%"
    )
}

fn count_line(label: &str, change: &CountChange) -> String {
    totals_line(
        label,
        &thousands(change.a),
        &thousands(change.b),
        &signed(change.delta),
        &percentage(change.percent),
    )
}

fn milliseconds_line(change: &Change<f64, f64>) -> String {
    totals_line(
        "estimate ms",
        &format!("{:.6}", change.a),
        &format!("{:.6}", change.b),
        &format!("{:+.6}", change.delta),
        &percentage(change.percent),
    )
}

fn identity_line(side: char, source: &SourceLabel, diff: &ReportDiff) -> String {
    let identity = if side == 'A' { &diff.a } else { &diff.b };
    format!(
        "  {side}: {}: {} ({}, {}, batch {}, {} tiles)",
        source.describe(),
        identity.name,
        identity.model,
        crate::text::counted(identity.layers, "layer", "layers"),
        identity.batch,
        identity.tiles
    )
}

/// The whole text output.
fn render(sources: &Sources, diff: &ReportDiff) -> Vec<String> {
    let mut lines = vec![
        String::from("superstep diff"),
        identity_line('A', &sources.a, diff),
        identity_line('B', &sources.b, diff),
        totals_header(),
        milliseconds_line(&diff.totals.milliseconds),
    ];
    lines.extend(
        diff.totals
            .counts()
            .iter()
            .map(|(field, change)| count_line(total_label(field), change)),
    );
    lines.push(phases_heading(diff));
    let width = diff
        .phases
        .iter()
        .map(|phase| phase.key.len())
        .max()
        .unwrap_or(0);
    lines.extend(diff.phases.iter().map(|phase| {
        format!(
            "  {:>14}  {:<width$}  {}",
            signed(phase.cycle_delta),
            phase.key,
            describe_phase(phase)
        )
    }));
    lines
}

fn phases_heading(diff: &ReportDiff) -> String {
    let counted = format!(
        "phases: {} changed or in one build only ({} in A, {} in B)",
        diff.changed_phases, diff.phases_in_a, diff.phases_in_b
    );
    if diff.changed_phases == 0 {
        return counted;
    }
    let shown = if diff.phases.len() < diff.changed_phases {
        format!("; the {} largest", diff.phases.len())
    } else {
        String::new()
    };
    format!("{counted}, by cycle delta (horizon x executions){shown}:")
}

/// A policy with ` (override)` when an override set it.
fn policy_text(side: &PhaseSide) -> String {
    match side.policy_source {
        PolicySource::Default => side.policy.to_string(),
        PolicySource::Override => format!("{} (override)", side.policy),
    }
}

/// What changed in one phase, or what the one build that has it says.
fn describe_phase(phase: &PhaseDiff) -> String {
    match (&phase.a, &phase.b) {
        (Some(a), Some(b)) => phase
            .changes
            .iter()
            .filter_map(|aspect| describe_aspect(*aspect, &phase.changes, a, b))
            .collect::<Vec<_>>()
            .join("; "),
        (Some(a), None) => format!("only in A: {}", describe_side(a)),
        (None, Some(b)) => format!("only in B: {}", describe_side(b)),
        (None, None) => String::new(),
    }
}

/// One changed aspect as `what old -> new` (`None` for a chosen policy that
/// only repeats a changed policy).
fn describe_aspect(
    aspect: Aspect,
    changes: &[Aspect],
    a: &PhaseSide,
    b: &PhaseSide,
) -> Option<String> {
    let text = match aspect {
        Aspect::Executions => format!("executions {} -> {}", a.executions, b.executions),
        Aspect::Horizon if changes.contains(&Aspect::Executions) => format!(
            "horizon {} -> {}",
            thousands(a.horizon),
            thousands(b.horizon)
        ),
        Aspect::Horizon => format!(
            "horizon {} -> {} (x{})",
            thousands(a.horizon),
            thousands(b.horizon),
            b.executions
        ),
        Aspect::Policy => format!("policy {} -> {}", policy_text(a), policy_text(b)),
        Aspect::Chosen
            if changes.contains(&Aspect::Policy)
                && a.chosen == a.policy.to_string()
                && b.chosen == b.policy.to_string() =>
        {
            return None;
        }
        Aspect::Chosen => format!("chosen {} -> {}", a.chosen, b.chosen),
        Aspect::Rows => format!(
            "rows max {} -> {} B, total {} -> {} B",
            thousands(a.max_row_bytes),
            thousands(b.max_row_bytes),
            thousands(a.total_row_bytes),
            thousands(b.total_row_bytes)
        ),
        Aspect::PatchWords => format!(
            "patch words {} -> {}",
            thousands(a.patch_words),
            thousands(b.patch_words)
        ),
    };
    Some(text)
}

/// A phase only one build has.
fn describe_side(side: &PhaseSide) -> String {
    let chosen = if side.chosen == side.policy.to_string() {
        String::new()
    } else {
        format!(", chosen {}", side.chosen)
    };
    format!(
        "horizon {} (x{}), policy {}{chosen}, rows max {} B, total {} B, patch words {}",
        thousands(side.horizon),
        side.executions,
        policy_text(side),
        thousands(side.max_row_bytes),
        thousands(side.total_row_bytes),
        thousands(side.patch_words)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::diff::Presence;

    fn side(policy: &str, horizon: u32) -> PhaseSide {
        PhaseSide {
            executions: 2,
            horizon,
            cycles: u64::from(horizon) * 2,
            policy: policy.parse().expect("a policy"),
            policy_source: PolicySource::Default,
            chosen: policy.to_string(),
            max_row_bytes: 1_024,
            total_row_bytes: 4_096,
            patch_words: 0,
        }
    }

    #[test]
    fn a_phase_line_says_what_changed() {
        let phase = PhaseDiff {
            key: "x#0".to_string(),
            presence: Presence::Both,
            changes: vec![Aspect::Horizon, Aspect::Policy, Aspect::Chosen],
            cycle_delta: 2_000,
            a: Some(side("latency", 1_000)),
            b: Some(side("B1024", 2_000)),
        };
        assert_eq!(
            describe_phase(&phase),
            "horizon 1,000 -> 2,000 (x2); policy latency -> B1024"
        );
    }

    #[test]
    fn a_phase_of_one_build_is_described_whole() {
        let phase = PhaseDiff {
            key: "y#0".to_string(),
            presence: Presence::OnlyInB,
            changes: Vec::new(),
            cycle_delta: 200,
            a: None,
            b: Some(side("latency", 100)),
        };
        assert_eq!(
            describe_phase(&phase),
            "only in B: horizon 100 (x2), policy latency, rows max 1,024 B, total 4,096 B, patch words 0"
        );
    }

    #[test]
    fn signed_numbers_and_percentages() {
        assert_eq!(signed(1_234), "+1,234");
        assert_eq!(signed(-56), "-56");
        assert_eq!(signed(0), "0");
        assert_eq!(percentage(Some(12.5)), "+12.50%");
        assert_eq!(percentage(Some(-3.0)), "-3.00%");
        assert_eq!(percentage(Some(0.0)), "0.00%");
        assert_eq!(percentage(None), "n/a");
    }
}
