//! The process's tracing: log events to standard error (filtered by
//! `RUST_LOG`, default `warn`) and, with `--trace FILE`, the compiler's spans
//! as a Chrome trace ([`install`], whose [`Tracing`] lives until the command
//! has run).
//!
//! The `--trace` file's writer: the Chrome trace layer writes from its own
//! thread and panics on a write error; this writer keeps the first error
//! instead (later writes are dropped), so that a trace that could not be
//! written (`--trace /dev/full`) is reported by the command as an error
//! naming the file, never a panic in another thread and an exit code 0.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

use super::command_error::CommandError;
use super::preflight;

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

/// The trace file, as the trace layer's writer.
pub struct TraceWriter {
    file: File,
    failure: Arc<Mutex<Option<std::io::Error>>>,
}

/// What became of the writes to the trace file, looked at after the trace
/// layer has flushed (its guard dropped).
pub struct TraceOutcome {
    path: PathBuf,
    failure: Arc<Mutex<Option<std::io::Error>>>,
}

/// The writer of `file` (created as `path`) and the handle that reports
/// whether everything reached it.
pub fn trace_writer(path: &Path, file: File) -> (TraceWriter, TraceOutcome) {
    let failure = Arc::new(Mutex::new(None));
    (
        TraceWriter {
            file,
            failure: Arc::clone(&failure),
        },
        TraceOutcome {
            path: path.to_path_buf(),
            failure,
        },
    )
}

impl TraceWriter {
    fn attempt(&mut self, write: impl FnOnce(&mut File) -> std::io::Result<()>) {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        if failure.is_none()
            && let Err(error) = write(&mut self.file)
        {
            *failure = Some(error);
        }
    }
}

impl Write for TraceWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.attempt(|file| file.write_all(bytes));
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.attempt(|file| file.flush().and_then(|()| file.sync_data().or(Ok(()))));
        Ok(())
    }
}

impl TraceOutcome {
    /// `Err` when a write to the trace file failed: "--trace: cannot write
    /// trace FILE: reason" (exit 1).
    pub fn check(&self) -> Result<(), CommandError> {
        let failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        match failure.as_ref() {
            None => Ok(()),
            Some(error) => Err(CommandError::Internal(format!(
                "--trace: cannot write trace {}: {error}",
                self.path.display()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_device_is_reported_not_panicked_on() {
        let path = Path::new("/dev/full");
        let file = File::options().write(true).open(path).expect("/dev/full");
        let (mut writer, outcome) = trace_writer(path, file);
        writer.write_all(&[b'x'; 100]).expect("kept, not returned");
        writer.flush().expect("kept, not returned");
        let error = outcome.check().expect_err("the write failed");
        let CommandError::Internal(message) = error else {
            panic!("an internal error");
        };
        assert!(message.contains("/dev/full"), "{message}");
    }
}
