//! `superstep packing [QUERY]`: the packing counterfactuals (seed 002) of
//! the build's exchange phases, or of the phases `--phase` names, or of the
//! top N by endpoint fragmentation: per phase the original and source
//! packing, receiver staging, both, and the coalesced independent prefix,
//! each checked, scheduled, validated and encoded; a table per phase, then
//! `packing.json` and `packing.html` under `outputs.directory/NAME/packing/`.
//! Only the first half, the phase groups and the studied phases' schedules
//! are computed (no placement or package).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{
    artifacts_directory, build_phase_groups_checked, finish_cache, load, open_session,
};
use super::{preflight, progress};
use crate::build_file::validate::{DEFAULT_OUTPUT_DIRECTORY, DEFAULT_POLICY};
use crate::report::packing::{PackingDocument, write_packing};
use crate::schedule::TransferWidth;
use crate::snapshot::packing::snapshot_packing;
use crate::snapshot::{Snapshot, import_phases, select_phases};
use crate::studies::packing::{
    AlternativeOutcome, ExchangeMeasure, Packing, PackingPhase, PackingRequest,
    PackingRequestError, packing,
};
use crate::studies::sweep::config::ConfigParseError;
use crate::studies::sweep::{ConfigList, SweepConfig};
use crate::text::thousands;

/// `--policy P[/WIDTH]`: one configuration (a bare policy means word32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackingConfig(pub SweepConfig);

impl FromStr for PackingConfig {
    type Err = PackingConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // The sweep's `--config` syntax; a bare policy gives every width,
        // word32 first, and packing takes that one.
        let list: ConfigList = text.parse()?;
        list.0
            .first()
            .copied()
            .map(PackingConfig)
            .ok_or_else(|| PackingConfigError::Empty(text.to_string()))
    }
}

/// A `--policy` that is not one configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PackingConfigError {
    /// Not in the sweep's `--config` syntax.
    #[error("{0}")]
    Syntax(#[from] ConfigParseError),
    /// The syntax, but no configuration.
    #[error("`{0}` names no configuration")]
    Empty(String),
}

/// The flags of `superstep packing`.
#[derive(Debug, clap::Args)]
pub struct PackingArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// Study this phase: its key or its step, as `superstep phases` lists
    /// them. Repeatable; default: every phase.
    #[arg(long = "phase", value_name = "KEY|STEP")]
    pub phases: Vec<String>,
    /// Study only the N phases with the most piece endpoints on one tile
    /// (of those --phase names, if any).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Schedule the original and every alternative under POLICY[/WIDTH]
    /// (latency, list, matching, auto, S<W>, B<W>; WIDTH word32 or
    /// paired64, default word32) instead of each phase's own policy.
    #[arg(long = "policy", value_name = "P[/WIDTH]")]
    pub config: Option<PackingConfig>,
    /// Print packing.json to standard output instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Study the phases of an exchange snapshot (`superstep capture`'s
    /// schema-4 JSON, the seed's capture format) instead of a build:
    /// --phase then takes a snapshot phase id or key, and every phase is
    /// scheduled under --policy (default: auto at word32). No build
    /// query or --set is read.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Write packing.json and packing.html into DIR (default:
    /// outputs.directory/NAME/packing, or artifacts/STEM/packing for a
    /// snapshot). Created when missing; a file in its path is an error.
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

pub fn run(arguments: &PackingArguments) -> Result<(), CommandError> {
    if arguments.top == Some(0) {
        return Err(CommandError::Input(
            "--top 0 studies no phase; give at least 1 (or leave --top out for every phase)"
                .to_string(),
        ));
    }
    if let Some(file) = &arguments.snapshot {
        return run_snapshot(arguments, file);
    }
    let mut query = load(&arguments.query)?;
    let directory = match &arguments.output {
        Some(directory) => {
            preflight::check_output_flag_directory("--output", directory)?;
            directory.clone()
        }
        None => {
            let directory = artifacts_directory(&query).join("packing");
            preflight::check_output_directory("outputs.directory", &directory)?;
            directory
        }
    };
    let mut session = open_session(&arguments.query, &mut query)?;
    build_phase_groups_checked(&mut session, &query, &arguments.query)?;
    let request = PackingRequest {
        phases: arguments.phases.clone(),
        top: arguments.top,
        config: arguments.config.map(|config| config.0),
    };
    let packing = packing(&session, &request).map_err(|error| match error {
        PackingRequestError::UnknownPhase(_) => CommandError::Input(error.to_string()),
        PackingRequestError::Phase(_) | PackingRequestError::Study { .. } => {
            CommandError::Internal(error.to_string())
        }
    })?;
    show(&query.name, &packing, &directory, arguments)?;
    finish_cache(session.cache());
    Ok(())
}

/// Writes the outputs into `directory` and prints the tables (or the JSON).
fn show(
    name: &str,
    packing: &Packing,
    directory: &Path,
    arguments: &PackingArguments,
) -> Result<(), CommandError> {
    let written = write_packing(directory, name, packing)
        .map_err(|error| CommandError::Internal(error.to_string()))?;
    if arguments.json {
        let document = PackingDocument { name, packing };
        print_line!(
            "{}",
            serde_json::to_string_pretty(&document)
                .map_err(|error| CommandError::Internal(error.to_string()))?
        );
        return Ok(());
    }
    for line in render(name, packing, arguments.top) {
        print_line!("{line}");
    }
    if !progress::quiet() {
        for path in &written {
            print_note!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// `--snapshot FILE`: the phases of an exchange snapshot, each scheduled
/// under --policy (default: the build default policy at word32).
fn run_snapshot(arguments: &PackingArguments, file: &Path) -> Result<(), CommandError> {
    if let Some(query) = &arguments.query.query {
        return Err(CommandError::Input(format!(
            "error: packing --snapshot {} studies the snapshot's phases; drop the build query {} \
             (or drop --snapshot to study the build)",
            file.display(),
            query.display()
        )));
    }
    if !arguments.query.sets.is_empty() {
        return Err(CommandError::Input(
            "error: --set (and --calibration) change a build query; packing --snapshot reads no \
             build query"
                .to_string(),
        ));
    }
    let name = file
        .file_stem()
        .map(|stem| stem.to_string_lossy().to_string())
        .unwrap_or_else(|| "snapshot".to_string());
    // A snapshot has no build file: the folder is --output's, or its
    // default, so the advice names the flag (never a build-file key).
    let directory = arguments.output.clone().unwrap_or_else(|| {
        Path::new(DEFAULT_OUTPUT_DIRECTORY)
            .join(&name)
            .join("packing")
    });
    preflight::check_output_flag_directory("--output", &directory)?;
    let snapshot =
        Snapshot::read(file).map_err(|error| CommandError::Input(format!("error: {error}")))?;
    let selected = select_phases(&snapshot, &arguments.phases).map_err(|error| {
        CommandError::Input(format!(
            "error: --phase {}: {}: {error}",
            error.selector,
            file.display()
        ))
    })?;
    let total = snapshot.phases.len();
    let phases = import_phases(&snapshot, &selected).map_err(|error| {
        CommandError::Input(format!(
            "error: {} is not a valid snapshot: {error}",
            file.display()
        ))
    })?;
    drop(snapshot);
    let config = arguments.config.map_or(
        SweepConfig {
            policy: DEFAULT_POLICY,
            width: TransferWidth::Word32,
        },
        |config| config.0,
    );
    let packing = snapshot_packing(&phases, total, config, arguments.top)
        .map_err(|error| CommandError::Internal(error.to_string()))?;
    show(&name, &packing, &directory, arguments)
}

/// The text of the study (what `run` prints without `--json`).
pub fn render(name: &str, packing: &Packing, top: Option<usize>) -> Vec<String> {
    let chosen = match top {
        Some(top) => format!(" (the top {top} by endpoint fragmentation)"),
        None => String::new(),
    };
    let policy = match &packing.config {
        Some(config) => format!("every alternative scheduled under {config}"),
        None => "each scheduled under its own policy".to_string(),
    };
    let mut lines = vec![format!(
        "superstep packing {name}: {} of the {}'s {} exchange phases{chosen}, {policy}; copy cycles are \
         ideal (8 B/cycle, busiest source tile plus busiest receiver), change = horizon + copies \
         - the original's horizon",
        packing.phases.len(),
        packing.source,
        packing.phases_in_build
    )];
    for phase in &packing.phases {
        lines.extend(phase_lines(phase));
    }
    lines
}

fn phase_lines(phase: &PackingPhase) -> Vec<String> {
    let study = &phase.study;
    let independence = &study.independence;
    let dependencies = if independence.is_independent() {
        "independent".to_string()
    } else {
        format!(
            "{} pieces depend on earlier ones ({} forwarding); independent prefix {}",
            thousands(u64::from(independence.dependent)),
            thousands(u64::from(independence.forwarding)),
            thousands(u64::from(independence.prefix))
        )
    };
    let mut lines = vec![
        String::new(),
        format!(
            "step {} {}: x{}, {} transfers, {} receives, most endpoints {} on tile {}; endpoint bound {} cycles; policy {}; {dependencies}",
            phase.step,
            phase.key,
            phase.executions,
            thousands(study.original.transfers),
            thousands(study.original.receives),
            thousands(phase.endpoint_fragments),
            phase.fragment_tile,
            thousands(u64::from(study.original.endpoint_bound)),
            phase.policy
        ),
        format!(
            "  {:<17} {:>9} {:>10} {:>9} {:>8} {:>9} {:>8} {:>18} {:>9} {:>14}  check",
            "alternative",
            "transfers",
            "max row B",
            "rows KiB",
            "horizon",
            "copy cyc",
            "change",
            "staging KiB (tile)",
            "runs",
            "affine (max)"
        ),
    ];
    lines.push(measure_line(
        "original",
        &study.original,
        None,
        &study.original,
    ));
    for alternative in &study.alternatives {
        let name = alternative.alternative.name();
        lines.push(match &alternative.outcome {
            AlternativeOutcome::Measured { exchange, copies } => {
                measure_line(name, exchange, Some(copies), &study.original)
            }
            AlternativeOutcome::Refused(refusal) => format!("  {name:<17} {refusal}"),
            AlternativeOutcome::Failed(message) => format!("  {name:<17} FAIL: {message}"),
        });
    }
    lines
}

fn measure_line(
    name: &str,
    exchange: &ExchangeMeasure,
    copies: Option<&crate::studies::packing::CopyFigures>,
    original: &ExchangeMeasure,
) -> String {
    let added = copies.map_or(0, |copies| copies.added_copy_cycles);
    let change = i64::from(exchange.horizon) + added as i64 - i64::from(original.horizon);
    let (staging, runs, affine) = match copies {
        Some(copies) => (
            match copies.staging_tile {
                Some(tile) => format!("{:.1} ({tile})", copies.staging_bytes_max as f64 / 1024.0),
                None => "0".to_string(),
            },
            thousands(copies.copy_runs),
            format!(
                "{} ({})",
                thousands(copies.affine_groups),
                copies.affine_groups_max_per_tile
            ),
        ),
        None => ("0".to_string(), "0".to_string(), "0".to_string()),
    };
    format!(
        "  {name:<17} {:>9} {:>10} {:>9.1} {:>8} {:>9} {:>8} {:>18} {:>9} {:>14}  PASS",
        thousands(exchange.transfers),
        thousands(exchange.max_row_bytes),
        exchange.total_row_bytes as f64 / 1024.0,
        thousands(u64::from(exchange.horizon)),
        thousands(added),
        if change > 0 {
            format!("+{}", thousands(change as u64))
        } else if change < 0 {
            format!("-{}", thousands(change.unsigned_abs()))
        } else {
            "0".to_string()
        },
        staging,
        runs,
        affine
    )
}
