//! The program's modelled timeline as a Chrome / Perfetto trace (the JSON
//! trace-event format): not the compiler's spans but the program it made,
//! laid out as the estimate charges it (cycles at 1.5 GHz, Repeat
//! iterations unrolled). Process 1 has one track per kind of step
//! (exchange phases, kernels, copies, fills), each execution a complete
//! slice named by its key with its figures as arguments; process 2 has two
//! tracks per chosen tile, its send and receive windows within each
//! exchange phase (from the phase's schedule, after the patching that
//! precedes the phase).
//!
//! Every slice is a complete event (`ph: "X"`), so begin and end always
//! balance; slices on one track never overlap.

use serde::Serialize;
use serde_json::{Value, json};

use crate::estimate::profile::{ProgramProfile, StepKind};
use crate::schedule::SchedulePolicy;
use crate::schedule::windows::{TileActivity, Window};
use crate::target::costs::CLOCK_HERTZ;

/// What a trace shows of an exchange phase beyond its cycles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseLabel {
    /// The phase's effective policy (`auto`, or an override's).
    pub policy: SchedulePolicy,
    /// The concrete policy that made the schedule (`auto`'s winner).
    pub chosen: SchedulePolicy,
    pub horizon: u64,
    /// The endpoint bound, in cycles: the most exchange events one tile
    /// sends or receives (a piece that may pair counted at its paired
    /// events, half its words), so no schedule of the phase is shorter
    /// (`crate::schedule::Schedule::endpoint_bound`).
    pub endpoint_bound: u32,
    pub max_row_bytes: u64,
    pub total_row_bytes: u64,
}

impl PhaseLabel {
    /// The policy as a slice's arguments show it: `B1024`, or with the
    /// concrete choice when it differs (`auto (chose matching)`).
    pub fn policy_text(&self) -> String {
        if self.chosen == self.policy {
            self.policy.to_string()
        } else {
            format!("{} (chose {})", self.policy, self.chosen)
        }
    }
}

/// A tile shown in detail, with why it was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceTile {
    pub tile: u32,
    pub reason: String,
}

/// One trace event (the fields Perfetto and chrome://tracing read).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEvent {
    pub name: String,
    pub cat: &'static str,
    pub ph: &'static str,
    /// Microseconds.
    pub ts: f64,
    pub dur: f64,
    pub pid: u32,
    pub tid: u32,
    pub args: Value,
}

const PROGRAM: u32 = 1;
const TILES: u32 = 2;

fn microseconds(cycles: u64) -> f64 {
    cycles as f64 * 1e6 / CLOCK_HERTZ
}

fn track_of(kind: StepKind) -> u32 {
    match kind {
        StepKind::Exchange => 1,
        StepKind::Kernels => 2,
        StepKind::Copies => 3,
        StepKind::Fills => 4,
    }
}

fn metadata(pid: u32, tid: Option<u32>, name: &str, sort_index: u32) -> Vec<Value> {
    match tid {
        None => vec![
            json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}),
            json!({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": sort_index}}),
        ],
        Some(tid) => vec![
            json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}),
            json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": sort_index}}),
        ],
    }
}

/// The trace of `profile`. `phases[i]` labels phase `i`; `activity[i][j]`
/// is tile `tiles[j]`'s activity in phase `i`.
pub fn program_trace(
    name: &str,
    profile: &ProgramProfile,
    phases: &[PhaseLabel],
    tiles: &[TraceTile],
    activity: &[Vec<TileActivity>],
) -> Value {
    let mut events: Vec<Value> = Vec::new();
    events.extend(metadata(
        PROGRAM,
        None,
        &format!("{name} (modelled program)"),
        0,
    ));
    for kind in [
        StepKind::Exchange,
        StepKind::Kernels,
        StepKind::Copies,
        StepKind::Fills,
    ] {
        events.extend(metadata(
            PROGRAM,
            Some(track_of(kind)),
            kind.name(),
            track_of(kind),
        ));
    }
    if !tiles.is_empty() {
        events.extend(metadata(TILES, None, "tiles (exchange windows)", 1));
    }
    for (position, tile) in tiles.iter().enumerate() {
        let base = 2 * position as u32;
        let label = format!("tile {} ({})", tile.tile, tile.reason);
        events.extend(metadata(
            TILES,
            Some(base + 1),
            &format!("{label} send"),
            base + 1,
        ));
        events.extend(metadata(
            TILES,
            Some(base + 2),
            &format!("{label} receive"),
            base + 2,
        ));
    }
    let mut slices: Vec<TraceEvent> = Vec::new();
    profile.for_each_execution(&mut |entry_index, start, cycles| {
        let entry = &profile.entries[entry_index];
        let mut args = json!({
            "executions": entry.executions,
            "cycles": cycles,
            "step": entry.step,
            "op": entry.op,
        });
        if entry.kind == StepKind::Exchange {
            if let Some(label) = phases.get(entry.index) {
                args["policy"] = json!(label.policy_text());
                args["horizon"] = json!(label.horizon);
                args["endpoint_bound"] = json!(label.endpoint_bound);
                args["max_row_bytes"] = json!(label.max_row_bytes);
                args["total_row_bytes"] = json!(label.total_row_bytes);
            }
            args["patch_cycles"] = json!(entry.patch_cycles);
            let exchange_start = start + entry.patch_cycles;
            if let Some(per_tile) = activity.get(entry.index) {
                for (position, tile_activity) in per_tile.iter().enumerate() {
                    let base = 2 * position as u32;
                    let mut window = |window: Option<Window>, tid: u32, words: u64, what| {
                        if let Some(window) = window {
                            slices.push(TraceEvent {
                                name: format!("{what} {}", entry.key),
                                cat: "tile",
                                ph: "X",
                                ts: microseconds(exchange_start + u64::from(window.start)),
                                dur: microseconds(u64::from(window.end - window.start)),
                                pid: TILES,
                                tid,
                                args: json!({"words": words, "first_event": window.start, "last_event": window.end}),
                            });
                        }
                    };
                    window(tile_activity.send, base + 1, tile_activity.words_sent, "send");
                    window(tile_activity.receive, base + 2, tile_activity.words_received, "receive");
                }
            }
        } else {
            args["busy_tiles"] = json!(entry.busy_tiles);
            args["occupancy"] = json!(entry.occupancy(profile.tiles));
        }
        slices.push(TraceEvent {
            name: entry.key.clone(),
            cat: entry.kind.name(),
            ph: "X",
            ts: microseconds(start),
            dur: microseconds(cycles),
            pid: PROGRAM,
            tid: track_of(entry.kind),
            args,
        });
    });
    events.extend(
        slices
            .into_iter()
            .map(|slice| serde_json::to_value(slice).unwrap_or(Value::Null)),
    );
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "build": name,
            "note": "the program's modelled timeline (the estimate's cycles at 1.5 GHz, Repeat iterations unrolled), not a hardware profile",
            "total_cycles": profile.total_cycles(),
        },
    })
}
