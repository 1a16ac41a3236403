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

use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::exchange::chosen_label;
use super::{BackReport, BuildReport, OpComputeLine};
use crate::session::PhaseFigures;
use crate::session::Suggestion;
use crate::session::memory::MemoryView;
use crate::target::costs::cycles_to_ms;
use crate::text::thousands;

/// What the page shows.
pub struct ReportPage<'a> {
    pub report: &'a BuildReport,
    pub back: &'a BackReport,
    pub memory: &'a MemoryView,
    pub suggestions: &'a [Suggestion],
    /// How many of the most expensive exchange phases the suggestions measured.
    pub suggestion_candidates: usize,
}

/// The whole page.
pub fn render(page: &ReportPage) -> String {
    let title = format!("superstep build report: {}", page.report.name);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                main {
                    (headline(page))
                    (time_split(page.back))
                    (phase_table(page.back))
                    (horizon_chart(page.back))
                    (heat_maps(page.memory))
                    (memory_over_steps(page.memory, page.report.layers))
                    (suggestions(page))
                    (compute_table(page.back))
                    footer {
                        "Written by superstep " (env!("CARGO_PKG_VERSION"))
                        " from the same figures as report.json."
                    }
                }
                script { (PreEscaped(SORT_SCRIPT)) }
            }
        }
    }
    .into_string()
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
.scroll { max-height: 560px; overflow: auto; border: 1px solid #eceef2; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  vertical-align: -1px; margin-right: 6px; }
.maps { display: flex; flex-wrap: wrap; gap: 24px; }
.map h3 { font-size: 15px; margin: 0 0 6px; }
svg text { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; font-size: 12px; fill: #1d2330; }
svg text.inside { fill: #fff; font-weight: 600; }
svg text.muted { fill: #5a6272; }
code { background: #f0f2f5; padding: 1px 4px; border-radius: 3px; }
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

/// An SVG coordinate with one decimal.
fn coordinate(value: f64) -> String {
    format!("{value:.1}")
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
            cycles: back.compute_cycles,
            colour: "#3b6fd8",
        },
        Category {
            name: "exchange",
            label: "exchange",
            cycles: back.exchange_cycles,
            colour: "#e8833a",
        },
        Category {
            name: "sync",
            label: "setup and sync",
            cycles: back.sync_cycles,
            colour: "#8d96a8",
        },
        Category {
            name: "patching",
            label: "patching",
            cycles: back.patch_cycles,
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
            div.notice {
                strong { "Modelled, not measured. " }
                "Every time on this page is the compiler's modelled cost of the program "
                "(the estimate's cycles at 1.5 GHz), not a measurement on hardware."
            }
        }
        section {
            h2 { "Estimate" }
            div.cards {
                (card("estimate", html! {
                    span id="milliseconds" data-value=(back.milliseconds) { (format!("{:.4}", back.milliseconds)) " ms" }
                }, html! {
                    span id="total-cycles" data-value=(back.total_cycles) { (thousands(back.total_cycles)) } " cycles"
                }))
                @for category in categories(back) {
                    (card(category.label, html! { (thousands(category.cycles)) " cycles" }, html! {
                        (percent(category.cycles, back.total_cycles)) " of the estimate · "
                        (milliseconds(category.cycles))
                    }))
                }
                (card("barriers", html! {
                    span id="barriers" data-value=(back.barriers) { (thousands(back.barriers)) }
                }, html! { "one per exchange phase executed" }))
                (card("exchange table", html! {
                    span id="exchange-table-max" data-value=(back.exchange_table_bytes_per_tile_max) {
                        (thousands(back.exchange_table_bytes_per_tile_max)) " B"
                    }
                }, html! { "per tile, the largest" }))
                (card("peak SRAM", html! {
                    span id="peak-sram" data-value=(back.peak_sram_bytes_per_tile) data-tile=(back.peak_sram_tile) {
                        (thousands(back.peak_sram_bytes_per_tile)) " B"
                    }
                }, html! {
                    "on tile " (back.peak_sram_tile) " · "
                    (percent(back.peak_sram_bytes_per_tile, u64::from(page.memory.usable_bytes_per_tile)))
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

/// Width of the full-width charts, in SVG units.
const CHART_WIDTH: f64 = 1240.0;

/// Each category with its segment's left edge and width in the stacked bar.
fn segments(back: &BackReport) -> Vec<(Category, f64, f64)> {
    let total = back.total_cycles.max(1) as f64;
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
                            (category.label) " " (percent(category.cycles, back.total_cycles))
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
                            td { (percent(category.cycles, back.total_cycles)) }
                        }
                    }
                    tr {
                        td.text { strong { "total" } }
                        td { strong { (thousands(back.total_cycles)) } }
                        td { strong { (format!("{:.4}", back.milliseconds)) } }
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
    if chosen == phase.policy {
        chosen
    } else {
        format!("{} ({chosen})", phase.policy)
    }
}

fn phase_row(index: usize, phase: &PhaseFigures) -> Markup {
    let total = u64::from(phase.horizon) * u64::from(phase.executions);
    let gap = f64::from(phase.horizon) / f64::from(phase.lower_bound.max(1));
    html! {
        tr data-key=(phase.key) data-horizon=(phase.horizon) {
            td data-sort=(index) { (index) }
            td.text { (phase.key) }
            td data-sort=(phase.executions) { (phase.executions) }
            td.text { (policy_text(phase)) }
            td data-sort=(phase.horizon) { (thousands(phase.horizon)) }
            td data-sort=(phase.lower_bound) { (thousands(phase.lower_bound)) }
            td data-sort=(phase.latency_bound) { (thousands(phase.latency_bound)) }
            td data-sort=(format!("{gap:.4}")) { (times(u64::from(phase.horizon), u64::from(phase.lower_bound))) }
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
                "Every exchange phase in program order. Horizon: the phase's scheduled cycles per execution; "
                "gap: horizon over the endpoint lower bound. The horizon × executions column leaves out "
                "each phase's setup and sync and its patching. Click a header to sort."
            }
            div.scroll {
                table id="phases" class="sortable" {
                    thead {
                        tr {
                            th { "#" } th.text { "key" } th { "executions" } th.text { "policy (chosen)" }
                            th { "horizon" } th { "lower bound" } th { "latency bound" } th { "gap" }
                            th { "horizon × executions" } th { "max row bytes" } th { "total row bytes" }
                            th { "patch words" }
                        }
                    }
                    tbody {
                        @for (index, phase) in back.phases.iter().enumerate() {
                            (phase_row(index, phase))
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

/// `text` cut to `limit` characters with an ellipsis.
fn shortened(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_string()
    } else {
        let kept: String = text.chars().take(limit.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

fn horizon_chart(back: &BackReport) -> Markup {
    let phases = costliest_phases(&back.phases);
    let row = 22.0;
    let top = 8.0;
    let label_width = 300.0;
    let value_width = 300.0;
    let bar_area = CHART_WIDTH - label_width - value_width;
    let largest = phases
        .iter()
        .map(|phase| phase.horizon.max(phase.lower_bound))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let height = top + row * phases.len() as f64 + 8.0;
    let scale = |value: u32| f64::from(value) / largest * bar_area;
    html! {
        section {
            h2 { "Horizon against the lower bound" }
            p.note {
                "The " (phases.len()) " phases with the most horizon cycles over all their executions (horizon × executions), most first. "
                span.swatch style="background:#e8833a" {} "horizon per execution; "
                span.swatch style="background:#1d2330" {} "endpoint lower bound (the most words one tile sends or receives)."
            }
            svg id="horizon-chart" width="100%" viewBox=(format!("0 0 {CHART_WIDTH} {height}")) role="img"
                aria-label="horizon and lower bound per phase" {
                @for (position, phase) in phases.iter().enumerate() {
                    @let y = top + row * position as f64;
                    g.phase data-key=(phase.key) data-horizon=(phase.horizon) data-lower-bound=(phase.lower_bound) {
                        title { (phase.key) ": horizon " (thousands(phase.horizon)) ", lower bound " (thousands(phase.lower_bound)) }
                        text x=(coordinate(label_width - 8.0)) y=(coordinate(y + 15.0)) text-anchor="end" {
                            (shortened(&phase.key, 36)) " ×" (phase.executions)
                        }
                        rect x=(label_width) y=(coordinate(y + 3.0)) width=(coordinate(scale(phase.horizon))) height="16" fill="#e8833a" {}
                        rect x=(label_width) y=(coordinate(y + 9.0)) width=(coordinate(scale(phase.lower_bound))) height="4" fill="#1d2330" {}
                        text.muted x=(coordinate(label_width + scale(phase.horizon.max(phase.lower_bound)) + 8.0)) y=(coordinate(y + 15.0)) {
                            (thousands(phase.horizon)) " / " (thousands(phase.lower_bound)) " cycles · gap "
                            (times(u64::from(phase.horizon), u64::from(phase.lower_bound)))
                        }
                    }
                }
            }
        }
    }
}

/// Columns of a tile grid: a divisor of `tiles` near a 3:2 aspect when
/// there is one (46 × 32 for 1,472), else the rounded-up ideal.
fn grid_columns(tiles: usize) -> usize {
    let ideal = (tiles as f64 * 1.5).sqrt();
    let low = (ideal * 0.8).floor().max(1.0) as usize;
    let high = (ideal * 1.25).ceil() as usize;
    (low..=high)
        .filter(|columns| tiles.is_multiple_of(*columns))
        .min_by(|a, b| {
            let distance = |columns: usize| (columns as f64 - ideal).abs();
            distance(*a).total_cmp(&distance(*b))
        })
        .unwrap_or_else(|| (ideal.ceil() as usize).max(1))
}

/// Colour stops of the heat maps (viridis), low to high.
const HEAT_STOPS: [(u8, u8, u8); 5] = [
    (68, 1, 84),
    (59, 82, 139),
    (33, 145, 140),
    (94, 201, 98),
    (253, 231, 37),
];

/// The heat colour of `fraction` (0 to 1) as `#rrggbb`.
fn heat_colour(fraction: f64) -> String {
    let scaled = fraction.clamp(0.0, 1.0) * (HEAT_STOPS.len() - 1) as f64;
    let index = (scaled.floor() as usize).min(HEAT_STOPS.len() - 2);
    let within = scaled - index as f64;
    let (low, high) = (HEAT_STOPS[index], HEAT_STOPS[index + 1]);
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * within).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(low.0, high.0),
        mix(low.1, high.1),
        mix(low.2, high.2)
    )
}

/// Narrowest legend of a heat map, so that its labels never meet.
const LEGEND_WIDTH: f64 = 300.0;

/// One per-tile heat map.
struct HeatMap<'a> {
    id: &'a str,
    title: &'a str,
    values: Vec<u64>,
    /// A tile to outline (the fullest).
    marked: Option<usize>,
}

fn heat_legend(minimum: u64, maximum: u64, width: f64, y: f64, gradient: &str) -> Markup {
    html! {
        rect x="0" y=(coordinate(y)) width=(coordinate(width)) height="10" fill=(format!("url(#{gradient})")) {}
        text x="0" y=(coordinate(y + 24.0)) { "min " (thousands(minimum)) " B" }
        text x=(coordinate(width)) y=(coordinate(y + 24.0)) text-anchor="end" { "max " (thousands(maximum)) " B" }
    }
}

fn heat_map(map: &HeatMap) -> Markup {
    let tiles = map.values.len();
    let columns = grid_columns(tiles.max(1));
    let rows = tiles.div_ceil(columns).max(1);
    let cell = (560.0 / columns as f64).floor().clamp(4.0, 32.0);
    let grid_width = cell * columns as f64;
    let width = grid_width.max(LEGEND_WIDTH);
    let grid_height = cell * rows as f64;
    let height = grid_height + 40.0;
    let minimum = map.values.iter().copied().min().unwrap_or(0);
    let maximum = map.values.iter().copied().max().unwrap_or(0);
    let span = maximum.saturating_sub(minimum);
    let fraction = |value: u64| {
        if span == 0 {
            0.5
        } else {
            (value - minimum) as f64 / span as f64
        }
    };
    let gradient = format!("{}-gradient", map.id);
    html! {
        div.map {
            h3 { (map.title) }
            svg id=(map.id) width=(width) height=(height) viewBox=(format!("0 0 {width} {height}"))
                data-columns=(columns) data-rows=(rows) role="img" aria-label=(map.title) {
                defs {
                    linearGradient id=(gradient) {
                        @for (index, _) in HEAT_STOPS.iter().enumerate() {
                            @let offset = index as f64 / (HEAT_STOPS.len() - 1) as f64;
                            stop offset=(coordinate(offset * 100.0) + "%") stop-color=(heat_colour(offset)) {}
                        }
                    }
                }
                @for (tile, &value) in map.values.iter().enumerate() {
                    rect.cell x=(coordinate((tile % columns) as f64 * cell)) y=(coordinate((tile / columns) as f64 * cell))
                        width=(cell) height=(cell) fill=(heat_colour(fraction(value)))
                        data-tile=(tile) data-bytes=(value) {
                        title { "tile " (tile) ": " (thousands(value)) " B" }
                    }
                }
                @if let Some(tile) = map.marked.filter(|&tile| tile < tiles) {
                    rect x=(coordinate((tile % columns) as f64 * cell)) y=(coordinate((tile / columns) as f64 * cell))
                        width=(cell) height=(cell) fill="none" stroke="#e0245e" stroke-width="2" {}
                }
                (heat_legend(minimum, maximum, width, grid_height + 8.0, &gradient))
            }
        }
    }
}

fn heat_maps(memory: &MemoryView) -> Markup {
    let sram = HeatMap {
        id: "heat-sram",
        title: "Peak SRAM per tile",
        values: memory
            .peak_bytes_per_tile
            .iter()
            .map(|&bytes| u64::from(bytes))
            .collect(),
        marked: Some(memory.fullest_tile.tile as usize),
    };
    let table = HeatMap {
        id: "heat-table",
        title: "Exchange table per tile",
        values: memory.exchange_table_bytes_per_tile.clone(),
        marked: None,
    };
    html! {
        section {
            h2 { "Memory per tile" }
            p.note {
                "One cell per tile, tile 0 at the top left, row by row ("
                (grid_columns(sram.values.len().max(1))) " tiles a row). Peak SRAM counts the exchange table and "
                "patch lists; the fullest tile (" (memory.fullest_tile.tile) ") is outlined. Hover a cell for its bytes."
            }
            div.maps {
                (heat_map(&sram))
                (heat_map(&table))
            }
        }
    }
}

/// How many points the memory chart draws at most.
const MEMORY_POINTS: usize = 900;

/// `(first step, largest value)` of at most `buckets` consecutive runs of
/// `values` (the largest keeps every peak visible).
fn bucket_maxima(values: &[u64], buckets: usize) -> Vec<(usize, u64)> {
    let count = values.len();
    let buckets = buckets.clamp(1, count.max(1));
    (0..buckets)
        .filter_map(|bucket| {
            let start = bucket * count / buckets;
            let end = ((bucket + 1) * count / buckets).max(start + 1).min(count);
            let largest = values.get(start..end)?.iter().copied().max()?;
            Some((start, largest))
        })
        .collect()
}

/// Plot area of the memory chart.
struct Plot {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    steps: usize,
    ceiling: u64,
}

impl Plot {
    fn x(&self, step: usize) -> f64 {
        self.left + step as f64 / self.steps.max(1) as f64 * self.width
    }

    fn y(&self, bytes: u64) -> f64 {
        self.top + self.height - bytes as f64 / self.ceiling.max(1) as f64 * self.height
    }
}

fn memory_area(plot: &Plot, values: &[u64]) -> String {
    let points = bucket_maxima(values, MEMORY_POINTS);
    let mut path = format!("M{} {}", coordinate(plot.x(0)), coordinate(plot.y(0)));
    for (index, &(step, bytes)) in points.iter().enumerate() {
        let next = points.get(index + 1).map_or(values.len(), |point| point.0);
        path.push_str(&format!(
            " L{} {} L{} {}",
            coordinate(plot.x(step)),
            coordinate(plot.y(bytes)),
            coordinate(plot.x(next)),
            coordinate(plot.y(bytes))
        ));
    }
    path.push_str(&format!(
        " L{} {} Z",
        coordinate(plot.x(values.len())),
        coordinate(plot.y(0))
    ));
    path
}

/// A round tick spacing (1, 2 or 5 times a power of ten) that cuts
/// `extent` into at most five parts.
fn tick_spacing(extent: u64) -> u64 {
    let mut power = 1u64;
    loop {
        for factor in [1, 2, 5] {
            let spacing = factor * power;
            if extent / spacing <= 5 {
                return spacing;
            }
        }
        power = power.saturating_mul(10);
    }
}

/// Multiples of a round spacing from 0 up to `extent`.
fn ticks(extent: u64) -> Vec<u64> {
    let spacing = tick_spacing(extent).max(1);
    (0..=extent / spacing)
        .map(|index| index * spacing)
        .collect()
}

fn memory_axes(plot: &Plot) -> Markup {
    const KIB: u64 = 1024;
    html! {
        @for kib in ticks(plot.ceiling / KIB) {
            @let y = plot.y(kib * KIB);
            line x1=(plot.left) x2=(coordinate(plot.left + plot.width)) y1=(coordinate(y)) y2=(coordinate(y))
                stroke="#eceef2" {}
            text.muted x=(coordinate(plot.left - 8.0)) y=(coordinate(y + 4.0)) text-anchor="end" {
                (thousands(kib)) " KiB"
            }
        }
        @for step in ticks(plot.steps.saturating_sub(1) as u64) {
            text.muted x=(coordinate(plot.x(step as usize))) y=(coordinate(plot.top + plot.height + 18.0))
                text-anchor="middle" {
                "step " (thousands(step))
            }
        }
    }
}

/// The top of the memory chart: the usable bytes when the peak comes within
/// half of them (so the margin shows), else a little above the peak.
fn memory_ceiling(peak: u64, usable: u64) -> u64 {
    if peak.saturating_mul(2) >= usable {
        usable.max(peak)
    } else {
        (peak + peak / 5).max(1)
    }
}

/// The peak's dot and label, the label on the side with more room.
fn peak_marker(plot: &Plot, step: usize, bytes: u64) -> Markup {
    // The middle of the step's level.
    let x = (plot.x(step) + plot.x(step + 1)) / 2.0;
    let y = plot.y(bytes);
    let right_half = x > plot.left + plot.width / 2.0;
    let label_x = if right_half { x - 8.0 } else { x + 8.0 };
    let label_y = if y - 8.0 < plot.top + 24.0 {
        y + 16.0
    } else {
        y - 8.0
    };
    html! {
        circle cx=(coordinate(x)) cy=(coordinate(y)) r="4" fill="#e0245e" {}
        text x=(coordinate(label_x)) y=(coordinate(label_y)) text-anchor=(if right_half { "end" } else { "start" }) {
            "peak " (thousands(bytes)) " B"
        }
    }
}

/// A horizontal line across the plot with a label in the right margin.
fn level_line(plot: &Plot, bytes: u64, label: &str, colour: &str, dashed: bool) -> Markup {
    let y = coordinate(plot.y(bytes));
    html! {
        line x1=(plot.left) x2=(coordinate(plot.left + plot.width)) y1=(y) y2=(y)
            stroke=(colour) stroke-width="1.5" stroke-dasharray=[dashed.then_some("4 3")] {}
        text x=(coordinate(plot.left + plot.width + 6.0)) y=(coordinate(plot.y(bytes) + 4.0)) { (label) }
    }
}

fn repeat_shading(plot: &Plot, ranges: &[(u32, u32)], layers: u32) -> Markup {
    html! {
        @for &(first, last) in ranges {
            @let left = plot.x(first as usize);
            rect x=(coordinate(left)) y=(plot.top) width=(coordinate(plot.x(last as usize + 1) - left))
                height=(plot.height) fill="#eef3fb" {}
            text.muted x=(coordinate(left + 6.0)) y=(coordinate(plot.top + 16.0)) {
                "layer loop body (runs " (layers) "×)"
            }
        }
    }
}

fn memory_over_steps(memory: &MemoryView, layers: u32) -> Markup {
    let fullest = &memory.fullest_tile;
    let values = &fullest.live_bytes_per_step;
    let peak = values.iter().copied().max().unwrap_or(0);
    let peak_step = values.iter().position(|&bytes| bytes == peak).unwrap_or(0);
    let usable = u64::from(memory.usable_bytes_per_tile);
    let plot = Plot {
        left: 80.0,
        top: 12.0,
        width: CHART_WIDTH - 80.0 - 90.0,
        height: 280.0,
        steps: values.len(),
        ceiling: memory_ceiling(peak, usable),
    };
    let height = plot.top + plot.height + 30.0;
    html! {
        section {
            h2 { "Memory of the fullest tile over the program" }
            p.note {
                "Live bytes on tile " (fullest.tile) " at each of the " (thousands(values.len() as u64))
                " steps of the placed program (the layer loop's body drawn once, shaded), the exchange table and "
                "patch lists (" (thousands(fullest.reserved_bytes)) " B, dashed) included. Peak "
                (thousands(peak)) " B at step " (thousands(peak_step as u64)) "; the tile has "
                (thousands(usable)) " usable bytes"
                @if plot.ceiling < usable { " (far above this chart's top)" }
                "."
            }
            svg id="memory-steps" width="100%" viewBox=(format!("0 0 {CHART_WIDTH} {height}")) role="img"
                aria-label="live bytes of the fullest tile per step"
                data-steps=(values.len()) data-peak=(peak) data-tile=(fullest.tile) {
                (repeat_shading(&plot, &fullest.repeat_steps, layers))
                (memory_axes(&plot))
                path d=(memory_area(&plot, values)) fill="#3b6fd8" fill-opacity="0.35" stroke="#3b6fd8" stroke-width="1.2" {}
                @if plot.ceiling >= usable {
                    (level_line(&plot, usable, "usable", "#e0245e", false))
                }
                (level_line(&plot, fullest.reserved_bytes, "reserved", "#1d2330", true))
                (peak_marker(&plot, peak_step, peak))
            }
        }
    }
}

fn suggestions(page: &ReportPage) -> Markup {
    html! {
        section id="suggestions" {
            h2 { "Suggestions" }
            @if page.suggestions.is_empty() {
                p { "none: no standard policy beats the " (page.suggestion_candidates)
                    " most expensive exchange phases as built." }
            } @else {
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
                        @for suggestion in page.suggestions {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_near_three_to_two() {
        assert_eq!(grid_columns(1472), 46);
        assert_eq!(grid_columns(16), 4);
        assert_eq!(grid_columns(7), 4);
        assert_eq!(grid_columns(1), 1);
    }

    #[test]
    fn buckets_keep_the_peak() {
        let values: Vec<u64> = (0..10_000).map(|step| (step % 977) as u64).collect();
        let points = bucket_maxima(&values, 900);
        assert_eq!(points.len(), 900);
        assert_eq!(points.iter().map(|point| point.1).max(), Some(976));
        assert_eq!(bucket_maxima(&[5, 7], 900), vec![(0, 5), (1, 7)]);
        assert!(bucket_maxima(&[], 900).is_empty());
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(17), vec![0, 5, 10, 15]);
        assert_eq!(ticks(622), vec![0, 200, 400, 600]);
        assert_eq!(ticks(0), vec![0]);
        assert_eq!(ticks(5), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn heat_colours_run_from_the_first_stop_to_the_last() {
        assert_eq!(heat_colour(0.0), "#440154");
        assert_eq!(heat_colour(1.0), "#fde725");
        assert_eq!(heat_colour(2.0), "#fde725");
    }
}
