//! `superstep capture`: build, then write the build's exchange phases as a
//! schema-4 snapshot (`crate::snapshot`), with or without the symbolic
//! provenance that makes a re-import exact.

use std::path::PathBuf;
use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_session};
use crate::snapshot::{capture_session, snapshot_of_build};

/// The flags of `superstep capture`.
#[derive(Debug, clap::Args)]
pub struct CaptureArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// The snapshot file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE.json")]
    pub output: PathBuf,
    /// Leave out the symbolic provenance (allocations, source_allocation,
    /// destination_allocations): the file then holds the seed system's
    /// fields plus phase key, operator and executions, and an import
    /// reconstructs allocations from the address pattern.
    #[arg(long)]
    pub without_allocations: bool,
}

pub fn run(arguments: &CaptureArguments) -> Result<(), CommandError> {
    let mut query = load(&arguments.query)?;
    let mut session = open_session(&arguments.query, &mut query)?;
    let started = Instant::now();
    build_checked(&mut session, &query, &arguments.query)?;
    let built = started.elapsed();
    finish_cache(session.cache());
    let started = Instant::now();
    let phases = capture_session(&session)
        .and_then(|mut phases| {
            for phase in &mut phases {
                phase.symbolic = !arguments.without_allocations;
            }
            snapshot_of_build(&phases, query.machine.tiles)
        })
        .map_err(|error| CommandError::Internal(format!("capture: {error}")))?;
    let bytes = phases.to_bytes();
    super::common::write_output(&arguments.output, &bytes)?;
    let transfers: usize = phases
        .phases
        .iter()
        .map(|phase| phase.transfers.len())
        .sum();
    let destinations: usize = phases
        .phases
        .iter()
        .flat_map(|phase| &phase.transfers)
        .map(|transfer| transfer.destinations.len())
        .sum();
    print_line!(
        "captured {} phases of {} ({} transfers, {} destinations) to {}: {:.1} MB{}",
        phases.phases.len(),
        query.name,
        transfers,
        destinations,
        arguments.output.display(),
        bytes.len() as f64 / 1e6,
        super::progress::timing(format_args!(
            "; build {:.2} s, capture {:.2} s",
            built.as_secs_f64(),
            started.elapsed().as_secs_f64()
        ))
    );
    Ok(())
}
