//! `superstep audit copies [QUERY]`: the copy-boundary audit (seed 000) of
//! the build's low program: one line per exchange boundary (the exchanges
//! before and after it, its copies and fills, how many of its copy/fill
//! groups may move before the preceding exchange and after the following
//! one, and what copy motion decided), then the hazard that blocks each
//! blocked group's direction; `--json` prints the `COPY_BOUNDARY` records.
//! Only the first half and the phase groups are computed.

use serde::Serialize;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{finish_cache, load, open_session, stage_error};
use crate::studies::copy_audit::{
    Blocked, BoundaryAudit, CopyAudit, GroupAudit, Other, copy_audit, copy_audit_across_operators,
};
use crate::text::thousands;

/// The flags of `superstep audit copies`.
#[derive(Debug, clap::Args)]
pub struct CopiesArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// Print the COPY_BOUNDARY records as JSON (an object with the
    /// build's name, the summary and the boundaries shown).
    #[arg(long)]
    pub json: bool,
    /// Only boundary N (its index in the table); the table then shows
    /// every group of it, movable or not.
    #[arg(long, value_name = "N")]
    pub boundary: Option<u32>,
    /// Whose copy-motion decisions to show beside the audit: build (the
    /// build's own pass, under planning.fusion) or across (copy motion
    /// with cross-operator fusion, the seed's experiment, run for the
    /// audit only; the build is unchanged).
    #[arg(long, value_enum, default_value = "build", value_name = "build|across")]
    pub motion: MotionFusion,
}

/// Whose copy-motion decisions the audit shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MotionFusion {
    /// The build's own pass (under planning.fusion; none when
    /// planning.copy_motion is false).
    Build,
    /// Copy motion with cross-operator fusion, run for the audit only.
    Across,
}

/// The JSON document: the build's name, the totals and the records shown.
#[derive(Serialize)]
pub struct AuditDocument<'a> {
    pub name: &'a str,
    pub summary: &'a crate::studies::copy_audit::AuditSummary,
    pub boundaries: Vec<&'a BoundaryAudit>,
}

pub fn run(arguments: &CopiesArguments) -> Result<(), CommandError> {
    let mut query = load(&arguments.query)?;
    let mut session = open_session(&arguments.query, &mut query)?;
    let tiles = Some(query.machine.tiles);
    session
        .build_low_program()
        .map_err(|error| stage_error(error, tiles))?;
    let audit = match arguments.motion {
        MotionFusion::Build => copy_audit(&session),
        MotionFusion::Across => copy_audit_across_operators(&session),
    }
    .map_err(|error| stage_error(error, tiles))?;
    let result = report(&audit, &query.name, arguments);
    finish_cache(session.cache());
    result
}

/// The text of the audit (what `run` prints without `--json`).
pub fn render(audit: &CopyAudit, name: &str, boundary: Option<u32>) -> Vec<String> {
    let summary = &audit.summary;
    let mut lines = vec![format!(
        "superstep audit copies {name}: {} exchange boundaries, {} copy/fill groups ({} copies, {} fills); \
         groups movable before the preceding exchange {}, after the following {}, both {}, neither {}; \
         copy motion merged {} of them",
        thousands(summary.boundaries),
        thousands(summary.groups),
        thousands(summary.copies),
        thousands(summary.fills),
        thousands(summary.movable_before),
        thousands(summary.movable_after),
        thousands(summary.movable_both),
        thousands(summary.movable_neither),
        thousands(summary.merged),
    )];
    lines.push(format!(
        "{:>5}  {:<40} {:<40} {:>7} {:>6} {:>6} {:>6} {:>6}  motion",
        "index",
        "preceding exchange",
        "following exchange",
        "copies",
        "fills",
        "groups",
        "before",
        "after"
    ));
    let shown: Vec<&BoundaryAudit> = audit
        .boundaries
        .iter()
        .filter(|record| boundary.is_none_or(|wanted| record.index == wanted))
        .collect();
    for record in &shown {
        lines.push(format!(
            "{:>5}  {:<40} {:<40} {:>7} {:>6} {:>6} {:>6} {:>6}  {}",
            record.index,
            record.preceding.key,
            record.following.key,
            thousands(record.copies),
            thousands(record.fills),
            record.groups.len(),
            record.movable_before,
            record.movable_after,
            motion_text(record)
        ));
    }
    for record in &shown {
        for group in &record.groups {
            // One boundary asked for: every group; otherwise the blocked ones.
            if boundary.is_none() && group.before.is_none() && group.after.is_none() {
                continue;
            }
            lines.push(group_line(record, group));
            for (direction, blocked) in [("before", &group.before), ("after", &group.after)] {
                if let Some(blocked) = blocked {
                    lines.push(format!(
                        "      cannot move {direction}: {}",
                        blocked_text(blocked)
                    ));
                }
            }
        }
    }
    lines
}

fn motion_text(record: &BoundaryAudit) -> String {
    match &record.motion {
        None => "copy motion off".to_string(),
        Some(view) => {
            let verdict = if view.merged { "merged" } else { "not merged" };
            let judged = if view.copies == record.copies && view.fills == record.fills {
                String::new()
            } else {
                format!(
                    " (judged {} copies, {} fills after {})",
                    view.copies, view.fills, view.preceding
                )
            };
            let priced = match &view.decision.cost {
                Some(cost) => match cost.merged_horizon {
                    Some(horizon) if cost.taken_by_bounds() => format!(
                        " [merged horizon {horizon} (bound {}) vs separate bounds {} + sync {}: apart not scheduled]",
                        cost.merged_bound, cost.separate_sum, cost.sync_saved
                    ),
                    Some(horizon) => format!(
                        " [merged horizon {horizon} (bound {}) vs separate {} + sync {}]",
                        cost.merged_bound, cost.separate_sum, cost.sync_saved
                    ),
                    None => format!(
                        " [merged bound {} >= separate {} + sync {}: not scheduled]",
                        cost.merged_bound, cost.separate_sum, cost.sync_saved
                    ),
                },
                None => String::new(),
            };
            format!("{verdict}: {}{judged}{priced}", view.outcome)
        }
    }
}

fn group_line(record: &BoundaryAudit, group: &GroupAudit) -> String {
    format!(
        "  boundary {} group {} ({} {} of `{}` on {} tiles, step {}): movable {}",
        record.index,
        group.index,
        thousands(group.items),
        group.kind,
        group.op,
        thousands(group.tiles),
        group
            .step_path
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join("."),
        group.movable.name()
    )
}

fn access(writes: bool) -> &'static str {
    if writes { "writes" } else { "reads" }
}

/// One hazard in words: kind, the group's item and bytes, the other side's
/// transfer (or group item) and bytes, the alias root and the overlap.
pub fn blocked_text(blocked: &Blocked) -> String {
    let item = &blocked.item;
    let other = match &blocked.other {
        Other::Transfer {
            exchange,
            key,
            index,
            source_tile,
            tile,
            writes,
            allocation,
            start,
            end,
        } => format!(
            "transfer {index} of the {exchange} exchange `{key}` (from tile {source_tile}) {} \
             allocation {allocation} bytes {start}..{end} on tile {tile}",
            access(*writes)
        ),
        Other::Group {
            group,
            item: other_item,
            index,
            tile,
            writes,
            allocation,
            start,
            end,
        } => format!(
            "{other_item} {index} of group {group} (which cannot move this way; tile {tile}) {} \
             allocation {allocation} bytes {start}..{end}",
            access(*writes)
        ),
    };
    format!(
        "{} hazard: {} {} (tile {}) {} allocation {} bytes {}..{}; {}; alias root {}, overlap {}..{}",
        blocked.kind,
        item.item,
        item.index,
        item.tile,
        access(item.writes),
        item.allocation,
        item.start,
        item.end,
        other,
        blocked.alias_root,
        blocked.overlap_start,
        blocked.overlap_end
    )
}

fn report(audit: &CopyAudit, name: &str, arguments: &CopiesArguments) -> Result<(), CommandError> {
    if let Some(wanted) = arguments.boundary
        && wanted >= audit.summary.boundaries
    {
        return Err(CommandError::Input(format!(
            "error: --boundary {wanted}: the build has {} exchange boundaries{}\n  \
             help: run `superstep audit copies` without --boundary to list them",
            audit.summary.boundaries,
            if audit.summary.boundaries == 0 {
                String::new()
            } else {
                format!(" (0..={})", audit.summary.boundaries - 1)
            }
        )));
    }
    if arguments.json {
        let document = AuditDocument {
            name,
            summary: &audit.summary,
            boundaries: audit
                .boundaries
                .iter()
                .filter(|record| {
                    arguments
                        .boundary
                        .is_none_or(|wanted| record.index == wanted)
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&document)
            .map_err(|error| CommandError::Internal(error.to_string()))?;
        print_line!("{text}");
        return Ok(());
    }
    let lines = render(audit, name, arguments.boundary);
    // --quiet: the headline only.
    let shown = if super::progress::quiet() {
        1
    } else {
        lines.len()
    };
    for line in &lines[..shown] {
        print_line!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::expand::program::{
        Allocation, AllocationId, Destination, LocalCopy, Location, LowProgram, Provenance, Reason,
        Step, TransferList,
    };
    use crate::layout::format::MemoryClass;

    fn at(allocation: u32, offset: u32) -> Location {
        Location {
            allocation: AllocationId(allocation),
            offset,
        }
    }

    #[test]
    fn a_blocked_group_prints_its_hazard() {
        let provenance = Provenance {
            op: 0,
            value: None,
            reason: Reason::Rearrange,
        };
        let exchange = |source: Location, destination: Location, words: u32| {
            let mut transfers = TransferList::default();
            transfers.push(
                1,
                source,
                words,
                &[Destination {
                    tile: 0,
                    location: destination,
                }],
            );
            Step::Exchange {
                provenance,
                transfers,
            }
        };
        // The copy writes bytes 3,072..3,584 of allocation 1, which the
        // following exchange reads from 3,072 on (64 bytes).
        let program = LowProgram {
            tiles: 2,
            names: vec!["op".into()],
            allocations: (0..4)
                .map(|id| Allocation {
                    tile: 0,
                    bytes: 4096,
                    alignment: 4,
                    class: MemoryClass::Standard,
                    alias_group: id,
                    iterations: 1,
                    provenance,
                })
                .collect(),
            steps: vec![
                exchange(at(0, 0), at(3, 0), 16),
                Step::Copies {
                    provenance,
                    copies: vec![LocalCopy {
                        tile: 0,
                        source: at(2, 0),
                        destination: at(1, 3072),
                        row_bytes: 512,
                        rows: 1,
                        source_stride: 0,
                        destination_stride: 0,
                    }],
                },
                exchange(at(1, 3072), at(3, 128), 16),
            ],
            values: Vec::new(),
        };
        let audit = crate::studies::copy_audit::audit_copies(&program, &[]);
        let lines = render(&audit, "hand-built", None);
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines[2].starts_with("    0  op#0"), "{}", lines[2]);
        assert!(lines[2].ends_with("copy motion off"), "{}", lines[2]);
        assert_eq!(
            lines[3],
            "  boundary 0 group 0 (1 copies of `op` on 1 tiles, step 1): movable before"
        );
        assert_eq!(
            lines[4],
            "      cannot move after: write/read hazard: copy 0 (tile 0) writes allocation 1 bytes \
             3072..3584; transfer 0 of the following exchange `op#1` (from tile 1) reads \
             allocation 1 bytes 3072..3136 on tile 0; alias root 1, overlap 3072..3136"
        );
    }
}
