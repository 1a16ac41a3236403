//! Build queries: what to compile, read from a TOML file plus `--set KEY=VALUE`
//! overrides, and resolved into plain, validated, hashable settings
//! (`BuildQuery`) that become the compiler's salsa inputs.
//!
//! This module owns the load API and the resolved types. It must not plan,
//! schedule or touch artifacts; it never panics on any input and never clamps
//! a value silently: anything out of range is a `QueryError` that points at
//! the value (or names the `--set` argument) and says what to change.
//!
//! The pipeline is: TOML syntax (`toml::de::DeTable`) -> known keys and types
//! (`validate::check_structure`) -> serde layer with spans (`schema`) ->
//! `--set` overrides (`set`) -> validation and defaults (`validate`).

pub mod error;
pub mod field_reference;
pub mod fields;
pub mod fit;
pub mod schema;
pub mod set;
pub mod settings;
pub mod validate;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub use crate::group::Fusion;
pub use crate::layout::overrides::{LayoutOverride, Partition};
use crate::model::config::ModelConfig;

/// The scheduler's vocabulary, which the build file parses into.
pub use crate::schedule::vocabulary::{
    MAX_WAVE_WORDS, PolicyParseError, SchedulePolicy, TransferWidth,
};
pub use error::{FileProblem, QueryError, QueryProblem, SetProblem};

/// How attention is formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionChoice {
    /// The planner chooses.
    Auto,
    /// Scores (`tokens x tokens` per head) are formed.
    Materialized,
    /// Online softmax over key blocks.
    Flash,
}

/// Accumulator precision of matrix products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccumulationChoice {
    Auto,
    F32,
    F16,
}

/// Where weights come from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WeightSource {
    /// Deterministic random weights from this seed.
    Seeded { seed: u64 },
    /// A SafeTensors checkpoint (resolved against the build file's directory
    /// when written in the file; as given when set with `--set`) in
    /// `naming`, or the naming its tensors show when `None`.
    SafeTensors {
        path: PathBuf,
        naming: Option<crate::model::checkpoint::Naming>,
    },
}

impl WeightSource {
    /// Whether the weights come from a checkpoint file (not seeded).
    pub fn is_checkpoint(&self) -> bool {
        matches!(self, WeightSource::SafeTensors { .. })
    }

    /// The parameter values of `graph` from this source, quantised with
    /// `fp8_scale`.
    pub fn load(
        &self,
        graph: &crate::model::graph::Graph,
        fp8_scale: crate::model::quantisation::Fp8Scale,
    ) -> Result<crate::model::weights::Weights, crate::model::weights::WeightError> {
        match self {
            WeightSource::Seeded { seed } => {
                crate::model::weights::seeded_weights(graph, *seed, fp8_scale)
            }
            WeightSource::SafeTensors { path, naming } => {
                crate::model::weights::safetensors_weights(graph, path, *naming, 1, fp8_scale)
            }
        }
    }
}

/// `[workload]`, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Workload {
    pub model: ModelConfig,
    pub batch: u32,
    pub fuse_qkv: bool,
    /// Stored FP8 value x 2^scale, the scale fixed or per tensor instance.
    pub fp8_scale: crate::model::quantisation::Fp8Scale,
    pub attention: AttentionChoice,
    pub weights: WeightSource,
}

/// `[machine]`, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MachineSettings {
    pub preset: String,
    /// The first `tiles` logical tiles are used.
    pub tiles: u32,
    /// `machine.calibration`: the calibration file the kernel cost model's
    /// constants were read from (`None`: the shipped table).
    pub calibration: Option<PathBuf>,
    /// The kernel cost model's constants.
    pub cost_table: crate::target::kernel_cost::CostTable,
}

/// `[planning]`, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanningFlags {
    pub accumulation: AccumulationChoice,
    pub copy_motion: bool,
    /// Which exchanges copy motion may merge (`planning.fusion`).
    pub fusion: Fusion,
    /// Repeat patches may encode a tile's sender addresses against an
    /// outgoing base register that moves by the most common stride
    /// (fewer patch words); `false` keeps absolute addresses and patches
    /// every moving word.
    pub repeat_base: bool,
    pub reserved_bytes_per_tile: u32,
    pub max_partition_candidates: u32,
    /// `auto` accumulation: FP16 partial sums for a product split into at
    /// most this many reduction parts, when that is cheaper (0: never).
    pub auto_f16_max_parts: u32,
    /// What the matrix unit multiplies in every product
    /// (`planning.matrix_inputs`).
    pub matrix_inputs: crate::target::kernel_cost::MatrixInputs,
    /// `--set planning.matrix_inputs.OP=...`: products whose inputs differ
    /// from `matrix_inputs`, by op name.
    pub matrix_input_overrides:
        std::collections::BTreeMap<String, crate::target::kernel_cost::MatrixInputs>,
    /// The scale of FP8 activations (`planning.activation_scale`).
    pub activation_scale: ActivationScale,
    /// Where FP8 activations are cast (`planning.fp8_cast`).
    pub fp8_cast: crate::layout::fp8_activations::Fp8Cast,
    /// `[[layout.override]]`: partitions that replace the cost model's
    /// choice for the ops they name (sorted by op): the entries whose
    /// `when` matches the configuration, and every `--set` pin.
    pub layout_overrides: Vec<LayoutOverride>,
    /// `[[layout.override]]` entries left out because their `when` does
    /// not match the configuration.
    pub skipped_layout_overrides: u32,
}

/// `planning.activation_scale`, resolved: FP8 activations are stored as
/// value x 2^-scale.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ActivationScale {
    /// One scale for every product.
    Fixed(i8),
    /// A scale per product position, chosen by running the FP32 reference
    /// on `input` (`crate::sim::calibration`).
    Calibrate { input: CalibrationInput },
}

/// What calibration runs the reference on (`workload.calibration`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CalibrationInput {
    /// The build's seeded input.
    Seeded,
    /// A photo or a `.npy` array (resolved against the build file's folder
    /// when written in the file), read by the calibration query when it
    /// first runs in a session (as a checkpoint is).
    File { path: PathBuf },
}

impl PlanningFlags {
    /// Every product's inputs when the scale is fixed; under calibration,
    /// the inputs of a product calibration did not see (there is none: the
    /// query layer gives every product its own), at the default scale.
    pub fn uniform_inputs(&self) -> crate::numerics::dot::ProductInputs {
        use crate::numerics::dot::ProductInputs;
        use crate::target::kernel_cost::MatrixInputs;
        match (self.matrix_inputs, &self.activation_scale) {
            (MatrixInputs::Fp16, _) => ProductInputs::Fp16,
            (MatrixInputs::Fp8, ActivationScale::Fixed(scale)) => ProductInputs::Fp8 {
                activation_scale: *scale,
            },
            (MatrixInputs::Fp8, ActivationScale::Calibrate { .. }) => ProductInputs::Fp8 {
                activation_scale: validate::DEFAULT_ACTIVATION_SCALE,
            },
        }
    }
}

/// `[schedule]`, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScheduleSettings {
    pub policy: SchedulePolicy,
    pub width: TransferWidth,
    /// `auto`'s storage guard: bytes a candidate's largest row may exceed
    /// the smallest candidate's largest row by.
    pub row_allowance: u32,
    /// Skip scheduling what a lower bound shows cannot win: an `auto`
    /// fusion merge whose merged latency-aware bound is already no cheaper
    /// than the two exchanges apart, and a suggestion's policy on a phase
    /// already at its bound. `false` schedules every one of them (slower;
    /// the same program, which is what it is for checking).
    pub prune_by_bounds: bool,
}

/// One `[[schedule.override]]`: a phase key (`provenance#ordinal`), its
/// policy and, optionally, its transfer width (absent: `schedule.width`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PhaseOverride {
    pub phase: String,
    pub policy: SchedulePolicy,
    pub width: Option<TransferWidth>,
}

/// `[outputs]`, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Outputs {
    pub directory: PathBuf,
    pub report: bool,
    pub phases_csv: bool,
    /// `report.html`: the build report as a self-contained page.
    pub html: bool,
    pub package: bool,
}

/// `[cache]`: the remote tier behind the persistent cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheSettings {
    /// `http(s)://HOST/PATH` or `s3://BUCKET/PREFIX`; never credentials
    /// (a token comes from `SUPERSTEP_CACHE_TOKEN`, S3 keys from the usual
    /// environment).
    pub remote: Option<String>,
    /// Bound on one remote request, in milliseconds.
    pub remote_timeout_ms: u64,
    /// How long a build waits at its end for its uploads, in milliseconds.
    pub remote_deadline_ms: u64,
    /// Public keys (`ed25519:HEX`) whose signed cache entries are trusted.
    pub trusted_keys: Vec<String>,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            remote: None,
            remote_timeout_ms: 2_000,
            remote_deadline_ms: 2_000,
            trusted_keys: Vec::new(),
        }
    }
}

/// A whole validated build query.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BuildQuery {
    /// Names the artifacts folder: `outputs.directory/NAME/`.
    pub name: String,
    /// The build file, when the query was loaded from one.
    pub source_path: Option<PathBuf>,
    pub workload: Workload,
    pub machine: MachineSettings,
    pub planning: PlanningFlags,
    pub schedule: ScheduleSettings,
    pub overrides: Vec<PhaseOverride>,
    pub outputs: Outputs,
    pub cache: CacheSettings,
}

/// The most bytes a build file may have (the shipped ones have about 2 000).
pub const MAX_BUILD_FILE_BYTES: u64 = 1 << 20;

/// The text of the build file at `path` (`input_file`: a regular file of at
/// most [`MAX_BUILD_FILE_BYTES`]).
pub fn read_build_file(path: &Path) -> Result<String, std::io::Error> {
    crate::input_file::read_text(path, MAX_BUILD_FILE_BYTES, "a build file")
        .map_err(crate::input_file::InputFileError::into_io)
}

/// Reads and validates the build file at `path`, then applies `sets`
/// (`KEY=VALUE` strings from `--set`). Relative SafeTensors paths in the file
/// resolve against the file's directory.
pub fn load_query(path: &Path, sets: &[String]) -> Result<BuildQuery, QueryError> {
    load_query_with(path, sets, validate::CapacityCheck::Checked)
}

/// [`load_query`] with or without the capacity check (a query that fails
/// only that check still loads without it).
pub fn load_query_with(
    path: &Path,
    sets: &[String],
    capacity: validate::CapacityCheck,
) -> Result<BuildQuery, QueryError> {
    let text = read_build_file(path).map_err(|source| {
        QueryError::from_problem(QueryProblem::Read {
            path: path.to_path_buf(),
            source,
        })
    })?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    let source_name = path.display().to_string();
    let mut query = parse_query_with(&source_name, &text, Some(base_dir), sets, capacity)?;
    query.source_path = Some(path.to_path_buf());
    Ok(query)
}

/// Parses and validates build-query `text` (named `source_name` in messages
/// and, when it ends in `.toml`, the default build name), then applies `sets`.
/// `base_dir` is where relative SafeTensors paths in the text resolve.
pub fn parse_query(
    source_name: &str,
    text: &str,
    base_dir: Option<&Path>,
    sets: &[String],
) -> Result<BuildQuery, QueryError> {
    parse_query_with(
        source_name,
        text,
        base_dir,
        sets,
        validate::CapacityCheck::Checked,
    )
}

/// [`parse_query`] with or without the capacity check.
pub fn parse_query_with(
    source_name: &str,
    text: &str,
    base_dir: Option<&Path>,
    sets: &[String],
    capacity: validate::CapacityCheck,
) -> Result<BuildQuery, QueryError> {
    let (file, origins) = query_file(source_name, text, sets)?;
    let mut query = validate::resolve(&file, &origins, base_dir, source_name, capacity)
        .map_err(|issue| issue.into_error(source_name, text))?;
    query.source_path = None;
    Ok(query)
}

/// The build file's text with every `--set` applied, deserialised, and the
/// paths the arguments set. As cargo's `--config KEY=VALUE`, a `--set`
/// edits the TOML document before it is deserialised
/// ([`set::edit_document`]), so no key needs code of its own; the entries
/// of the override lists are added after ([`set::add_entries`]).
pub(crate) fn query_file(
    source_name: &str,
    text: &str,
    sets: &[String],
) -> Result<(schema::QueryFile, set::SetOrigins), QueryError> {
    let document = toml::de::DeTable::parse(text).map_err(|error| {
        let span = error.span().unwrap_or(0..0);
        error::Issue::from(error::IssueBody {
            field: None,
            message: format!("invalid TOML: {}", error.message().trim_end()),
            label: String::from("here"),
            help: Some(String::from(
                "fix the TOML syntax; the shipped files in queries/ show the format",
            )),
            origin: error::Origin::File(span),
            related: Vec::new(),
            secret: false,
        })
        .into_error(source_name, text)
    })?;
    validate::check_structure(document.get_ref())
        .map_err(|issue| issue.into_error(source_name, text))?;
    let mut edited = document.clone();
    let origins = set::edit_document(edited.get_mut(), sets)?;
    let mut file = <schema::QueryFile as serde::Deserialize>::deserialize(
        toml::de::Deserializer::from(edited),
    )
    .map_err(|error| {
        validate::serde_issue(&error, document.get_ref()).into_error(source_name, text)
    })?;
    set::add_entries(&mut file, sets)?;
    Ok((file, origins))
}

/// An error about the `[[schedule.override]]` entry (or the
/// `--set schedule.override.PHASE=...` argument) of `phase` in the build file
/// at `path` with `sets`, pointing at its `phase` value. Checks that need the
/// compiled build (a phase the build does not have) report through this.
pub fn override_error(
    path: &Path,
    sets: &[String],
    phase: &str,
    message: String,
    label: &str,
    help: String,
) -> QueryError {
    let plain = |message: String| {
        QueryError::set(
            &format!("schedule.override.{phase}"),
            Some("schedule.override"),
            message,
            Some(help.clone()),
        )
    };
    let Ok(text) = read_build_file(path) else {
        return plain(message);
    };
    let Ok((file, _)) = query_file(&path.display().to_string(), &text, sets) else {
        return plain(message);
    };
    let entry = file
        .schedule
        .overrides
        .iter()
        .enumerate()
        .find(|(_, entry)| {
            entry
                .phase
                .as_ref()
                .is_some_and(|field| field.get_ref() == phase)
        });
    let Some((index, entry)) = entry else {
        return plain(message);
    };
    let origin = match (&entry.set_argument, &entry.phase) {
        (Some(argument), _) => error::Origin::Set(argument.clone()),
        (None, Some(field)) => error::Origin::File(field.span()),
        (None, None) => return plain(message),
    };
    error::Issue::new(format!("schedule.override[{index}].phase"), origin, message)
        .label(label)
        .help(help)
        .into_error(&path.display().to_string(), &text)
}

/// An error about the `[[layout.override]]` entry (or the
/// `--set layout.override.OP=...` argument) of `op` in the build file at
/// `path` with `sets`, pointing at its `partition` value (its `op` value
/// when the op itself is wrong). The planner's checks, which need the
/// graph, report through this.
pub fn layout_override_error(
    path: &Path,
    sets: &[String],
    problem: &crate::layout::overrides::OverrideError,
    op_is_wrong: bool,
) -> QueryError {
    let op = problem.op.as_str();
    let message = problem.to_string();
    let help = problem.help();
    let plain = || {
        QueryError::set(
            &format!("layout.override.{op}"),
            Some("layout.override"),
            message.clone(),
            Some(help.clone()),
        )
    };
    let Ok(text) = read_build_file(path) else {
        return plain();
    };
    let Ok((file, _)) = query_file(&path.display().to_string(), &text, sets) else {
        return plain();
    };
    let found = file.layout.overrides.iter().enumerate().find(|(_, entry)| {
        entry
            .op
            .as_ref()
            .is_some_and(|field| field.get_ref().trim() == op)
    });
    let Some((index, entry)) = found else {
        return plain();
    };
    let (field_name, field) = match (op_is_wrong, &entry.partition) {
        (false, Some(partition)) => ("partition", partition),
        _ => match &entry.op {
            Some(op_field) => ("op", op_field),
            None => return plain(),
        },
    };
    let origin = match &entry.set_argument {
        Some(argument) => error::Origin::Set(argument.clone()),
        None => error::Origin::File(field.span()),
    };
    error::Issue::new(
        format!("layout.override[{index}].{field_name}"),
        origin,
        message,
    )
    .label(if op_is_wrong {
        "no such op"
    } else {
        "this partition cannot be used"
    })
    .help(help)
    .into_error(&path.display().to_string(), &text)
}

/// The build key of a query: the compiler version and every field of the
/// effective query that the package depends on (where outputs go and which
/// file the query came from do not count).
pub fn package_build_key(query: &BuildQuery) -> crate::cache::CacheKey {
    use std::hash::Hash;
    let mut neutral = query.clone();
    neutral.source_path = None;
    neutral.outputs.directory = std::path::PathBuf::new();
    neutral.outputs.report = false;
    neutral.outputs.phases_csv = false;
    neutral.outputs.html = false;
    neutral.outputs.package = false;
    // Where results are cached, and whether candidates a bound rules out
    // are scheduled to the end, change nothing in the package.
    neutral.cache = CacheSettings::default();
    neutral.schedule.prune_by_bounds = true;
    let mut hasher = crate::cache::StableHasher::for_domain("package build");
    neutral.hash(&mut hasher);
    hasher.digest()
}

/// Matrix-product accumulation: FP32 or FP16 partial sums everywhere, or
/// `auto`: per product, FP16 where cheaper and split into at most
/// `auto_f16_max_parts` reduction parts (FP16 halves partial-sum traffic;
/// each FP16 partial adds one rounding).
pub fn accumulation(
    choice: AccumulationChoice,
    auto_f16_max_parts: u32,
) -> crate::layout::planner::AccumulationPolicy {
    use crate::layout::planner::AccumulationPolicy;
    use crate::numerics::dot::Accumulation;
    match choice {
        AccumulationChoice::Auto => AccumulationPolicy::Auto {
            f16_max_parts: auto_f16_max_parts,
        },
        AccumulationChoice::F32 => AccumulationPolicy::Fixed(Accumulation::F32),
        AccumulationChoice::F16 => AccumulationPolicy::Fixed(Accumulation::F16),
    }
}

/// The planner's settings from the build's tile count, planning flags and
/// attention choice: the one constructor the database-free pipeline and
/// the salsa query both use.
pub fn planning_settings(
    tiles: u32,
    cost_table: crate::target::kernel_cost::CostTable,
    planning: &PlanningFlags,
    attention: AttentionChoice,
) -> crate::layout::planner::PlanningSettings {
    crate::layout::planner::PlanningSettings {
        tiles,
        cost_table,
        reserved_bytes_per_tile: planning.reserved_bytes_per_tile,
        accumulation: accumulation(planning.accumulation, planning.auto_f16_max_parts),
        matrix_inputs: planning.uniform_inputs(),
        fp8_cast: planning.fp8_cast,
        candidate_limit: planning.max_partition_candidates,
        forced_flash: match attention {
            AttentionChoice::Auto => None,
            AttentionChoice::Materialized => Some(false),
            AttentionChoice::Flash => Some(true),
        },
    }
}
