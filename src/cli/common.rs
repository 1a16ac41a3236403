//! Shared CLI plumbing: loading the build query (default path, `--set`),
//! opening the persistent cache (`--cache`, `--no-cache`, `--cache-limit`),
//! rendering errors, and the exit codes (2 for bad input, 1 otherwise).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use super::{DEFAULT_QUERY, QueryArguments};
use crate::cache::PersistentCache;
use crate::driver::Session;
use crate::layout::planner::LayoutError;
use crate::model::graph::Graph;
use crate::model::weights::Weights;
use crate::pipeline::load_weights;
use crate::queries::backend::BackendError;
use crate::queries::stages::StageError;
use crate::query::{BuildQuery, QueryError, load_query};
use crate::sim::reference::evaluate_reference;

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

pub fn render_query_error(error: &QueryError) -> String {
    let mut rendered = String::new();
    let handler = miette::GraphicalReportHandler::new();
    if handler.render_report(&mut rendered, error).is_err() {
        rendered = error.to_string();
    }
    rendered
}

impl From<StageError> for CommandError {
    fn from(error: StageError) -> CommandError {
        match error {
            // The model does not fit the machine: a property of the input.
            StageError::Layout(LayoutError::WeightsDoNotFit { .. } | LayoutError::Cost { .. }) => {
                CommandError::Input(format!("error: {error}"))
            }
            StageError::Expand(_) => CommandError::Internal(error.to_string()),
        }
    }
}

impl From<BackendError> for CommandError {
    fn from(error: BackendError) -> CommandError {
        match error {
            BackendError::Stage(stage) => CommandError::from(stage),
            // The model does not fit the machine: a property of the input.
            BackendError::Placement(placement) => {
                CommandError::Input(format!("error: {placement}"))
            }
            BackendError::Phase(phase) => CommandError::Internal(phase.to_string()),
        }
    }
}

pub fn query_path(arguments: &QueryArguments) -> PathBuf {
    arguments
        .query
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_QUERY))
}

pub fn load(arguments: &QueryArguments) -> Result<BuildQuery, CommandError> {
    load_query(&query_path(arguments), &arguments.sets)
        .map_err(|error| CommandError::Input(render_query_error(&error)))
}

pub fn artifacts_directory(query: &BuildQuery) -> PathBuf {
    Path::new(&query.outputs.directory).join(&query.name)
}

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), CommandError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| {
            CommandError::Internal(format!("creating {}: {error}", parent.display()))
        })?;
    }
    let mut text = serde_json::to_string_pretty(value).map_err(|error| {
        CommandError::Internal(format!("serialising {}: {error}", path.display()))
    })?;
    text.push('\n');
    std::fs::write(path, text)
        .map_err(|error| CommandError::Internal(format!("writing {}: {error}", path.display())))
}

/// The cache folder used when `--cache` is not given: `.cache` in the
/// build's output folder (`artifacts/.cache` by default).
pub fn default_cache_directory(outputs: &Path) -> PathBuf {
    outputs.join(".cache")
}

/// Opens the persistent cache the arguments ask for (none with
/// `--no-cache`). A folder that cannot be used is an input error.
pub fn open_cache(
    arguments: &QueryArguments,
    outputs: &Path,
) -> Result<Option<Arc<PersistentCache>>, CommandError> {
    if arguments.no_cache {
        return Ok(None);
    }
    let directory = arguments
        .cache
        .clone()
        .unwrap_or_else(|| default_cache_directory(outputs));
    PersistentCache::open(&directory, arguments.cache_limit << 20)
        .map(|cache| Some(Arc::new(cache)))
        .map_err(|error| CommandError::Input(format!("error: --cache: {error}")))
}

/// A session for `query` with the cache the arguments ask for.
pub fn open_session(
    arguments: &QueryArguments,
    query: &BuildQuery,
) -> Result<Session, CommandError> {
    let cache = open_cache(arguments, &query.outputs.directory)?;
    Ok(Session::with_cache(query, cache))
}

/// Prints the cache's warnings (to standard error), evicts beyond its
/// limit, and returns a one-line summary of its use.
pub fn finish_cache(cache: Option<&PersistentCache>) -> Option<String> {
    let report = cache?.finish();
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    Some(report.to_string())
}

/// The build's weights (seeded, or read from its SafeTensors file); a file
/// that cannot be used is an input error.
pub fn load_build_weights(query: &BuildQuery, graph: &Graph) -> Result<Weights, CommandError> {
    load_weights(query, graph).map_err(|error| CommandError::Input(format!("error: {error}")))
}

/// The FP32 reference output of the model on `weights`.
pub fn reference_output(graph: &Graph, weights: &Weights) -> Result<Vec<f32>, CommandError> {
    evaluate_reference(graph, weights)
        .map_err(|error| CommandError::Internal(format!("reference: {error}")))
}
