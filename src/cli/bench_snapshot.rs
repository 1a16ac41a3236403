//! `superstep bench-snapshot`: import a schema-4 snapshot and, per selected
//! phase and policy, schedule, encode, validate, check and replay it,
//! printing one line per (phase, policy) and the total time. A snapshot
//! that cannot be read or imported is bad input (exit code 2); a phase that
//! fails an invariant makes the command fail (exit code 1) after the report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::command_error::CommandError;
use super::common::write_json;
use super::progress::timing;
use crate::build_file::validate::DEFAULT_POLICY;
use crate::build_file::{SchedulePolicy, TransferWidth};
use crate::schedule::vocabulary::WidthParseError;
use crate::snapshot::{
    BenchOptions, BenchRecord, Snapshot, bench_phase, import_phases, select_phases,
};

/// The most timed repetitions `bench-snapshot --iterations` accepts.
pub const MAX_BENCH_ITERATIONS: i64 = 1000;

/// The flags of `superstep bench-snapshot`.
#[derive(Debug, clap::Args)]
pub struct BenchSnapshotArguments {
    /// The snapshot file.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
    /// Only this phase: its id (for a `superstep capture`, the phase's
    /// step, the first column of `superstep phases`) or its key, e.g.
    /// `layer.attn.merge#0` (repeatable; default: every phase).
    #[arg(long = "phase", value_name = "STEP|KEY")]
    pub phases: Vec<String>,
    /// A schedule policy: latency, S<W> or B<W> (repeatable; default: the
    /// build default, B1024).
    #[arg(long = "policy", value_name = "P")]
    pub policies: Vec<SchedulePolicy>,
    /// Transfer width: auto, word32 or paired64.
    #[arg(long, value_name = "WIDTH", default_value = "auto", value_parser = parse_width)]
    pub width: TransferWidth,
    /// Timed repetitions of schedule + encode per phase and policy (1..=1000).
    #[arg(long, value_name = "K", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=MAX_BENCH_ITERATIONS))]
    pub iterations: u32,
    /// Words the replay checks per phase (a deterministic sample); 0 checks every word.
    #[arg(long, value_name = "WORDS", default_value_t = 8192)]
    pub sample: u64,
    /// Also write the records as JSON to OUT.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
}

/// Parses `auto`, `word32` or `paired64`, as build files spell them.
pub fn parse_width(text: &str) -> Result<TransferWidth, WidthParseError> {
    text.parse()
}

pub fn run(arguments: &BenchSnapshotArguments) -> Result<(), CommandError> {
    let started = Instant::now();
    let snapshot = Snapshot::read(&arguments.file)
        .map_err(|error| CommandError::Input(format!("error: {error}")))?;
    let parsed = started.elapsed();
    // A phase the snapshot lacks is the flag's fault, not the file's.
    let selected = select_phases(&snapshot, &arguments.phases).map_err(|error| {
        CommandError::Input(format!(
            "error: --phase {}: {}: {error}",
            error.selector,
            arguments.file.display()
        ))
    })?;
    let phases = import_phases(&snapshot, &selected).map_err(|error| {
        CommandError::Input(format!(
            "error: {} is not a valid snapshot: {error}",
            arguments.file.display()
        ))
    })?;
    drop(snapshot);
    print_note!(
        "read {} in {:.0} ms; imported {} phases in {:.0} ms",
        arguments.file.display(),
        parsed.as_secs_f64() * 1e3,
        phases.len(),
        (started.elapsed() - parsed).as_secs_f64() * 1e3
    );
    let options = BenchOptions {
        policies: if arguments.policies.is_empty() {
            vec![DEFAULT_POLICY]
        } else {
            arguments.policies.clone()
        },
        width: arguments.width,
        iterations: usize::try_from(arguments.iterations)
            .unwrap_or(usize::MAX)
            .max(1),
        sample: (arguments.sample > 0).then_some(arguments.sample),
    };
    let mut records: Vec<BenchRecord> = Vec::new();
    let progress = super::progress::Bars::for_terminal();
    use crate::session::progress::Progress;
    progress.begin("phases", Some(phases.len() as u64));
    for phase in &phases {
        for record in bench_phase(phase, &options) {
            if !super::progress::quiet() {
                progress.print_line(&record.line());
            }
            records.push(record);
        }
        progress.advance(1);
    }
    progress.end();
    let failures = records.iter().filter(|record| !record.passed()).count();
    print_line!(
        "{}{} x {}, {} failed",
        timing(format_args!(
            "total {:.0} ms: ",
            started.elapsed().as_secs_f64() * 1e3
        )),
        crate::text::counted(phases.len() as u64, "phase", "phases"),
        crate::text::counted(options.policies.len() as u64, "policy", "policies"),
        failures
    );
    if let Some(path) = &arguments.json {
        write_json(Path::new(path), &records)?;
    }
    if failures > 0 {
        return Err(CommandError::Internal(format!(
            "{failures} (phase, policy) pairs failed their invariants"
        )));
    }
    Ok(())
}
