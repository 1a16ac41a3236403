//! The watch loop's logic, free of file-system notification plumbing: it
//! takes "the build file may have changed" events from a channel, waits for
//! a quiet period, re-reads the file, and when its content changed parses it,
//! applies it to the one long-lived `Session` and rebuilds, writing a report
//! to any `Write`. Invalid files and failing builds are reported and the loop
//! goes on; only `WatchEvent::Stop`, a closed channel or `exit_after` end it.
//!
//! Salsa: the session is owned here and only ever touched from this thread;
//! `Session::build` drops its worker clones before returning, so the setters
//! in `Session::update` never wait on a live clone.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::metrics::{WatchMetrics, render_metrics};
use super::moves::{PHASE_MOVES, PhaseCosts, phase_costs, render_phase_moves};
use super::report::{render_changes, render_runs, render_times};
use crate::build_file::error::render_query_error;
use crate::build_file::settings::setting_changes;
use crate::build_file::{BuildQuery, QueryError, QueryProblem, parse_query};
use crate::cache::PersistentCache;
use crate::report::artifacts::{artifacts_directory, session_report, write_reports};
use crate::report::last_build::{LastBuild, STATE_FILE};
use crate::report::manifest;
use crate::session::suggest::SUGGESTION_CANDIDATES;
use crate::session::{BuildError, Session};

/// What the notification side tells the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// The build file may have changed (content is compared before use).
    Touched,
    /// Stop watching (Ctrl-C).
    Stop,
}

/// How to watch.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// The build file.
    pub path: PathBuf,
    /// `--set KEY=VALUE` overrides, applied to every version of the file.
    pub sets: Vec<String>,
    /// Events closer together than this are one change.
    pub quiet_period: Duration,
    /// Stop after this many handled changes (valid or not); the initial
    /// build does not count, so `Some(0)` builds once and returns.
    pub exit_after: Option<usize>,
    /// The persistent cache the session reads and writes, if any.
    pub cache: Option<Arc<PersistentCache>>,
    /// After each successful build, write report.json, phases.csv and
    /// compute.csv (as `[outputs]` asks) and last-build.json.
    pub write_artifacts: bool,
    /// After each successful build, bring this snapshot folder up to date
    /// and name the files that changed.
    pub snapshot: Option<super::snapshot::SnapshotOptions>,
    /// How a failed build is explained: the command line passes
    /// `superstep build`'s explanation (the same diagnostic, with its help
    /// and what would fit); without one, the error's own text.
    pub explain_failure: Option<FailureExplainer>,
}

/// Explains a failed build of a session for its query (the text printed).
#[derive(Clone)]
pub struct FailureExplainer(pub Arc<ExplainFailure>);

/// The explanation itself: the session that failed (which it may build
/// other candidates in), the query it failed on, and the error.
pub type ExplainFailure = dyn Fn(&mut Session, &BuildQuery, BuildError) -> String + Send + Sync;

impl std::fmt::Debug for FailureExplainer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("FailureExplainer")
    }
}

impl WatchOptions {
    pub fn new(path: impl Into<PathBuf>) -> WatchOptions {
        WatchOptions {
            path: path.into(),
            sets: Vec::new(),
            quiet_period: Duration::from_millis(150),
            exit_after: None,
            cache: None,
            write_artifacts: false,
            snapshot: None,
            explain_failure: None,
        }
    }
}

/// Writes the report artifacts of a successful build, the `--why` record
/// (`last-build.json`) of `text` as applied and, last, the folder's build
/// record (`build.json`; a package of an earlier build is removed, since
/// watch does not write one).
fn write_artifacts(
    session: &Session,
    query: &BuildQuery,
    outcome: &crate::session::BuildOutcome,
    options: &WatchOptions,
    text: &str,
) -> Result<Vec<PathBuf>, String> {
    let report = session_report(session, query, outcome).map_err(|error| error.to_string())?;
    let suggestions = if query.outputs.html {
        session
            .suggestions(Some(SUGGESTION_CANDIDATES))
            .map_err(|error| error.to_string())?
    } else {
        Vec::new()
    };
    let directory = artifacts_directory(query);
    let (_lock, previous) = manifest::begin(&directory).map_err(|error| error.to_string())?;
    let mut written = write_reports(session, query, &report, Some(&suggestions))
        .map_err(|error| error.to_string())?;
    let record_path = directory.join(STATE_FILE);
    LastBuild::new(&options.path, text, &options.sets, query)
        .save(&record_path)
        .map_err(|error| error.to_string())?;
    written.push(record_path);
    let manifest = manifest::finish(&directory, query, &written, previous.as_ref())
        .map_err(|error| error.to_string())?;
    written.push(manifest);
    Ok(written)
}

/// What one look at the build file did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refresh {
    /// Same content as last time (or still unreadable): nothing done.
    Unchanged,
    /// The file is unreadable or not a valid build query; the error was printed.
    Invalid,
    /// Applied and built successfully.
    Built,
    /// Applied, but a stage failed; the error was printed.
    Failed,
}

/// How a `Watcher::run` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchSummary {
    /// Changes handled after the initial build.
    pub handled: usize,
    /// What the last build attempt (the initial one included) did.
    pub last: Refresh,
    /// Whether `exit_after` ended the loop (rather than `Stop`).
    pub reached_limit: bool,
}

/// The watch loop's state: one session, the last content and query applied,
/// and the metrics of the last successful build.
pub struct Watcher {
    options: WatchOptions,
    session: Option<Session>,
    last_text: Option<String>,
    last_unreadable: bool,
    applied: Option<BuildQuery>,
    metrics: Option<WatchMetrics>,
    /// Each phase's cycles in the last successful build.
    phase_costs: Option<PhaseCosts>,
    builds: usize,
}

impl Watcher {
    pub fn new(options: WatchOptions) -> Watcher {
        Watcher {
            options,
            session: None,
            last_text: None,
            last_unreadable: false,
            applied: None,
            metrics: None,
            phase_costs: None,
            builds: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.options.path
    }

    /// The session, once a valid query has been applied.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// The metrics of the last successful build.
    pub fn metrics(&self) -> Option<&WatchMetrics> {
        self.metrics.as_ref()
    }

    /// Builds the current file, then handles events until `Stop`, a closed
    /// channel or `exit_after` handled changes.
    pub fn run(
        &mut self,
        events: &Receiver<WatchEvent>,
        out: &mut impl Write,
    ) -> io::Result<WatchSummary> {
        let mut summary = WatchSummary {
            handled: 0,
            last: self.refresh(out)?,
            reached_limit: false,
        };
        writeln!(
            out,
            "watching {} for changes (Ctrl-C to stop)",
            self.options.path.display()
        )?;
        out.flush()?;
        loop {
            if let Some(limit) = self.options.exit_after
                && summary.handled >= limit
            {
                summary.reached_limit = true;
                break;
            }
            if events.recv() != Ok(WatchEvent::Touched) || !self.settle(events) {
                break;
            }
            let refresh = self.refresh(out)?;
            if refresh != Refresh::Unchanged {
                summary.handled += 1;
                summary.last = refresh;
            }
            out.flush()?;
        }
        Ok(summary)
    }

    /// Waits until no event arrived for the quiet period; false on `Stop`
    /// or a closed channel.
    fn settle(&self, events: &Receiver<WatchEvent>) -> bool {
        loop {
            match events.recv_timeout(self.options.quiet_period) {
                Ok(WatchEvent::Touched) => continue,
                Ok(WatchEvent::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
                Err(RecvTimeoutError::Timeout) => return true,
            }
        }
    }

    /// Reads the build file; if its content changed, parses, applies and
    /// rebuilds, writing what happened to `out`.
    pub fn refresh(&mut self, out: &mut impl Write) -> io::Result<Refresh> {
        let path = self.options.path.clone();
        let text = match crate::build_file::read_build_file(&path) {
            Ok(text) => text,
            Err(source) => {
                if self.last_unreadable {
                    return Ok(Refresh::Unchanged);
                }
                self.last_unreadable = true;
                self.last_text = None;
                let error = QueryError::from_problem(QueryProblem::Read { path, source });
                writeln!(out, "== build file unreadable (still watching) ==")?;
                writeln!(out, "{}", render_query_error(&error))?;
                return Ok(Refresh::Invalid);
            }
        };
        self.last_unreadable = false;
        if self.last_text.as_deref() == Some(text.as_str()) {
            return Ok(Refresh::Unchanged);
        }
        let parsed = parse_query(
            &path.display().to_string(),
            &text,
            Some(path.parent().unwrap_or(Path::new(""))),
            &self.options.sets,
        );
        self.last_text = Some(text);
        match parsed {
            Ok(mut query) => {
                query.source_path = Some(path);
                self.rebuild(query, out)
            }
            Err(error) => {
                writeln!(out, "== build file invalid (still watching) ==")?;
                writeln!(out, "{}", render_query_error(&error))?;
                Ok(Refresh::Invalid)
            }
        }
    }

    fn rebuild(&mut self, query: BuildQuery, out: &mut impl Write) -> io::Result<Refresh> {
        self.builds += 1;
        let cold = self.session.is_none();
        let (changed, settings) = match (&mut self.session, &self.applied) {
            (Some(session), Some(previous)) => {
                (session.update(&query), setting_changes(previous, &query))
            }
            _ => {
                self.session = Some(Session::with_cache(&query, self.options.cache.clone()));
                (Vec::new(), Vec::new())
            }
        };
        let name = query.name.clone();
        self.applied = Some(query);
        let Some(session) = self.session.as_mut() else {
            return Ok(Refresh::Failed);
        };
        // The plan a search kept for this configuration, under the file's
        // pins, as `superstep build` would use it: the session's query of
        // the configuration, asked again when a search kept another plan
        // since the last save.
        session.notice_kept_searches();
        let layouts = session.layout_source();
        writeln!(
            out,
            "{} {name}…",
            if cold { "building" } else { "rebuilding" }
        )?;
        writeln!(out, "{}", layouts.line())?;
        out.flush()?;
        let started = Instant::now();
        let result = session.build();
        let elapsed = started.elapsed().as_secs_f64() * 1e3;
        let kind = if cold { "cold" } else { "incremental" };
        match result {
            Ok(outcome) => {
                writeln!(
                    out,
                    "== build {}: {name} ({kind}, {elapsed:.3} ms) ==",
                    self.builds
                )?;
                if !cold {
                    write!(out, "{}", render_changes(&changed, &settings))?;
                }
                write!(out, "{}", render_runs(&outcome.executions, None))?;
                write!(out, "{}", render_times(&outcome.times))?;
                let metrics = WatchMetrics::from_outcome(&outcome);
                writeln!(out, "headline metrics:")?;
                write!(out, "{}", render_metrics(&metrics, self.metrics.as_ref()))?;
                self.metrics = Some(metrics);
                let costs = phase_costs(&outcome);
                if let Some(previous) = &self.phase_costs {
                    write!(out, "{}", render_phase_moves(previous, &costs, PHASE_MOVES))?;
                }
                self.phase_costs = Some(costs);
                if self.options.write_artifacts
                    && let (Some(applied), Some(text)) = (&self.applied, &self.last_text)
                {
                    match write_artifacts(session, applied, &outcome, &self.options, text) {
                        Ok(paths) => {
                            for path in paths {
                                writeln!(out, "wrote {}", path.display())?;
                            }
                        }
                        Err(error) => writeln!(out, "warning: artifacts not written: {error}")?,
                    }
                }
                if let (Some(snapshot), Some(applied)) = (&self.options.snapshot, &self.applied) {
                    super::snapshot::update(session, applied, snapshot, out)?;
                }
                if let Some(cache) = session.cache() {
                    let report = cache.finish();
                    for warning in &report.warnings {
                        writeln!(out, "warning: {warning}")?;
                    }
                    writeln!(out, "{report}")?;
                }
                Ok(Refresh::Built)
            }
            Err(error) => {
                writeln!(
                    out,
                    "== build {}: {name} failed ({kind}, still watching) ==",
                    self.builds
                )?;
                if !cold {
                    write!(out, "{}", render_changes(&changed, &settings))?;
                }
                let explained = match (&self.options.explain_failure, &self.applied) {
                    (Some(explain), Some(query)) => {
                        let explained = (explain.0)(session, query, error);
                        // Explaining may build other candidates in this
                        // session (what would fit): it goes back to the
                        // file's query, so the next save compares with it.
                        session.update(query);
                        explained
                    }
                    _ => format!("error: {error}"),
                };
                writeln!(out, "{}", explained.trim_end())?;
                Ok(Refresh::Failed)
            }
        }
    }
}
