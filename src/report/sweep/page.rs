//! `sweep/index.html`: the sweep as one self-contained page (inline CSS and
//! SVG, no script, no network), rendered with `maud`. One scatter per
//! exchange phase, horizon against max row bytes: circles are `word32`
//! points, triangles `paired64`, squares any other width; filled marks are
//! on the phase's Pareto frontier (horizon, max row, total row); the ring
//! is the phase as built; points with the same horizon, max row and width
//! share one mark whose tooltip lists each. A summary table lists every phase with its best
//! point under selections (a) and (b). Deterministic: the same sweep gives
//! a byte-identical page. Figures a test reads carry `data-*` attributes.

use maud::{Markup, html};

use crate::report::html::document;

use crate::schedule::TransferWidth;
use crate::studies::sweep::{PhaseSelection, Selection, Sweep, SweepPhase, frontier};
use crate::target::costs::cycles_to_ms;
use crate::text::thousands;

/// What the page shows.
pub struct SweepPage<'a> {
    pub name: &'a str,
    pub sweep: &'a Sweep,
    /// Selection (a), then (b).
    pub no_growth: &'a Selection,
    pub window: &'a Selection,
}

const PLOT_WIDTH: f64 = 360.0;
const PLOT_HEIGHT: f64 = 250.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 36.0;

/// A coordinate with one decimal (stable text).
fn coordinate(value: f64) -> String {
    format!("{value:.1}")
}

/// The whole page.
pub fn render(page: &SweepPage) -> String {
    let title = format!("superstep sweep: {}", page.name);
    let body = html! {
        h1 { (title) }
        (headline(page))
        (summary_table(page))
        section {
            h2 { "Horizon against max row bytes, per phase" }
            p.note {
                "Circles: word32; triangles: paired64; squares: other widths. Filled: on the phase's \
                 Pareto frontier (horizon, max row bytes, total row bytes). Ring: the phase as built. \
                 Rows are encoded bytes before cross-phase sharing; horizons are the modelled \
                 schedule's, not hardware measurements."
            }
            div.plots {
                @for phase in &page.sweep.phases {
                    (scatter(phase))
                }
            }
        }
        footer { "Written by superstep " (env!("CARGO_PKG_VERSION")) " from the figures of results.csv." }
    };
    document(&title, STYLE, body, None)
}

fn headline(page: &SweepPage) -> Markup {
    let sweep = page.sweep;
    let saving = |selection: &Selection| {
        let cycles = selection.saving_cycles();
        html! {
            span data-cycles=(cycles) { (thousands(cycles)) " cycles" }
            " (" (format!("{:.4}", cycles_to_ms(cycles))) " ms) over "
            (selection.chosen().count()) " phases"
        }
    };
    html! {
        section {
            p {
                span id="points" data-count=(sweep.point_count()) { (thousands(sweep.point_count() as u64)) }
                " points: " (sweep.phases.len()) " exchange phases under " (sweep.configs.len())
                " configurations (" (sweep.configs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
                "; paired64 only where some piece may move paired); "
                span id="validated" data-count=(sweep.validated_count()) { (sweep.validated_count()) }
                " validated."
            }
            p id="saving-a" { "Saving " (page.no_growth.rule.describe()) ": " (saving(page.no_growth)) "." }
            p id="saving-b" { "Saving " (page.window.rule.describe()) ": " (saving(page.window)) "." }
            p.note {
                "Savings are horizon plus Repeat patching per execution, times executions, against the phase as \
                 built; sharing patches and placement are not included (superstep sweep --apply measures them)."
            }
        }
    }
}

fn choice_cell(selected: Option<&PhaseSelection>) -> Markup {
    match selected.and_then(|phase| phase.chosen.as_ref()) {
        Some(chosen) => html! {
            td.text { (chosen.config.to_string()) }
            td data-cycles=(chosen.saving_cycles) { (thousands(chosen.saving_cycles)) }
        },
        None => html! { td.text { "as built" } td data-cycles="0" { "0" } },
    }
}

fn summary_table(page: &SweepPage) -> Markup {
    html! {
        section {
            h2 { "Phases" }
            div.scroll {
                table id="phases" {
                    thead {
                        tr {
                            th { "step" } th.text { "phase" } th { "executions" } th.text { "built policy" }
                            th { "horizon" } th { "max row B" } th { "total row B" } th { "points" }
                            th { "frontier" } th.text { "best (a)" } th { "saving (a)" }
                            th.text { "best (b)" } th { "saving (b)" }
                        }
                    }
                    tbody {
                        @for phase in &page.sweep.phases {
                            tr data-phase=(phase.key) {
                                td { (phase.step) }
                                td.text { a href=(format!("#step-{}", phase.step)) { (phase.key) } }
                                td { (phase.executions) }
                                td.text { (phase.built.policy) " (" (phase.built.figures.chosen) ", " (phase.built.figures.width) ")" }
                                td { (thousands(phase.built.figures.horizon)) }
                                td { (thousands(phase.built.figures.max_row_bytes)) }
                                td { (thousands(phase.built.figures.total_row_bytes)) }
                                td { (phase.points.len()) }
                                td { (frontier(phase).len()) }
                                (choice_cell(page.no_growth.phases.get(phase.index)))
                                (choice_cell(page.window.phases.get(phase.index)))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Maps a value range onto a pixel range.
struct Axis {
    low: f64,
    high: f64,
    from: f64,
    to: f64,
}

impl Axis {
    fn new(values: &[u64], from: f64, to: f64) -> Axis {
        let low = values.iter().copied().min().unwrap_or(0) as f64;
        let high = values.iter().copied().max().unwrap_or(1) as f64;
        let pad = ((high - low) * 0.08).max(1.0);
        Axis {
            low: (low - pad).max(0.0),
            high: high + pad,
            from,
            to,
        }
    }

    fn at(&self, value: u64) -> f64 {
        self.from + (value as f64 - self.low) / (self.high - self.low) * (self.to - self.from)
    }
}

fn mark(x: f64, y: f64, width: TransferWidth, on_frontier: bool, label: &str) -> Markup {
    let fill = if on_frontier { "#2459c9" } else { "#b9c6e4" };
    let class = if on_frontier {
        "point frontier"
    } else {
        "point"
    };
    html! {
        @match width {
            TransferWidth::Word32 => {
                circle class=(class) cx=(coordinate(x)) cy=(coordinate(y)) r="4.5" fill=(fill) stroke="#1d3f8f" stroke-width="0.8" {
                    title { (label) }
                }
            }
            TransferWidth::Paired64 => {
                polygon class=(class) points=(format!("{},{} {},{} {},{}",
                        coordinate(x), coordinate(y - 5.5), coordinate(x - 5.0), coordinate(y + 4.0),
                        coordinate(x + 5.0), coordinate(y + 4.0)))
                    fill=(fill) stroke="#1d3f8f" stroke-width="0.8" {
                    title { (label) }
                }
            }
            TransferWidth::Auto => {
                rect class=(class) x=(coordinate(x - 4.0)) y=(coordinate(y - 4.0)) width="8" height="8"
                    fill=(fill) stroke="#1d3f8f" stroke-width="0.8" {
                    title { (label) }
                }
            }
        }
    }
}

/// Points drawn as one mark: the same horizon, max row and width.
struct MarkGroup {
    horizon: u64,
    max_row_bytes: u64,
    width: TransferWidth,
    on_frontier: bool,
    /// One line per point, in configuration order.
    labels: Vec<String>,
}

/// The phase's validated points grouped by where (and how) they are drawn,
/// in the order of each group's first point.
fn coincident_marks(phase: &SweepPhase, on_frontier: &[usize]) -> Vec<MarkGroup> {
    let mut groups: Vec<MarkGroup> = Vec::new();
    for (index, point) in phase.points.iter().enumerate() {
        let Some(figures) = point.figures() else {
            continue;
        };
        let label = format!(
            "{}: horizon {}, max row {} B, total row {} B, Repeat patch {} words",
            point.config,
            thousands(figures.horizon),
            thousands(figures.max_row_bytes),
            thousands(figures.total_row_bytes),
            thousands(figures.repeat_patch_words)
        );
        let horizon = u64::from(figures.horizon);
        let width = point.config.width;
        let frontier_point = on_frontier.contains(&index);
        match groups.iter_mut().find(|group| {
            group.horizon == horizon
                && group.max_row_bytes == figures.max_row_bytes
                && group.width == width
        }) {
            Some(group) => {
                group.on_frontier |= frontier_point;
                group.labels.push(label);
            }
            None => groups.push(MarkGroup {
                horizon,
                max_row_bytes: figures.max_row_bytes,
                width,
                on_frontier: frontier_point,
                labels: vec![label],
            }),
        }
    }
    groups
}

fn scatter(phase: &SweepPhase) -> Markup {
    let on_frontier = frontier(phase);
    let mut horizons = vec![u64::from(phase.built.figures.horizon)];
    let mut rows = vec![phase.built.figures.max_row_bytes];
    for point in &phase.points {
        if let Some(figures) = point.figures() {
            horizons.push(u64::from(figures.horizon));
            rows.push(figures.max_row_bytes);
        }
    }
    let x_axis = Axis::new(&horizons, LEFT, PLOT_WIDTH - RIGHT);
    let y_axis = Axis::new(&rows, PLOT_HEIGHT - BOTTOM, TOP);
    let bottom = PLOT_HEIGHT - BOTTOM;
    html! {
        figure.plot id=(format!("step-{}", phase.step)) data-phase=(phase.key) {
            figcaption {
                "step " (phase.step) ": " code { (phase.key) } " x " (phase.executions)
            }
            svg width=(PLOT_WIDTH) height=(PLOT_HEIGHT) viewBox=(format!("0 0 {PLOT_WIDTH} {PLOT_HEIGHT}")) role="img" {
                rect x=(LEFT) y=(TOP) width=(coordinate(PLOT_WIDTH - LEFT - RIGHT)) height=(coordinate(bottom - TOP))
                    fill="#fbfcfd" stroke="#dde1e8" {}
                text.muted x=(LEFT) y=(coordinate(bottom + 14.0)) text-anchor="start" {
                    (thousands(x_axis.low.round() as u64))
                }
                text.muted x=(coordinate(PLOT_WIDTH - RIGHT)) y=(coordinate(bottom + 14.0)) text-anchor="end" {
                    (thousands(x_axis.high.round() as u64))
                }
                text.muted x=(coordinate((LEFT + PLOT_WIDTH - RIGHT) / 2.0)) y=(coordinate(bottom + 30.0)) text-anchor="middle" {
                    "horizon (cycles)"
                }
                text.muted x=(coordinate(LEFT - 6.0)) y=(coordinate(bottom)) text-anchor="end" {
                    (thousands(y_axis.low.round() as u64))
                }
                text.muted x=(coordinate(LEFT - 6.0)) y=(coordinate(TOP + 10.0)) text-anchor="end" {
                    (thousands(y_axis.high.round() as u64))
                }
                text.muted x="12" y=(coordinate((TOP + bottom) / 2.0)) text-anchor="middle"
                    transform=(format!("rotate(-90 12 {})", coordinate((TOP + bottom) / 2.0))) {
                    "max row bytes"
                }
                @for group in coincident_marks(phase, &on_frontier) {
                    (mark(
                        x_axis.at(group.horizon),
                        y_axis.at(group.max_row_bytes),
                        group.width,
                        group.on_frontier,
                        &group.labels.join("\n"),
                    ))
                }
                circle.built cx=(coordinate(x_axis.at(u64::from(phase.built.figures.horizon)))) cy=(coordinate(y_axis.at(phase.built.figures.max_row_bytes)))
                    r="9" fill="none" stroke="#e0245e" stroke-width="2"
                    data-horizon=(phase.built.figures.horizon) data-max-row=(phase.built.figures.max_row_bytes) {
                    title {
                        "as built: " (phase.built.policy) " (" (phase.built.figures.chosen) ", " (phase.built.figures.width) "), horizon "
                        (thousands(phase.built.figures.horizon)) ", max row " (thousands(phase.built.figures.max_row_bytes)) " B, total row "
                        (thousands(phase.built.figures.total_row_bytes)) " B"
                    }
                }
            }
        }
    }
}

pub const STYLE: &str = "
body { margin: 0; background: #f6f7f9; color: #1d2330;
  font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; }
main { max-width: 1320px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 0 0 8px; }
section { background: #fff; border: 1px solid #dde1e8; border-radius: 8px;
  padding: 16px 20px; margin: 16px 0; overflow-x: auto; }
p.note { color: #5a6272; margin: 4px 0 12px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eceef2; text-align: right; white-space: nowrap; }
th { background: #f0f2f5; position: sticky; top: 0; font-weight: 600; }
td.text, th.text { text-align: left; }
tbody tr:nth-child(even) { background: #fafbfc; }
.scroll { max-height: 560px; overflow: auto; border: 1px solid #eceef2; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
figure.plot { margin: 0; border: 1px solid #eceef2; border-radius: 6px; padding: 6px; }
figcaption { font-size: 12px; margin-bottom: 4px; }
svg text { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; font-size: 11px; fill: #1d2330; }
svg text.muted { fill: #5a6272; }
code { background: #f0f2f5; padding: 1px 4px; border-radius: 3px; }
footer { color: #5a6272; font-size: 12px; margin-top: 24px; }
";
