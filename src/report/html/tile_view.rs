//! The tile drill-down of `report.html`: pick any tile (a number, the
//! fullest, or a click on a heat-map cell) and see its live bytes over the
//! program and what it holds at its peak, by category and by value. The
//! page is written showing the fullest tile (it reads so without
//! JavaScript); every tile's figures ride in one JSON block that a short
//! script reads to show another, and `#tile=N` in the address picks tile N
//! when the page opens (links and the headless-browser test use it).

use maud::{Markup, PreEscaped, html};
use serde::Serialize;

use super::charts::tile_memory_chart;
use crate::session::memory::{MemoryCategory, MemoryView, TileMemory};
use crate::text::thousands;

/// Values listed per tile (the rest are summed as one line).
const LISTED_VALUES: usize = 12;

/// Colour of each category, in [`MemoryCategory::ALL`] order.
const CATEGORY_COLOURS: [&str; 9] = [
    "#1d2330", "#8d96a8", "#3b6fd8", "#e8833a", "#9b59b6", "#2a9d8f", "#e0245e", "#c9b458",
    "#6c8ebf",
];

/// One tile as the script reads it: `[peak step, peak bytes, live bytes
/// per step, bytes per category, [label, category, bytes] of the largest
/// values]`.
type TileRecord<'a> = (u32, u64, &'a [u64], &'a [u64], Vec<(i64, i64, u64)>);

#[derive(Serialize)]
struct TileData<'a> {
    fullest: u32,
    usable: u32,
    categories: Vec<&'static str>,
    colours: &'static [&'static str],
    labels: &'a [String],
    tiles: Vec<TileRecord<'a>>,
}

/// `[label, category, bytes]` of the largest values of `tile` at its
/// peak, the rest summed under label and category -1.
fn listed(tile: &TileMemory) -> Vec<(i64, i64, u64)> {
    let mut rows: Vec<(i64, i64, u64)> = tile
        .peak_by_value
        .iter()
        .take(LISTED_VALUES)
        .map(|held| (i64::from(held.label), held.category as i64, held.bytes))
        .collect();
    let rest: u64 = tile
        .peak_by_value
        .iter()
        .skip(LISTED_VALUES)
        .map(|held| held.bytes)
        .sum();
    if rest > 0 {
        rows.push((-1, -1, rest));
    }
    rows
}

/// The JSON block, with `</` written `<\/` so that no value can end the
/// script element.
fn tile_data(memory: &MemoryView) -> String {
    let data = TileData {
        fullest: memory.fullest_tile.tile,
        usable: memory.usable_bytes_per_tile,
        categories: MemoryCategory::ALL
            .iter()
            .map(|category| category.label())
            .collect(),
        colours: &CATEGORY_COLOURS,
        labels: &memory.tiles.labels,
        tiles: memory
            .tiles
            .tiles
            .iter()
            .map(|tile| {
                (
                    tile.peak_step,
                    tile.peak_bytes,
                    &tile.live_bytes_per_step[..],
                    &tile.peak_by_category[..],
                    listed(tile),
                )
            })
            .collect(),
    };
    serde_json::to_string(&data)
        .unwrap_or_else(|_| "null".to_string())
        .replace("</", "<\\/")
}

fn share(part: u64, whole: u64) -> String {
    format!("{:.1}%", part as f64 * 100.0 / whole.max(1) as f64)
}

/// The summary line of `tile`.
fn summary(memory: &MemoryView, index: usize, tile: &TileMemory) -> String {
    format!(
        "Tile {index}: peak {} B at step {} ({} of its {} usable bytes).",
        thousands(tile.peak_bytes),
        thousands(u64::from(tile.peak_step)),
        share(tile.peak_bytes, u64::from(memory.usable_bytes_per_tile)),
        thousands(memory.usable_bytes_per_tile),
    )
}

fn category_rows(tile: &TileMemory) -> Markup {
    html! {
        @for (index, category) in MemoryCategory::ALL.iter().enumerate() {
            @let bytes = tile.peak_by_category.get(index).copied().unwrap_or(0);
            @if bytes > 0 {
                tr data-category=(category.label()) {
                    td.text {
                        span.swatch style=(format!("background:{}", CATEGORY_COLOURS[index])) {}
                        (category.label())
                    }
                    td data-sort=(bytes) { (thousands(bytes)) }
                    td { (share(bytes, tile.peak_bytes)) }
                }
            }
        }
    }
}

fn value_rows(memory: &MemoryView, tile: &TileMemory) -> Markup {
    html! {
        @for (label, category, bytes) in listed(tile) {
            tr {
                td.text.key {
                    @if label < 0 {
                        "the other " (tile.peak_by_value.len() - LISTED_VALUES) " values"
                    } @else {
                        (memory.tiles.labels.get(label as usize).map_or("?", String::as_str))
                    }
                }
                td.text {
                    (usize::try_from(category).ok().and_then(|category| MemoryCategory::ALL.get(category)).map_or("", |category| category.label()))
                }
                td data-sort=(bytes) { (thousands(bytes)) }
                td { (share(bytes, tile.peak_bytes)) }
            }
        }
    }
}

/// The section: picker, chart and the two tables, written for the fullest
/// tile, and the data and script that show any other.
pub(super) fn tile_view(memory: &MemoryView, layers: u32) -> Markup {
    let fullest = memory.fullest_tile.tile as usize;
    let Some(tile) = memory.tiles.tiles.get(fullest) else {
        return html! {};
    };
    let last = memory.tiles.tiles.len().saturating_sub(1);
    html! {
        section id="tile-view" {
            h2 { "One tile's memory over the program" }
            p.note {
                "Live bytes of one tile at each of the " (thousands(tile.live_bytes_per_step.len() as u64))
                " steps of the placed program (the layer loop's body drawn once, shaded; the exchange table "
                "and patch lists held throughout), on the fullest tile's scale, and what the tile holds at its "
                "peak. Pick a tile by number, or click a cell of the heat maps above; the address keeps it ("
                code { "report.html#tile=N" } ")."
            }
            form.picker onsubmit="return false" {
                label for="tile-picker" { "Tile " }
                input id="tile-picker" type="number" min="0" max=(last) step="1" value=(fullest);
                " of 0 to " (last) " "
                button type="button" id="tile-fullest" data-tile=(fullest) { "fullest (" (fullest) ")" }
            }
            p id="tile-summary" data-tile=(fullest) data-peak=(tile.peak_bytes) data-peak-step=(tile.peak_step) {
                (summary(memory, fullest, tile))
            }
            (tile_memory_chart(memory, fullest, layers))
            div.columns {
                div {
                    h3 { "At its peak, by category" }
                    table id="tile-categories" {
                        thead { tr { th.text { "category" } th { "bytes" } th { "share" } } }
                        tbody { (category_rows(tile)) }
                    }
                }
                div {
                    h3 { "At its peak, by value (largest " (LISTED_VALUES) ")" }
                    table id="tile-values" {
                        thead { tr { th.text { "value" } th.text { "category" } th { "bytes" } th { "share" } } }
                        tbody { (value_rows(memory, tile)) }
                    }
                }
            }
            script type="application/json" id="tile-data" { (PreEscaped(tile_data(memory))) }
        }
    }
}

/// Shows the picked tile: the summary, the curve and peak marker (on the
/// chart's own geometry), both tables, the outlined heat-map cells and
/// `body[data-picked-tile]`.
pub(super) const TILE_SCRIPT: &str = r##"
(function () {
  var source = document.getElementById('tile-data');
  var picker = document.getElementById('tile-picker');
  if (!source || !picker) { return; }
  var data = JSON.parse(source.textContent);
  var chart = document.getElementById('memory-steps');
  var geometry = ['left', 'top', 'width', 'height', 'ceiling'].reduce(function (all, name) {
    all[name] = Number(chart.dataset[name]); return all;
  }, {});
  var svg = chart.namespaceURI;
  function thousands(value) { return Math.round(value).toLocaleString('en-US'); }
  function share(part, whole) { return (part * 100 / Math.max(whole, 1)).toFixed(1) + '%'; }
  function x(step, steps) { return geometry.left + step / Math.max(steps, 1) * geometry.width; }
  function y(bytes) {
    return geometry.top + geometry.height - bytes / Math.max(geometry.ceiling, 1) * geometry.height;
  }
  function cell(row, text, sort, left) {
    var td = document.createElement('td');
    td.textContent = text;
    if (sort !== undefined) { td.dataset.sort = sort; }
    if (left) { td.className = 'text'; }
    row.appendChild(td);
    return td;
  }
  function swatch(td, colour) {
    var mark = document.createElement('span');
    mark.className = 'swatch';
    mark.style.background = colour;
    td.insertBefore(mark, td.firstChild);
  }
  function show(index) {
    index = Math.max(0, Math.min(data.tiles.length - 1, Math.floor(Number(index)) || 0));
    var tile = data.tiles[index];
    var peakStep = tile[0], peak = tile[1], live = tile[2], categories = tile[3], values = tile[4];
    picker.value = index;
    var summary = document.getElementById('tile-summary');
    summary.textContent = 'Tile ' + index + ': peak ' + thousands(peak) + ' B at step ' + thousands(peakStep)
      + ' (' + share(peak, data.usable) + ' of its ' + thousands(data.usable) + ' usable bytes).';
    summary.dataset.tile = index;
    summary.dataset.peak = peak;
    summary.dataset.peakStep = peakStep;
    var steps = live.length;
    var path = 'M' + x(0, steps).toFixed(1) + ' ' + y(0).toFixed(1);
    live.forEach(function (bytes, step) {
      path += ' L' + x(step, steps).toFixed(1) + ' ' + y(bytes).toFixed(1)
        + ' L' + x(step + 1, steps).toFixed(1) + ' ' + y(bytes).toFixed(1);
    });
    path += ' L' + x(steps, steps).toFixed(1) + ' ' + y(0).toFixed(1) + ' Z';
    document.getElementById('tile-area').setAttribute('d', path);
    chart.dataset.tile = index;
    chart.dataset.peak = peak;
    var marker = document.getElementById('tile-peak');
    while (marker.firstChild) { marker.removeChild(marker.firstChild); }
    var markX = (x(peakStep, steps) + x(peakStep + 1, steps)) / 2, markY = y(peak);
    var dot = document.createElementNS(svg, 'circle');
    dot.setAttribute('cx', markX.toFixed(1)); dot.setAttribute('cy', markY.toFixed(1));
    dot.setAttribute('r', '4'); dot.setAttribute('fill', '#e0245e');
    marker.appendChild(dot);
    var right = markX > geometry.left + geometry.width / 2;
    var label = document.createElementNS(svg, 'text');
    label.setAttribute('x', (right ? markX - 8 : markX + 8).toFixed(1));
    label.setAttribute('y', (markY - 8 < geometry.top + 24 ? markY + 16 : markY - 8).toFixed(1));
    label.setAttribute('text-anchor', right ? 'end' : 'start');
    label.textContent = 'peak ' + thousands(peak) + ' B';
    marker.appendChild(label);
    var byCategory = document.querySelector('#tile-categories tbody');
    byCategory.textContent = '';
    categories.forEach(function (bytes, category) {
      if (bytes === 0) { return; }
      var row = byCategory.insertRow();
      row.dataset.category = data.categories[category];
      swatch(cell(row, data.categories[category], undefined, true), data.colours[category]);
      cell(row, thousands(bytes), bytes);
      cell(row, share(bytes, peak));
    });
    var byValue = document.querySelector('#tile-values tbody');
    byValue.textContent = '';
    var others = values.length > 0 && values[values.length - 1][0] < 0;
    values.forEach(function (held) {
      var row = byValue.insertRow();
      var name = held[0] < 0 ? 'the other values' : data.labels[held[0]];
      cell(row, name, undefined, true).classList.add('key');
      cell(row, held[0] < 0 ? '' : data.categories[held[1]], undefined, true);
      cell(row, thousands(held[2]), held[2]);
      cell(row, share(held[2], peak));
    });
    byValue.dataset.others = others ? 'yes' : 'no';
    document.querySelectorAll('rect.cell.picked').forEach(function (rect) { rect.classList.remove('picked'); });
    document.querySelectorAll('rect.cell[data-tile="' + index + '"]').forEach(function (rect) {
      rect.classList.add('picked');
    });
    document.body.dataset.pickedTile = index;
    try { history.replaceState(null, '', '#tile=' + index); } catch (error) { /* a file page may refuse */ }
  }
  picker.addEventListener('change', function () { show(picker.value); });
  picker.addEventListener('input', function () { if (picker.value !== '') { show(picker.value); } });
  document.getElementById('tile-fullest').addEventListener('click', function () { show(data.fullest); });
  document.querySelectorAll('rect.cell').forEach(function (rect) {
    rect.addEventListener('click', function () {
      show(rect.dataset.tile);
      document.getElementById('tile-view').scrollIntoView();
    });
  });
  var asked = /tile=(\d+)/.exec(location.hash);
  show(asked ? asked[1] : data.fullest);
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::memory::{FullestTile, HeldValue, TileMemories};

    fn view() -> MemoryView {
        let tile = |peak: u64| TileMemory {
            live_bytes_per_step: vec![10, peak, 20],
            peak_step: 1,
            peak_bytes: peak,
            peak_by_category: vec![4, 2, peak - 6, 0, 0, 0, 0, 0, 0],
            peak_by_value: vec![HeldValue {
                label: 0,
                category: MemoryCategory::Weights,
                bytes: peak - 6,
            }],
        };
        MemoryView {
            peak_bytes_per_tile: vec![50, 90],
            exchange_table_bytes_per_tile: vec![4, 4],
            usable_bytes_per_tile: 100,
            fullest_tile: FullestTile {
                tile: 1,
                reserved_bytes: 6,
                live_bytes_per_step: vec![10, 90, 20],
                repeat_steps: vec![],
            },
            tiles: TileMemories {
                labels: vec!["w</script>".to_string()],
                tiles: vec![tile(50), tile(90)],
            },
        }
    }

    #[test]
    fn the_page_shows_the_fullest_tile_and_carries_every_tile() {
        let markup = tile_view(&view(), 2).into_string();
        assert!(markup.contains("Tile 1: peak 90 B at step 1"), "{markup}");
        assert!(markup.contains(r#"value="1""#));
        let data = tile_data(&view());
        assert!(!data.contains("</"), "{data}");
        let parsed: serde_json::Value =
            serde_json::from_str(&data.replace("<\\/", "</")).expect("JSON");
        assert_eq!(parsed["tiles"].as_array().map(Vec::len), Some(2));
        assert_eq!(parsed["tiles"][0][1], 50);
        assert_eq!(parsed["labels"][0], "w</script>");
    }

    #[test]
    fn values_beyond_the_listed_ones_are_summed() {
        let mut tile = view().tiles.tiles[1].clone();
        tile.peak_by_value = (0..15)
            .map(|label| HeldValue {
                label,
                category: MemoryCategory::Activations,
                bytes: 2,
            })
            .collect();
        let rows = listed(&tile);
        assert_eq!(rows.len(), LISTED_VALUES + 1);
        assert_eq!(rows.last(), Some(&(-1, -1, 6)));
    }
}
