//! The record file of the whole program: the build's settings, every op
//! with its plan and output layout, the steps in program order, the row
//! table, patch totals, placement peaks per region and the estimate's
//! totals with each step's share. The aggregates live here, so that a
//! change of one phase changes that phase's file and this one only.

use std::sync::Arc;

use super::exchange::Shared;
use super::identity::RecordError;
use super::sheet::{Sheet, histogram};
use crate::build_file::BuildQuery;
use crate::estimate::profile::ProgramProfile;
use crate::expand::expansion::OpExpansion;
use crate::report::op_summaries;
use crate::session::{BackendError, Session};
use crate::target::memory::{REGION_ONE_START, REGION_ZERO_START};
use crate::text::thousands;

fn bytes(value: u64) -> String {
    format!("{} B", thousands(value))
}

/// The program's record.
pub fn text(
    session: &Session,
    query: &BuildQuery,
    profile: &ProgramProfile,
    shared: &Shared,
) -> Result<Sheet, RecordError> {
    let mut sheet = Sheet::titled(format!("program {}", query.name));
    settings(&mut sheet, query);

    sheet.section("ops");
    let layouts = session.layouts().map_err(BackendError::from)?;
    let expansions: Vec<Arc<OpExpansion>> = session.op_expansions().map_err(BackendError::from)?;
    let references: Vec<&OpExpansion> = expansions.iter().map(Arc::as_ref).collect();
    for op in op_summaries(&layouts, &references) {
        let counts = &op.counts;
        sheet.fact(
            &op.name,
            format!(
                "{:?} · {} · output {} · {} kernel runs, {} copies, {} fills, {} exchanges of {} words",
                op.region,
                op.plan,
                op.output_format,
                thousands(counts.kernel_runs),
                thousands(counts.local_copies),
                thousands(counts.zero_fills),
                thousands(counts.exchanges),
                thousands(counts.transfer_words)
            ),
        );
    }

    sheet.section("steps");
    for entry in &profile.entries {
        sheet.fact(
            &format!("step {}", entry.step),
            format!(
                "{} {} x{}",
                entry.kind.name(),
                entry.key,
                thousands(entry.executions)
            ),
        );
    }

    sheet.section("row table");
    let table = &shared.table;
    sheet.fact("largest tile", bytes(table.max_bytes()));
    sheet.fact("total", bytes(table.bytes_per_tile.iter().sum()));
    sheet.fact(
        "tiles by table bytes",
        histogram(table.bytes_per_tile.iter().copied()),
    );
    sheet.count("identical rows stored once", table.identical_rows);

    sheet.section("patch lists");
    let mut repeat_words = 0;
    for phase in session.phases() {
        repeat_words += phase
            .patches()
            .map_err(|error| RecordError::Inconsistent(error.to_string()))?
            .words();
    }
    sheet.count("repeat patch words", repeat_words);
    sheet.count("sharing patch words", table.sharing_patches.len() as u64);

    placement(&mut sheet, session, shared)?;

    sheet.section("estimate");
    let estimate = session.estimate()?;
    sheet.count("total cycles", estimate.total_cycles);
    sheet.fact("milliseconds", format!("{:.4}", estimate.milliseconds));
    sheet.count("compute cycles", estimate.compute_cycles);
    sheet.count("exchange cycles", estimate.exchange_cycles);
    sheet.count("sync cycles", estimate.sync_cycles);
    sheet.count("patch cycles", estimate.patch_cycles);
    sheet.count("barriers", estimate.barriers);
    sheet.count("compute steps", estimate.compute_steps);

    // Shares to a tenth of a percent: a phase that moves the total by a
    // little leaves the other steps' lines as they are (their cycles are
    // exact beside them).
    sheet.section("shares");
    let total = estimate.total_cycles.max(1) as f64;
    for entry in &profile.entries {
        sheet.fact(
            &entry.key,
            format!(
                "{} cycles · {:.1}%",
                thousands(entry.total_cycles),
                entry.total_cycles as f64 * 100.0 / total
            ),
        );
    }
    Ok(sheet)
}

/// The build's settings that shape the program (the model itself is named
/// by the header's digest).
fn settings(sheet: &mut Sheet, query: &BuildQuery) {
    sheet.section("build");
    let workload = &query.workload;
    sheet.fact("model", format!("{:?}", workload.model));
    sheet.count("batch", u64::from(workload.batch));
    sheet.fact("attention", format!("{:?}", workload.attention));
    sheet.fact(
        "machine",
        format!("{} on {} tiles", query.machine.preset, query.machine.tiles),
    );
    let planning = &query.planning;
    sheet.fact(
        "planning.accumulation",
        format!("{:?}", planning.accumulation),
    );
    sheet.fact("planning.copy_motion", planning.copy_motion);
    sheet.fact("planning.fusion", format!("{:?}", planning.fusion));
    sheet.fact("planning.repeat_base", planning.repeat_base);
    sheet.count(
        "planning.reserved_bytes_per_tile",
        u64::from(planning.reserved_bytes_per_tile),
    );
    for layout in &planning.layout_overrides {
        sheet.fact("layout.override", format!("{layout:?}"));
    }
    sheet.fact("schedule.policy", query.schedule.policy);
    sheet.fact("schedule.width", query.schedule.width.to_string());
    sheet.count(
        "schedule.row_allowance",
        u64::from(query.schedule.row_allowance),
    );
    for entry in &query.overrides {
        sheet.fact(
            &format!("schedule.override.{}", entry.phase),
            match entry.width {
                Some(width) => format!("{} {width}", entry.policy),
                None => entry.policy.to_string(),
            },
        );
    }
}

/// Peaks per tile, and how far each region is filled on its fullest tile.
fn placement(sheet: &mut Sheet, session: &Session, shared: &Shared) -> Result<(), RecordError> {
    sheet.section("placement");
    let placed = &shared.placement;
    let program = &shared.program;
    let reservations = session.tile_reservations()?;
    let tiles = placed.peak_bytes_per_tile.len();
    let mut region_zero = vec![0u64; tiles];
    let mut region_one = vec![0u64; tiles];
    for (tile, &end) in placed.reserved_end.iter().enumerate() {
        if let Some(slot) = region_zero.get_mut(tile) {
            *slot = u64::from(end.saturating_sub(REGION_ZERO_START));
        }
    }
    for (index, allocation) in program.allocations.iter().enumerate() {
        if !placed.live.get(index).copied().unwrap_or(false) {
            continue;
        }
        let base = placed.base.get(index).copied().unwrap_or(0);
        let end =
            u64::from(base) + u64::from(allocation.bytes) * u64::from(allocation.iterations.max(1));
        let tile = allocation.tile as usize;
        if tile >= tiles {
            continue;
        }
        if base >= REGION_ONE_START {
            region_one[tile] = region_one[tile].max(end - u64::from(REGION_ONE_START));
        } else {
            region_zero[tile] = region_zero[tile].max(end - u64::from(REGION_ZERO_START));
        }
    }
    let fullest = |values: &[u64]| {
        values
            .iter()
            .enumerate()
            .max_by_key(|&(tile, &value)| (value, std::cmp::Reverse(tile)))
            .map(|(tile, &value)| format!("{} on tile {tile}", bytes(value)))
            .unwrap_or_else(|| "none".to_string())
    };
    sheet.fact(
        "peak",
        format!(
            "{} on tile {}",
            bytes(u64::from(placed.max_peak.1)),
            placed.max_peak.0
        ),
    );
    sheet.fact(
        "tiles by peak bytes",
        histogram(
            placed
                .peak_bytes_per_tile
                .iter()
                .map(|&peak| u64::from(peak)),
        ),
    );
    sheet.fact("region 0 high water", fullest(&region_zero));
    sheet.fact("region 1 high water", fullest(&region_one));
    sheet.fact(
        "exchange table reservation",
        format!(
            "largest {} · total {}",
            bytes(
                reservations
                    .exchange_table
                    .iter()
                    .copied()
                    .max()
                    .map_or(0, u64::from)
            ),
            bytes(
                reservations
                    .exchange_table
                    .iter()
                    .map(|&value| u64::from(value))
                    .sum()
            )
        ),
    );
    sheet.fact(
        "patch list reservation",
        format!(
            "largest {} · total {}",
            bytes(
                reservations
                    .patch_lists
                    .iter()
                    .copied()
                    .max()
                    .map_or(0, u64::from)
            ),
            bytes(
                reservations
                    .patch_lists
                    .iter()
                    .map(|&value| u64::from(value))
                    .sum()
            )
        ),
    );
    sheet.count("element conflicts", placed.element_conflicts.count);
    sheet.count("fetch conflicts", placed.element_conflicts.fetch_count);
    Ok(())
}
