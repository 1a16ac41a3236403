//! The memory charts of `report.html`: the per-tile heat maps (peak SRAM
//! and exchange-table bytes, one cell per tile on a near 3:2 grid with a
//! viridis legend) and one tile's live bytes over the placed steps
//! (bucketed to at most `MEMORY_POINTS` points, round ticks, the layer loop
//! shaded, the usable level and the peak marked, on the fullest tile's
//! scale), with the width and the coordinate format every chart of the
//! page shares.

use maud::{Markup, html};

use crate::session::memory::MemoryView;
use crate::text::thousands;

/// Width of the full-width charts, in SVG units.
pub(super) const CHART_WIDTH: f64 = 1240.0;

/// An SVG coordinate with one decimal.
pub(super) fn coordinate(value: f64) -> String {
    format!("{value:.1}")
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

pub(super) fn heat_maps(memory: &MemoryView) -> Markup {
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
                "patch lists; the fullest tile (" (memory.fullest_tile.tile) ") is outlined. Click a cell to see "
                "that tile below, hover it for its bytes."
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

/// The live-bytes chart of `tile` (its curve drawn; the scale, the layer
/// loop's shading and the usable level fixed by the fullest tile, so that
/// every tile reads on the same axes). Its geometry rides on `data-*`
/// attributes, and the curve and the peak marker carry ids, for the tile
/// picker's script to redraw them for another tile.
pub(super) fn tile_memory_chart(memory: &MemoryView, tile: usize, layers: u32) -> Markup {
    let fullest = &memory.fullest_tile;
    let values = memory
        .tiles
        .tiles
        .get(tile)
        .map_or(&fullest.live_bytes_per_step[..], |shown| {
            &shown.live_bytes_per_step[..]
        });
    let peak = values.iter().copied().max().unwrap_or(0);
    let peak_step = values.iter().position(|&bytes| bytes == peak).unwrap_or(0);
    let largest = fullest
        .live_bytes_per_step
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    let usable = u64::from(memory.usable_bytes_per_tile);
    let plot = Plot {
        left: 80.0,
        top: 12.0,
        width: CHART_WIDTH - 80.0 - 90.0,
        height: 280.0,
        steps: values.len(),
        ceiling: memory_ceiling(largest.max(peak), usable),
    };
    let height = plot.top + plot.height + 30.0;
    html! {
        svg id="memory-steps" width="100%" viewBox=(format!("0 0 {CHART_WIDTH} {height}")) role="img"
            aria-label="live bytes of one tile per step"
            data-steps=(values.len()) data-peak=(peak) data-tile=(tile)
            data-left=(plot.left) data-top=(plot.top) data-width=(plot.width) data-height=(plot.height)
            data-ceiling=(plot.ceiling) {
            (repeat_shading(&plot, &fullest.repeat_steps, layers))
            (memory_axes(&plot))
            path id="tile-area" d=(memory_area(&plot, values)) fill="#3b6fd8" fill-opacity="0.35" stroke="#3b6fd8" stroke-width="1.2" {}
            @if plot.ceiling >= usable {
                (level_line(&plot, usable, "usable", "#e0245e", false))
            }
            g id="tile-peak" { (peak_marker(&plot, peak_step, peak)) }
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
