//! The command line: `superstep build`, `superstep run`, `superstep watch`, with `--set`
//! overrides, `--trace` and `RUST_LOG` tracing. Errors in user input are
//! rendered with their span into the build file and exit with code 2.
//!
//! [`Cli`] and [`Command`] name the commands (each one's about text and
//! example); each command's flags are declared once, as the `Arguments`
//! struct in its own file, which its `run` takes; [`run`] dispatches.

// First: its output macros are used by every command below.
#[macro_use]
pub mod stdout;

pub mod arguments;
pub mod audit;
pub mod bench_snapshot;
pub mod build;
pub mod cache_keys;
pub mod calibrate;
pub mod capture;
pub mod command_error;
pub mod common;
pub mod cost;
pub mod diff;
pub mod explain;
pub mod fit;
pub mod host_data;
pub mod memory;
pub mod packing;
pub mod phases;
pub mod preflight;
pub mod profile;
pub mod progress;
pub mod quantisation;
pub mod replay;
pub mod run;
pub mod search;
pub mod simulate;
pub mod snapshot;
pub mod sweep;
pub mod trace_output;
pub mod unknown_override;
pub mod verify;
pub mod watch;
pub mod why;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use arguments::{QueryArguments, fold_calibration};
use command_error::CommandError;

#[derive(Debug, Parser)]
#[command(
    name = "superstep",
    version,
    about = "An incremental, query-based compiler of Vision Transformers for IPU21-class tile machines",
    long_about = "superstep compiles a Vision Transformer described by a build query (queries/*.toml) into a \
                  bulk-synchronous program for a 1,472-tile IPU21 (C600). Every stage is a memoized salsa \
                  query. Set RUST_LOG=superstep=debug for tracing."
)]
pub struct Cli {
    /// Write a Chrome trace (chrome://tracing, Perfetto) of the compiler's query spans to FILE.
    #[arg(long, global = true, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print results only: no progress bars, no per-item lines, no tables.
    #[arg(long, short = 'q', global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Also print stage times and the queries each build executed (salsa's log).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line as the commands read it: parsed, with flags that
    /// stand for `--set` overrides (`--calibration`) folded into them.
    pub fn parse_arguments() -> Cli {
        let mut cli = <Cli as Parser>::parse();
        cli.command.fold_calibration();
        cli
    }

    /// How much the command prints: `--quiet`, `--verbose` or neither.
    pub fn verbosity(&self) -> progress::Verbosity {
        if self.quiet {
            progress::Verbosity::Quiet
        } else if self.verbose {
            progress::Verbosity::Verbose
        } else {
            progress::Verbosity::Normal
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compile the build query through the whole pipeline (graph, layouts,
    /// expansion, phase groups, schedules, rows, patches, placement, package,
    /// estimate); print per-stage times, counts and the estimate, and write
    /// artifacts/NAME/report.json, report.html, phases.csv, package.bin (each as
    /// [outputs] asks) and last-build.json (the record --why reads).
    ///
    /// Layouts: the plan `superstep search` kept in the cache for exactly
    /// this configuration when there is one, else the planner's; one line
    /// says which ("layouts: searched (cache; ...)" or "layouts: planner
    /// (...)"), and report.json's `layouts` records it. [[layout.override]]
    /// pins (and --set layout.override.OP=...) win over the search for the
    /// ops they name; an entry whose `when` names another configuration is
    /// skipped and counted.
    ///
    /// Examples (a one-layer vit-tiny, then the full one explained against it):
    ///   superstep build queries/vit-tiny.toml --set workload.layers=1
    ///   superstep build queries/vit-tiny.toml --why
    #[command(verbatim_doc_comment)]
    #[command(after_long_help = memory::MEMORY_MODEL)]
    Build(build::BuildArguments),
    /// Build, then list every exchange phase and compute step of the
    /// program in program order: step (the line's position among every
    /// exchange phase and compute step: the one index every command shows
    /// beside the key: the trace, report.html and report.json, packing,
    /// sweep, capture's phase ids; `explain --phase`, `packing --phase`
    /// and `bench-snapshot --phase` take it or the key), stable key, kind,
    /// executions, cycles per
    /// execution, total cycles and share of the estimate; for exchanges
    /// the horizon, endpoint lower bound, gap (horizon over bound), policy
    /// and its source, row bytes and patch words; for compute steps the
    /// busy tiles and occupancy (modelled busy tile-cycles over tiles x
    /// step cycles). Every figure is the program's modelled
    /// cost (the estimate's), not a hardware measurement; the lines' totals
    /// add up to the estimate.
    ///
    /// Examples (the five largest shares, then the overrides that would save time):
    ///   superstep phases queries/vit-tiny.toml --sort-by share --top 5
    ///   superstep phases queries/vit-tiny.toml --suggest
    #[command(verbatim_doc_comment)]
    Phases(phases::PhasesArguments),
    /// Build, then write the program's modelled timeline as a Chrome /
    /// Perfetto trace (open it in ui.perfetto.dev or chrome://tracing): one
    /// track per kind of step (exchange phases, kernels, copies, fills), each
    /// execution a slice named by its key with its figures (executions,
    /// cycles, horizon, bound, policy, rows) as arguments, Repeat iterations
    /// unrolled, at 1.5 GHz; and for chosen tiles their send and receive
    /// windows within every exchange phase, from its schedule. This is the
    /// estimate laid out in time, not a hardware profile.
    ///
    /// Example (tiles 0 and 7 in detail):
    ///   superstep profile queries/vit-tiny.toml -o artifacts/vit-tiny.trace.json --tiles 0,7
    #[command(verbatim_doc_comment)]
    Profile(profile::ProfileArguments),
    /// Compare two builds: A and B are each a report (a `.json` file that
    /// `superstep build` wrote, artifacts/NAME/report.json) or a build query
    /// (queries/*.toml), which is built first (nothing is written but the
    /// persistent cache).
    ///
    /// Prints the totals of A and B side by side with the delta (B - A) and
    /// its percentage: the estimate in ms and cycles, compute, exchange,
    /// setup and sync and patching cycles, barriers, the exchange table
    /// (bytes on the fullest tile), peak SRAM (bytes on the fullest tile)
    /// and the Repeat and sharing patch words. Then one line per exchange
    /// phase whose executions, horizon, policy (or chosen policy), row bytes
    /// (fullest tile or total) or patch words changed, and per phase only A
    /// or only B has, sorted by cycle delta (horizon x executions, largest
    /// absolute first), each saying what changed.
    ///
    /// Example (the default policy of vit-tiny against B1024):
    ///   superstep diff queries/vit-tiny.toml queries/vit-tiny.toml \
    ///       --set-b schedule.policy=B1024
    #[command(verbatim_doc_comment)]
    Diff(diff::DiffArguments),
    /// Audits of the build (`superstep audit copies`).
    ///
    /// Example:
    ///   superstep audit copies queries/vit-tiny.toml --boundary 0
    #[command(verbatim_doc_comment)]
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Explain one line of `superstep phases`: an exchange phase (provenance,
    /// transfers, schedule, rows per tile, patches, and where its policy
    /// comes from) or a compute step (its cost, busy tiles and occupancy,
    /// the op's plan and compute).
    ///
    /// Examples:
    ///   superstep explain queries/vit-tiny.toml --phase 'layer.mlp.down.a.rearrange#0'
    ///   superstep explain queries/vit-tiny.toml --phase 'layer.attn.core:kernels#0'
    ///   superstep explain queries/vit-tiny.toml --phase 13 --json
    #[command(verbatim_doc_comment)]
    Explain(explain::ExplainArguments),
    /// Build, then replay every exchange phase from its decoded rows on
    /// simulated tile memories whose sources hold known patterns, checking
    /// the delivered words (every word, or a sample per phase).
    ///
    /// Example (every word of every phase):
    ///   superstep replay queries/vit-tiny.toml --sample 0
    #[command(verbatim_doc_comment)]
    Replay(replay::ReplayArguments),
    /// Compile, then interpret the low program on the build's weights and
    /// compare its output with the FP32 reference (cosine, max abs error).
    /// The input is seeded unless --image or --input names one; --output
    /// writes the embedding, --reference compares it with another.
    ///
    /// Example (the seeded input; the embedding written as .npy):
    ///   superstep run queries/vit-tiny.toml --output artifacts/vit-tiny.npy
    #[command(verbatim_doc_comment)]
    Run(run::RunArguments),
    /// Build, then execute the package on simulated tile memories (placed
    /// addresses, decoded and patched exchange rows) and compare its output
    /// with the FP32 reference; prints where the package came from, the
    /// exchange events simulated, the estimated cycles and the simulation's
    /// wall time.
    ///
    /// The package executed is the file on disk: FILE with --package (it
    /// must have been written by `superstep build` of the same query), else
    /// artifacts/NAME/package.bin when it is up to date (its header's build
    /// key matches the query and this compiler); otherwise the package is
    /// assembled in memory and the command says why.
    ///
    /// Examples (the package a build wrote; --poisoned reads unwritten bytes as NaN):
    ///   superstep build queries/vit-tiny.toml
    ///   superstep simulate queries/vit-tiny.toml --package artifacts/vit-tiny/package.bin
    ///   superstep simulate queries/vit-tiny.toml --poisoned
    #[command(verbatim_doc_comment)]
    Simulate(simulate::SimulateArguments),
    /// Build, then write every exchange phase of the build as a schema-4
    /// exchange snapshot (the seed system's capture format): absolute
    /// addresses from the build's placement, one source address per Repeat
    /// iteration, plus provenance (phase key, operator, executions, and the
    /// symbolic allocations that make a re-import exact). Each phase's id
    /// is its step, the index `superstep phases` shows.
    ///
    /// Example:
    ///   superstep capture queries/vit-tiny.toml -o artifacts/vit-tiny.snapshot.json
    #[command(verbatim_doc_comment)]
    Capture(capture::CaptureArguments),
    /// Import a schema-4 exchange snapshot and, for every (selected) phase and
    /// policy, schedule it, encode its rows, validate the schedule, decode and
    /// check the rows and replay them; print one line per phase and policy
    /// (transfers, destinations, horizon, endpoint lower bound, gap, row words,
    /// schedule+encode ms min/median/max, validation ms, invariants) and the
    /// total time. A malformed snapshot is an error naming the phase and the
    /// transfer (exit code 2).
    ///
    /// --phase takes a phase's id (for a superstep capture, its step: the
    /// first column of `superstep phases`) or its key.
    ///
    /// Example (capture a snapshot, then bench one phase, by its key, under two policies):
    ///   superstep capture queries/vit-tiny.toml -o artifacts/vit-tiny.snapshot.json
    ///   superstep bench-snapshot artifacts/vit-tiny.snapshot.json --phase 'layer.attn.merge#0' --policy latency --policy B1024
    #[command(verbatim_doc_comment)]
    BenchSnapshot(bench_snapshot::BenchSnapshotArguments),
    /// Policy frontiers: build, then measure every exchange phase under a
    /// set of (policy, width) configurations, each point scheduled,
    /// validated (schedule validator and row checker), encoded and patched.
    ///
    /// Per point: horizon, endpoint bound, max and total row bytes (encoded,
    /// before cross-phase sharing), Repeat patch words and PASS/FAIL. Every
    /// point is memoized and kept in the persistent cache, so a second
    /// sweep (even in a new process) schedules nothing. Writes, under
    /// outputs.directory/NAME/sweep/: results.csv (every point),
    /// frontier.csv (each phase's Pareto points on horizon, max row bytes
    /// and total row bytes), selection.csv (what selections (a) and (b)
    /// take per phase) and index.html (one scatter per phase, horizon
    /// against max row bytes, the phase as built ringed; a summary table).
    /// Prints the saving, weighted by executions, of (a) taking per phase
    /// the cheapest point (horizon plus Repeat patching) that grows neither
    /// storage metric over the phase as built and (b) the cheapest whose
    /// max row grows by at most --window bytes.
    ///
    /// Example:
    ///   superstep sweep queries/vit-tiny.toml --write-overrides tiny-overrides.toml --apply a
    #[command(verbatim_doc_comment)]
    Sweep(sweep::SweepArguments),
    /// The packing counterfactuals (seed 002) of exchange phases: for each
    /// phase (every one, those --phase names, or the --top N by endpoint
    /// fragmentation, the most piece endpoints on one tile), the original
    /// and four alternatives that keep every piece's source tile, recipient
    /// set and payload bytes:
    ///   source-packing    each source tile gathers what it sends into one
    ///                     staging buffer (by route, in destination order)
    ///   receiver-staging  each receiver takes its pieces into one staging
    ///                     buffer (by route, in source order), then scatters
    ///   both              both ends staged: one run per route
    ///   coalesced-prefix  no copies: the pieces before the first one that
    ///                     depends on an earlier piece are sorted by route
    ///                     and source and coalesced; the rest keeps its order
    /// Each alternative is checked against the original (the same bytes
    /// delivered, the same words per route, order kept where it matters),
    /// then scheduled, validated, encoded and row-checked with the real
    /// scheduler and encoder (memoized and kept in the persistent cache).
    /// Per alternative: transfers, max row bytes per tile and total row
    /// bytes (before cross-phase sharing), horizon, endpoint bound, added
    /// ideal copy cycles (8 B/cycle: the busiest tile's gather plus the
    /// busiest tile's scatter), the change (horizon + copies - the
    /// original's horizon), staging KiB on the fullest tile (source and
    /// receive staging together), contiguous copy runs and greedy affine
    /// copy groups (over all tiles, and the most on one tile). A phase
    /// whose pieces read, overwrite or are overwritten by what earlier
    /// pieces of the same phase touch (under any Repeat binding) is
    /// refused the three staging alternatives, and the first such piece
    /// is named. Writes packing.json and packing.html under
    /// outputs.directory/NAME/packing/.
    ///
    /// Example:
    ///   superstep packing queries/vit-tiny.toml --top 2
    ///   superstep packing queries/vit-tiny.toml --phase 'layer.mlp.down.a.rearrange#0' --policy B1024
    ///   superstep packing --snapshot capture.json --top 4
    #[command(verbatim_doc_comment)]
    Packing(packing::PackingArguments),
    /// Search layouts for the whole program by its own estimate. First a
    /// beam over the matrix products and attention in program order (width
    /// --beam-width), each state priced without scheduling: the cost
    /// model's cycles of every product plus the endpoint bound of every
    /// conversion the planner inserts, with Pareto retention (price,
    /// largest working set) per output format; its best plan is compiled
    /// and kept when the real estimate beats the build's. Then, from there,
    /// local steps that try the next partitions of one
    /// matrix product or attention at a time (the cost model's cheapest,
    /// the cheapest once a block that pairs is priced at half its words,
    /// the least memory, and those whose blocks line up with the value they
    /// read or with whole heads; a product's in the tile order that lets
    /// partner tiles share a replicated block, so it moves as paired 64-bit
    /// transfers), then the accepted partition's other tile orders. A step
    /// is accepted only when the whole program, re-planned,
    /// scheduled under the build's policy, placed and estimated, is cheaper
    /// and still fits. Each trial is an incremental rebuild; the result is
    /// kept in the persistent cache, so a second search of the same build
    /// and settings computes nothing.
    ///
    /// By default the search is quick: one pass over the ops that cost at
    /// least 1% of the estimate (the others keep the planner's partition),
    /// the two partitions the cost model ranks cheapest, and the tile
    /// orders: on SigLIP so400m it takes under a minute and finds three
    /// quarters of what the thorough search (--thorough: two passes over
    /// every op, six cheapest, three per alignment) finds in six minutes.
    ///
    /// The best plan is also kept in the cache under the configuration
    /// searched (model, batch, layers, tiles, precision, scheduling
    /// settings; not the search's own flags): every later build of exactly
    /// that configuration over the same cache uses it ("layouts: searched"),
    /// any other configuration the planner's layouts ("layouts: planner").
    /// --write-overrides writes the plan as [[layout.override]] pins, each
    /// with a `when` naming the configuration searched.
    ///
    /// Example:
    ///   superstep search
    ///   superstep build        # layouts: searched (cache; ...)
    ///   superstep search --thorough
    ///   superstep search --write-overrides queries/siglip-so400m.layout.toml
    ///   superstep build --set layout.override.layer.mlp.down=8x8x23
    #[command(verbatim_doc_comment)]
    Search(search::SearchArguments),
    /// Check a package file: its header (format, length, BLAKE3 digest),
    /// then every row decoded, every patch and every placed address within
    /// bounds, then every exchange phase execution replayed from its rows
    /// against its transfer list. Given the build QUERY it was written for
    /// (and its --set arguments), also compile that build's program and
    /// check that the file is its package, as `simulate --package` admits
    /// it: what simulate would refuse, verify refuses first. Exit code 2
    /// when the file is unusable or a check fails.
    ///
    /// Example (the package a build wrote):
    ///   superstep build queries/vit-tiny.toml
    ///   superstep verify artifacts/vit-tiny/package.bin queries/vit-tiny.toml
    #[command(verbatim_doc_comment)]
    Verify(verify::VerifyArguments),
    /// Keep one compiler session alive and rebuild incrementally whenever the
    /// build file changes; print which inputs changed, which queries re-ran
    /// (by stage), the time per stage and how the headline metrics moved.
    ///
    /// Watches the build file's folder (editors save by renaming a temporary
    /// file over the target) and waits for a quiet period before rebuilding.
    /// A save that leaves the content unchanged does nothing. A save that
    /// changes the content during a build cancels that build ("build N
    /// cancelled (the file changed)") and builds the new content. An
    /// invalid file or a failing build is reported (a failing build as
    /// `superstep build` explains it) and watching goes on. A build file
    /// missing when watching starts is an error (exit code 2). Ctrl-C stops
    /// (exit code 0) after the current build; a second Ctrl-C stops
    /// without waiting for it.
    ///
    /// Examples (until Ctrl-C; the second builds once and stops):
    ///   superstep watch queries/vit-tiny.toml
    ///   superstep watch queries/vit-tiny.toml --exit-after 0
    #[command(verbatim_doc_comment)]
    Watch(watch::WatchArguments),
    /// Price one kernel call on one tile with the kernel cost model: the
    /// formula fitted to IPU21 hardware measurements (calibration/ipu21.csv,
    /// from design/CALIBRATION.md), with its terms: machine facts (the matrix
    /// unit's work at its rate) and fitted constants times counts read off
    /// the shape. For comparing the model with your own profiles.
    ///
    /// Examples:
    ///   superstep cost matmul --rows 82 --reduction 192 --cols 160 --inputs fp8
    ///   superstep cost softmax --rows 8 --keys 729 --json
    ///   superstep cost cast --rows 164 --cols 384 --into panels
    #[command(verbatim_doc_comment)]
    Cost(cost::CostArguments),
    /// Refit the kernel cost model to measured calls: read a CSV of
    /// (kernel, shape, cycles), fit each kernel family's constants by least
    /// squares on relative error (the shared vector call first, from the
    /// adds; a family with too few points keeps its constants), print every
    /// point's error before and after and every constant, and write a
    /// calibration file (-o) that `superstep cost --calibration FILE` reads.
    /// A bad row is an error naming its line (exit 2).
    ///
    /// Examples:
    ///   superstep calibrate calibration/ipu21.csv
    ///   superstep calibrate my-profile.csv -o my-calibration.txt
    #[command(verbatim_doc_comment)]
    Calibrate(calibrate::CalibrateArguments),
    /// Build, then keep DIR as the build's per-phase record: one text file
    /// per exchange phase (exchange/KEY.txt: provenance, transfers,
    /// schedule, rows, patches, the placement of what it touches, its
    /// cycles), one per compute step (compute/KEY.txt: kernel shapes, runs,
    /// cycles) and program.txt (settings, ops with plans and layouts, the
    /// steps in order, row table, placement peaks, the estimate and each
    /// step's share). One figure per line, the same bytes on every run, so
    /// a change of one phase is a diff of that phase's file and the
    /// program's. Only files that differ are rewritten (atomically).
    ///
    /// --check writes nothing, prints per changed file what changed and
    /// exits 1 when anything differs (0 when nothing does): a CI gate.
    /// --accept takes the build as the snapshot. A folder of another
    /// compiler version, build or --detail, or a damaged file, is exit 2
    /// unless --accept.
    ///
    /// Examples (write, change one phase's policy, check, accept):
    ///   superstep snapshot queries/vit-tiny.toml --dir snapshots/vit-tiny
    ///   superstep snapshot queries/vit-tiny.toml --dir snapshots/vit-tiny --check \
    ///       --set 'schedule.override.layer.attn.split_q#0=B64'
    ///   superstep snapshot queries/vit-tiny.toml --dir snapshots/vit-tiny --accept \
    ///       --set 'schedule.override.layer.attn.split_q#0=B64'
    #[command(verbatim_doc_comment)]
    Snapshot(snapshot::SnapshotArguments),
    /// Manage the persistent cache's signing keys (see docs/cache.md).
    #[command(subcommand)]
    Cache(cache_keys::CacheCommand),
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The copy-boundary audit (seed 000): compile the first half and the
    /// phase groups (nothing is scheduled), then, for every exchange
    /// boundary of the low program (local copies and zero fills standing
    /// between two exchanges, in program order, the Repeat body on its own;
    /// kernels, checkpoints and Repeat steps end a boundary), list its
    /// copy/fill groups (one copy or fill step each) and whether each may
    /// move before the preceding exchange, after the following one, both or
    /// neither, from byte ranges of affine copy rows on alias roots (never
    /// whole allocations). A blocked direction names its hazard: kind
    /// (write/read, read/write, write/write in program order), the copy or
    /// fill (index, tile, bytes), the transfer and exchange (or the group it
    /// would overtake), the allocations, their alias root and the
    /// overlapping bytes. Each boundary also shows what copy motion decided
    /// there (merged or not, and why), from its decision log.
    ///
    /// The table: one line per boundary (index, exchange keys before and
    /// after, copies, fills, groups, groups movable before and after, copy
    /// motion's decision), then each blocked group and its hazards.
    ///
    /// Example:
    ///   superstep audit copies queries/vit-tiny.toml --boundary 0
    #[command(verbatim_doc_comment)]
    Copies(audit::CopiesArguments),
}

impl Command {
    /// The build query arguments of a command that has them.
    pub fn query_arguments(&self) -> Option<&QueryArguments> {
        Some(match self {
            Command::Build(arguments) => &arguments.query,
            Command::Phases(arguments) => &arguments.query,
            Command::Profile(arguments) => &arguments.query,
            Command::Explain(arguments) => &arguments.query,
            Command::Replay(arguments) => &arguments.query,
            Command::Capture(arguments) => &arguments.query,
            Command::Sweep(arguments) => &arguments.query,
            Command::Search(arguments) => &arguments.query,
            Command::Watch(arguments) => &arguments.query,
            Command::Audit(AuditCommand::Copies(arguments)) => &arguments.query,
            Command::Packing(arguments) => &arguments.query,
            Command::Run(arguments) => &arguments.query,
            Command::Simulate(arguments) => &arguments.query,
            Command::Snapshot(arguments) => &arguments.query,
            Command::Verify(arguments) if arguments.query.query.is_some() => &arguments.query,
            Command::Diff(_)
            | Command::BenchSnapshot(_)
            | Command::Verify(_)
            | Command::Cost(_)
            | Command::Cache(_)
            | Command::Calibrate(_) => return None,
        })
    }

    /// Folds `--calibration FILE` into the `--set` overrides of the
    /// command's build queries ([`QueryArguments::fold_calibration`]).
    pub fn fold_calibration(&mut self) {
        let query = match self {
            Command::Build(arguments) => &mut arguments.query,
            Command::Phases(arguments) => &mut arguments.query,
            Command::Profile(arguments) => &mut arguments.query,
            Command::Explain(arguments) => &mut arguments.query,
            Command::Replay(arguments) => &mut arguments.query,
            Command::Capture(arguments) => &mut arguments.query,
            Command::Sweep(arguments) => &mut arguments.query,
            Command::Search(arguments) => &mut arguments.query,
            Command::Watch(arguments) => &mut arguments.query,
            Command::Audit(AuditCommand::Copies(arguments)) => &mut arguments.query,
            Command::Packing(arguments) => &mut arguments.query,
            Command::Run(arguments) => &mut arguments.query,
            Command::Simulate(arguments) => &mut arguments.query,
            Command::Snapshot(arguments) => &mut arguments.query,
            Command::Diff(arguments) => {
                fold_calibration(&mut arguments.sets, arguments.calibration.take());
                return;
            }
            Command::Verify(arguments) => &mut arguments.query,
            Command::BenchSnapshot(_)
            | Command::Cost(_)
            | Command::Calibrate(_)
            | Command::Cache(_) => return,
        };
        query.fold_calibration();
    }
}

/// Runs the command `cli` names.
pub fn run(cli: &Cli) -> Result<(), CommandError> {
    match &cli.command {
        Command::Build(arguments) => build::run(arguments),
        Command::Phases(arguments) => phases::run(arguments),
        Command::Profile(arguments) => profile::run(arguments),
        Command::Diff(arguments) => diff::run(arguments),
        Command::Audit(AuditCommand::Copies(arguments)) => audit::run(arguments),
        Command::Explain(arguments) => explain::run(arguments),
        Command::Replay(arguments) => replay::run(arguments),
        Command::Run(arguments) => run::run(arguments),
        Command::Simulate(arguments) => simulate::run(arguments),
        Command::Capture(arguments) => capture::run(arguments),
        Command::BenchSnapshot(arguments) => bench_snapshot::run(arguments),
        Command::Sweep(arguments) => sweep::run(arguments),
        Command::Packing(arguments) => packing::run(arguments),
        Command::Search(arguments) => search::run(arguments),
        Command::Verify(arguments) => verify::run(arguments),
        Command::Watch(arguments) => watch::run(arguments),
        Command::Cost(arguments) => cost::run(arguments),
        Command::Calibrate(arguments) => calibrate::run(arguments),
        Command::Snapshot(arguments) => snapshot::run(arguments),
        Command::Cache(command) => cache_keys::run(command),
    }
}
