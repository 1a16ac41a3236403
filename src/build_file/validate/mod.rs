//! Validation of build queries: known keys and TOML types, then every value's
//! range and spelling, the relations between values (heads divide the width,
//! the model fits the chosen tiles), and the documented defaults, producing
//! the resolved `BuildQuery`.
//!
//! This module owns what is valid and what the defaults are. It must not read
//! the build file (it gets parsed data), must not plan anything and must not
//! silently adjust a value: a value that cannot be used is an `Issue` located
//! at the value (a file span, or the `--set` argument that set it).

use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use crate::build_file::error::{Issue, Origin};
use crate::build_file::fields;
use crate::build_file::schema::{self, QueryFile};
use crate::build_file::set::SetOrigins;
use crate::model::config::ModelConfig;
use crate::model::quantisation::Fp8Scale;
use keys::*;
mod cost_inputs;
mod fit;
mod keys;
pub use fit::Capacity;
pub mod layout;
mod outputs;
mod schedule;
mod structure;
mod workload;

pub use structure::{check_structure, serde_issue};

use crate::build_file::{
    AccumulationChoice, BuildQuery, Fusion, MachineSettings, PlanningFlags, SchedulePolicy,
    TransferWidth,
};

/// Tiles of the IPU21 C600.
pub const C600_TILES: u32 = 1472;
/// SRAM of one tile in bytes (624 KiB).
pub const SRAM_BYTES_PER_TILE: u32 = 624 * 1024;

/// The machine presets a query may name.
pub const MACHINE_PRESETS: &[&str] = &["c600"];

// Documented defaults of optional fields.
pub const DEFAULT_MACHINE_PRESET: &str = "c600";
pub const DEFAULT_BATCH: u32 = 1;
pub const DEFAULT_FUSE_QKV: bool = true;
pub const DEFAULT_FP8_SCALE: Fp8Scale = Fp8Scale::Fixed(-4);
pub const DEFAULT_SEED: u64 = 1;
pub const DEFAULT_COPY_MOTION: bool = true;
/// `planning.fusion`'s default: `auto`, measured faster on SigLIP than
/// `same-operator` (4.123 vs 4.188 ms) and `across-operators` (5.704 ms),
/// and on PE-Core-L14 (2.666 vs 2.738 and 2.669 ms). It costs about twice
/// the cold compile (phase grouping schedules every merge it prices; SigLIP
/// 11.5-12.7 s vs 5.3-5.8 s with `--no-cache --suggestions 0`); docs/measurements.md,
/// "Fusion by cost".
pub const DEFAULT_FUSION: Fusion = Fusion::Auto;
pub const DEFAULT_REPEAT_BASE: bool = true;
/// The default of `schedule.prune_by_bounds`.
pub const DEFAULT_PRUNE_BY_BOUNDS: bool = true;
pub const DEFAULT_RESERVED_BYTES_PER_TILE: u32 = 65536;
pub const DEFAULT_MAX_PARTITION_CANDIDATES: u32 = 64;

/// `auto` accumulation's default bound on FP16 partial sums (see
/// `crate::layout::planner::AccumulationPolicy`; chosen by measurement,
/// docs/measurements.md, "Accumulation").
pub const DEFAULT_AUTO_F16_MAX_PARTS: u32 = MAX_REDUCTION_PARTS;

/// The most reduction parts the cost model splits a product into.
pub const MAX_REDUCTION_PARTS: u32 = crate::layout::cost::MAX_REDUCTION_PARTS;
pub const DEFAULT_POLICY: SchedulePolicy = SchedulePolicy::Auto;

/// The default of `schedule.row_allowance`, in bytes.
pub const DEFAULT_ROW_ALLOWANCE_BYTES: u32 =
    crate::schedule::candidates::DEFAULT_ROW_ALLOWANCE_BYTES;

/// The largest `schedule.row_allowance`, in bytes (a row of the largest
/// phase is a few KiB; more than this is no guard at all).
pub const MAX_ROW_ALLOWANCE_BYTES: u32 = 1 << 20;
pub const DEFAULT_OUTPUT_DIRECTORY: &str = "artifacts";

/// The spellings of `schedule.width` and of an override's `width`.
pub const WIDTH_OPTIONS: &[(&str, TransferWidth)] = &[
    ("auto", TransferWidth::Auto),
    ("word32", TransferWidth::Word32),
    ("paired64", TransferWidth::Paired64),
];
/// The range of `workload.fp8_scale`.
pub const FP8_SCALE_RANGE: std::ops::RangeInclusive<i64> = -32..=32;

/// The activation scale of FP8 products that calibration does not choose
/// (none of a calibrated graph's; see `incremental::calibration::recipe`):
/// the scale the notes used for activations of random weights
/// (CALIBRATION.md: -4, range +-15).
pub const DEFAULT_ACTIVATION_SCALE: i8 = -4;

/// The names a choice field accepts: its choices in the table of fields
/// when the table lists them (an array entry's path, `schedule.override[3].width`,
/// is looked up as `schedule.override.width`), else the options' names.
fn allowed_names<'a, T>(path: &str, options: &[(&'a str, T)]) -> Vec<&'a str> {
    let key = table_key(path);
    match fields::field_of(&key).filter(|field| !field.choices.is_empty()) {
        Some(field) => {
            debug_assert!(
                options
                    .iter()
                    .map(|(name, _)| *name)
                    .eq(field.choices.iter().copied()),
                "validation's options for `{key}` differ from the table of fields"
            );
            field.choices.to_vec()
        }
        None => options.iter().map(|(name, _)| *name).collect(),
    }
}

/// A value's path with array indices dropped: the key of its field in the
/// table of fields (`schedule.override[3].width` -> `schedule.override.width`).
pub(crate) fn table_key(path: &str) -> String {
    let mut key = String::with_capacity(path.len());
    let mut inside_index = false;
    for character in path.chars() {
        match character {
            '[' => inside_index = true,
            ']' => inside_index = false,
            _ if !inside_index => key.push(character),
            _ => {}
        }
    }
    key
}

/// The accepted widths, `a | b | c`, for messages.
fn width_names() -> String {
    WIDTH_OPTIONS
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A machine preset or tile count no build can use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    #[error(
        "machine.preset = \"{0}\" is not a known machine; known presets: {presets}",
        presets = MACHINE_PRESETS.join(", ")
    )]
    UnknownPreset(String),
    #[error("machine.tiles = 0: a build needs at least one tile (the c600 has {C600_TILES})")]
    NoTiles,
    #[error("machine.tiles = {0} exceeds the {C600_TILES} tiles of the c600")]
    TooManyTiles(u32),
}

/// Checks a machine preset and tile count and returns the number of tiles
/// to use (the preset's full count when `tiles` is `None`).
pub fn validate_machine(preset: &str, tiles: Option<u32>) -> Result<u32, MachineError> {
    if preset != "c600" {
        return Err(MachineError::UnknownPreset(preset.to_string()));
    }
    match tiles {
        None => Ok(C600_TILES),
        Some(0) => Err(MachineError::NoTiles),
        Some(count) if count > C600_TILES => Err(MachineError::TooManyTiles(count)),
        Some(count) => Ok(count),
    }
}

// ---------------------------------------------------------------------------
// Values: ranges, spellings, relations and defaults.
// ---------------------------------------------------------------------------

/// Whether resolving checks the capacity (a necessary condition on total
/// bytes): every command does, but `superstep build` answering a failed
/// check, which then builds candidates to find what fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityCheck {
    Checked,
    Skipped,
}

/// Resolves a parsed (and `--set`-overridden) file into a `BuildQuery`.
pub fn resolve(
    file: &QueryFile,
    origins: &SetOrigins,
    base_dir: Option<&Path>,
    source_name: &str,
    capacity: CapacityCheck,
) -> Result<BuildQuery, Issue> {
    let resolver = Resolver { origins };
    let (workload, model_origin, layers_origin) = resolver.workload(file, base_dir)?;
    let machine = resolver.machine(file, base_dir)?;
    let planning = resolver.planning(file, base_dir)?;
    let schedule = resolver.schedule(file)?;
    let overrides = resolver.phase_overrides(file)?;
    let outputs = resolver.outputs(file)?;
    let cache = resolver.cache(file)?;
    let name = resolver.name(file, source_name, &workload.model)?;
    let field_origin = |path: &str, span: Option<Range<usize>>| {
        origins
            .get(path)
            .map(|argument| Origin::Set(argument.clone()))
            .or(span.map(Origin::File))
    };
    let sources = fit::FitSources {
        model: model_origin,
        layers: layers_origin,
        batch: field_origin(
            WORKLOAD_BATCH,
            file.workload
                .as_ref()
                .and_then(|section| section.get_ref().batch.as_ref().map(Spanned::span)),
        ),
        tiles: field_origin(
            MACHINE_TILES,
            file.machine.tiles.as_ref().map(Spanned::span),
        ),
    };
    if capacity == CapacityCheck::Checked {
        fit::check_fit(&workload, &machine, &planning, sources)?;
    }
    let mut planning = planning;
    planning.matrix_input_overrides = resolver.matrix_input_overrides(&file.planning, &workload)?;
    let (pins, skipped) = resolver.layout_overrides(
        file,
        &layout::Configuration {
            batch: workload.batch,
            layers: workload.model.layers,
            tiles: machine.tiles,
            matrix_inputs: planning.matrix_inputs,
        },
    )?;
    planning.layout_overrides = pins;
    planning.skipped_layout_overrides = skipped;
    Ok(BuildQuery {
        name,
        source_path: None,
        workload,
        machine,
        planning,
        schedule,
        overrides,
        outputs,
        cache,
    })
}

/// A valid policy spelled like `text` (`s256` -> `S256`, `Latency` ->
/// `latency`, `B 1024` -> `B1024`), if there is one.
pub fn policy_suggestion(text: &str) -> Option<String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut candidates = vec![compact.to_uppercase(), compact.to_lowercase()];
    if let Some(first) = compact.chars().next() {
        candidates.push(format!(
            "{}{}",
            first.to_ascii_uppercase(),
            compact[first.len_utf8()..].to_lowercase()
        ));
    }
    // A misspelled named policy: the nearest name within two edits.
    let lowered = compact.to_lowercase();
    if let Some((distance, name)) = ["auto", "list", "matching", "latency"]
        .into_iter()
        .map(|name| (schema::edit_distance(&lowered, name), name))
        .min()
        && distance <= 2
    {
        candidates.push(name.to_string());
    }
    candidates
        .into_iter()
        .find(|candidate| candidate != text && candidate.parse::<SchedulePolicy>().is_ok())
}

struct Resolver<'a> {
    origins: &'a SetOrigins,
}

/// An integer shape value with where it came from.
#[derive(Clone)]
struct Sourced {
    value: u32,
    origin: Origin,
    /// Whether the query wrote it (as opposed to taking it from the preset).
    explicit: bool,
}

/// The range a value outside it must be in: "between A and B" when both
/// ends are practical, else stated from the side it missed ("at least 1",
/// "at most 4,294,967,294").
fn describe_bounds(value: i64, minimum: i64, maximum: i64) -> String {
    let signed = |number: i64| {
        let magnitude = with_separators(u128::from(number.unsigned_abs()));
        if number < 0 {
            format!("-{magnitude}")
        } else {
            magnitude
        }
    };
    if maximum < i64::from(u32::MAX) - 1 {
        format!("between {} and {}", signed(minimum), signed(maximum))
    } else if value > maximum {
        format!("at most {}", signed(maximum))
    } else {
        format!("at least {}", signed(minimum))
    }
}

use crate::text::thousands as with_separators;

/// A divisor of `width` near `target` for which `accept(width / divisor)` holds.
fn nearest_divisor(width: u32, target: u32, accept: impl Fn(u32) -> bool) -> Option<u32> {
    let good = |candidate: u32| {
        candidate > 0 && width.is_multiple_of(candidate) && accept(width / candidate)
    };
    for distance in 0..=4096u32 {
        let below = target.checked_sub(distance);
        let above = target.checked_add(distance);
        for candidate in [below, above].into_iter().flatten() {
            if candidate <= width && good(candidate) {
                return Some(candidate);
            }
        }
    }
    (1..=width.min(4096)).find(|candidate| good(*candidate))
}

impl Resolver<'_> {
    /// Where the value at `path` came from.
    fn origin<T>(&self, path: &str, field: &Spanned<T>) -> Origin {
        match self.origins.get(path) {
            Some(argument) => Origin::Set(argument.clone()),
            None => Origin::File(field.span()),
        }
    }

    fn integer(
        &self,
        path: &str,
        field: &Spanned<i64>,
        minimum: i64,
        maximum: i64,
        help: &str,
    ) -> Result<i64, Issue> {
        let value = *field.get_ref();
        if (minimum..=maximum).contains(&value) {
            return Ok(value);
        }
        let side = if value < minimum {
            "too small"
        } else {
            "too large"
        };
        Err(Issue::new(
            path,
            self.origin(path, field),
            format!(
                "{path} = {value} is {side}; it must be {}",
                describe_bounds(value, minimum, maximum)
            ),
        )
        .label(format!(
            "must be {}",
            describe_bounds(value, minimum, maximum)
        ))
        .help(help))
    }

    fn unsigned(
        &self,
        path: &str,
        field: &Spanned<i64>,
        minimum: u32,
        maximum: u32,
        help: &str,
    ) -> Result<u32, Issue> {
        let value = self.integer(path, field, i64::from(minimum), i64::from(maximum), help)?;
        u32::try_from(value).map_err(|_| {
            Issue::new(
                path,
                self.origin(path, field),
                format!("{path} = {value} does not fit 32 bits"),
            )
            .help(help)
        })
    }

    /// The value `field` names among `options`: the field's choices in the
    /// table of fields ([`fields::FIELDS`]), each paired with what it means
    /// here. The table is what a user is told is allowed; the options must
    /// name exactly its choices (checked in debug builds, which every test
    /// that validates a choice field runs).
    fn choice<T: Copy>(
        &self,
        path: &str,
        field: &Spanned<String>,
        options: &[(&str, T)],
    ) -> Result<T, Issue> {
        let names = allowed_names(path, options);
        let text = field.get_ref().as_str();
        if let Some((_, value)) = options
            .iter()
            .find(|(name, _)| *name == text && names.contains(name))
        {
            return Ok(*value);
        }
        let close = names
            .iter()
            .map(|name| (*name, schema::edit_distance(name, text)))
            .filter(|(name, distance)| *distance <= (name.len() / 3).max(1))
            .min_by_key(|(_, distance)| *distance)
            .map(|(name, _)| name);
        let help = match close {
            Some(name) => format!("did you mean \"{name}\"?"),
            None => format!("write one of: {}", names.join(", ")),
        };
        Err(Issue::new(
            path,
            self.origin(path, field),
            format!(
                "{path} = \"{text}\" is not one of the accepted values: {}",
                names.join(" | ")
            ),
        )
        .label(format!("expected {}", names.join(" | ")))
        .help(help))
    }

    fn machine(&self, file: &QueryFile, base_dir: Option<&Path>) -> Result<MachineSettings, Issue> {
        let (calibration, cost_table) = self.calibration(file, base_dir)?;
        let section = &file.machine;
        let preset = section
            .preset
            .as_ref()
            .map_or(DEFAULT_MACHINE_PRESET, |field| field.get_ref().as_str());
        let tiles_help = format!(
            "the c600 has {C600_TILES} tiles; choose a count in 1..={C600_TILES} \
             (tests use 16), or omit machine.tiles to use all of them"
        );
        let tiles = match &section.tiles {
            Some(field) => Some(self.unsigned(MACHINE_TILES, field, 1, C600_TILES, &tiles_help)?),
            None => None,
        };
        validate_machine(preset, tiles)
            .map_err(|error| {
                let message = error.to_string();
                match (&error, &section.preset, &section.tiles) {
                    (MachineError::UnknownPreset(_), Some(field), _) => {
                        Issue::new(MACHINE_PRESET, self.origin(MACHINE_PRESET, field), message)
                            .label("unknown preset")
                            .help(format!("known presets: {}", MACHINE_PRESETS.join(", ")))
                    }
                    (_, _, Some(field)) => {
                        Issue::new(MACHINE_TILES, self.origin(MACHINE_TILES, field), message)
                            .label(format!("must be in 1..={C600_TILES}"))
                            .help(tiles_help.clone())
                    }
                    _ => Issue::new("machine", Origin::File(0..0), message),
                }
            })
            .map(|tiles| MachineSettings {
                preset: preset.to_string(),
                tiles,
                calibration,
                cost_table,
            })
    }

    fn planning(&self, file: &QueryFile, base_dir: Option<&Path>) -> Result<PlanningFlags, Issue> {
        let section = &file.planning;
        let accumulation = match &section.accumulation {
            Some(field) => self.choice(
                PLANNING_ACCUMULATION,
                field,
                &[
                    ("auto", AccumulationChoice::Auto),
                    ("f32", AccumulationChoice::F32),
                    ("f16", AccumulationChoice::F16),
                ],
            )?,
            None => AccumulationChoice::Auto,
        };
        let copy_motion = section
            .copy_motion
            .as_ref()
            .map_or(DEFAULT_COPY_MOTION, |field| *field.get_ref());
        let fusion = match &section.fusion {
            Some(field) => self.choice(
                PLANNING_FUSION,
                field,
                &[
                    ("auto", Fusion::Auto),
                    ("same-operator", Fusion::SameOperator),
                    ("across-operators", Fusion::AcrossOperators),
                ],
            )?,
            None => DEFAULT_FUSION,
        };
        let repeat_base = section
            .repeat_base
            .as_ref()
            .map_or(DEFAULT_REPEAT_BASE, |field| *field.get_ref());
        let reserved_bytes_per_tile = match &section.reserved_bytes_per_tile {
            Some(field) => self.unsigned(
                PLANNING_RESERVED_BYTES_PER_TILE,
                field,
                0,
                SRAM_BYTES_PER_TILE - 1,
                &format!(
                    "a tile has {SRAM_BYTES_PER_TILE} bytes (624 KiB) of SRAM; the reserve must \
                     leave room for the model (the default is {DEFAULT_RESERVED_BYTES_PER_TILE})"
                ),
            )?,
            None => DEFAULT_RESERVED_BYTES_PER_TILE,
        };
        let max_partition_candidates = match &section.max_partition_candidates {
            Some(field) => self.unsigned(
                PLANNING_MAX_PARTITION_CANDIDATES,
                field,
                1,
                u32::MAX,
                &format!(
                    "the cost model needs at least one candidate per operator \
                     (the default is {DEFAULT_MAX_PARTITION_CANDIDATES})"
                ),
            )?,
            None => DEFAULT_MAX_PARTITION_CANDIDATES,
        };
        let auto_f16_max_parts = match &section.auto_f16_max_parts {
            Some(field) => self.unsigned(
                "planning.auto_f16_max_parts",
                field,
                0,
                MAX_REDUCTION_PARTS,
                &format!(
                    "a product is split into at most {MAX_REDUCTION_PARTS} reduction parts; 0 keeps \
                     FP32 partial sums everywhere (the default is {DEFAULT_AUTO_F16_MAX_PARTS})"
                ),
            )?,
            None => DEFAULT_AUTO_F16_MAX_PARTS,
        };
        let matrix_inputs = self.matrix_inputs(section)?;
        let fp8_cast = self.fp8_cast(section)?;
        let activation_scale = self.activation_scale(file, base_dir)?;
        // Per-product inputs name the graph's products: resolved once the
        // workload is known to fit ([`resolve`]), so no absurd shape is
        // ever built into a graph.
        let matrix_input_overrides = std::collections::BTreeMap::new();
        Ok(PlanningFlags {
            accumulation,
            matrix_inputs,
            fp8_cast,
            matrix_input_overrides,
            activation_scale,
            copy_motion,
            fusion,
            repeat_base,
            reserved_bytes_per_tile,
            max_partition_candidates,
            auto_f16_max_parts,
            // Entries apply by their `when`: resolved with the workload
            // and machine ([`resolve`]).
            layout_overrides: Vec::new(),
            skipped_layout_overrides: 0,
        })
    }

    fn name(
        &self,
        file: &QueryFile,
        source_name: &str,
        model: &ModelConfig,
    ) -> Result<String, Issue> {
        let Some(field) = &file.name else {
            let stem = source_name
                .strip_suffix(".toml")
                .and_then(|path| Path::new(path).file_name())
                .and_then(|stem| stem.to_str())
                .filter(|stem| name_problem(stem).is_none());
            return Ok(stem.map_or_else(|| model.name.clone(), str::to_string));
        };
        let name = field.get_ref();
        match name_problem(name) {
            None => Ok(name.clone()),
            Some(problem) => Err(Issue::new(
                "name",
                self.origin("name", field),
                format!("name = \"{name}\" cannot name the artifacts folder: {problem}"),
            )
            .label("not a folder name")
            .help("use letters, digits, '-', '_' and '.', e.g. name = \"siglip-so400m\"")),
        }
    }
}

/// Why `name` cannot be a folder name under the outputs directory, if it cannot.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > 128 {
        return Some("it is longer than 128 bytes");
    }
    if name.starts_with('.') {
        return Some("it starts with '.'");
    }
    if !name
        .chars()
        .all(|character| character.is_ascii_alphanumeric() || "-_.".contains(character))
    {
        return Some("it may hold only letters, digits, '-', '_' and '.'");
    }
    None
}
