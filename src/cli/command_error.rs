//! A command's failure and its exit code (2 for bad input, 1 otherwise),
//! and the build file a command reads: the leaf every command file and the
//! shared plumbing (`common.rs`) import.

use std::path::PathBuf;
use std::process::ExitCode;

use super::arguments::{DEFAULT_QUERY, QueryArguments};

/// A command's failure, with its exit code.
#[derive(Debug)]
pub enum CommandError {
    /// Bad user input with a source to point into (a build file, a `--set`):
    /// already rendered by miette with its spans (`render_query_error`);
    /// exit 2.
    Diagnostic(String),
    /// Other bad input (flags, files, a model that does not fit): exit 2.
    /// The text is `MESSAGE` or `error: MESSAGE`, optionally followed by
    /// `\n  help: HELP`.
    Input(String),
    /// Anything else: exit 1.
    Internal(String),
}

impl CommandError {
    /// Prints the error on standard error in the one style every command
    /// uses (miette's: `  × MESSAGE`, `  help: HELP`) and gives the exit
    /// code.
    pub fn exit(&self) -> ExitCode {
        match self {
            CommandError::Diagnostic(rendered) => {
                eprintln!("{}", rendered.trim_end());
                ExitCode::from(2)
            }
            CommandError::Input(message) => {
                eprintln!("{}", render_diagnostic(message));
                ExitCode::from(2)
            }
            CommandError::Internal(message) => {
                eprintln!("{}", render_diagnostic(message));
                ExitCode::from(1)
            }
        }
    }

    /// The text `exit` prints.
    pub fn rendered(&self) -> String {
        match self {
            CommandError::Diagnostic(rendered) => rendered.trim_end().to_string(),
            CommandError::Input(message) | CommandError::Internal(message) => {
                render_diagnostic(message)
            }
        }
    }
}

/// `message` (`MESSAGE` or `error: MESSAGE`, then optionally `\n  help:
/// HELP`) as a miette diagnostic without a source, rendered like the build
/// file's errors (lines are not wrapped, so keys and paths stay whole).
pub fn render_diagnostic(message: &str) -> String {
    let text = message.trim_end();
    let text = text.strip_prefix("error: ").unwrap_or(text);
    let (text, help) = match text.split_once("\n  help: ") {
        Some((text, help)) => (text, Some(help)),
        None => (text, None),
    };
    let mut diagnostic = miette::MietteDiagnostic::new(text);
    if let Some(help) = help {
        diagnostic = diagnostic.with_help(help);
    }
    let mut rendered = String::new();
    let handler = miette::GraphicalReportHandler::new().with_wrap_lines(false);
    if handler.render_report(&mut rendered, &diagnostic).is_err() {
        return format!("error: {message}");
    }
    rendered.trim_end().to_string()
}

/// The build file the arguments name, or the default build.
pub fn query_path(arguments: &QueryArguments) -> PathBuf {
    arguments
        .query
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_QUERY))
}
