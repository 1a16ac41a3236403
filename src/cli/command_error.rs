//! A command's failure and its exit code (2 for bad input, 1 otherwise),
//! and the build file a command reads: the leaf every command file and the
//! shared plumbing (`common.rs`) import.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{DEFAULT_QUERY, QueryArguments};

/// A command's failure, with its exit code.
#[derive(Debug)]
pub enum CommandError {
    /// Bad user input (build file, flags, a model that does not fit): exit 2.
    Input(String),
    /// Anything else: exit 1.
    Internal(String),
}

impl CommandError {
    pub fn exit(&self) -> ExitCode {
        match self {
            CommandError::Input(message) => {
                eprintln!("{message}");
                ExitCode::from(2)
            }
            CommandError::Internal(message) => {
                eprintln!("error: {message}");
                ExitCode::from(1)
            }
        }
    }
}

/// The build file the arguments name, or the default build.
pub fn query_path(arguments: &QueryArguments) -> PathBuf {
    arguments
        .query
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_QUERY))
}
