//! `superstep simulate`: build, assemble the package, execute it on
//! simulated tile memories (`crate::sim::package`) and compare the output
//! with the FP32 reference.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{
    agreement_result, artifacts_directory, build_checked, build_weights, check_package_build,
    finish_cache, load, open_session, reference_output,
};
use super::host_data::{self, HostArguments};
use crate::build_file::BuildQuery;
use crate::build_file::package_build_key as build_key;
use crate::package::Package;
use crate::package::file::PackageHeader;
use crate::session::Session;
use crate::sim::compare::compare;
use crate::sim::package::{SimulationOptions, admit, simulate_admitted};

/// The flags of `superstep simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    #[command(flatten)]
    pub host: HostArguments,
    /// Execute this package file (a foreign, truncated, corrupt or stale
    /// file is an error, exit code 2).
    #[arg(long, value_name = "FILE")]
    pub package: Option<PathBuf>,
    /// Start tile memory as NaN and, instead of stopping at the first
    /// kernel read of a byte the read value's producer never wrote, count
    /// every such read and read those bytes as NaN: results that depend on
    /// undefined bytes show as non-finite or as differences (the command
    /// still fails when there was any).
    #[arg(long)]
    pub poisoned: bool,
}

/// The package a simulation executes and where it came from.
fn choose_package(
    session: &Session,
    query: &BuildQuery,
    from_flag: Option<(Package, &Path)>,
) -> Result<(Package, String), CommandError> {
    let key = build_key(query);
    if let Some((package, path)) = from_flag {
        return Ok((package, format!("read from {}", path.display())));
    }
    let path = artifacts_directory(query).join("package.bin");
    let assembled = |why: String| -> Result<(Package, String), CommandError> {
        let package = session
            .package()
            .map_err(|error| CommandError::Internal(format!("package: {error}")))?;
        Ok((package, format!("assembled in memory ({why})")))
    };
    match PackageHeader::read(&path) {
        Ok(header) if header.build == key => match Package::read(&path) {
            Ok(package) => Ok((
                package,
                format!("read from {} (up to date)", path.display()),
            )),
            Err(error) => {
                eprintln!("warning: {error}; simulating a package assembled in memory");
                assembled(format!("{} is unusable", path.display()))
            }
        },
        Ok(_) => assembled(format!(
            "{} is from another query or compiler; `superstep build` rewrites it",
            path.display()
        )),
        Err(_) if !path.exists() => assembled(format!("{} does not exist", path.display())),
        Err(error) => assembled(format!("{error}")),
    }
}

pub fn run(arguments: &SimulateArguments) -> Result<(), CommandError> {
    let mut query = load(&arguments.query)?;
    let host_data = host_data::read(&arguments.host, &query)?;
    // A package named on the command line is read and checked before the compile.
    let from_flag = match arguments.package.as_deref() {
        Some(path) => {
            let (package, header) = Package::read_with_header(path)
                .map_err(|error| CommandError::Input(format!("error: --package: {error}")))?;
            check_package_build("--package ", path, &header, &query)?;
            Some((package, path))
        }
        None => None,
    };
    let mut session = open_session(&arguments.query, &mut query)?;
    let started = Instant::now();
    let outcome = build_checked(&mut session, &query, &arguments.query)?;
    finish_cache(session.cache());
    let flagged = from_flag.as_ref().map(|(_, path)| path.to_path_buf());
    let (package, origin) = choose_package(&session, &query, from_flag)?;
    let layouts = session.layouts()?;
    let program = session.low_program()?;
    // A package from disk is executed only when it fits this program
    // (checked before any tile memory is made).
    let admitted = admit(&package, &program).map_err(|refusal| {
        let source = flagged.unwrap_or_else(|| artifacts_directory(&query).join("package.bin"));
        CommandError::Input(format!(
            "error: {}: the package cannot be executed safely: {refusal}\n  help: \
             `superstep verify {}` lists every failure; `superstep build` writes it again",
            source.display(),
            source.display()
        ))
    })?;
    let compile_time = started.elapsed();
    let graph = session.graph();
    let started = Instant::now();
    let weights = host_data.apply(build_weights(&session)?)?;
    let weights_time = started.elapsed();
    let started = Instant::now();
    // A kernel read of a byte its value's producer never wrote is an
    // error; --poisoned counts them all and shows what they would compute.
    let options = SimulationOptions {
        strict: !arguments.poisoned,
        poisoned: arguments.poisoned,
    };
    let progress = super::progress::Bars::for_terminal();
    use crate::session::progress::Progress;
    progress.begin("simulation", None);
    let run = simulate_admitted(admitted, &program, &layouts, &weights, options);
    progress.end();
    let run =
        run.map_err(|error| CommandError::Internal(format!("package simulation: {error}")))?;
    let simulate_time = started.elapsed();
    let (reference, reference_time) = reference_output(graph, &weights, &progress)?;
    let agreement = compare(&run.output, &reference);
    print_line!(
        "superstep simulate {}: {} ({}) on {} tiles, package of {} phases",
        query.name,
        query.workload.model.name,
        crate::text::counted(
            graph.repeat.as_ref().map_or(0, |repeat| repeat.iterations),
            "layer",
            "layers"
        ),
        query.machine.tiles,
        package.phases.len()
    );
    print_line!("  package {origin}");
    print_note!(
        "  compile {:.3} s, weights {:.3} s, package simulation {:.3} s, FP32 reference {:.3} s",
        compile_time.as_secs_f64(),
        weights_time.as_secs_f64(),
        simulate_time.as_secs_f64(),
        reference_time.as_secs_f64()
    );
    let counts = run.counts;
    print_line!(
        "  executed {} kernel runs, {} copy rows, {} fills; {} exchange phases from decoded rows: \
         {} receives ({} words), {} exchange events, {} Repeat-patched and {} sharing-patched \
         row words",
        counts.kernel_runs,
        counts.copy_rows,
        counts.fills,
        counts.phases_run,
        counts.deliveries,
        counts.words_received,
        counts.exchange_events,
        counts.patched_words,
        counts.sharing_patched_words
    );
    print_line!(
        "  paired receives whose two members' pointers differ (IPU21.md wants one address; \
         a split pair is refused): {}",
        counts.paired_receives_at_split_addresses
    );
    print_line!(
        "  kernel operand reads of bytes their value's producer never wrote: {} of never-written \
         memory, {} of bytes another allocation wrote{}",
        counts.unwritten_kernel_reads,
        counts.foreign_kernel_reads,
        run.first_foreign_read
            .as_ref()
            .map_or(String::new(), |first| format!("; first: {first}"))
    );
    if let Some(back) = &outcome.back {
        print_line!(
            "  estimated {} cycles ({:.3} ms), {} barriers",
            back.headline.estimate.total_cycles,
            back.headline.estimate.milliseconds,
            back.headline.estimate.barriers
        );
    }
    let from_checkpoint = query.workload.weights.is_checkpoint();
    super::quantisation::report(&weights, from_checkpoint && !super::progress::quiet(), "  ");
    super::quantisation::report_activations(
        counts.fp8_activations,
        counts.saturated_activations,
        "  ",
    );
    print_line!("  {}", host_data.input_line);
    print_line!("  {agreement}");
    for line in host_data.finish(&arguments.host, &run.output, &reference)? {
        print_line!("  {line}");
    }
    let undefined = counts.unwritten_kernel_reads + counts.foreign_kernel_reads;
    if undefined > 0 {
        return Err(CommandError::Internal(format!(
            "{undefined} kernel operand reads of bytes their value's producer never wrote: the \
             program leaves padding undefined (without --poisoned the first one is named)"
        )));
    }
    agreement_result(&agreement)
}
