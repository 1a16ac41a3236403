//! Standard output for every command. Lines go through [`print_line!`] and
//! [`print_text!`] (never `println!`, which panics when the reader of a pipe
//! has gone): a closed pipe (`superstep build | head -1`) ends the output
//! quietly, later lines are dropped and the command still finishes its
//! files; any other write error (standard output on a full disk, `>
//! /dev/full`) is kept, the command finishes, and [`finish`] reports it as
//! an error naming standard output.
//!
//! Under `--json` a command's text is replaced by one JSON document
//! ([`set_json_document`], [`write_document`]): its lines are dropped and
//! only the document is written.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// What has happened to standard output so far.
#[derive(Debug, Default)]
struct OutputState {
    /// The reader went away (EPIPE): nothing more is written.
    closed: bool,
    /// The first write error other than a closed pipe.
    failure: Option<std::io::Error>,
}

static STATE: Mutex<OutputState> = Mutex::new(OutputState {
    closed: false,
    failure: None,
});

/// Whether the command prints one JSON document instead of its text.
static JSON_DOCUMENT: AtomicBool = AtomicBool::new(false);

/// From now on the command's text lines are dropped: it prints one JSON
/// document with [`write_document`].
pub fn set_json_document() {
    JSON_DOCUMENT.store(true, Ordering::Relaxed);
}

/// Writes `value` as the command's JSON document (pretty, one newline).
pub fn write_document(value: &impl serde::Serialize) -> Result<(), serde_json::Error> {
    let text = serde_json::to_string_pretty(value)?;
    let mut state = state();
    if state.closed || state.failure.is_some() {
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    let result = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.write_all(b"\n"));
    record(&mut state, result);
    Ok(())
}

fn state() -> std::sync::MutexGuard<'static, OutputState> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes `arguments` to standard output (with a newline when `newline`),
/// unless it has closed or failed before.
pub fn write(arguments: fmt::Arguments<'_>, newline: bool) {
    let mut state = state();
    if state.closed || state.failure.is_some() || JSON_DOCUMENT.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let result = stdout.write_fmt(arguments).and_then(|()| {
        if newline {
            stdout.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    record(&mut state, result);
}

fn record(state: &mut OutputState, result: std::io::Result<()>) {
    match result {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::BrokenPipe => state.closed = true,
        Err(error) => state.failure = Some(error),
    }
}

/// Whether the reader of standard output has gone (a command may skip
/// printing work nobody will read, never its files).
pub fn closed() -> bool {
    state().closed
}

/// The first write to standard output that failed for another reason than
/// a closed pipe.
#[derive(Debug, thiserror::Error)]
#[error("writing to standard output: {0}")]
pub struct WriteFailure(std::io::Error);

/// Flushes standard output; `Err` names the first write error that was not
/// a closed pipe ("writing to standard output: No space left on device").
pub fn finish() -> Result<(), WriteFailure> {
    let mut state = state();
    if !state.closed && state.failure.is_none() {
        let result = std::io::stdout().lock().flush();
        record(&mut state, result);
    }
    match &state.failure {
        Some(error) => Err(WriteFailure(std::io::Error::new(
            error.kind(),
            error.to_string(),
        ))),
        None => Ok(()),
    }
}

/// `println!` for commands: see the module header.
macro_rules! print_line {
    () => {
        $crate::cli::stdout::write(format_args!(""), true)
    };
    ($($argument:tt)*) => {
        $crate::cli::stdout::write(format_args!($($argument)*), true)
    };
}

/// A line about the run rather than its result ("wrote FILE"): standard
/// output like [`print_line!`], and nothing under `--quiet`, which prints
/// results only.
macro_rules! print_note {
    ($($argument:tt)*) => {
        if !$crate::cli::progress::quiet() {
            $crate::cli::stdout::write(format_args!($($argument)*), true)
        }
    };
}

/// `print!` for commands: see the module header.
macro_rules! print_text {
    ($($argument:tt)*) => {
        $crate::cli::stdout::write(format_args!($($argument)*), false)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_quiet_and_other_errors_are_kept() {
        let mut state = OutputState::default();
        record(&mut state, Err(std::io::Error::from(ErrorKind::BrokenPipe)));
        assert!(state.closed);
        assert!(state.failure.is_none());
        let mut state = OutputState::default();
        record(
            &mut state,
            Err(std::io::Error::from(ErrorKind::StorageFull)),
        );
        assert!(!state.closed);
        assert_eq!(
            state.failure.as_ref().map(std::io::Error::kind),
            Some(ErrorKind::StorageFull)
        );
    }
}
