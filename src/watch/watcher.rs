//! The watch loop's logic, free of file-system notification plumbing: it
//! takes "the build file may have changed" events from a channel, waits for
//! a quiet period, re-reads the file, and when its content changed parses it,
//! applies it to the one long-lived `Session` and rebuilds, writing a report
//! to any `Write`. Invalid files and failing builds are reported and the loop
//! goes on; only `WatchEvent::Stop`, a closed channel or `exit_after` end it.
//!
//! A build runs on a thread of its own while this one keeps reading events:
//! when the file's content changes during a build, the build is cancelled
//! (`Session::begin_cancellable`: its queries unwind with salsa's
//! `Cancelled`, caught on the build thread), reported, and the new content
//! is built. Nothing of a cancelled build is written: artifacts follow a
//! finished build only, and a cancelled query stores no cache entry.
//!
//! Salsa: the session is owned by whichever thread runs its build, and is
//! handed back when the build ends; `Session::build` drops its worker
//! clones before returning (unwinding included), so the setters in
//! `Session::update` never wait on a live clone.

use std::io::{self, Write};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
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
use crate::session::{BuildError, BuildOutcome, Canceller, Session};
use crate::studies::suggestions::SUGGESTION_CANDIDATES;

/// How often the loop looks whether a running build has ended while it
/// waits for events.
const BUILD_POLL: Duration = Duration::from_millis(10);

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
    /// Run on the build thread before each build, where a change of the
    /// file cancels it like the build itself (tests hold a build there).
    pub before_build: Option<BuildHook>,
}

/// Work run on the build thread before each build (`WatchOptions::before_build`).
#[derive(Clone)]
pub struct BuildHook(pub Arc<dyn Fn(&Session) + Send + Sync>);

impl std::fmt::Debug for BuildHook {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("BuildHook")
    }
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
            before_build: None,
        }
    }
}

/// Why watch could not write a build's artifacts (the build itself
/// succeeded; watch warns and keeps watching).
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error(transparent)]
    Artifact(#[from] crate::report::artifacts::ArtifactError),
    #[error(transparent)]
    Suggestions(#[from] crate::session::PhaseError),
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    #[error(transparent)]
    Record(#[from] crate::report::last_build::StateError),
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
) -> Result<Vec<PathBuf>, WriteError> {
    let report = session_report(session, query, outcome)?;
    let suggestions = if query.outputs.html {
        crate::studies::suggestions::suggestions(session, Some(SUGGESTION_CANDIDATES))?
    } else {
        Vec::new()
    };
    let directory = artifacts_directory(query);
    let (_lock, previous) = manifest::begin(&directory)?;
    let mut written = write_reports(session, query, &report, Some(&suggestions))?;
    let record_path = directory.join(STATE_FILE);
    LastBuild::new(&options.path, text, &options.sets, query).save(&record_path)?;
    written.push(record_path);
    let manifest = manifest::finish(&directory, query, &written, previous.as_ref())?;
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
    /// Applied, but the file's content changed during the build, which was
    /// cancelled (`Watcher::run` builds the new content next).
    Cancelled,
}

/// How a build on the build thread ended.
enum BuildRun {
    /// It ran to its end, successfully or not.
    Finished(Box<Result<BuildOutcome, BuildError>>),
    /// The file changed and the build was cancelled.
    Cancelled,
    /// It unwound with salsa's `Cancelled` though nothing cancelled it.
    Stopped(salsa::Cancelled),
}

/// The build thread's result: the session handed back, and the build's
/// result or the cancellation it unwound with.
type BuildThreadResult = (
    Session,
    Result<Result<BuildOutcome, BuildError>, salsa::Cancelled>,
);

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
    /// The query of the last build that ran to its end (what the next
    /// report's setting changes are counted from).
    finished: Option<BuildQuery>,
    /// Input fields changed since the last build that ran to its end
    /// (those of cancelled builds included).
    unreported_changes: Vec<&'static str>,
    metrics: Option<WatchMetrics>,
    /// Each phase's cycles in the last successful build.
    phase_costs: Option<PhaseCosts>,
    builds: usize,
    /// `Stop` or a closed channel arrived during a build.
    stop_requested: bool,
    /// A touch during a build was not examined: look at the file again.
    look_again: bool,
}

impl Watcher {
    pub fn new(options: WatchOptions) -> Watcher {
        Watcher {
            options,
            session: None,
            last_text: None,
            last_unreadable: false,
            applied: None,
            finished: None,
            unreported_changes: Vec::new(),
            metrics: None,
            phase_costs: None,
            builds: 0,
            stop_requested: false,
            look_again: false,
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
    /// channel or `exit_after` handled changes. A build cancelled by a
    /// change counts as handled, and the new content is built at once.
    pub fn run(
        &mut self,
        events: &Receiver<WatchEvent>,
        out: &mut impl Write,
    ) -> io::Result<WatchSummary> {
        let first = self.refresh_watching(Some(events), out)?;
        let mut summary = WatchSummary {
            handled: 0,
            last: first,
            reached_limit: false,
        };
        let mut cancelled = first == Refresh::Cancelled;
        writeln!(
            out,
            "watching {} for changes (Ctrl-C to stop)",
            self.options.path.display()
        )?;
        out.flush()?;
        loop {
            if let Some(limit) = self.options.exit_after
                && summary.handled >= limit
                && !cancelled
            {
                summary.reached_limit = true;
                break;
            }
            if self.stop_requested {
                break;
            }
            // After a cancelled build the file is read again at once: the
            // change that cancelled it has settled already.
            if !std::mem::take(&mut cancelled) {
                let touched = std::mem::take(&mut self.look_again)
                    || events.recv() == Ok(WatchEvent::Touched);
                if !touched || !self.settle(events) {
                    break;
                }
            }
            let refresh = self.refresh_watching(Some(events), out)?;
            if refresh != Refresh::Unchanged {
                summary.handled += 1;
                summary.last = refresh;
            }
            cancelled = refresh == Refresh::Cancelled;
            out.flush()?;
        }
        Ok(summary)
    }

    /// Runs `session`'s build on a thread of its own; meanwhile, with
    /// `events`, listens for changes and cancels the build when the file's
    /// content changed. Hands the session back with how the build ended.
    fn build_on_thread(
        &mut self,
        session: Session,
        events: Option<&Receiver<WatchEvent>>,
    ) -> io::Result<(Session, BuildRun)> {
        let canceller = session.begin_cancellable();
        let hook = self.options.before_build.clone();
        let worker = std::thread::Builder::new()
            .name(String::from("watch build"))
            .spawn(move || -> BuildThreadResult {
                let mut session = session;
                let result = salsa::Cancelled::catch(AssertUnwindSafe(|| {
                    if let Some(hook) = &hook {
                        (hook.0)(&session);
                    }
                    session.build()
                }));
                session.end_cancellable();
                (session, result)
            })?;
        let cancelled = match events {
            Some(events) => self.listen_during_build(&worker, events, &canceller),
            None => false,
        };
        let (session, result) = match worker.join() {
            Ok(ended) => ended,
            // A panic of the build is the watcher's (as before builds ran
            // on their own thread).
            Err(payload) => std::panic::resume_unwind(payload),
        };
        let run = match result {
            Ok(result) => BuildRun::Finished(Box::new(result)),
            Err(_) if cancelled => BuildRun::Cancelled,
            Err(other) => BuildRun::Stopped(other),
        };
        Ok((session, run))
    }

    /// Reads events until the build on `worker` ends; returns whether it
    /// cancelled the build because the file's content changed (a touch is
    /// examined once the quiet period passed without another). `Stop` or
    /// a closed channel lets the build finish and then ends the loop.
    fn listen_during_build(
        &mut self,
        worker: &JoinHandle<BuildThreadResult>,
        events: &Receiver<WatchEvent>,
        canceller: &Canceller,
    ) -> bool {
        let quiet = self.options.quiet_period;
        let mut touched_at: Option<Instant> = None;
        while !worker.is_finished() {
            let wait = touched_at.map_or(BUILD_POLL, |at| {
                quiet.saturating_sub(at.elapsed()).min(BUILD_POLL)
            });
            match events.recv_timeout(wait) {
                Ok(WatchEvent::Touched) => touched_at = Some(Instant::now()),
                Ok(WatchEvent::Stop) | Err(RecvTimeoutError::Disconnected) => {
                    self.stop_requested = true;
                    return false;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if touched_at.is_some_and(|at| at.elapsed() >= quiet) {
                touched_at = None;
                match crate::build_file::read_build_file(&self.options.path) {
                    Ok(text) if self.last_text.as_deref() != Some(text.as_str()) => {
                        canceller.cancel();
                        return true;
                    }
                    Ok(_) => {}
                    // Unreadable for now (an editor replacing it): looked
                    // at again once the build ends.
                    Err(_) => self.look_again = true,
                }
            }
        }
        if touched_at.is_some() {
            self.look_again = true;
        }
        false
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
    /// rebuilds, writing what happened to `out` (the build runs to its end:
    /// nothing is listened to meanwhile).
    pub fn refresh(&mut self, out: &mut impl Write) -> io::Result<Refresh> {
        self.refresh_watching(None, out)
    }

    /// [`Watcher::refresh`], cancelling the build when `events` tell of a
    /// change of the file's content while it runs.
    fn refresh_watching(
        &mut self,
        events: Option<&Receiver<WatchEvent>>,
        out: &mut impl Write,
    ) -> io::Result<Refresh> {
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
                self.rebuild(query, events, out)
            }
            Err(error) => {
                writeln!(out, "== build file invalid (still watching) ==")?;
                writeln!(out, "{}", render_query_error(&error))?;
                Ok(Refresh::Invalid)
            }
        }
    }

    fn rebuild(
        &mut self,
        query: BuildQuery,
        events: Option<&Receiver<WatchEvent>>,
        out: &mut impl Write,
    ) -> io::Result<Refresh> {
        self.builds += 1;
        // Cold until a build of the session has run to its end.
        let cold = self.finished.is_none();
        match &mut self.session {
            Some(session) => {
                for field in session.update(&query) {
                    if !self.unreported_changes.contains(&field) {
                        self.unreported_changes.push(field);
                    }
                }
            }
            None => {
                self.session = Some(Session::with_cache(&query, self.options.cache.clone()));
            }
        }
        let settings = match &self.finished {
            Some(previous) => setting_changes(previous, &query),
            None => Vec::new(),
        };
        let name = query.name.clone();
        self.applied = Some(query);
        let Some(mut session) = self.session.take() else {
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
        let (session, run) = self.build_on_thread(session, events)?;
        let elapsed = started.elapsed().as_secs_f64() * 1e3;
        let session = self.session.insert(session);
        let result = match run {
            BuildRun::Finished(result) => *result,
            BuildRun::Cancelled => {
                writeln!(
                    out,
                    "== build {} cancelled (the file changed) ==",
                    self.builds
                )?;
                // Read again and applied whatever the file now holds.
                self.last_text = None;
                return Ok(Refresh::Cancelled);
            }
            BuildRun::Stopped(cancelled) => {
                writeln!(
                    out,
                    "== build {}: {name} failed (still watching) ==",
                    self.builds
                )?;
                writeln!(out, "error: the build stopped: {cancelled}")?;
                self.last_text = None;
                return Ok(Refresh::Failed);
            }
        };
        self.finished = self.applied.clone();
        let changed = std::mem::take(&mut self.unreported_changes);
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
