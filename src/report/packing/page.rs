//! `packing/packing.html`: the packing study as one self-contained page
//! (inline CSS and SVG, no script, no network), rendered with `maud`. A
//! summary table of the studied phases, then per phase its alternatives'
//! table and two bar charts: exchange horizon plus the added ideal copy
//! cycles (against the original's horizon, a dashed line), and max row
//! bytes per tile. Refused alternatives say why; their timings are not
//! shown. Deterministic; the figures a test reads carry `data-*`
//! attributes.

use maud::{Markup, html};

use crate::report::html::document;
use crate::report::sweep::page::STYLE;
use crate::studies::packing::{
    AlternativeOutcome, AlternativeStudy, ExchangeMeasure, Packing, PackingPhase,
};
use crate::text::thousands;

const CHART_WIDTH: f64 = 560.0;
const LABEL_WIDTH: f64 = 130.0;
const BAR_HEIGHT: f64 = 18.0;
const BAR_GAP: f64 = 6.0;

/// The whole page.
pub fn render(name: &str, packing: &Packing) -> String {
    let title = format!("superstep packing: {name}");
    let body = html! {
        h1 { (title) }
        p.note {
            "Counterfactuals of " (packing.phases.len()) " of the " (packing.source) "'s "
            (packing.phases_in_build) " exchange phases, each scheduled under "
            @match &packing.config { Some(config) => { code { (config) } }, None => { "its own policy" } }
            ". Every alternative keeps each piece's source tile, recipient set and payload bytes, \
             is checked against the original (the same bytes delivered), then scheduled, \
             validated, encoded and row-checked by the real scheduler and encoder. Copy cycles are \
             ideal floors (8 bytes per cycle, the busiest source tile's gather plus the busiest \
             receiver's scatter), not kernel estimates; staging is the fullest tile's source and \
             receive staging together. Horizons are the modelled schedule's, not hardware \
             measurements. Staging alternatives are refused on phases whose pieces depend on one \
             another."
        }
        (summary(packing))
        @for phase in &packing.phases {
            (phase_section(phase))
        }
    };
    document(&title, &format!("{STYLE}{EXTRA_STYLE}"), body, None)
}

fn measured(study: &AlternativeStudy) -> Option<(&ExchangeMeasure, u64)> {
    match &study.outcome {
        AlternativeOutcome::Measured { exchange, copies } => {
            Some((exchange, copies.added_copy_cycles))
        }
        _ => None,
    }
}

/// The alternative with the lowest horizon plus copy cycles, when it is
/// below the original's horizon (`None`: the original is the shortest).
fn best(phase: &PackingPhase) -> Option<(&AlternativeStudy, u64)> {
    let original = u64::from(phase.study.original.horizon);
    phase
        .study
        .alternatives
        .iter()
        .filter_map(|study| {
            measured(study).map(|(exchange, copy)| (study, u64::from(exchange.horizon) + copy))
        })
        .filter(|&(_, cycles)| cycles < original)
        .min_by_key(|&(study, cycles)| (cycles, study.alternative))
}

fn summary(packing: &Packing) -> Markup {
    html! {
        section {
            h2 { "Phases" }
            table #summary {
                thead { tr {
                    th.text { "phase" } th { "executions" } th { "transfers" } th { "most endpoints (tile)" }
                    th.text { "dependencies" } th { "original horizon" } th.text { "shortest: horizon + copies" }
                    th { "cycles" } th { "change" }
                } }
                tbody {
                    @for phase in &packing.phases {
                        @let original = u64::from(phase.study.original.horizon);
                        tr data-key=(phase.key) {
                            td.text { code { (phase.key) } }
                            td { (phase.executions) }
                            td { (thousands(phase.study.original.transfers)) }
                            td { (thousands(phase.endpoint_fragments)) " (tile " (phase.fragment_tile) ")" }
                            td.text { (dependency_text(phase)) }
                            td { (thousands(original)) }
                            @match best(phase) {
                                Some((study, cycles)) => {
                                    td.text { (study.alternative.name()) }
                                    td { (thousands(cycles)) }
                                    td { (signed(cycles as i64 - original as i64)) }
                                }
                                None => { td.text { "the original" } td { (thousands(original)) } td { "0" } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn dependency_text(phase: &PackingPhase) -> String {
    let independence = &phase.study.independence;
    if independence.is_independent() {
        "independent".to_string()
    } else {
        format!(
            "{} dependent ({} forwarding), prefix {}",
            thousands(u64::from(independence.dependent)),
            thousands(u64::from(independence.forwarding)),
            thousands(u64::from(independence.prefix))
        )
    }
}

fn signed(value: i64) -> String {
    if value > 0 {
        format!("+{}", thousands(value as u64))
    } else if value < 0 {
        format!("-{}", thousands(value.unsigned_abs()))
    } else {
        "0".to_string()
    }
}

fn phase_section(phase: &PackingPhase) -> Markup {
    let original = &phase.study.original;
    html! {
        section.phase data-key=(phase.key) {
            h2 { code { (phase.key) } }
            p.note {
                "Step " (phase.step) " (the index " code { "superstep phases" } " shows), " (phase.executions) " executions, policy " code { (phase.policy) }
                "; " (thousands(original.transfers)) " transfers to " (thousands(original.receives))
                " receives; endpoint bound " (thousands(u64::from(original.endpoint_bound)))
                " cycles (the same payload in every alternative); " (dependency_text(phase)) "."
            }
            table.alternatives {
                thead { tr {
                    th.text { "alternative" } th { "transfers" } th { "max row B/tile" }
                    th { "total row KiB" } th { "horizon" }
                    th { "added copy cycles" } th { "change" } th { "staging KiB/tile" }
                    th { "copy runs" } th { "affine groups (max/tile)" } th.text { "check" }
                } }
                tbody {
                    (measure_row("original", original, None, original))
                    @for study in &phase.study.alternatives {
                        @match &study.outcome {
                            AlternativeOutcome::Measured { exchange, copies } => {
                                (measure_row(study.alternative.name(), exchange, Some(copies), original))
                            }
                            AlternativeOutcome::Refused(refusal) => {
                                tr data-alternative=(study.alternative.name()) data-refused="true" {
                                    td.text { (study.alternative.name()) }
                                    td.text.wrap colspan="10" { (refusal.to_string()) }
                                }
                            }
                            AlternativeOutcome::Failed(message) => {
                                tr data-alternative=(study.alternative.name()) data-failed="true" {
                                    td.text { (study.alternative.name()) }
                                    td.text.wrap colspan="9" { (message) }
                                    td.text { "FAIL" }
                                }
                            }
                        }
                    }
                }
            }
            div.plots {
                (bars(phase, "Horizon + added copy cycles", |exchange, copy| (u64::from(exchange.horizon), copy), u64::from(original.horizon)))
                (bars(phase, "Max row bytes per tile", |exchange, _| (exchange.max_row_bytes, 0), original.max_row_bytes))
            }
        }
    }
}

fn measure_row(
    name: &str,
    exchange: &ExchangeMeasure,
    copies: Option<&crate::studies::packing::CopyFigures>,
    original: &ExchangeMeasure,
) -> Markup {
    let added = copies.map_or(0, |copies| copies.added_copy_cycles);
    let change = i64::from(exchange.horizon) + added as i64 - i64::from(original.horizon);
    html! {
        tr data-alternative=(name) data-transfers=(exchange.transfers) data-horizon=(exchange.horizon)
            data-max-row-bytes=(exchange.max_row_bytes) data-added-copy-cycles=(added) {
            td.text { (name) }
            td { (thousands(exchange.transfers)) }
            td { (thousands(exchange.max_row_bytes)) }
            td { (format!("{:.1}", exchange.total_row_bytes as f64 / 1024.0)) }
            td { (thousands(u64::from(exchange.horizon))) }
            td { (thousands(added)) }
            td { (signed(change)) }
            @match copies {
                Some(copies) => {
                    td { @match copies.staging_tile {
                        Some(tile) => { (format!("{:.1}", copies.staging_bytes_max as f64 / 1024.0)) " (tile " (tile) ")" }
                        None => { "0" }
                    } }
                    td { (thousands(copies.copy_runs)) }
                    td { (thousands(copies.affine_groups)) " (" (copies.affine_groups_max_per_tile) ")" }
                }
                None => { td { "0" } td { "0" } td { "0" } }
            }
            td.text { "PASS" }
        }
    }
}

/// Horizontal bars, one per measured row (original first), each split in
/// two parts (`value` gives them); a dashed line at `reference`.
fn bars(
    phase: &PackingPhase,
    title: &str,
    value: impl Fn(&ExchangeMeasure, u64) -> (u64, u64),
    reference: u64,
) -> Markup {
    let mut rows: Vec<(&str, u64, u64)> = vec![("original", value(&phase.study.original, 0).0, 0)];
    for study in &phase.study.alternatives {
        if let Some((exchange, copy)) = measured(study) {
            let (first, second) = value(exchange, copy);
            rows.push((study.alternative.name(), first, second));
        }
    }
    let largest = rows
        .iter()
        .map(|&(_, first, second)| first + second)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let span = CHART_WIDTH - LABEL_WIDTH - 70.0;
    let scale = |value: u64| value as f64 / largest * span;
    let height = rows.len() as f64 * (BAR_HEIGHT + BAR_GAP) + 24.0;
    html! {
        figure.plot {
            figcaption { (title) }
            svg width=(CHART_WIDTH) height=(format!("{height:.1}")) viewBox=(format!("0 0 {CHART_WIDTH} {height:.1}")) role="img" {
                @for (row, &(name, first, second)) in rows.iter().enumerate() {
                    @let y = row as f64 * (BAR_HEIGHT + BAR_GAP) + 4.0;
                    text x="0" y=(format!("{:.1}", y + 13.0)) { (name) }
                    rect x=(LABEL_WIDTH) y=(format!("{y:.1}")) width=(format!("{:.1}", scale(first))) height=(BAR_HEIGHT) fill="#3b6fb6" {
                        title { (name) ": " (thousands(first)) }
                    }
                    @if second > 0 {
                        rect x=(format!("{:.1}", LABEL_WIDTH + scale(first))) y=(format!("{y:.1}")) width=(format!("{:.1}", scale(second))) height=(BAR_HEIGHT) fill="#e08a2c" {
                            title { (name) " copies: " (thousands(second)) }
                        }
                    }
                    text.muted x=(format!("{:.1}", LABEL_WIDTH + scale(first + second) + 4.0)) y=(format!("{:.1}", y + 13.0)) { (thousands(first + second)) }
                }
                @let x = LABEL_WIDTH + scale(reference);
                line x1=(format!("{x:.1}")) x2=(format!("{x:.1}")) y1="0" y2=(format!("{:.1}", height - 18.0)) stroke="#1d2330" stroke-dasharray="4 3" {}
                text.muted x=(format!("{:.1}", LABEL_WIDTH)) y=(format!("{:.1}", height - 4.0)) {
                    "blue: exchange; orange: added ideal copies; dashed: the original"
                }
            }
        }
    }
}

/// What this page adds to the sweep page's style.
const EXTRA_STYLE: &str = "
table.alternatives, table#summary { font-size: 13px; margin-bottom: 12px; }
td.wrap { white-space: normal; }
";
