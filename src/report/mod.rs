//! Reports of a whole build: per-op and per-exchange summaries, the back half's figures
//! (`exchange` sums up schedule quality) and the build report written to
//! `artifacts/NAME/report.json`, `phases.csv` and (`html`) `report.html`. Everything here is
//! deterministic (ordered, no timings), so the same build gives
//! byte-identical reports. `diff` compares two reports; `last_build` is the
//! record of the last successful build (`last-build.json`) that `--why` and
//! `watch` read.

pub mod artifacts;
pub mod diff;
pub mod exchange;
pub mod html;
pub mod last_build;
pub mod manifest;
pub mod packing;
pub mod precision;
pub mod sweep;
pub mod trace;

use serde::Serialize;

use exchange::{ExchangeQuality, chosen_label};

use crate::expand::expansion::OpExpansion;
use crate::expand::program::{LowProgram, Reason, Step};
use crate::expand::summary::{ProgramSummary, StepCounts};
use crate::layout::cost::AttentionMethod;
use crate::layout::plan::{Layouts, OpPlan};
use crate::model::graph::{Graph, Region};
use crate::numerics::dot::Accumulation;
use crate::session::Headline;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpSummary {
    pub name: String,
    pub region: Region,
    pub plan: String,
    pub output_format: String,
    pub counts: StepCounts,
}

/// One line describing an op's plan.
pub fn describe_plan(plan: &OpPlan) -> String {
    match plan {
        OpPlan::MatMul(plan) => format!(
            "matmul rows {} x cols {} x reduction {} (block {}x{}x{}, {:?} accumulation)",
            plan.row_parts,
            plan.col_parts,
            plan.reduction_parts,
            plan.block_rows,
            plan.block_cols,
            plan.block_reduction,
            plan.accumulation
        ),
        OpPlan::Attention(plan) => format!(
            "attention {} (block {} groups x {} queries x {} keys; {} query x {} key parts{})",
            match plan.method {
                AttentionMethod::Materialized => "materialized".to_string(),
                AttentionMethod::Flash { key_block } => format!("flash, key block {key_block}"),
            },
            plan.block_groups,
            plan.block_queries,
            plan.block_keys,
            plan.query_parts,
            plan.key_parts,
            match plan.value_product {
                crate::numerics::dot::ProductInputs::Fp16 => String::new(),
                crate::numerics::dot::ProductInputs::Fp8 { activation_scale } => format!(
                    "; PV at the FP8 rate, values at scale {activation_scale}, probabilities at {}",
                    crate::numerics::dot::PROBABILITY_SCALE
                ),
            }
        ),
        OpPlan::Blockwise => "blockwise".to_string(),
        OpPlan::Rearrange { reason, .. } => format!("rearrange ({reason:?})"),
    }
}

pub fn op_summaries(layouts: &Layouts, expansions: &[&OpExpansion]) -> Vec<OpSummary> {
    layouts
        .ops
        .iter()
        .zip(expansions)
        .map(|(op, expansion)| {
            let mut counts = StepCounts::default();
            expansion
                .steps
                .iter()
                .for_each(|step| counts.add_step(step));
            let format = &layouts.value(op.output).format;
            OpSummary {
                name: op.name.clone(),
                region: op.region,
                plan: describe_plan(&op.plan),
                output_format: format!(
                    "{:?} {:?} block {:?}{} x{} on {} tiles",
                    format.precision,
                    format.order,
                    format.block,
                    match &format.row_starts {
                        Some(starts) => format!(" (ragged: {} row blocks)", starts.len() - 1),
                        None => String::new(),
                    },
                    format.replicas,
                    format.distinct_tiles().len()
                ),
                counts,
            }
        })
        .collect()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExchangeSummary {
    pub op: String,
    pub reason: Reason,
    pub in_repeat: bool,
    pub transfers: u64,
    pub destinations: u64,
    pub words: u64,
    pub largest_transfer_words: u32,
    pub source_tiles: u64,
    pub max_words_sent_by_a_tile: u64,
    pub max_words_received_by_a_tile: u64,
}

fn exchange_summaries_into(
    program: &LowProgram,
    steps: &[Step],
    in_repeat: bool,
    out: &mut Vec<ExchangeSummary>,
) {
    for step in steps {
        match step {
            Step::Exchange {
                provenance,
                transfers,
            } => {
                let mut sent = vec![0u64; program.tiles as usize];
                let mut received = vec![0u64; program.tiles as usize];
                for index in 0..transfers.len() {
                    let words = transfers.words[index] as u64;
                    sent[transfers.source_tile[index] as usize] += words;
                    for destination in transfers.destinations_of(index) {
                        received[destination.tile as usize] += words;
                    }
                }
                out.push(ExchangeSummary {
                    op: program.name(provenance.op).to_string(),
                    reason: provenance.reason,
                    in_repeat,
                    transfers: transfers.len() as u64,
                    destinations: transfers.destinations.len() as u64,
                    words: transfers.total_words(),
                    largest_transfer_words: transfers.words.iter().copied().max().unwrap_or(0),
                    source_tiles: sent.iter().filter(|&&words| words > 0).count() as u64,
                    max_words_sent_by_a_tile: sent.iter().copied().max().unwrap_or(0),
                    max_words_received_by_a_tile: received.iter().copied().max().unwrap_or(0),
                });
            }
            Step::Repeat { body, .. } => exchange_summaries_into(program, body, true, out),
            _ => {}
        }
    }
}

pub fn exchange_summaries(program: &LowProgram) -> Vec<ExchangeSummary> {
    let mut summaries = Vec::new();
    exchange_summaries_into(program, &program.steps, false, &mut summaries);
    summaries
}

/// The version of `report.json`'s layout (docs/report-json.md): raised
/// whenever a field is renamed, removed or changes meaning. 2: the schema
/// and compiler fields, `transfer_lists` (was `exchanges`), step indices.
pub const REPORT_SCHEMA_VERSION: u32 = 3;

/// The compiler that wrote a report: name and version.
pub fn compiler_version() -> String {
    format!("superstep {}", env!("CARGO_PKG_VERSION"))
}

/// The fingerprint of the compiler's own source (every file under `src/`
/// and `Cargo.lock`, hashed by `build.rs`): tells apart two compilers of
/// the same version, as a commit would, without reading git.
pub fn compiler_source() -> &'static str {
    env!("SUPERSTEP_SOURCE_FINGERPRINT")
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuildReport {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// [`compiler_version`].
    pub compiler: String,
    pub name: String,
    pub model: String,
    pub tiles: u32,
    pub layers: u32,
    pub batch: u32,
    pub parameters: u64,
    pub graph_ops: usize,
    pub graph_values: usize,
    pub planned_ops: usize,
    pub planned_values: usize,
    pub rearranges: usize,
    pub resident_weight_bytes_max: u64,
    pub resident_weight_tile: u32,
    pub program: ProgramSummary,
    pub ops: Vec<OpSummary>,
    /// The matrix products whose reduction is split, by how their partial
    /// sums accumulate (the planner's decision under `planning.accumulation`).
    pub f16_partials: Vec<String>,
    pub f32_partials: Vec<String>,
    /// Under `planning.activation_scale = "calibrate"` (FP8 products):
    /// every product position's scale, largest activation and
    /// quantisation error on the calibration input.
    pub activation_calibration: Option<crate::sim::calibration::ActivationCalibration>,
    /// The low program's transfer lists in program order (the Repeat body
    /// once), before phase grouping merges them into the exchange phases of
    /// `back.phases`.
    pub transfer_lists: Vec<ExchangeSummary>,
    /// The back half's figures (phases, estimate, memory).
    pub back: Option<BackReport>,
    /// Which layouts the build used: a search kept for its configuration
    /// or the planner's (`superstep build` fills it in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layouts: Option<crate::session::searched_layouts::LayoutSource>,
    /// What was built: the build file, the `--set`s and the build key
    /// (`superstep build` fills it in), so that two reports can be told
    /// apart and a report matched with its package.bin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<BuildSource>,
}

/// The command line a report was built from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BuildSource {
    /// The build file, as the command named it.
    pub build_file: String,
    /// The `--set KEY=VALUE` arguments, in order, but those of `outputs.*`
    /// and `cache.*` (which the build key leaves aside too: a report's
    /// bytes do not depend on where it is written).
    pub sets: Vec<String>,
    /// The build's key, as package.bin's header records it (hexadecimal):
    /// a function of the compiler and of every setting the program
    /// depends on.
    pub build_key: String,
    /// [`compiler_source`]: which source the compiler was built from.
    pub compiler_source: String,
}

/// Per build: the estimate, exchange table and SRAM figures; per phase: its
/// step, schedule and row figures. Serialized as [`BackReportRecord`].
#[derive(Clone, Debug, PartialEq)]
pub struct BackReport {
    /// The build's headline figures (written in place: `back.total_cycles`).
    pub headline: Headline,
    /// Weighted horizons against the endpoint and latency-aware bounds.
    pub exchange_quality: ExchangeQuality,
    pub phases: Vec<crate::session::PhaseFigures>,
    /// Each phase's step, in `phases`' order: its line's position among
    /// every exchange phase and compute step, the one index `phases`,
    /// `explain` and the trace use (report.html's `step` column, each
    /// phase's `step` in report.json); empty until the program's profile is
    /// read ([`BackReport::number_steps`]).
    pub steps: Vec<Option<usize>>,
    /// Matrix-unit roofline of the whole program's MACs (FP8 products, FP16 attention).
    pub compute_roofline_cycles: u64,
    /// Compute cycles, MACs and roofline per op, most cycles first.
    pub compute_by_op: Vec<OpComputeLine>,
}

/// How report.json writes [`BackReport`]: the headline in place, then each
/// phase's figures with its step first.
#[derive(Serialize)]
struct BackReportRecord<'report> {
    #[serde(flatten)]
    headline: &'report Headline,
    exchange_quality: &'report ExchangeQuality,
    phases: Vec<StepPhase<'report>>,
    compute_roofline_cycles: u64,
    compute_by_op: &'report [OpComputeLine],
}

/// One phase of report.json: its step (the index `superstep phases`
/// shows), then its figures (key first).
#[derive(Serialize)]
struct StepPhase<'report> {
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<usize>,
    #[serde(flatten)]
    figures: &'report crate::session::PhaseFigures,
}

impl Serialize for BackReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        BackReportRecord {
            headline: &self.headline,
            exchange_quality: &self.exchange_quality,
            phases: self
                .phases
                .iter()
                .enumerate()
                .map(|(index, figures)| StepPhase {
                    step: self.steps.get(index).copied().flatten(),
                    figures,
                })
                .collect(),
            compute_roofline_cycles: self.compute_roofline_cycles,
            compute_by_op: &self.compute_by_op,
        }
        .serialize(serializer)
    }
}

/// One op's compute with its share of the estimate and its distance from
/// the matrix-unit roofline (FP8 128, FP16 64 MACs per cycle per tile).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpComputeLine {
    #[serde(flatten)]
    pub op: crate::estimate::breakdown::OpCompute,
    /// `cycles` over the op's executions.
    pub cycles_per_execution: u64,
    /// `cycles` over the estimate's total cycles.
    pub share: f64,
    /// `cycles` over `roofline_cycles` (absent for ops without matrix work).
    pub roofline_ratio: Option<f64>,
}

impl OpComputeLine {
    pub fn of(op: &crate::estimate::breakdown::OpCompute, total_cycles: u64) -> OpComputeLine {
        OpComputeLine {
            op: op.clone(),
            cycles_per_execution: op.cycles / op.executions.max(1),
            share: op.cycles as f64 / total_cycles.max(1) as f64,
            roofline_ratio: (op.roofline_cycles > 0)
                .then(|| op.cycles as f64 / op.roofline_cycles as f64),
        }
    }
}

impl BackReport {
    pub fn from_outcome(back: &crate::session::BackOutcome) -> BackReport {
        BackReport {
            headline: back.headline.clone(),
            exchange_quality: ExchangeQuality::of(&back.phases),
            phases: back.phases.clone(),
            steps: Vec::new(),
            compute_roofline_cycles: back.compute_by_op.iter().map(|op| op.roofline_cycles).sum(),
            compute_by_op: back
                .compute_by_op
                .iter()
                .map(|op| OpComputeLine::of(op, back.headline.estimate.total_cycles))
                .collect(),
        }
    }

    /// Numbers the phases by their steps in `profile` (the built
    /// program's lines in order).
    pub fn number_steps(&mut self, profile: &crate::estimate::profile::ProgramProfile) {
        let mut steps = vec![None; self.phases.len()];
        for entry in &profile.entries {
            if entry.kind == crate::estimate::profile::StepKind::Exchange
                && let Some(step) = steps.get_mut(entry.index)
            {
                *step = Some(entry.step);
            }
        }
        self.steps = steps;
    }

    /// `compute.csv`: one line per op with compute steps.
    pub fn compute_csv(&self) -> String {
        let mut csv = String::from(
            "op,steps,cycles,kernel_cycles,copy_cycles,fill_cycles,fp8_macs,fp16_macs,roofline_cycles,ratio\n",
        );
        for line in &self.compute_by_op {
            let op = &line.op;
            let ratio = if op.roofline_cycles == 0 {
                String::new()
            } else {
                format!("{:.2}", op.cycles as f64 / op.roofline_cycles as f64)
            };
            csv.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{}\n",
                op.op,
                op.steps,
                op.cycles,
                op.kernel_cycles,
                op.copy_cycles,
                op.fill_cycles,
                op.fp8_macs,
                op.fp16_macs,
                op.roofline_cycles,
                ratio
            ));
        }
        csv
    }

    /// `phases.csv`: one line per phase.
    pub fn phases_csv(&self) -> String {
        let mut csv = String::from(
            "key,provenance,executions,policy,chosen,width,transfers,destinations,horizon,endpoint_bound,latency_bound,max_row_bytes,total_row_bytes,patch_words\n",
        );
        for phase in &self.phases {
            csv.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                phase.key,
                phase.merged_from.join("+"),
                phase.executions,
                phase.policy,
                chosen_label(phase),
                phase.width,
                phase.transfers,
                phase.destinations,
                phase.horizon,
                phase.endpoint_bound,
                phase.latency_bound,
                phase.max_row_bytes,
                phase.total_row_bytes,
                phase.patch_words
            ));
        }
        csv
    }
}

/// Matrix products split over the reduction whose partial sums accumulate in `accumulation`.
fn split_products(layouts: &Layouts, accumulation: Accumulation) -> Vec<String> {
    layouts
        .ops
        .iter()
        .filter(|op| {
            matches!(&op.plan, OpPlan::MatMul(plan)
                if plan.reduction_parts > 1 && plan.accumulation == accumulation)
        })
        .map(|op| op.name.clone())
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub fn build_report(
    name: &str,
    model: &str,
    batch: u32,
    graph: &Graph,
    layouts: &Layouts,
    expansions: &[&OpExpansion],
    program: &LowProgram,
    summary: &ProgramSummary,
) -> BuildReport {
    BuildReport {
        schema_version: REPORT_SCHEMA_VERSION,
        compiler: compiler_version(),
        name: name.to_string(),
        model: model.to_string(),
        tiles: program.tiles,
        layers: graph.repeat.as_ref().map_or(0, |repeat| repeat.iterations),
        batch,
        parameters: graph.parameter_count(),
        graph_ops: graph.ops.len(),
        graph_values: graph.values.len(),
        planned_ops: layouts.ops.len(),
        planned_values: layouts.values.len(),
        rearranges: layouts.rearrange_count(),
        resident_weight_bytes_max: layouts.resident_weight_bytes_max,
        resident_weight_tile: layouts.resident_weight_tile,
        program: summary.clone(),
        ops: op_summaries(layouts, expansions),
        f16_partials: split_products(layouts, Accumulation::F16),
        f32_partials: split_products(layouts, Accumulation::F32),
        activation_calibration: None,
        transfer_lists: exchange_summaries(program),
        back: None,
        layouts: None,
        source: None,
    }
}
