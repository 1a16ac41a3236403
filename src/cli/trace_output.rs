//! The process's tracing: log events to standard error (filtered by
//! `RUST_LOG`, default `warn`) and, with `--trace FILE`, the compiler's spans
//! as a Chrome trace ([`install`], whose [`Tracing`] lives until the command
//! has run).
//!
//! The `--trace` file's writer: the Chrome trace layer writes from its own
//! thread and panics on a write error; this writer keeps the first error
//! instead (later writes are dropped), so that a trace that could not be
//! written (a full disk) is reported by the command as an error naming the
//! file, never a panic in another thread and an exit code 0. The trace is
//! written to a temporary file and renamed into place at the end, as every
//! output is (`output_file`): a path that is one of the command's inputs is
//! never truncated, not even before it is read.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

use super::command_error::CommandError;
use super::preflight;
use crate::output_file::{OutputFileError, PendingFile};

/// The installed tracing: with `--trace`, the guard that writes the rest of
/// the trace when dropped and what became of the writes.
pub struct Tracing {
    trace: Option<(tracing_chrome::FlushGuard, TraceOutcome)>,
}

/// Installs the process's tracing subscriber: log events to standard error
/// and, when `trace` names a file, a Chrome trace of the spans into it (the
/// file is created here; one that cannot be is an input error). Keep the
/// result until the command has run, then call [`Tracing::finish`].
pub fn install(trace: Option<&Path>) -> Result<Tracing, CommandError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let fmt_layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    let (chrome_layer, trace) = match trace {
        Some(path) => {
            let file = preflight::create_trace(path)?;
            let (writer, outcome) = trace_writer(path, file);
            // Spans carry their fields (phase key, op, policy) as arguments;
            // events are named by level and target, never by a source path
            // of the machine that built the binary.
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .writer(writer)
                .include_args(true)
                .include_locations(false)
                .name_fn(Box::new(|event_or_span| match event_or_span {
                    tracing_chrome::EventOrSpan::Event(event) => {
                        format!("{} {}", event.metadata().level(), event.metadata().target())
                    }
                    tracing_chrome::EventOrSpan::Span(span) => span.metadata().name().to_string(),
                }))
                .build();
            (Some(layer), Some((guard, outcome)))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(fmt_layer)
        .with(chrome_layer)
        .init();
    Ok(Tracing { trace })
}

impl Tracing {
    /// Writes the rest of the trace (the trace layer flushes when its guard
    /// drops), then `Err` when a write to the trace file failed.
    pub fn finish(self) -> Result<(), CommandError> {
        match self.trace {
            Some((guard, outcome)) => {
                drop(guard);
                outcome.check()
            }
            None => Ok(()),
        }
    }
}

/// The trace file, as the trace layer's writer: a temporary file beside
/// the target (`output_file::PendingFile`), renamed over it once the trace
/// is complete ([`TraceOutcome::check`]).
pub struct TraceWriter {
    state: Arc<Mutex<TraceState>>,
}

/// The trace being written and the first write that failed.
struct TraceState {
    file: Option<PendingFile>,
    failure: Option<String>,
}

/// What became of the writes to the trace file, looked at after the trace
/// layer has flushed (its guard dropped).
pub struct TraceOutcome {
    path: PathBuf,
    state: Arc<Mutex<TraceState>>,
}

/// The writer of `file` (the pending trace at `path`) and the handle that
/// reports whether everything reached it and puts it in place.
pub fn trace_writer(path: &Path, file: PendingFile) -> (TraceWriter, TraceOutcome) {
    let state = Arc::new(Mutex::new(TraceState {
        file: Some(file),
        failure: None,
    }));
    (
        TraceWriter {
            state: Arc::clone(&state),
        },
        TraceOutcome {
            path: path.to_path_buf(),
            state,
        },
    )
}

impl Write for TraceWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.failure.is_none()
            && let Some(file) = state.file.as_mut()
            && let Err(error) = file.write_all(bytes)
        {
            state.failure = Some(match error {
                OutputFileError::Write { source, .. } => source.to_string(),
                other => other.to_string(),
            });
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TraceOutcome {
    /// `Err` when a write to the trace file failed ("--trace: cannot write
    /// trace FILE: reason", exit 1) or its path became one it may not
    /// replace (exit 2); otherwise the complete trace is renamed into place.
    pub fn check(&self) -> Result<(), CommandError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let file = state.file.take();
        if let Some(error) = state.failure.as_ref() {
            return Err(CommandError::Internal(format!(
                "--trace: cannot write trace {}: {error}",
                self.path.display()
            )));
        }
        match file.map(PendingFile::commit) {
            Some(Err(error)) if error.is_input() => Err(CommandError::Input(format!(
                "error: --trace: cannot write trace {}: {error}",
                self.path.display()
            ))),
            Some(Err(error)) => Err(CommandError::Internal(format!(
                "--trace: cannot write trace {}: {error}",
                self.path.display()
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_is_in_place_only_when_complete_and_a_failure_names_it() {
        let directory =
            std::env::temp_dir().join(format!("superstep-trace-output-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).expect("folder");
        let path = directory.join("trace.json");
        let (mut writer, outcome) =
            trace_writer(&path, PendingFile::create(&path).expect("pending"));
        writer.write_all(b"[]").expect("kept, not returned");
        assert!(!path.exists(), "not in place before the end");
        outcome.check().expect("committed");
        assert_eq!(std::fs::read(&path).expect("reads"), b"[]");
        // The folder went away while the trace was written: an error naming it.
        let (mut writer, outcome) =
            trace_writer(&path, PendingFile::create(&path).expect("pending"));
        writer.write_all(b"[]").expect("kept, not returned");
        std::fs::remove_dir_all(&directory).expect("removed");
        let error = outcome.check().expect_err("the folder is gone");
        let (CommandError::Internal(message) | CommandError::Input(message)) = error else {
            panic!("an error with a message");
        };
        assert!(message.contains("trace.json"), "{message}");
    }
}
