//! Output hygiene shared by every command: the verbosity (`--quiet`,
//! `--verbose`) and progress bars on standard error, drawn only when
//! standard error is a terminal and the command is not quiet. Summaries go
//! to standard output, diagnostics and progress to standard error.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::session::progress::Progress;

/// How much a command prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verbosity {
    /// Results only: no progress, no per-item lines, no tables.
    Quiet,
    Normal,
    /// Also stage times and the queries each build executed.
    Verbose,
}

static VERBOSITY: OnceLock<Verbosity> = OnceLock::new();

/// Sets the process's verbosity once, from the command line.
pub fn set_verbosity(verbosity: Verbosity) {
    let _ = VERBOSITY.set(verbosity);
}

pub fn verbosity() -> Verbosity {
    VERBOSITY.get().copied().unwrap_or(Verbosity::Normal)
}

pub fn quiet() -> bool {
    verbosity() == Verbosity::Quiet
}

/// What a result line adds about the time it took (`text` with the
/// seconds, say " in 1.234 s"), or nothing under `--quiet`, whose output is
/// results only and the same on every run.
pub fn timing(text: std::fmt::Arguments) -> String {
    if quiet() {
        String::new()
    } else {
        text.to_string()
    }
}

pub fn verbose() -> bool {
    verbosity() == Verbosity::Verbose
}

/// Progress bars on standard error (one per stage), or nothing.
pub struct Bars {
    enabled: bool,
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// Bars that draw only on a terminal and when not quiet.
    pub fn for_terminal() -> Bars {
        Bars {
            enabled: std::io::stderr().is_terminal() && !quiet(),
            current: Mutex::new(None),
        }
    }

    /// Prints `line` to standard output without garbling a bar being drawn.
    pub fn print_line(&self, line: &str) {
        match self.current.lock() {
            Ok(current) => match current.as_ref() {
                Some(bar) => bar.suspend(|| print_line!("{line}")),
                None => print_line!("{line}"),
            },
            Err(_) => print_line!("{line}"),
        }
    }

    fn replace(&self, bar: Option<ProgressBar>) {
        if let Ok(mut current) = self.current.lock()
            && let Some(previous) = std::mem::replace(&mut *current, bar)
        {
            previous.finish_and_clear();
        }
    }
}

impl Progress for Bars {
    fn begin(&self, stage: &str, total: Option<u64>) {
        if !self.enabled {
            return;
        }
        let bar = match total {
            Some(total) => {
                let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix:>14} [{bar:32}] {human_pos}/{human_len} {elapsed}",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar
            }
            None => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template("{prefix:>14} {spinner} {elapsed}")
                {
                    bar.set_style(style);
                }
                bar.enable_steady_tick(Duration::from_millis(120));
                bar
            }
        };
        bar.set_prefix(stage.to_string());
        self.replace(Some(bar));
    }

    fn advance(&self, items: u64) {
        if let Ok(current) = self.current.lock()
            && let Some(bar) = current.as_ref()
        {
            bar.inc(items);
        }
    }

    fn end(&self) {
        self.replace(None);
    }
}

/// The observer commands give their sessions.
pub fn bars() -> Arc<dyn Progress> {
    Arc::new(Bars::for_terminal())
}
