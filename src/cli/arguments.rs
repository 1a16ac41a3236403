//! The arguments every command shares: what to compile (the build query
//! file, `--set` overrides, `--calibration`) and where per-phase results
//! persist (the cache options), with the default build query. The
//! commands' own files import them from here, not through `cli`, which
//! declares those files.

use std::path::PathBuf;

/// The default build: SigLIP so400m on the C600.
pub const DEFAULT_QUERY: &str = "queries/siglip-so400m.toml";

/// What to compile: a build query file and field overrides.
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArguments {
    /// The build query file (default: queries/siglip-so400m.toml).
    #[arg(value_name = "QUERY")]
    pub query: Option<PathBuf>,
    /// Override one field of the build query, e.g. `--set workload.layers=2` or
    /// `--set machine.tiles=64`. Repeatable, one key each (a key given twice is an error).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Calibrate the scales of FP8 activations on this input instead of the
    /// build's seeded input: a PNG or JPEG photo (preprocessed as `--image`
    /// is) or a .npy array of pixels or patches (as `--input` takes). The
    /// same as `--set workload.calibration=FILE` (a `--set
    /// workload.calibration=...` takes its place); read when
    /// some product takes FP8 inputs (planning.matrix_inputs = "fp8") and
    /// planning.activation_scale = "calibrate" (the default). Not the kernel
    /// cost model's calibration file (machine.calibration).
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
    pub calibration: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArguments,
}

impl QueryArguments {
    /// Folds `--calibration FILE` into the `--set` overrides, first, unless
    /// a `--set workload.calibration` names the input instead (each key is
    /// set once): every reader of `sets` (loading, the build record,
    /// `--why`, `watch`) sees one list. The flag is taken, so folding twice
    /// adds nothing.
    pub fn fold_calibration(&mut self) {
        fold_calibration(&mut self.sets, self.calibration.take());
    }
}

/// `--calibration FILE` as the first of `sets`, unless one of them sets
/// `workload.calibration` already.
pub fn fold_calibration(sets: &mut Vec<String>, file: Option<PathBuf>) {
    let named = |set: &String| {
        set.split_once('=')
            .is_some_and(|(key, _)| key.trim() == "workload.calibration")
    };
    if let Some(file) = file
        && !sets.iter().any(named)
    {
        sets.insert(0, calibration_set(&file));
    }
}

/// `workload.calibration=FILE` as a `--set` argument, the path a TOML
/// string (quoted and escaped, so any file name reads back unchanged).
pub fn calibration_set(file: &std::path::Path) -> String {
    let path = toml::Value::String(file.to_string_lossy().into_owned());
    format!("workload.calibration={path}")
}

/// Where per-phase results persist between builds: shown under their own
/// heading, after each command's own options.
#[derive(Debug, Clone, clap::Args)]
pub struct CacheArguments {
    /// The persistent cache of per-phase results (schedules, rows) and
    /// placements, shared by every build that uses the same folder
    /// (default: OUTPUTS/.cache, i.e. artifacts/.cache). Entries are keyed
    /// by content (the phase problem, the effective policy and width) and by
    /// the cache format and compiler versions; an unusable entry is
    /// recomputed with a warning.
    #[arg(
        long,
        help_heading = "Cache options",
        value_name = "DIR",
        conflicts_with = "no_cache",
        verbatim_doc_comment
    )]
    pub cache: Option<PathBuf>,
    /// Neither read nor write the persistent cache.
    #[arg(long, help_heading = "Cache options")]
    pub no_cache: bool,
    /// Size limit of the persistent cache in MiB; after a build the least
    /// recently used entries beyond it are evicted.
    #[arg(long, value_name = "MIB", help_heading = "Cache options", default_value_t = 2048,
          value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    pub cache_limit: u64,
    /// A shared remote tier behind the local cache (overrides the build
    /// file's cache.remote): http(s)://HOST/PATH, any server that takes PUT
    /// and GET (nginx with dav_methods PUT, a Bazel HTTP cache), or
    /// s3://BUCKET/PREFIX (credentials from the usual AWS environment).
    /// Local misses are read from it, every entry checked like a local
    /// one; new entries are uploaded in the background. A server that is
    /// down, slow or wrong never fails a build: it degrades to local work
    /// with one summary line. A bearer token, if the server needs one,
    /// comes from SUPERSTEP_CACHE_TOKEN.
    #[arg(
        long,
        help_heading = "Cache options",
        value_name = "URL",
        conflicts_with = "no_cache",
        verbatim_doc_comment
    )]
    pub cache_remote: Option<String>,
    /// Trust cache entries signed by this public key (ed25519:HEX, as
    /// `superstep cache keygen` prints it; repeatable; adds to the build
    /// file's cache.trusted_keys). An entry of any kind a trusted key
    /// signed is used without its check for meaning, and with any key
    /// listed every kind is fetched from the remote tier; anything else is
    /// checked or recomputed as without keys. Writers sign with the secret
    /// in SUPERSTEP_CACHE_SIGNING_KEY (or the file named by
    /// SUPERSTEP_CACHE_SIGNING_KEY_FILE).
    #[arg(
        long = "cache-trusted-key",
        help_heading = "Cache options",
        value_name = "KEY",
        conflicts_with = "no_cache",
        verbatim_doc_comment
    )]
    pub cache_trusted_keys: Vec<String>,
}
