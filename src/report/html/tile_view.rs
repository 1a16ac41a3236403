//! The tile drill-down of `report.html`: pick any tile (a number, the
//! fullest, or a click on a heat-map cell) and see its live bytes over the
//! program and what it holds at its peak, by category and by value, and
//! its work at every step (a per-tile BSP timeline: busy cycles in compute
//! steps, words moved in exchange phases, against the step's busiest
//! tile); pick a step there and see that step's work across all tiles.
//! The memory part is written showing the fullest tile (it reads so
//! without JavaScript); every tile's figures ride in one JSON block that a
//! short script reads to show another, and `#tile=N` (and `&step=S`) in
//! the address picks them when the page opens (links and the
//! headless-browser test use it).

use maud::{Markup, PreEscaped, html};
use serde::Serialize;

use super::charts::tile_memory_chart;
use crate::session::memory::{MemoryCategory, MemoryView, TileMemory};
use crate::session::step_loads::StepTileLoad;
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

/// One program step as the script reads it: `[step, key, kind, cycles
/// per execution, executions, work per tile]`.
type StepRecord<'a> = (usize, &'a str, &'static str, u64, u64, &'a [u64]);

#[derive(Serialize)]
struct TileData<'a> {
    fullest: u32,
    usable: u32,
    categories: Vec<&'static str>,
    colours: &'static [&'static str],
    labels: &'a [String],
    tiles: Vec<TileRecord<'a>>,
    steps: Vec<StepRecord<'a>>,
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
fn tile_data(memory: &MemoryView, steps: &[StepTileLoad]) -> String {
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
        steps: steps
            .iter()
            .map(|load| {
                (
                    load.step,
                    load.key.as_str(),
                    load.kind.name(),
                    load.cycles,
                    load.executions,
                    &load.per_tile[..],
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
pub(super) fn tile_view(memory: &MemoryView, steps: &[StepTileLoad], layers: u32) -> Markup {
    let fullest = memory.fullest_tile.tile as usize;
    let Some(tile) = memory.tiles.tiles.get(fullest) else {
        return html! {};
    };
    let last = memory.tiles.tiles.len().saturating_sub(1);
    html! {
        section id="tile-view" {
            h2 { "One tile over the program: its memory and its work" }
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
            h3 { "Its work at every step" }
            p.note {
                "One bar per step of the program (the layer loop's body once): how busy the picked tile is "
                "against the step's busiest tile, busy cycles in compute steps ("
                span.swatch style="background:#3b6fd8" {} "kernels, copies, fills) and words sent and received "
                "in exchange phases (" span.swatch style="background:#e8833a" {} "), as the estimate models one "
                "execution. A step's busiest tile sets its length (BSP: every tile waits for it at the barrier). "
                "Click a bar to see that step across all tiles."
            }
            svg id="tile-timeline" width="100%" viewBox="0 0 1240 140" role="img"
                aria-label="the picked tile's work per step" {}
            h3 id="step-title" { "One step across all tiles" }
            p id="step-summary" {}
            svg id="step-balance" width="560" role="img" aria-label="one step's work per tile" {}
            noscript { p.note { "The timeline and the balance across tiles are drawn by the page's script." } }
            script type="application/json" id="tile-data" { (PreEscaped(tile_data(memory, steps))) }
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
    picked.tile = index;
    timeline();
    balance();
    remember();
  }
  var picked = { tile: data.fullest, step: 0 };
  function remember() {
    try { history.replaceState(null, '', '#tile=' + picked.tile + '&step=' + picked.step); }
    catch (error) { /* a file page may refuse */ }
  }
  function busiest(loads) { return loads.reduce(function (most, value) { return Math.max(most, value); }, 0); }
  function unit(kind) { return kind === 'exchange' ? 'words' : 'cycles'; }
  function colour(kind) { return kind === 'exchange' ? '#e8833a' : '#3b6fd8'; }
  function element(name, attributes, parent) {
    var made = document.createElementNS(svg, name);
    Object.keys(attributes).forEach(function (key) { made.setAttribute(key, attributes[key]); });
    parent.appendChild(made);
    return made;
  }
  function timeline() {
    var strip = document.getElementById('tile-timeline');
    if (!strip || !data.steps.length) { return; }
    strip.textContent = '';
    var left = 80, width = 1240 - left - 20, top = 10, height = 100;
    var step = width / data.steps.length;
    element('text', { x: left - 8, y: top + 12, 'text-anchor': 'end', class: 'muted' }, strip).textContent = 'busiest';
    element('text', { x: left - 8, y: top + height, 'text-anchor': 'end', class: 'muted' }, strip).textContent = 'idle';
    data.steps.forEach(function (entry, position) {
      var loads = entry[5], most = busiest(loads), mine = loads[picked.tile] || 0;
      var share = most > 0 ? mine / most : 0;
      var group = element('g', { class: 'step', 'data-step': entry[0], 'data-load': mine }, strip);
      if (entry[0] === picked.step) { group.setAttribute('data-picked', 'yes'); }
      element('rect', { x: (left + position * step).toFixed(1), y: top, width: Math.max(step - 1, 1).toFixed(1),
        height: height, fill: entry[0] === picked.step ? '#dfe6f3' : '#f0f2f5' }, group);
      element('rect', { x: (left + position * step).toFixed(1), y: (top + height * (1 - share)).toFixed(1),
        width: Math.max(step - 1, 1).toFixed(1), height: (height * share).toFixed(1), fill: colour(entry[2]) }, group);
      element('title', {}, group).textContent = 'step ' + entry[0] + ' ' + entry[1] + ' (' + entry[2] + '): tile '
        + picked.tile + ' ' + thousands(mine) + ' ' + unit(entry[2]) + ', the busiest ' + thousands(most)
        + '; ' + thousands(entry[3]) + ' cycles x ' + entry[4];
      group.addEventListener('click', function () { pickStep(entry[0]); });
    });
    [0, Math.floor(data.steps.length / 2), data.steps.length - 1].forEach(function (position) {
      element('text', { x: (left + (position + 0.5) * step).toFixed(1), y: top + height + 18, 'text-anchor': 'middle',
        class: 'muted' }, strip).textContent = 'step ' + data.steps[position][0];
    });
  }
  function balance() {
    var grid = document.getElementById('step-balance');
    var entry = data.steps.filter(function (candidate) { return candidate[0] === picked.step; })[0];
    if (!grid || !entry) { return; }
    var loads = entry[5], most = busiest(loads);
    var busy = loads.filter(function (value) { return value > 0; }).length;
    var total = loads.reduce(function (sum, value) { return sum + value; }, 0);
    var map = document.getElementById('heat-sram');
    var columns = map ? Number(map.dataset.columns) : Math.ceil(Math.sqrt(loads.length * 1.5));
    var rows = Math.ceil(loads.length / columns), cell = Math.max(4, Math.min(32, Math.floor(560 / columns)));
    grid.setAttribute('viewBox', '0 0 ' + columns * cell + ' ' + rows * cell);
    grid.setAttribute('height', rows * cell);
    grid.textContent = '';
    grid.dataset.step = entry[0];
    loads.forEach(function (value, tile) {
      var share = most > 0 ? value / most : 0;
      var rect = element('rect', { x: (tile % columns) * cell, y: Math.floor(tile / columns) * cell, width: cell,
        height: cell, fill: value === 0 ? '#e3e6ec' : colour(entry[2]), 'fill-opacity': value === 0 ? '1' : (0.2 + 0.8 * share).toFixed(2),
        class: 'load' + (tile === picked.tile ? ' picked' : ''), 'data-tile': tile, 'data-load': value }, grid);
      element('title', {}, rect).textContent = 'tile ' + tile + ': ' + thousands(value) + ' ' + unit(entry[2]);
      rect.addEventListener('click', function () { show(tile); });
    });
    document.getElementById('step-title').textContent = 'Step ' + entry[0] + ', ' + entry[1] + ' (' + entry[2]
      + '), across all tiles';
    var summary = document.getElementById('step-summary');
    summary.textContent = thousands(busy) + ' of ' + thousands(loads.length) + ' tiles busy; the busiest '
      + thousands(most) + ' ' + unit(entry[2]) + ' (tile ' + loads.indexOf(most) + '), the mean over busy tiles '
      + thousands(busy > 0 ? total / busy : 0) + ' (' + share(busy > 0 ? total / busy : 0, most)
      + ' of the busiest); the step costs ' + thousands(entry[3]) + ' cycles per execution, ' + entry[4]
      + ' executions. Tile ' + picked.tile + ': ' + thousands(loads[picked.tile] || 0) + ' ' + unit(entry[2]) + '.';
    summary.dataset.step = entry[0];
    summary.dataset.busiest = most;
    summary.dataset.busy = busy;
  }
  function pickStep(step) {
    picked.step = step;
    document.body.dataset.pickedStep = step;
    timeline();
    balance();
    remember();
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
  var askedStep = /step=(\d+)/.exec(location.hash);
  var firstStep = data.steps.length ? data.steps[0][0] : 0;
  var heaviest = data.steps.reduce(function (best, entry) {
    return entry[3] * entry[4] > best[3] * best[4] ? entry : best;
  }, data.steps[0] || [0, '', '', 0, 0]);
  picked.step = askedStep ? Number(askedStep[1]) : (heaviest ? heaviest[0] : firstStep);
  document.body.dataset.pickedStep = picked.step;
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
        let markup = tile_view(&view(), &[], 2).into_string();
        assert!(markup.contains("Tile 1: peak 90 B at step 1"), "{markup}");
        assert!(markup.contains(r#"value="1""#));
        let data = tile_data(&view(), &[]);
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
