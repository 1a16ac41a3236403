//! Shared CLI plumbing: loading the build query (default path, `--set`),
//! opening the persistent cache (`--cache`, `--no-cache`, `--cache-limit`),
//! rendering errors, and the exit codes (2 for bad input, 1 otherwise).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::arguments::{CacheArguments, QueryArguments};
use super::command_error::{CommandError, query_path};
use super::{fit, memory, unknown_override};
use crate::build_file::error::render_query_error;
use crate::build_file::{BuildQuery, CacheSettings, load_query};
use crate::cache::remote::{RemoteCache, RemoteSettings};
use crate::cache::signing::{
    PublicKey, SigningKey, TrustedKeys, environment_signing_key, local_key_path, local_signing_key,
};
use crate::cache::{PersistentCache, Signing};
use crate::layout::overrides::OverrideCause;
use crate::layout::planner::LayoutError;
use crate::model::graph::Graph;
use crate::model::weights::Weights;
use crate::output_file::{OutputFileError, write_atomically};
use crate::session::BackendError;
use crate::session::StageError;
use crate::session::searched_layouts::{LayoutSource, stale_pin};
use crate::session::{BuildError, BuildOutcome, Session, WeightsError};
use crate::sim::reference::evaluate_reference;

/// A first-half failure; `tiles` (the build's tile count, when known)
/// keeps "use more tiles" out of the advice when all are in use.
pub fn stage_error(error: StageError, tiles: Option<u32>) -> CommandError {
    match &error {
        // The model does not fit the machine: a property of the input.
        StageError::Layout(
            layout @ (LayoutError::WeightsDoNotFit { .. } | LayoutError::DoesNotFit(_)),
        ) => CommandError::Input(memory::layout_message(layout, tiles)),
        // The checkpoint or the calibration input cannot be computed on.
        StageError::Layout(LayoutError::Cost { .. } | LayoutError::Calibration(_)) => {
            CommandError::Input(format!("error: {error}"))
        }
        StageError::Layout(LayoutError::Override(problem)) => {
            CommandError::Input(format!("error: {problem}\nhelp: {}", problem.help()))
        }
        StageError::Expand(_) => CommandError::Internal(error.to_string()),
    }
}

/// A whole-build failure (see [`stage_error`]).
pub fn backend_error(error: BackendError, tiles: Option<u32>) -> CommandError {
    match error {
        BackendError::Stage(stage) => stage_error(stage, tiles),
        // The model does not fit the machine: a property of the input.
        BackendError::Placement(placement) => {
            CommandError::Input(memory::placement_message(&placement, tiles))
        }
        BackendError::Phase(phase) => CommandError::Internal(phase.to_string()),
    }
}

impl From<StageError> for CommandError {
    fn from(error: StageError) -> CommandError {
        stage_error(error, None)
    }
}

impl From<BackendError> for CommandError {
    fn from(error: BackendError) -> CommandError {
        backend_error(error, None)
    }
}

/// A new session for `query`, the query as built (its pins already hold
/// the searched plan: [`apply_searched_layouts`], so the session does not
/// look it up again), with progress bars, built through the whole
/// pipeline: what `superstep build` does without `--why`.
pub fn build_cold(
    arguments: &QueryArguments,
    query: &BuildQuery,
    cache: Option<Arc<PersistentCache>>,
) -> Result<(Session, BuildOutcome), CommandError> {
    let mut session = Session::as_written(query, cache);
    session.set_progress(super::progress::bars());
    let outcome = build_checked(&mut session, query, arguments)?;
    Ok((session, outcome))
}

/// Builds the whole pipeline of `session` for `query`, explaining a
/// failure as the command line shows it.
pub fn build_checked(
    session: &mut Session,
    query: &BuildQuery,
    arguments: &QueryArguments,
) -> Result<BuildOutcome, CommandError> {
    session
        .build()
        .map_err(|error| build_failure(session, query, arguments, error))
}

/// The first half and the phase groups of `session` (overrides checked),
/// failures explained as [`build_checked`] explains them.
pub fn build_phase_groups_checked(
    session: &mut Session,
    query: &BuildQuery,
    arguments: &QueryArguments,
) -> Result<BuildOutcome, CommandError> {
    session
        .build_phase_groups()
        .map_err(|error| build_failure(session, query, arguments, error))
}

/// A build failure of `session` as the command line explains it: an
/// override naming no phase points at its entry; a model that does not fit
/// says what would (`fit`); other input errors exit 2, the rest 1.
pub fn build_failure(
    session: &mut Session,
    query: &BuildQuery,
    arguments: &QueryArguments,
    error: BuildError,
) -> CommandError {
    let tiles = Some(query.machine.tiles);
    match error {
        BuildError::UnknownOverride(unknown) => {
            unknown_override::unknown_override_error(query, arguments, &unknown)
        }
        BuildError::Backend(BackendError::Stage(error)) => {
            front_error(session, query, arguments, error)
        }
        BuildError::Backend(BackendError::Placement(placement)) => {
            let failure = fit::Failure {
                shortage: memory::placement_shortage(&placement, tiles),
                override_op: None,
            };
            fit::does_not_fit(session, query, arguments, failure, None)
        }
        BuildError::Backend(error) => backend_error(error, tiles),
    }
}

/// A first-half failure of [`build_checked`]: a model that does not fit
/// (the planner's shortage, or a layout override that fits a smaller batch
/// only) is explained by what would fit; an override is pointed back at
/// its entry.
fn front_error(
    session: &mut Session,
    query: &BuildQuery,
    arguments: &QueryArguments,
    error: StageError,
) -> CommandError {
    let tiles = Some(query.machine.tiles);
    match error {
        StageError::Layout(LayoutError::Override(problem)) => {
            let original = layout_override_error(arguments, &problem, session.graph());
            // An override that cannot apply to this configuration at all
            // (its op, or its shape on these tiles) is reported now: only
            // one that does not fit memory is worth any fit probing.
            if problem.cause != OverrideCause::Memory {
                return original;
            }
            let failure = fit::Failure {
                shortage: memory::Shortage {
                    message: problem.to_string(),
                    help: problem.help(),
                },
                override_op: Some(problem.op.clone()),
            };
            fit::does_not_fit(session, query, arguments, failure, Some(original))
        }
        StageError::Layout(layout) => match memory::layout_shortage(&layout, tiles) {
            Some(shortage) => {
                let failure = fit::Failure {
                    shortage,
                    override_op: None,
                };
                fit::does_not_fit(session, query, arguments, failure, None)
            }
            None => stage_error(StageError::Layout(layout), tiles),
        },
        error => stage_error(error, tiles),
    }
}

/// A layout override the planner refused, pointed back at its entry.
pub fn layout_override_error(
    arguments: &QueryArguments,
    problem: &crate::layout::overrides::OverrideError,
    graph: &Graph,
) -> CommandError {
    let op_is_wrong = !has_heavy_op(graph, &problem.op);
    let error = crate::build_file::layout_override_error(
        &query_path(arguments),
        &arguments.sets,
        problem,
        op_is_wrong,
    );
    CommandError::Diagnostic(render_query_error(&error))
}

/// Whether `graph` has a matrix product or attention named `op`.
fn has_heavy_op(graph: &Graph, op: &str) -> bool {
    graph.op_ids().any(|id| {
        let candidate = graph.op(id);
        candidate.name == op
            && matches!(
                candidate.kind,
                crate::model::graph::OpKind::MatMul { .. }
                    | crate::model::graph::OpKind::Attention { .. }
            )
    })
}

pub fn load(arguments: &QueryArguments) -> Result<BuildQuery, CommandError> {
    load_query(&query_path(arguments), &arguments.sets)
        .map_err(|error| CommandError::Diagnostic(render_query_error(&error)))
}

pub fn artifacts_directory(query: &BuildQuery) -> PathBuf {
    Path::new(&query.outputs.directory).join(&query.name)
}

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), CommandError> {
    let mut text = serde_json::to_string_pretty(value).map_err(|error| {
        CommandError::Internal(format!("serialising {}: {error}", path.display()))
    })?;
    text.push('\n');
    write_output(path, text.as_bytes())
}

/// Writes a file a command was asked for, whole ([`write_atomically`]): a
/// link or folder in its place is an input error (exit 2), a failed write
/// (a full disk) an error naming the file (exit 1).
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), CommandError> {
    write_atomically(path, bytes).map_err(output_error)
}

/// The command error of a file that could not be written.
pub fn output_error(error: OutputFileError) -> CommandError {
    if error.is_input() {
        CommandError::Input(format!("error: {error}"))
    } else {
        CommandError::Internal(error.to_string())
    }
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
    settings: &CacheSettings,
) -> Result<Option<Arc<PersistentCache>>, CommandError> {
    open_persistent_cache(&arguments.cache, outputs, settings)
}

/// Opens the persistent cache `--cache`, `--no-cache` and `--cache-limit`
/// ask for, with the remote tier `--cache-remote` (or the build file's
/// `cache.remote`) names behind it; `outputs` is the build's outputs
/// folder (for the default).
pub fn open_persistent_cache(
    arguments: &CacheArguments,
    outputs: &Path,
    settings: &CacheSettings,
) -> Result<Option<Arc<PersistentCache>>, CommandError> {
    if arguments.no_cache {
        return Ok(None);
    }
    let remote = match (&arguments.cache_remote, &settings.remote) {
        (Some(url), _) => Some((url.as_str(), "--cache-remote")),
        (None, Some(url)) => Some((url.as_str(), "cache.remote")),
        (None, None) => None,
    };
    let remote = match remote {
        None => None,
        Some((url, field)) => Some(
            RemoteCache::open(
                url,
                RemoteSettings {
                    timeout: Duration::from_millis(settings.remote_timeout_ms),
                    deadline: Duration::from_millis(settings.remote_deadline_ms),
                    ..RemoteSettings::default()
                },
            )
            .map_err(|error| CommandError::Input(format!("error: {field}: {error}")))?,
        ),
    };
    let signing = cache_signing(arguments, settings)?;
    let local = match &arguments.cache {
        Some(directory) => PersistentCache::open(directory, arguments.cache_limit << 20)
            .map_err(|error| CommandError::Input(format!("error: --cache: {error}"))),
        // The user named no cache folder: the one in the outputs folder is
        // at fault, so the message names `outputs.directory`.
        None => PersistentCache::open(&default_cache_directory(outputs), arguments.cache_limit << 20)
            .map_err(|error| {
                CommandError::Input(format!(
                    "error: outputs.directory: the default cache folder cannot be used: {error}\n  \
                     help: set outputs.directory to a writable folder, name another with --cache DIR, \
                     or pass --no-cache"
                ))
            }),
    }?;
    let local = local.with_signing(signing);
    let cache = Arc::new(match remote {
        Some(remote) => local.with_remote(remote),
        None => local,
    });
    unfinished_caches().push(cache.clone());
    Ok(Some(cache))
}

/// The caches this process opened and no [`finish_cache`] has finished
/// yet: a command that fails after using its cache leaves it here, and
/// [`finish_unfinished_caches`] ends it after the error is printed.
fn unfinished_caches() -> std::sync::MutexGuard<'static, Vec<Arc<PersistentCache>>> {
    static UNFINISHED: std::sync::Mutex<Vec<Arc<PersistentCache>>> =
        std::sync::Mutex::new(Vec::new());
    UNFINISHED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes `cache` off the caches the end of the process finishes: its
/// command reports it (`watch` after every build, [`finish_cache`] once).
pub fn reports_its_own_cache(cache: &PersistentCache) {
    unfinished_caches().retain(|open| !std::ptr::eq(Arc::as_ptr(open), cache));
}

/// Finishes every cache a command opened and left unfinished (it failed
/// after using it), so that the cache's warnings and its line come last on
/// standard error, after the error itself, as on success.
pub fn finish_unfinished_caches() {
    let caches = std::mem::take(&mut *unfinished_caches());
    for cache in caches {
        finish_cache(Some(&cache));
    }
}

/// Who signs the cache's entries and whose signatures it trusts: a
/// writer's key from the environment, else the per-user local key (made on
/// first use; without one, entries are unsigned and checked as ever), and
/// the keys `--cache-trusted-key` and `cache.trusted_keys` list. A key
/// that cannot be parsed is an input error naming where it came from.
fn cache_signing(
    arguments: &CacheArguments,
    settings: &CacheSettings,
) -> Result<Signing, CommandError> {
    let writer = environment_signing_key()
        .map_err(|error| CommandError::Input(format!("error: {error}")))?;
    let mut listed = Vec::new();
    for text in &arguments.cache_trusted_keys {
        listed.push(
            PublicKey::parse(text, "--cache-trusted-key")
                .map_err(|error| CommandError::Input(format!("error: {error}")))?,
        );
    }
    for text in &settings.trusted_keys {
        listed.push(
            PublicKey::parse(text, "cache.trusted_keys")
                .map_err(|error| CommandError::Input(format!("error: {error}")))?,
        );
    }
    let local = local_key_path().and_then(|path| match local_signing_key(&path) {
        Ok(key) => Some(key),
        Err(error) => {
            tracing::debug!("no local cache key ({error}); local entries are checked as unsigned");
            None
        }
    });
    let is_writer = writer.is_some();
    let local_public = local.as_ref().map(SigningKey::public);
    let (signer, also_trusted) = match writer {
        Some(writer) => (Some(writer), local_public),
        None => (local, None),
    };
    Ok(Signing {
        signer,
        writer: is_writer,
        listed: TrustedKeys::new(listed),
        also_trusted: also_trusted.into_iter().collect(),
    })
}

/// A session for `query` over the cache the arguments ask for, its layouts
/// the plan a search kept for the configuration under the query's pins;
/// `query` becomes the query as built ([`apply_searched_layouts`]), and the
/// `layouts:` line goes to standard error unless `--quiet`, so that the
/// command's own output is unchanged.
pub fn open_session(
    arguments: &QueryArguments,
    query: &mut BuildQuery,
) -> Result<Session, CommandError> {
    check_pins(arguments, query)?;
    let cache = open_cache(arguments, &query.outputs.directory, &query.cache)?;
    let mut session = Session::with_cache(query, cache);
    let source = session.layout_source();
    *query = session.effective_query(query);
    if !super::progress::quiet() {
        eprintln!("{}", source.line());
    }
    session.set_progress(super::progress::bars());
    Ok(session)
}

/// A session for `query` as written: no searched layouts looked up
/// (`superstep search` searches the configuration itself).
pub fn open_session_as_written(
    arguments: &QueryArguments,
    query: &BuildQuery,
) -> Result<Session, CommandError> {
    let cache = open_cache(arguments, &query.outputs.directory, &query.cache)?;
    let mut session = Session::as_written(query, cache);
    session.set_progress(super::progress::bars());
    Ok(session)
}

/// Exit 2 for a pin of `query` that cannot apply to its configuration
/// (`crate::session::searched_layouts::stale_pin`), pointed at its entry:
/// checked before anything is compiled.
pub fn check_pins(arguments: &QueryArguments, query: &BuildQuery) -> Result<(), CommandError> {
    match stale_pin(query) {
        Some(stale) => Err(CommandError::Diagnostic(render_query_error(
            &crate::build_file::layout_override_error(
                &query_path(arguments),
                &arguments.sets,
                &stale.problem,
                stale.op_is_wrong,
            ),
        ))),
        None => Ok(()),
    }
}

/// Makes `query` the query as built: the plan a search kept in `cache` for
/// its configuration under the query's own pins (asked of a session, whose
/// query of the configuration looks the plan up), and says which layouts
/// that is. A session later made from the returned query builds the same
/// layouts (its pins are then the whole plan).
pub fn apply_searched_layouts(
    query: &mut BuildQuery,
    cache: Option<&Arc<PersistentCache>>,
) -> LayoutSource {
    let session = Session::with_cache(query, cache.cloned());
    let source = session.layout_source();
    *query = session.effective_query(query);
    source
}

/// The end of every command that used the cache: evicts beyond its limit,
/// prints the cache's warnings and then its one-line summary on standard
/// error, as the command's last line (the summary is left out under
/// `--quiet`, the warnings never are).
pub fn finish_cache(cache: Option<&PersistentCache>) {
    let Some(cache) = cache else {
        return;
    };
    reports_its_own_cache(cache);
    let report = cache.finish();
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    if !super::progress::quiet() {
        eprintln!("{report}");
    }
}

/// The build's weights (seeded, or read from its SafeTensors file) from the
/// session; a file that cannot be used is an input error.
pub fn build_weights(session: &Session) -> Result<Arc<Weights>, CommandError> {
    session.weights().map_err(|error| {
        CommandError::Input(match &error {
            WeightsError::File { path, message } => format!(
                "error: workload.weights.safetensors = \"{}\": {message}\n  \
                 help: name a SafeTensors file of this model's weights, or use weights = {{ seeded = 1 }}",
                path.display()
            ),
            WeightsError::Seeded { message } => format!("error: {message}"),
        })
    })
}

/// The FP32 reference output of the model on `weights` and how long it
/// took, shown as the "FP32 reference" stage of `progress`.
pub fn reference_output(
    graph: &Graph,
    weights: &Weights,
    progress: &dyn crate::session::progress::Progress,
) -> Result<(Vec<f32>, std::time::Duration), CommandError> {
    let started = std::time::Instant::now();
    progress.begin("FP32 reference", None);
    let reference = evaluate_reference(graph, weights);
    progress.end();
    let reference =
        reference.map_err(|error| CommandError::Internal(format!("reference: {error}")))?;
    Ok((reference, started.elapsed()))
}

/// A comparison is an agreement only when every element of both outputs is
/// a finite number: a non-finite output never prints as agreement and is an
/// error (exit 1).
pub fn agreement_result(agreement: &crate::sim::compare::Agreement) -> Result<(), CommandError> {
    if agreement.non_finite == 0 {
        return Ok(());
    }
    Err(CommandError::Internal(format!(
        "the output has {} non-finite elements (NaN or infinity) of {}: it does not agree with \
         the reference, whatever its cosine over the finite ones",
        agreement.non_finite, agreement.elements
    )))
}

/// Refuses a package file (read with `header`) that a build of another
/// query, other `--set` arguments or another compiler version wrote:
/// `flag` is how the command names the file (`--package`, or nothing).
pub fn check_package_build(
    flag: &str,
    path: &std::path::Path,
    header: &crate::package::file::PackageHeader,
    query: &BuildQuery,
) -> Result<(), CommandError> {
    if header.build == crate::build_file::package_build_key(query) {
        return Ok(());
    }
    Err(CommandError::Input(format!(
        "error: {flag}{}: the file was written by a build of another query or another compiler \
         version than {} with these --set arguments; build it with the same query (superstep \
         build QUERY --set ...) or give the query and --set arguments it was built with",
        path.display(),
        query.name
    )))
}
