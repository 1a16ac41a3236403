//! Cancelling a build from another thread: the flag a database shares with
//! its clones, and the handle (`Canceller`) the thread that started the
//! build keeps.
//!
//! Salsa checks for cancellation at every query call and reports each
//! check to the database's event callback (`WillCheckCancellation`); the
//! callback of `CompilerDatabase` unwinds there with `salsa::Cancelled`
//! (by `resume_unwind`, as salsa does: no panic message) once the build is
//! cancelled. The callback is shared by every clone, so the build's
//! fan-out threads stop at their next query as well; long computations
//! inside one query call `db.unwind_if_revision_cancelled()` between units
//! of work (salsa's check, which reports to the callback).
//!
//! Salsa's own cancellation by a setter on the owning handle cannot cancel
//! a build: the build itself writes (it evicts schedules from the memo
//! between stages), which needs the one owning handle, so the build thread
//! owns the database and the thread that may cancel holds a `Canceller`.
//! A `Canceller` cancels only the build it was armed for: once that build
//! has ended, it does nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What a database and its clones share about cancelling the current build.
#[derive(Debug, Default)]
pub struct BuildCancellation {
    /// Whether the armed build was cancelled.
    cancelled: AtomicBool,
    builds: Mutex<Builds>,
}

/// Which build is armed.
#[derive(Debug, Default)]
struct Builds {
    /// Builds armed so far (each build's number is the count at arming).
    armed_so_far: u64,
    /// The armed build's number (0: none is armed).
    armed: u64,
}

impl BuildCancellation {
    /// Starts a cancellable build.
    pub fn arm(self: &Arc<Self>) -> Canceller {
        let mut builds = self.lock_builds();
        builds.armed_so_far += 1;
        let build = builds.armed_so_far;
        builds.armed = build;
        self.cancelled.store(false, Ordering::SeqCst);
        Canceller {
            cancellation: self.clone(),
            build,
        }
    }

    /// Ends the armed build: its `Canceller` does nothing from now on, and
    /// a cancel that came after the build's last check is dropped.
    pub fn disarm(&self) {
        self.lock_builds().armed = 0;
        self.cancelled.store(false, Ordering::SeqCst);
    }

    /// Whether the armed build was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Unwinds with `salsa::Cancelled` when the armed build was cancelled.
    pub fn unwind_if_cancelled(&self) {
        if self.is_cancelled() {
            std::panic::resume_unwind(Box::new(salsa::Cancelled::Local));
        }
    }

    fn cancel(&self, build: u64) {
        // Under the lock, so that a build disarmed meanwhile stays clear.
        let builds = self.lock_builds();
        if builds.armed == build {
            self.cancelled.store(true, Ordering::SeqCst);
        }
    }

    fn lock_builds(&self) -> std::sync::MutexGuard<'_, Builds> {
        self.builds
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Cancels one armed build from any thread.
#[derive(Clone, Debug)]
pub struct Canceller {
    cancellation: Arc<BuildCancellation>,
    build: u64,
}

impl Canceller {
    /// Makes every handle of the build unwind with `salsa::Cancelled` at
    /// its next query or cancellation check (nothing once it has ended).
    pub fn cancel(&self) {
        self.cancellation.cancel(self.build);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::BuildCancellation;

    #[test]
    fn a_canceller_cancels_only_the_build_it_was_armed_for() {
        let cancellation = Arc::new(BuildCancellation::default());
        let first = cancellation.arm();
        first.cancel();
        assert!(cancellation.is_cancelled());
        let caught = salsa::Cancelled::catch(|| cancellation.unwind_if_cancelled());
        assert!(caught.is_err());
        cancellation.disarm();
        assert!(!cancellation.is_cancelled());
        first.cancel();
        assert!(
            !cancellation.is_cancelled(),
            "a stale canceller does nothing"
        );
        let second = cancellation.arm();
        first.cancel();
        assert!(!cancellation.is_cancelled());
        second.cancel();
        assert!(cancellation.is_cancelled());
    }
}
