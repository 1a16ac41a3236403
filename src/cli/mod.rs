//! The command line: `superstep build`, `superstep run`, `superstep watch`, with `--set`
//! overrides, `--trace` and `RUST_LOG` tracing. Errors in user input are
//! rendered with their span into the build file and exit with code 2.

// First: its output macros are used by every command below.
#[macro_use]
pub mod stdout;

pub mod audit;
pub mod bench_snapshot;
pub mod build;
pub mod capture;
pub mod command_error;
pub mod common;
pub mod diff;
pub mod explain;
pub mod fit;
pub mod host_data;
pub mod memory;
pub mod overrides;
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
pub mod sweep;
pub mod trace_output;
pub mod verify;
pub mod watch;
pub mod why;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A fraction in 0..=1.
fn parse_fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number; give a fraction such as 0.1"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is outside 0..=1"))
    }
}

/// The most timed repetitions `bench-snapshot --iterations` accepts.
pub const MAX_BENCH_ITERATIONS: i64 = 1000;

/// The default build: SigLIP so400m on the C600.
pub const DEFAULT_QUERY: &str = "queries/siglip-so400m.toml";

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

/// What to compile: a build query file and field overrides.
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArguments {
    /// The build query file (default: queries/siglip-so400m.toml).
    #[arg(value_name = "QUERY")]
    pub query: Option<PathBuf>,
    /// Override one field of the build query, e.g. `--set workload.layers=2` or
    /// `--set machine.tiles=64`. Repeatable; later ones win.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    #[command(flatten)]
    pub cache: CacheArguments,
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
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compile the build query through the whole pipeline (graph, layouts,
    /// expansion, phase groups, schedules, rows, patches, placement, package,
    /// estimate); print per-stage times, counts and the estimate, and write
    /// artifacts/NAME/report.json, report.html, phases.csv, package.bin (each as
    /// [outputs] asks) and last-build.json (the record --why reads).
    #[command(after_long_help = memory::MEMORY_MODEL)]
    Build {
        #[command(flatten)]
        query: QueryArguments,
        /// Also print one line per op (plan, output format, counts).
        #[arg(long)]
        ops: bool,
        /// Print one JSON document instead of the text: report.json's record
        /// (schema_version, compiler, the figures), the files written and
        /// the suggestions measured. The same build prints the same bytes.
        #[arg(long)]
        json: bool,
        /// Explain the build against the last successful build of the same NAME.
        ///
        /// Every successful build records its effective query (build file
        /// text, folder and --set overrides) in artifacts/NAME/last-build.json.
        /// With --why, that recorded query is built first in a fresh session,
        /// then the current query is applied and built incrementally on top,
        /// and the build prints which input fields changed (old -> new) and
        /// which queries they invalidated, by stage, with op names. Cost: it
        /// builds twice (the recorded query cold, then the current one
        /// incrementally); the stage times shown are the second build's.
        /// Without a usable record it says so and builds once, cold.
        #[arg(long, verbatim_doc_comment)]
        why: bool,
        /// How many suggested overrides to end with (0: none, and none are
        /// measured; report.html then says so). Each is the best standard
        /// policy of one of the four most expensive exchange phases, proved
        /// by scheduling it under every standard policy: on a cold cache
        /// that is the largest part of a SigLIP build's time (memoized and
        /// cached after); `superstep phases --suggest` lists all.
        #[arg(long, value_name = "N", default_value_t = 3)]
        suggestions: usize,
    },
    /// Build, then list every exchange phase and compute step of the
    /// program in program order: index (the phase index `capture` and
    /// `bench-snapshot` use; compute steps are numbered on their own),
    /// stable key, kind, executions, cycles per execution, total cycles and
    /// share of the estimate; for exchanges the horizon, endpoint lower
    /// bound, gap, policy and its source, row bytes and patch words; for
    /// compute steps the busy tiles and occupancy (modelled busy tile-cycles
    /// over tiles x step cycles). Every figure is the program's modelled
    /// cost (the estimate's), not a hardware measurement; the lines' totals
    /// add up to the estimate.
    Phases {
        #[command(flatten)]
        query: QueryArguments,
        /// Order of the lines.
        #[arg(long, value_enum, default_value = "order")]
        sort_by: phases::SortKey,
        /// Only lines whose one execution takes at most N cycles.
        #[arg(long, value_name = "N")]
        max_cycles: Option<u64>,
        /// Only compute steps whose occupancy is at most F (0..=1).
        #[arg(long, value_name = "F", value_parser = parse_fraction)]
        max_occupancy: Option<f64>,
        /// Only exchange phases, or only compute steps.
        #[arg(long, value_enum)]
        kind: Option<phases::KindFilter>,
        /// Only the step whose execution covers this cycle of the modelled
        /// timeline (Repeat iterations unrolled).
        #[arg(long, value_name = "CYCLE", conflicts_with_all = ["sort_by", "top", "suggest"])]
        at_offset: Option<u64>,
        /// At most N lines (after sorting).
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Print the selected lines as JSON.
        #[arg(long)]
        json: bool,
        /// Instead of the lines: every phase whose cost (horizon plus Repeat
        /// patching) a standard policy (latency, S64, S256, B256, B1024,
        /// list, matching at the build's width) beats, measured by
        /// scheduling it, with the saving and the `--set` that applies it.
        #[arg(long)]
        suggest: bool,
    },
    /// Build, then write the program's modelled timeline as a Chrome /
    /// Perfetto trace (open it in ui.perfetto.dev or chrome://tracing): one
    /// track per kind of step (exchange phases, kernels, copies, fills), each
    /// execution a slice named by its key with its figures (executions,
    /// cycles, horizon, bound, policy, rows) as arguments, Repeat iterations
    /// unrolled, at 1.5 GHz; and for chosen tiles their send and receive
    /// windows within every exchange phase, from its schedule. This is the
    /// estimate laid out in time, not a hardware profile.
    Profile {
        #[command(flatten)]
        query: QueryArguments,
        /// The trace file to write (e.g. program.trace.json).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        /// Tiles shown in detail, e.g. `0,7,100-103` (at most 64; default:
        /// the two tiles that move the most words and the peak-SRAM tile).
        #[arg(long, value_name = "LIST", value_parser = profile::parse_tile_list)]
        tiles: Option<profile::TileList>,
    },
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
    Diff {
        /// Build A: a report.json file or a build query file.
        #[arg(value_name = "A")]
        a: PathBuf,
        /// Build B: a report.json file or a build query file.
        #[arg(value_name = "B")]
        b: PathBuf,
        /// Override one field of both build queries (repeatable; before
        /// --set-a and --set-b, which win).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Override one field of build query A (repeatable).
        #[arg(long = "set-a", value_name = "KEY=VALUE")]
        sets_a: Vec<String>,
        /// Override one field of build query B (repeatable).
        #[arg(long = "set-b", value_name = "KEY=VALUE")]
        sets_b: Vec<String>,
        /// At most N phase lines (the largest cycle deltas).
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Print the comparison as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArguments,
    },
    /// Audits of the build (`superstep audit copies`).
    Audit {
        #[command(subcommand)]
        what: AuditCommand,
    },
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
    Explain {
        #[command(flatten)]
        query: QueryArguments,
        /// The line: an exchange phase's key (`op#ordinal`), a compute
        /// step's key (`op:kernels#ordinal`, `:copies`, `:fills`), or its
        /// step number (the first column of `superstep phases`).
        #[arg(long, value_name = "KEY|STEP")]
        phase: String,
        /// Print the figures as one JSON object (schema_version, compiler,
        /// the phases line, and the exchange's or compute step's detail).
        #[arg(long)]
        json: bool,
    },
    /// Build, then replay every exchange phase from its decoded rows on
    /// simulated tile memories whose sources hold known patterns, checking
    /// the delivered words (every word, or a sample per phase).
    Replay {
        #[command(flatten)]
        query: QueryArguments,
        /// Words checked per phase (a deterministic sample); 0 checks every word.
        #[arg(long, value_name = "WORDS", default_value_t = 8192)]
        sample: u64,
    },
    /// Compile, then interpret the low program on the build's weights and
    /// compare its output with the FP32 reference (cosine, max abs error).
    /// The input is seeded unless --image or --input names one; --output
    /// writes the embedding, --reference compares it with another.
    Run {
        #[command(flatten)]
        query: QueryArguments,
        #[command(flatten)]
        host: host_data::HostArguments,
    },
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
    Simulate {
        #[command(flatten)]
        query: QueryArguments,
        #[command(flatten)]
        host: host_data::HostArguments,
        /// Execute this package file (a foreign, truncated, corrupt or stale
        /// file is an error, exit code 2).
        #[arg(long, value_name = "FILE")]
        package: Option<PathBuf>,
        /// Start tile memory as NaN and read bytes an operand never wrote
        /// (but another allocation did) as NaN: results that depend on
        /// undefined bytes show as non-finite or as differences.
        #[arg(long)]
        poisoned: bool,
    },
    /// Build, then write every exchange phase of the build as a schema-4
    /// exchange snapshot (the seed system's capture format): absolute
    /// addresses from the build's placement, one source address per Repeat
    /// iteration, plus provenance (phase key, operator, executions, and the
    /// symbolic allocations that make a re-import exact).
    Capture {
        #[command(flatten)]
        query: QueryArguments,
        /// The snapshot file to write.
        #[arg(short = 'o', long = "output", value_name = "FILE.json")]
        output: PathBuf,
        /// Leave out the symbolic provenance (allocations, source_allocation,
        /// destination_allocations): the file then holds the seed system's
        /// fields plus phase key, operator and executions, and an import
        /// reconstructs allocations from the address pattern.
        #[arg(long)]
        without_allocations: bool,
    },
    /// Import a schema-4 exchange snapshot and, for every (selected) phase and
    /// policy, schedule it, encode its rows, validate the schedule, decode and
    /// check the rows and replay them; print one line per phase and policy
    /// (transfers, destinations, horizon, endpoint lower bound, gap, row words,
    /// schedule+encode ms min/median/max, validation ms, invariants) and the
    /// total time. A malformed snapshot is an error naming the phase and the
    /// transfer (exit code 2).
    BenchSnapshot {
        /// The snapshot file.
        #[arg(value_name = "FILE.json")]
        file: PathBuf,
        /// Only this phase id (repeatable; default: every phase).
        #[arg(long = "phase", value_name = "N")]
        phases: Vec<u32>,
        /// A schedule policy: latency, S<W> or B<W> (repeatable; default: the
        /// build default, B1024).
        #[arg(long = "policy", value_name = "P")]
        policies: Vec<crate::build_file::SchedulePolicy>,
        /// Transfer width: auto, word32 or paired64.
        #[arg(long, value_name = "WIDTH", default_value = "auto", value_parser = bench_snapshot::parse_width)]
        width: crate::build_file::TransferWidth,
        /// Timed repetitions of schedule + encode per phase and policy (1..=1000).
        #[arg(long, value_name = "K", default_value_t = 3,
              value_parser = clap::value_parser!(u32).range(1..=MAX_BENCH_ITERATIONS))]
        iterations: u32,
        /// Words the replay checks per phase (a deterministic sample); 0 checks every word.
        #[arg(long, value_name = "WORDS", default_value_t = 8192)]
        sample: u64,
        /// Also write the records as JSON to OUT.
        #[arg(long, value_name = "OUT")]
        json: Option<PathBuf>,
    },
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
    Sweep {
        #[command(flatten)]
        query: QueryArguments,
        /// A configuration to measure, POLICY or POLICY/WIDTH (latency,
        /// list, matching, auto, S<W>, B<W>; WIDTH word32, paired64 or
        /// auto); POLICY alone means both word32 and paired64. Repeatable;
        /// default: latency, S64, S256, S1024, B64, B256, B1024 and B4096 (the
        /// seed study's) and matching, list and B16 (the rest of what `auto`
        /// considers), each at word32 and paired64. A paired64 configuration is measured
        /// only on phases where some piece may move paired.
        #[arg(long = "config", value_name = "P[/WIDTH]")]
        configs: Vec<crate::session::sweep::ConfigList>,
        /// Selection (b)'s window: how many bytes each phase's max row may
        /// grow by.
        #[arg(long, value_name = "BYTES", default_value_t = crate::session::sweep::DEFAULT_WINDOW_BYTES)]
        window: u64,
        /// Write the selection chosen by --select as [[schedule.override]]
        /// entries (phase, policy, width) to FILE, to append to a build file
        /// that does not already override those phases. FILE's folder must exist.
        #[arg(long, value_name = "FILE")]
        write_overrides: Option<PathBuf>,
        /// The selection --write-overrides writes: a (no storage growth) or
        /// b (max row within --window).
        #[arg(long, value_enum, default_value = "a", value_name = "a|b")]
        select: sweep::SelectionLetter,
        /// Apply selection a or b as per-phase overrides, rebuild the whole
        /// program and print the real estimate, exchange table and peak SRAM
        /// (after sharing and placement) next to the per-phase predictions
        /// and the difference; also writes sweep/applied.json.
        #[arg(long, value_enum, value_name = "a|b")]
        apply: Option<sweep::SelectionLetter>,
        /// Measure only shard I of N (0 <= I < N): every N-th point of the
        /// sweep's deterministic order, starting at the I-th, into the
        /// cache (local and --cache-remote); no reports. Run N shards as a
        /// job array against one remote cache, then `superstep sweep`
        /// without --shard: it finds every point cached and writes them.
        #[arg(long, value_name = "I/N", conflicts_with_all = ["apply", "write_overrides"])]
        shard: Option<crate::session::sweep::Shard>,
        /// Print one JSON document instead of the text: the configurations,
        /// every phase's points, both selections and where the build's own
        /// suggestions stand (`--apply`'s figures are in sweep/applied.json).
        #[arg(long, conflicts_with = "shard")]
        json: bool,
    },
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
    ///   superstep packing --phase 'layer.mlp.down.a.rearrange#0' --policy B1024
    ///   superstep packing --snapshot capture.json --top 4
    #[command(verbatim_doc_comment)]
    Packing {
        #[command(flatten)]
        query: QueryArguments,
        /// Study this phase (its key, as `superstep phases` lists it).
        /// Repeatable; default: every phase.
        #[arg(long = "phase", value_name = "KEY")]
        phases: Vec<String>,
        /// Study only the N phases with the most piece endpoints on one tile
        /// (of those --phase names, if any).
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Schedule the original and every alternative under POLICY[/WIDTH]
        /// (latency, list, matching, auto, S<W>, B<W>; WIDTH word32 or
        /// paired64, default word32) instead of each phase's own policy.
        #[arg(long = "policy", value_name = "P[/WIDTH]")]
        config: Option<packing::PackingConfig>,
        /// Print packing.json to standard output instead of the tables.
        #[arg(long)]
        json: bool,
        /// Study the phases of an exchange snapshot (`superstep capture`'s
        /// schema-4 JSON, the seed's capture format) instead of a build:
        /// --phase then takes a snapshot phase id or key, and every phase is
        /// scheduled under --policy (default: auto at word32). No build
        /// query or --set is read.
        #[arg(long, value_name = "FILE")]
        snapshot: Option<PathBuf>,
        /// Write packing.json and packing.html into DIR (default:
        /// outputs.directory/NAME/packing, or artifacts/STEM/packing for a
        /// snapshot). Created when missing; a file in its path is an error.
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
    },
    /// Search layouts for the whole program by its own estimate. First a
    /// beam over the matrix products and attention in program order (width
    /// --beam-width), each state priced without scheduling: the cost
    /// model's cycles of every product plus the endpoint bound of every
    /// conversion the planner inserts, with Pareto retention (price,
    /// largest working set) per output format; its best plan is compiled
    /// and kept when the real estimate beats the build's. Then, from there,
    /// local steps that try the next partitions of one
    /// matrix product or attention at a time (the cost model's cheapest,
    /// the least memory, and those whose blocks line up with the value they
    /// read or with whole heads), then the accepted partition's other tile
    /// orders. A step is accepted only when the whole program, re-planned,
    /// scheduled under the build's policy, placed and estimated, is cheaper
    /// and still fits. Each trial is an incremental rebuild; the result is
    /// kept in the persistent cache, so a second search of the same build
    /// and settings computes nothing.
    ///
    /// Example:
    ///   superstep search --write-overrides queries/siglip-so400m.layout.toml
    ///   superstep build --set layout.override.layer.mlp.down=8x8x23
    #[command(verbatim_doc_comment)]
    Search {
        #[command(flatten)]
        query: QueryArguments,
        /// States the beam keeps per op (0, the default: no beam, the local
        /// steps start from the build's layouts; on SigLIP, PE-Core and
        /// ViT-B/16 the beam's plan did not lead to a better result, see
        /// docs/commands/search.md).
        #[arg(long, default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=256))]
        beam_width: u32,
        /// Passes over the operators (a pass that improves nothing ends the search).
        #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16))]
        rounds: u32,
        /// Partitions per operator that the cost model ranks cheapest.
        #[arg(long, default_value_t = 6, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
        cheapest: u32,
        /// Partitions per alignment with a neighbour's blocks or whole heads.
        #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=64))]
        aligned: u32,
        /// Do not try other tile orders of the accepted partitions.
        #[arg(long)]
        no_orders: bool,
        /// Write the chosen plan as a [[layout.override]] fragment to FILE.
        #[arg(long, value_name = "FILE")]
        write_overrides: Option<PathBuf>,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a package file on its own: its header (format, length, BLAKE3
    /// digest), then every row decoded, every patch and every placed address
    /// within bounds. Exit code 2 when the file is unusable or a check fails.
    Verify {
        /// The package file (artifacts/NAME/package.bin).
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Keep one compiler session alive and rebuild incrementally whenever the
    /// build file changes; print which inputs changed, which queries re-ran
    /// (by stage), the time per stage and how the headline metrics moved.
    ///
    /// Watches the build file's folder (editors save by renaming a temporary
    /// file over the target) and waits for a quiet period before rebuilding.
    /// A save that leaves the content unchanged does nothing. An invalid file
    /// or a failing build is reported and watching goes on. Ctrl-C stops
    /// (exit code 0); a second Ctrl-C stops without waiting for a build.
    Watch {
        #[command(flatten)]
        query: QueryArguments,
        /// Stop after N changes of the build file have been handled (each
        /// rebuild, failed build or invalid edit counts; the initial build
        /// does not, so 0 builds once). The exit code is then 2 if the last
        /// one was an invalid file or a failed build.
        #[arg(long, value_name = "N")]
        exit_after: Option<usize>,
        /// Quiet period in milliseconds: events closer together than this
        /// are one change.
        #[arg(long, value_name = "MS", default_value_t = 150)]
        debounce_ms: u64,
        /// Do not write report.json, phases.csv, compute.csv, report.html
        /// and last-build.json after each successful build (written by default,
        /// as `[outputs]` asks).
        #[arg(long)]
        no_artifacts: bool,
    },
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
    Copies {
        #[command(flatten)]
        query: QueryArguments,
        /// Print the COPY_BOUNDARY records as JSON (an object with the
        /// build's name, the summary and the boundaries shown).
        #[arg(long)]
        json: bool,
        /// Only boundary N (its index in the table); the table then shows
        /// every group of it, movable or not.
        #[arg(long, value_name = "N")]
        boundary: Option<u32>,
        /// Whose copy-motion decisions to show beside the audit: build (the
        /// build's own pass, under planning.fusion) or across (copy motion
        /// with cross-operator fusion, the seed's experiment, run for the
        /// audit only; the build is unchanged).
        #[arg(long, value_enum, default_value = "build", value_name = "build|across")]
        motion: audit::MotionFusion,
    },
}
