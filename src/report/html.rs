//! `report.html`: the build report as one self-contained page (inline CSS,
//! inline SVG charts, a few lines of plain JavaScript that sort tables; the
//! page reads the same without it). It owns the page only: a pure function
//! of the build report, the memory view and the suggestions, rendered with
//! `maud` (which escapes every text and attribute). The output is
//! deterministic: the same build gives a byte-identical page.
//!
//! Every figure a test checks carries its exact value in a `data-*`
//! attribute beside the formatted text (ids `total-cycles`, `milliseconds`;
//! rows `tr.category`, `table#phases tbody tr`; cells `rect.cell`).
//! The memory charts (per-tile heat maps, one tile over the steps) live in
//! `charts`; the tile drill-down (pick a tile, see its memory over the
//! program and at its peak) in `tile_view`.

mod charts;
mod tile_view;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use charts::{CHART_WIDTH, coordinate, heat_maps};
use tile_view::{TILE_SCRIPT, tile_view};

use super::exchange::chosen_label;
use super::{BackReport, BuildReport, OpComputeLine};
use crate::session::PhaseFigures;
use crate::session::memory::MemoryView;
use crate::session::step_loads::StepTileLoad;
use crate::studies::suggestions::Suggestion;
use crate::target::costs::cycles_to_ms;
use crate::text::thousands;

/// What the page shows.
pub struct ReportPage<'a> {
    pub report: &'a BuildReport,
    pub back: &'a BackReport,
    pub memory: &'a MemoryView,
    /// Every program step's work per tile (the tile view's timeline and
    /// balance).
    pub step_loads: &'a [StepTileLoad],
    /// The suggestions, when the build measured them (`None`: it was told
    /// not to, `--suggestions 0`).
    pub suggestions: Option<&'a [Suggestion]>,
    /// How many of the most expensive exchange phases the suggestions measured.
    pub suggestion_candidates: usize,
}

/// A self-contained page: the document head (title, inline style) around
/// `body`, then `script` if any. Shared by every page superstep writes.
pub fn document(title: &str, style: &str, body: Markup, script: Option<&str>) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(style)) }
            }
            body {
                main { (body) }
                @if let Some(script) = script {
                    script { (PreEscaped(script)) }
                }
            }
        }
    }
    .into_string()
}

/// The whole page.
pub fn render(page: &ReportPage) -> String {
    let title = format!("superstep build report: {}", page.report.name);
    let body = html! {
        (headline(page))
        (time_split(page.back))
        (phase_table(page.back))
        (horizon_chart(page.back))
        (heat_maps(page.memory))
        (tile_view(page.memory, page.step_loads, page.report.layers))
        (suggestions(page))
        (compute_table(page.back))
        footer {
            "Written by superstep " (env!("CARGO_PKG_VERSION"))
            " from the same figures as report.json."
        }
    };
    document(
        &title,
        STYLE,
        body,
        Some(&format!("{SORT_SCRIPT}{TILE_SCRIPT}")),
    )
}

const STYLE: &str = "
body { margin: 0; background: #f6f7f9; color: #1d2330;
  font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; }
main { max-width: 1320px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 0 0 8px; }
section { background: #fff; border: 1px solid #dde1e8; border-radius: 8px;
  padding: 16px 20px; margin: 16px 0; overflow-x: auto; }
p.note { color: #5a6272; margin: 4px 0 12px; }
.notice { background: #fff7e0; border: 1px solid #f0d48a; border-radius: 6px;
  padding: 8px 12px; margin: 12px 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 12px; }
.card { border: 1px solid #e3e6ec; border-radius: 6px; padding: 10px 12px; background: #fbfcfd; }
.card .label { color: #5a6272; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 20px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .detail { color: #5a6272; font-size: 12px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eceef2; text-align: right; white-space: nowrap; }
th { background: #f0f2f5; position: sticky; top: 0; font-weight: 600; white-space: normal;
  vertical-align: bottom; }
table.sortable th { cursor: pointer; }
th[data-order=ascending]::after { content: ' \\25B2'; }
th[data-order=descending]::after { content: ' \\25BC'; }
td.text, th.text { text-align: left; }
table#categories { width: auto; min-width: 60%; }
#suggestions tbody tr { background: none; }
#suggestions tr.suggestion td { border-bottom: none; }
tr.apply td { border-bottom: 1px solid #dde1e8; padding-bottom: 8px; color: #5a6272; }
tbody tr:nth-child(even) { background: #fafbfc; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  vertical-align: -1px; margin-right: 6px; }
.maps { display: flex; flex-wrap: wrap; gap: 24px; }
.map h3 { font-size: 15px; margin: 0 0 6px; }
svg text { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; font-size: 12px; fill: #1d2330; }
svg text.inside { fill: #fff; font-weight: 600; }
svg text.muted { fill: #5a6272; }
code { background: #f0f2f5; padding: 1px 4px; border-radius: 3px; }
rect.cell { cursor: pointer; }
rect.cell.picked, rect.load.picked { stroke: #e0245e; stroke-width: 2; }
rect.load, g.step { cursor: pointer; }
.columns { display: flex; flex-wrap: wrap; gap: 24px; }
.columns > div { flex: 1 1 480px; min-width: 0; }
.columns h3 { font-size: 15px; margin: 12px 0 6px; }
td.key { white-space: normal; overflow-wrap: anywhere; }
form.picker { margin: 8px 0; }
form.picker input { width: 6em; font: inherit; }
form.picker button { font: inherit; margin-left: 8px; }
footer { color: #5a6272; font-size: 12px; margin-top: 24px; }
";

/// Sorts a `table.sortable` by the clicked column: numbers by their
/// `data-sort`, other cells by text; a second click reverses.
const SORT_SCRIPT: &str = "
document.querySelectorAll('table.sortable').forEach(function (table) {
  var headers = table.querySelectorAll('thead th');
  headers.forEach(function (header, column) {
    header.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.from(body.rows);
      var descending = header.dataset.order !== 'descending';
      rows.sort(function (first, second) {
        var a = first.cells[column], b = second.cells[column];
        var order = (a.dataset.sort !== undefined && b.dataset.sort !== undefined)
          ? Number(a.dataset.sort) - Number(b.dataset.sort)
          : a.textContent.localeCompare(b.textContent);
        return descending ? -order : order;
      });
      headers.forEach(function (other) { delete other.dataset.order; });
      header.dataset.order = descending ? 'descending' : 'ascending';
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
";

/// `part` over `whole` as a percentage with one decimal.
fn percent(part: u64, whole: u64) -> String {
    format!("{:.1}%", part as f64 * 100.0 / whole.max(1) as f64)
}

/// `numerator / denominator` as `1.23×`, or `-` without a denominator.
fn times(numerator: u64, denominator: u64) -> String {
    if denominator == 0 {
        "-".to_string()
    } else {
        format!("{:.2}×", numerator as f64 / denominator as f64)
    }
}

/// Milliseconds with enough digits for sub-millisecond phases.
fn milliseconds(cycles: u64) -> String {
    format!("{:.4} ms", cycles_to_ms(cycles))
}

/// One category of the estimate's time.
struct Category {
    name: &'static str,
    label: &'static str,
    cycles: u64,
    colour: &'static str,
}

fn categories(back: &BackReport) -> [Category; 4] {
    [
        Category {
            name: "compute",
            label: "compute",
            cycles: back.headline.estimate.compute_cycles,
            colour: "#3b6fd8",
        },
        Category {
            name: "exchange",
            label: "exchange",
            cycles: back.headline.estimate.exchange_cycles,
            colour: "#e8833a",
        },
        Category {
            name: "sync",
            label: "setup and sync",
            cycles: back.headline.estimate.sync_cycles,
            colour: "#8d96a8",
        },
        Category {
            name: "patching",
            label: "patching",
            cycles: back.headline.estimate.patch_cycles,
            colour: "#9b59b6",
        },
    ]
}

fn card(label: &str, value: Markup, detail: Markup) -> Markup {
    html! {
        div.card {
            div.label { (label) }
            div.value { (value) }
            div.detail { (detail) }
        }
    }
}

fn headline(page: &ReportPage) -> Markup {
    let report = page.report;
    let back = page.back;
    html! {
        header {
            h1 { "superstep build report: " (report.name) }
            p.note {
                (report.model) " · " (thousands(report.tiles)) " tiles · "
                (report.layers) " layers · batch " (report.batch) " · "
                (thousands(report.parameters)) " parameters"
            }
            @if let Some(source) = &report.source {
                p.note id="build-source" {
                    "built from " code { (source.build_file) }
                    @for set in &source.sets {
                        " " code { "--set " (set) }
                    }
                    " by " (report.compiler) " (source " code { (source.compiler_source) } ") · build key "
                    code title=(source.build_key) { (source.build_key[..16.min(source.build_key.len())]) "…" }
                }
            }
            div.notice {
                strong { "Modelled, not measured. " }
                "Every time on this page is the compiler's modelled cost of the program "
                "(the estimate's cycles at 1.5 GHz, from a kernel cost model fitted to "
                "published IPU21 measurements), not a measurement on hardware."
                @if let Some(line) = crate::report::precision::precision_line(&back.compute_by_op) {
                    " " (line) "."
                }
            }
        }
        section {
            h2 { "Estimate" }
            div.cards {
                (card("estimate", html! {
                    span id="milliseconds" data-value=(back.headline.estimate.milliseconds) { (format!("{:.4}", back.headline.estimate.milliseconds)) " ms" }
                }, html! {
                    span id="total-cycles" data-value=(back.headline.estimate.total_cycles) { (thousands(back.headline.estimate.total_cycles)) } " cycles"
                }))
                @for category in categories(back) {
                    (card(category.label, html! { (thousands(category.cycles)) " cycles" }, html! {
                        (percent(category.cycles, back.headline.estimate.total_cycles)) " of the estimate · "
                        (milliseconds(category.cycles))
                    }))
                }
                (card("barriers", html! {
                    span id="barriers" data-value=(back.headline.estimate.barriers) { (thousands(back.headline.estimate.barriers)) }
                }, html! { "one per exchange phase executed" }))
                (card("exchange table", html! {
                    span id="exchange-table-max" data-value=(back.headline.exchange_table_bytes_per_tile_max) {
                        (thousands(back.headline.exchange_table_bytes_per_tile_max)) " B"
                    }
                }, html! { "per tile, the largest" }))
                (card("peak SRAM", html! {
                    span id="peak-sram" data-value=(back.headline.peak_sram_bytes_per_tile) data-tile=(back.headline.peak_sram_tile) {
                        (thousands(back.headline.peak_sram_bytes_per_tile)) " B"
                    }
                }, html! {
                    "on tile " (back.headline.peak_sram_tile) " · "
                    (percent(back.headline.peak_sram_bytes_per_tile, u64::from(page.memory.usable_bytes_per_tile)))
                    " of the " (thousands(page.memory.usable_bytes_per_tile)) " usable bytes"
                }))
                (card("exchange against its bounds", html! {
                    (times(back.exchange_quality.horizon_cycles, back.exchange_quality.latency_bound_cycles))
                }, html! {
                    "of the latency-aware bound · "
                    (times(back.exchange_quality.horizon_cycles, back.exchange_quality.endpoint_bound_cycles))
                    " of the endpoint bound"
                }))
            }
        }
    }
}

/// Each category with its segment's left edge and width in the stacked bar.
fn segments(back: &BackReport) -> Vec<(Category, f64, f64)> {
    let total = back.headline.estimate.total_cycles.max(1) as f64;
    let mut left = 0.0;
    categories(back)
        .into_iter()
        .map(|category| {
            let width = category.cycles as f64 / total * CHART_WIDTH;
            let segment = (category, left, width);
            left += width;
            segment
        })
        .collect()
}

fn time_split(back: &BackReport) -> Markup {
    let height = 44.0;
    html! {
        section {
            h2 { "Where the time goes" }
            p.note { "Modelled cycles of one run of the program by category." }
            svg id="time-split" width="100%" viewBox=(format!("0 0 {CHART_WIDTH} {height}")) role="img"
                aria-label="stacked bar of the estimate by category" {
                @for (category, x, width) in segments(back) {
                    rect.segment x=(coordinate(x)) y="0" width=(coordinate(width)) height=(height)
                        fill=(category.colour) data-category=(category.name) data-cycles=(category.cycles) {
                        title { (category.label) ": " (thousands(category.cycles)) " cycles" }
                    }
                    @if width > 90.0 {
                        text.inside x=(coordinate(x + 8.0)) y="27" {
                            (category.label) " " (percent(category.cycles, back.headline.estimate.total_cycles))
                        }
                    }
                }
            }
            table id="categories" {
                thead { tr { th.text { "category" } th { "cycles" } th { "milliseconds" } th { "share" } } }
                tbody {
                    @for category in categories(back) {
                        tr.category data-category=(category.name) data-cycles=(category.cycles) {
                            td.text { span.swatch style=(format!("background:{}", category.colour)) {} (category.label) }
                            td { (thousands(category.cycles)) }
                            td { (format!("{:.4}", cycles_to_ms(category.cycles))) }
                            td { (percent(category.cycles, back.headline.estimate.total_cycles)) }
                        }
                    }
                    tr {
                        td.text { strong { "total" } }
                        td { strong { (thousands(back.headline.estimate.total_cycles)) } }
                        td { strong { (format!("{:.4}", back.headline.estimate.milliseconds)) } }
                        td { "100.0%" }
                    }
                }
            }
        }
    }
}

/// The policy column: the policy asked for and, when it differs, the concrete choice.
fn policy_text(phase: &PhaseFigures) -> String {
    let chosen = chosen_label(phase);
    if chosen == phase.policy.to_string() {
        chosen
    } else {
        format!("{} ({chosen})", phase.policy)
    }
}

/// One phase's row; `step` is its step (`None`: the program's profile was
/// not read, and the cell is left empty rather than numbered otherwise).
fn phase_row(step: Option<usize>, phase: &PhaseFigures) -> Markup {
    let total = u64::from(phase.horizon) * u64::from(phase.executions);
    let gap = f64::from(phase.horizon) / f64::from(phase.endpoint_bound.max(1));
    html! {
        tr data-key=(phase.key) data-horizon=(phase.horizon) data-step=[step] {
            @match step {
                Some(step) => td data-sort=(step) { (step) },
                None => td {},
            }
            td.text { (phase.key) }
            td data-sort=(phase.executions) { (phase.executions) }
            td.text { (policy_text(phase)) }
            td data-sort=(phase.horizon) { (thousands(phase.horizon)) }
            td data-sort=(phase.endpoint_bound) { (thousands(phase.endpoint_bound)) }
            td data-sort=(phase.latency_bound) { (thousands(phase.latency_bound)) }
            td data-sort=(format!("{gap:.4}")) { (times(u64::from(phase.horizon), u64::from(phase.endpoint_bound))) }
            td data-sort=(total) { (thousands(total)) }
            td data-sort=(phase.max_row_bytes) { (thousands(phase.max_row_bytes)) }
            td data-sort=(phase.total_row_bytes) { (thousands(phase.total_row_bytes)) }
            td data-sort=(phase.patch_words) { (thousands(phase.patch_words)) }
        }
    }
}

fn phase_table(back: &BackReport) -> Markup {
    html! {
        section {
            h2 { "Exchange phases (" (back.phases.len()) ")" }
            p.note {
                "Every exchange phase in program order, numbered by step (the index "
                code { "superstep phases" } ", " code { "explain --phase" } " and the trace use). "
                "Horizon: the phase's scheduled cycles per execution; "
                "gap: horizon over the endpoint bound. The horizon × executions column leaves out "
                "each phase's setup and sync and its patching. Click a header to sort."
            }
            div {
                table id="phases" class="sortable" {
                    thead {
                        tr {
                            th { "step" } th.text { "key" } th { "executions" } th.text { "policy (chosen)" }
                            th { "horizon" } th { "endpoint bound" } th { "latency bound" } th { "gap" }
                            th { "horizon × executions" } th { "max row bytes" } th { "total row bytes" }
                            th { "patch words" }
                        }
                    }
                    tbody {
                        @for (index, phase) in back.phases.iter().enumerate() {
                            (phase_row(back.steps.get(index).copied().flatten(), phase))
                        }
                    }
                }
            }
        }
    }
}

/// How many phases the horizon chart shows.
const CHART_PHASES: usize = 30;

/// The phases with the most horizon cycles over all executions, most first.
fn costliest_phases(phases: &[PhaseFigures]) -> Vec<&PhaseFigures> {
    let mut sorted: Vec<(usize, &PhaseFigures)> = phases.iter().enumerate().collect();
    sorted.sort_by_key(|(index, phase)| {
        (
            std::cmp::Reverse(u64::from(phase.horizon) * u64::from(phase.executions)),
            *index,
        )
    });
    sorted
        .into_iter()
        .take(CHART_PHASES)
        .map(|(_, phase)| phase)
        .collect()
}

fn horizon_chart(back: &BackReport) -> Markup {
    let phases = costliest_phases(&back.phases);
    let row = 22.0;
    let top = 8.0;
    // Room for the longest key whole (about 7 units a character at the
    // chart's 12-unit font), never cut.
    let longest = phases
        .iter()
        .map(|phase| phase.key.chars().count() + 5)
        .max()
        .unwrap_or(0);
    let label_width = (7.0 * longest as f64).clamp(300.0, 560.0);
    let value_width = 300.0;
    let bar_area = CHART_WIDTH - label_width - value_width;
    let largest = phases
        .iter()
        .map(|phase| phase.horizon.max(phase.endpoint_bound))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let height = top + row * phases.len() as f64 + 8.0;
    let scale = |value: u32| f64::from(value) / largest * bar_area;
    html! {
        section {
            h2 { "Horizon against the endpoint bound" }
            p.note {
                "The " (phases.len()) " phases with the most horizon cycles over all their executions (horizon × executions), most first. "
                span.swatch style="background:#e8833a" {} "horizon per execution; "
                span.swatch style="background:#1d2330" {} "endpoint bound (the most exchange events one tile sends or receives, a piece that may pair counted at half its words)."
            }
            svg id="horizon-chart" width="100%" viewBox=(format!("0 0 {CHART_WIDTH} {height}")) role="img"
                aria-label="horizon and endpoint bound per phase" {
                @for (position, phase) in phases.iter().enumerate() {
                    @let y = top + row * position as f64;
                    g.phase data-key=(phase.key) data-horizon=(phase.horizon) data-endpoint-bound=(phase.endpoint_bound) {
                        title { (phase.key) ": horizon " (thousands(phase.horizon)) ", endpoint bound " (thousands(phase.endpoint_bound)) }
                        text x=(coordinate(label_width - 8.0)) y=(coordinate(y + 15.0)) text-anchor="end" {
                            (phase.key) " ×" (phase.executions)
                        }
                        rect x=(label_width) y=(coordinate(y + 3.0)) width=(coordinate(scale(phase.horizon))) height="16" fill="#e8833a" {}
                        rect x=(label_width) y=(coordinate(y + 9.0)) width=(coordinate(scale(phase.endpoint_bound))) height="4" fill="#1d2330" {}
                        text.muted x=(coordinate(label_width + scale(phase.horizon.max(phase.endpoint_bound)) + 8.0)) y=(coordinate(y + 15.0)) {
                            (thousands(phase.horizon)) " / " (thousands(phase.endpoint_bound)) " cycles · gap "
                            (times(u64::from(phase.horizon), u64::from(phase.endpoint_bound)))
                        }
                    }
                }
            }
        }
    }
}

fn suggestions(page: &ReportPage) -> Markup {
    html! {
        section id="suggestions" {
            h2 { "Suggestions" }
            @if let Some(suggestions) = page.suggestions.filter(|found| !found.is_empty()) {
                p.note {
                    "Overrides that save time among the " (page.suggestion_candidates)
                    " most expensive exchange phases, each measured by scheduling the phase under every standard policy "
                    "(horizon and Repeat patching of that phase; sharing patches and placement may move a little when applied). "
                    code { "superstep phases --suggest" } " measures every phase."
                }
                table {
                    thead {
                        tr {
                            th.text { "phase" } th { "executions" } th.text { "policy now → suggested" }
                            th { "cycles per execution now → with the override" } th { "saving over all executions" }
                        }
                    }
                    tbody {
                        @for suggestion in suggestions {
                            tr.suggestion {
                                td.text { (suggestion.phase) }
                                td { (suggestion.executions) }
                                td.text { (suggestion.current_policy) " → " (suggestion.policy) }
                                td { (thousands(suggestion.current_cycles)) " → " (thousands(suggestion.predicted_cycles)) }
                                td {
                                    (thousands(suggestion.saving_cycles)) " cycles ("
                                    (format!("{:.4}", suggestion.saving_milliseconds)) " ms)"
                                }
                            }
                            tr.apply {
                                td.text colspan="5" { "apply with " code { "--set " (suggestion.set) } }
                            }
                        }
                    }
                }
            } @else if page.suggestions.is_some() {
                p { "none: no standard policy beats the " (page.suggestion_candidates)
                    " most expensive exchange phases as built." }
            } @else {
                p { "not measured in this build (" code { "--suggestions 0" } "); "
                    code { "superstep phases --suggest" } " measures every phase." }
            }
        }
    }
}

fn compute_row(line: &OpComputeLine) -> Markup {
    let macs = line.op.fp8_macs + line.op.fp16_macs;
    html! {
        tr data-op=(line.op.op) {
            td.text { (line.op.op) }
            td data-sort=(line.op.executions) { (line.op.executions) }
            td data-sort=(line.cycles_per_execution) { (thousands(line.cycles_per_execution)) }
            td data-sort=(line.op.cycles) { (thousands(line.op.cycles)) }
            td data-sort=(format!("{:.6}", line.share)) { (format!("{:.2}%", line.share * 100.0)) }
            td data-sort=(macs) { (thousands(macs)) }
            @match line.roofline_ratio {
                Some(ratio) => {
                    td data-sort=(format!("{ratio:.4}")) { (format!("{ratio:.2}×")) }
                }
                None => {
                    td data-sort="0" { "-" }
                }
            }
        }
    }
}

fn compute_table(back: &BackReport) -> Markup {
    html! {
        section {
            h2 { "Compute by op" }
            p.note {
                "Modelled compute cycles per op over one run of the program (runs: the op's executions, the "
                "layer loop counted), its share of the whole estimate, multiply-accumulates over all tiles and the "
                "distance from the matrix-unit roofline (FP8 128, FP16 64 MACs per cycle per tile). Click a header to sort."
            }
            table id="compute" class="sortable" {
                thead {
                    tr {
                        th.text { "op" } th { "runs" } th { "cycles per run" } th { "total cycles" }
                        th { "share" } th { "MACs" } th { "roofline ratio" }
                    }
                }
                tbody {
                    @for line in &back.compute_by_op {
                        (compute_row(line))
                    }
                }
            }
        }
    }
}
