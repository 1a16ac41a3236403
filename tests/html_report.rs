//! `report.html` as a reader gets it: `superstep build` writes it beside
//! `report.json`, its numbers (read back from the page's `data-*`
//! attributes with an HTML parser) are report.json's, it has one heat-map
//! cell per tile and one row per phase, it is byte-identical across builds
//! and self-contained, and `outputs.html = false` writes none. The memory
//! view it draws agrees with the placement.

use crate::common;

use std::path::Path;

use common::{query, scratch, superstep};
use serde_json::Value;
use superstep::session::Session;

/// Builds vit-tiny into `directory` with extra `--set`s; panics on failure.
fn build(directory: &Path, sets: &[&str]) {
    let outputs = format!("outputs.directory={}", directory.display());
    let cache = directory.join("cache");
    let mut arguments = vec!["build", "queries/vit-tiny.toml", "--set", &outputs];
    for set in sets {
        arguments.extend(["--set", set]);
    }
    let cache = cache.display().to_string();
    arguments.extend(["--cache", &cache]);
    let output = superstep(&arguments);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An attribute of a tag.
fn attribute(tag: &tl::HTMLTag, name: &str) -> String {
    tag.attributes()
        .get(name)
        .flatten()
        .map(|value| value.as_utf8_str().to_string())
        .unwrap_or_else(|| panic!("no {name} on <{}>", tag.name().as_utf8_str()))
}

/// The element with `id`.
fn element<'dom>(dom: &'dom tl::VDom<'dom>, id: &str) -> &'dom tl::HTMLTag<'dom> {
    dom.get_element_by_id(id)
        .and_then(|handle| handle.get(dom.parser()))
        .and_then(|node| node.as_tag())
        .unwrap_or_else(|| panic!("no #{id}"))
}

/// The tags inside the element `id` that `selector` matches (tl matches
/// simple selectors only, so the container is found by its id first), in
/// document order.
fn select<'dom>(
    dom: &'dom tl::VDom<'dom>,
    id: &str,
    selector: &'dom str,
) -> Vec<&'dom tl::HTMLTag<'dom>> {
    element(dom, id)
        .query_selector(dom.parser(), selector)
        .expect("valid selector")
        .filter_map(|handle| handle.get(dom.parser()))
        .filter_map(|node| node.as_tag())
        .collect()
}

/// `data-value` of the element with `id`, parsed.
fn value_of<'dom, T: std::str::FromStr>(dom: &'dom tl::VDom<'dom>, id: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    attribute(element(dom, id), "data-value")
        .parse()
        .expect("a number")
}

fn number(value: &Value) -> u64 {
    value.as_u64().expect("an integer")
}

fn check_headline<'dom>(dom: &'dom tl::VDom<'dom>, back: &Value) {
    assert_eq!(
        value_of::<u64>(dom, "total-cycles"),
        number(&back["total_cycles"])
    );
    // serde_json reads floats to within an ulp or so (no float_roundtrip).
    let milliseconds = back["milliseconds"].as_f64().expect("milliseconds");
    let shown: f64 = value_of(dom, "milliseconds");
    assert!(
        (shown - milliseconds).abs() <= milliseconds * 1e-12,
        "{shown} ms on the page, {milliseconds} ms in report.json"
    );
    assert_eq!(value_of::<u64>(dom, "barriers"), number(&back["barriers"]));
    assert_eq!(
        value_of::<u64>(dom, "peak-sram"),
        number(&back["peak_sram_bytes_per_tile"])
    );
    assert_eq!(
        value_of::<u64>(dom, "exchange-table-max"),
        number(&back["exchange_table_bytes_per_tile_max"])
    );
}

fn check_categories<'dom>(dom: &'dom tl::VDom<'dom>, back: &Value) {
    let expected = [
        ("compute", number(&back["compute_cycles"])),
        ("exchange", number(&back["exchange_cycles"])),
        ("sync", number(&back["sync_cycles"])),
        ("patching", number(&back["patch_cycles"])),
    ];
    for (id, selector) in [
        ("categories", "tr.category"),
        ("time-split", "rect.segment"),
    ] {
        let found: Vec<(String, u64)> = select(dom, id, selector)
            .iter()
            .map(|tag| {
                (
                    attribute(tag, "data-category"),
                    attribute(tag, "data-cycles").parse().expect("cycles"),
                )
            })
            .collect();
        let expected: Vec<(String, u64)> = expected
            .iter()
            .map(|(name, cycles)| (name.to_string(), *cycles))
            .collect();
        assert_eq!(found, expected, "{selector}");
    }
    let sum: u64 = expected.iter().map(|(_, cycles)| cycles).sum();
    assert_eq!(sum, number(&back["total_cycles"]), "the split adds up");
}

fn check_phases<'dom>(dom: &'dom tl::VDom<'dom>, back: &Value) {
    let phases = back["phases"].as_array().expect("phases");
    let rows = select(dom, "phases", "tr[data-key]");
    assert!(!phases.is_empty());
    assert_eq!(rows.len(), phases.len(), "one row per phase");
    for (row, phase) in rows.iter().zip(phases) {
        assert_eq!(
            attribute(row, "data-key"),
            phase["key"].as_str().expect("key")
        );
        assert_eq!(
            attribute(row, "data-horizon")
                .parse::<u64>()
                .expect("horizon"),
            number(&phase["horizon"]),
            "{}",
            attribute(row, "data-key")
        );
    }
    let charted = select(dom, "horizon-chart", "g.phase");
    assert_eq!(charted.len(), phases.len().min(30));
}

/// The phases table numbers each phase by its step, the index `phases`
/// prints for the same key (one numbering for both).
fn check_steps<'dom>(dom: &'dom tl::VDom<'dom>, directory: &Path) {
    let outputs = format!("outputs.directory={}", directory.display());
    let output = superstep(&[
        "phases",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--json",
        "--set",
        &outputs,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Value = serde_json::from_slice(&output.stdout).expect("phases --json");
    let step_of = |key: &str| {
        lines
            .as_array()
            .expect("lines")
            .iter()
            .find(|line| line["key"] == key)
            .and_then(|line| line["step"].as_u64())
            .unwrap_or_else(|| panic!("phases has no line `{key}`"))
    };
    let rows = select(dom, "phases", "tr[data-key]");
    let mut distinct = std::collections::BTreeSet::new();
    for row in &rows {
        let key = attribute(row, "data-key");
        let step: u64 = attribute(row, "data-step").parse().expect("step");
        assert_eq!(step, step_of(&key), "{key}");
        distinct.insert(step);
    }
    assert_eq!(distinct.len(), rows.len(), "steps repeat");
}

/// `(tile, bytes)` of every cell of the heat map `id`.
fn cells<'dom>(dom: &'dom tl::VDom<'dom>, id: &str) -> Vec<(u64, u64)> {
    select(dom, id, "rect.cell")
        .iter()
        .map(|cell| {
            (
                attribute(cell, "data-tile").parse().expect("tile"),
                attribute(cell, "data-bytes").parse().expect("bytes"),
            )
        })
        .collect()
}

fn check_heat_maps<'dom>(dom: &'dom tl::VDom<'dom>, report: &Value) {
    let back = &report["back"];
    let tiles = number(&report["tiles"]);
    let sram = cells(dom, "heat-sram");
    let table = cells(dom, "heat-table");
    for map in [&sram, &table] {
        assert_eq!(map.len() as u64, tiles, "one cell per tile");
        let numbered: Vec<u64> = map.iter().map(|(tile, _)| *tile).collect();
        assert_eq!(numbered, (0..tiles).collect::<Vec<_>>());
    }
    let fullest = sram
        .iter()
        .max_by_key(|(tile, bytes)| (*bytes, std::cmp::Reverse(*tile)))
        .expect("cells");
    assert_eq!(fullest.1, number(&back["peak_sram_bytes_per_tile"]));
    assert_eq!(fullest.0, number(&back["peak_sram_tile"]));
    let widest = table.iter().map(|(_, bytes)| *bytes).max();
    assert_eq!(
        widest,
        Some(number(&back["exchange_table_bytes_per_tile_max"]))
    );
    assert_eq!(
        attribute(element(dom, "memory-steps"), "data-peak")
            .parse::<u64>()
            .expect("peak"),
        number(&back["peak_sram_bytes_per_tile"])
    );
}

#[test]
fn the_page_shows_report_json_numbers_and_is_deterministic() {
    let directory = scratch("html", "page");
    build(&directory, &[]);
    let folder = directory.join("vit-tiny");
    let page = std::fs::read_to_string(folder.join("report.html")).expect("report.html written");
    let report: Value =
        serde_json::from_slice(&std::fs::read(folder.join("report.json")).expect("report.json"))
            .expect("valid JSON");
    let back = &report["back"];
    let dom = tl::parse(&page, tl::ParserOptions::default()).expect("parses");
    check_headline(&dom, back);
    check_categories(&dom, back);
    check_phases(&dom, back);
    check_steps(&dom, &directory);
    check_heat_maps(&dom, &report);
    let compute_rows = select(&dom, "compute", "tr[data-op]");
    assert_eq!(
        compute_rows.len(),
        back["compute_by_op"].as_array().expect("ops").len()
    );
    assert!(page.contains("not a measurement on hardware"));
    element(&dom, "suggestions");
    // Self-contained: nothing is fetched.
    for fetched in ["http://", "https://", "<link", " src="] {
        assert!(!page.contains(fetched), "the page refers to {fetched}");
    }
    // A second build renders the same bytes.
    build(&directory, &[]);
    let again = std::fs::read_to_string(folder.join("report.html")).expect("report.html");
    assert!(page == again, "report.html differs between builds");
}

#[test]
fn suggestions_zero_measures_none_and_the_page_says_so() {
    let directory = scratch("html", "no-suggestions");
    let outputs = format!("outputs.directory={}", directory.display());
    let output = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--suggestions",
        "0",
        "--verbose",
        "--set",
        &outputs,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let page = std::fs::read_to_string(directory.join("vit-tiny").join("report.html"))
        .expect("report.html written");
    assert!(page.contains("not measured in this build"));
    // Measured by default: the page shows the outcome instead.
    build(&directory, &[]);
    let page = std::fs::read_to_string(directory.join("vit-tiny").join("report.html"))
        .expect("report.html written");
    assert!(!page.contains("not measured in this build"));
    assert!(page.contains("standard policy"));
}

#[test]
fn html_false_writes_no_page() {
    let directory = scratch("html", "off");
    build(&directory, &["outputs.html=false"]);
    let folder = directory.join("vit-tiny");
    assert!(folder.join("report.json").exists());
    assert!(!folder.join("report.html").exists());
}

#[test]
fn the_memory_view_agrees_with_the_placement() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    let outcome = session.build().expect("builds");
    let back = outcome.back.expect("back half");
    let view = session.memory_view().expect("memory view");
    let tiles = outcome.summary.tiles as usize;
    assert_eq!(view.peak_bytes_per_tile.len(), tiles);
    assert_eq!(view.exchange_table_bytes_per_tile.len(), tiles);
    assert_eq!(view.fullest_tile.tile, back.headline.peak_sram_tile);
    let live = &view.fullest_tile.live_bytes_per_step;
    assert!(!live.is_empty());
    assert_eq!(
        live.iter().copied().max(),
        Some(back.headline.peak_sram_bytes_per_tile)
    );
    assert!(
        live.iter()
            .all(|&bytes| bytes >= view.fullest_tile.reserved_bytes)
    );
    assert_eq!(view.fullest_tile.repeat_steps.len(), 1, "one layer loop");
    let (first, last) = view.fullest_tile.repeat_steps[0];
    assert!(first <= last && (last as usize) < live.len());
    assert_eq!(
        view.exchange_table_bytes_per_tile.iter().copied().max(),
        Some(back.headline.exchange_table_bytes_per_tile_max)
    );
}

/// Every tile's curve peaks at its placed peak, the peak's categories add
/// up to it, and its values to the data it holds (the reservations apart).
#[test]
fn every_tiles_memory_agrees_with_the_placement() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("builds");
    let view = session.memory_view().expect("memory view");
    assert_eq!(view.tiles.tiles.len(), view.peak_bytes_per_tile.len());
    for (index, tile) in view.tiles.tiles.iter().enumerate() {
        let placed = u64::from(view.peak_bytes_per_tile[index]);
        assert_eq!(
            tile.live_bytes_per_step.iter().max(),
            Some(&placed),
            "tile {index}"
        );
        assert_eq!(tile.peak_bytes, placed, "tile {index}");
        assert_eq!(
            tile.live_bytes_per_step[tile.peak_step as usize], placed,
            "tile {index}"
        );
        assert_eq!(
            tile.peak_by_category.iter().sum::<u64>(),
            placed,
            "tile {index}"
        );
        let reserved: u64 = tile.peak_by_category[..2].iter().sum();
        let held: u64 = tile.peak_by_value.iter().map(|value| value.bytes).sum();
        assert_eq!(held + reserved, placed, "tile {index}");
        assert!(
            tile.peak_by_value
                .windows(2)
                .all(|pair| pair[0].bytes >= pair[1].bytes),
            "tile {index}: largest first"
        );
        assert!(
            tile.peak_by_value
                .iter()
                .all(|value| (value.label as usize) < view.tiles.labels.len())
        );
    }
    let fullest = &view.tiles.tiles[view.fullest_tile.tile as usize];
    assert_eq!(
        fullest.live_bytes_per_step,
        view.fullest_tile.live_bytes_per_step
    );
    assert!(
        fullest.peak_by_category[superstep::session::memory::MemoryCategory::Weights as usize] > 0
    );
}

/// The page in a real browser: headless Chromium opens `report.html#tile=N`
/// and the picker's script shows tile N (summary, curve, tables, outlined
/// cell) with its figures from the build; without `#tile` it shows the
/// fullest; `&step=S` picks a step, whose work across the tiles the page
/// then shows with the build's figures. Runs where `chromium` (or
/// `CHROMIUM`) is installed, as `.ci/run` installs it; elsewhere it says on
/// stderr that it did not run.
#[test]
fn the_tile_picker_shows_any_tile_in_headless_chromium() {
    let Some(browser) = common::chromium() else {
        eprintln!("no chromium: the headless-browser check did not run");
        return;
    };
    let directory = scratch("html", "tile-picker");
    build(&directory, &[]);
    let page = directory.join("vit-tiny").join("report.html");
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("builds");
    let view = session.memory_view().expect("memory view");
    let picked = (view.fullest_tile.tile as usize + 5) % view.tiles.tiles.len();
    let loads = session.step_loads().expect("step loads");
    let profile = session.profile().expect("profile");
    assert_eq!(
        loads.len(),
        profile.entries.len(),
        "one load per program step"
    );
    assert!(
        loads
            .iter()
            .all(|load| load.per_tile.len() == view.tiles.tiles.len())
    );
    let step = &loads[loads.len() / 2];
    for (fragment, tile) in [
        (format!("#tile={picked}&step={}", step.step), picked),
        (String::new(), view.fullest_tile.tile as usize),
    ] {
        let dom = common::rendered_dom(&browser, &page, &fragment);
        if !fragment.is_empty() {
            let parsed = tl::parse(&dom, tl::ParserOptions::default()).expect("the DOM parses");
            let summary = element(&parsed, "step-summary");
            assert_eq!(attribute(summary, "data-step"), step.step.to_string());
            let busiest = step.per_tile.iter().max().copied().unwrap_or(0);
            assert_eq!(attribute(summary, "data-busiest"), busiest.to_string());
            let busy = step.per_tile.iter().filter(|&&load| load > 0).count();
            assert_eq!(attribute(summary, "data-busy"), busy.to_string());
            assert_eq!(select(&parsed, "tile-timeline", "g").len(), loads.len());
            assert_eq!(
                select(&parsed, "step-balance", "rect").len(),
                step.per_tile.len()
            );
        }
        let figures = &view.tiles.tiles[tile];
        assert!(
            dom.contains(&format!(r#"data-picked-tile="{tile}""#)),
            "{fragment}: the script did not pick tile {tile}"
        );
        let parsed = tl::parse(&dom, tl::ParserOptions::default()).expect("the DOM parses");
        let summary = element(&parsed, "tile-summary");
        assert_eq!(attribute(summary, "data-tile"), tile.to_string());
        assert_eq!(
            attribute(summary, "data-peak"),
            figures.peak_bytes.to_string()
        );
        assert_eq!(
            attribute(summary, "data-peak-step"),
            figures.peak_step.to_string()
        );
        let text = summary.inner_text(parsed.parser()).to_string();
        assert!(
            text.starts_with(&format!("Tile {tile}: peak ")),
            "{fragment}: {text}"
        );
        let chart = element(&parsed, "memory-steps");
        assert_eq!(attribute(chart, "data-tile"), tile.to_string());
        let categories: Vec<u64> = select(&parsed, "tile-categories", "td[data-sort]")
            .iter()
            .map(|cell| attribute(cell, "data-sort").parse().expect("bytes"))
            .collect();
        let expected: Vec<u64> = figures
            .peak_by_category
            .iter()
            .copied()
            .filter(|&bytes| bytes > 0)
            .collect();
        assert_eq!(categories, expected, "{fragment}");
        let values = select(&parsed, "tile-values", "tr").len();
        // The header, the largest twelve and one line for the rest.
        let listed =
            figures.peak_by_value.len().min(12) + usize::from(figures.peak_by_value.len() > 12);
        assert_eq!(values, 1 + listed, "{fragment}");
        let outlined: Vec<_> = ["heat-sram", "heat-table"]
            .iter()
            .flat_map(|map| select(&parsed, map, "rect"))
            .filter(|cell| {
                cell.attributes().class().is_some_and(|class| {
                    class.as_utf8_str().split(' ').any(|name| name == "picked")
                })
            })
            .collect();
        assert_eq!(outlined.len(), 2, "{fragment}: one cell per heat map");
        assert!(
            outlined
                .iter()
                .all(|cell| attribute(cell, "data-tile") == tile.to_string())
        );
    }
}
