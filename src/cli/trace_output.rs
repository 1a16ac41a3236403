//! The `--trace` file's writer. The Chrome trace layer writes from its own
//! thread and panics on a write error; this writer keeps the first error
//! instead (later writes are dropped), so that a trace that could not be
//! written (`--trace /dev/full`) is reported by the command as an error
//! naming the file, never a panic in another thread and an exit code 0.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::command_error::CommandError;

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
