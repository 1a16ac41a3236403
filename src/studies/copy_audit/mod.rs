//! The copy-boundary audit (seed 000's `COPY_BOUNDARY` records): for every
//! exchange boundary of the low program (copy and fill steps standing
//! between two exchanges of one step sequence, the Repeat body audited on
//! its own; kernels, checkpoints and Repeat steps end a boundary), whether
//! each copy/fill group (one `Copies` or `Fills` step) can move before the
//! preceding exchange, after the following one, both or neither, with the
//! hazard that blocks each direction, and what copy motion decided there.
//!
//! A study over grouping, asked of the session's low program and phase
//! groups (`copy_audit`). Owns the per-group judgement only: the hazards
//! themselves come from `group::hazard` (affine rows on alias roots,
//! `group::access`), never from whole allocations and never by expanding
//! rows into words. It must not move anything (`group::motion` does).
//!
//! Groups keep their relative order when some move: a group may move
//! before the preceding exchange only if it also has no hazard with an
//! earlier group of the boundary that cannot (it would overtake it), and
//! after the following exchange only if it has none with a later group that
//! cannot. Such a block names that group instead of a transfer.

use serde::Serialize;

use crate::expand::program::{LowProgram, Step, TransferList};
use crate::group::access::Roots;
use crate::group::hazard::{
    Access, Accessor, GroupIndex, Hazard, HazardKind, Side, group_against_exchange,
    group_against_group,
};
use crate::group::keys::exchange_keys;
use crate::group::motion::{Blocker, MotionDecision, MotionOutcome};
use crate::group::{Fusion, MotionOptions, group_phases_with};
use crate::session::{Session, StageError};

/// Where a group may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Movable {
    Before,
    After,
    Both,
    Neither,
}

impl Movable {
    fn of(before: bool, after: bool) -> Movable {
        match (before, after) {
            (true, true) => Movable::Both,
            (true, false) => Movable::Before,
            (false, true) => Movable::After,
            (false, false) => Movable::Neither,
        }
    }

    pub fn before(self) -> bool {
        matches!(self, Movable::Before | Movable::Both)
    }

    pub fn after(self) -> bool {
        matches!(self, Movable::After | Movable::Both)
    }

    pub fn name(self) -> &'static str {
        match self {
            Movable::Before => "before",
            Movable::After => "after",
            Movable::Both => "both",
            Movable::Neither => "neither",
        }
    }
}

/// The accesses of a hazard in program order: `write/read` (the later
/// access reads what the earlier writes), `read/write`, `write/write`.
pub fn kind_name(kind: HazardKind) -> &'static str {
    match kind {
        HazardKind::ReadAfterWrite => "write/read",
        HazardKind::WriteAfterRead => "read/write",
        HazardKind::WriteAfterWrite => "write/write",
    }
}

/// One exchange at a boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExchangeRef {
    /// Stable key of the original exchange (`op#ordinal`).
    pub key: String,
    /// Indices from `LowProgram::steps` down to the exchange step.
    pub step_path: Vec<u32>,
    pub transfers: u32,
}

/// A copy or fill of the audited group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ItemAccess {
    /// `copy` or `fill`.
    pub item: &'static str,
    /// Position in its group's step.
    pub index: u32,
    pub tile: u32,
    /// Whether the conflicting access writes (a copy's destination, a fill).
    pub writes: bool,
    pub allocation: u32,
    /// The conflicting row of the (strided) item, in its allocation's bytes.
    pub start: u32,
    pub end: u32,
}

/// What the group's item conflicts with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "with", rename_all = "snake_case")]
pub enum Other {
    /// A transfer of the preceding or following exchange.
    Transfer {
        /// `preceding` or `following`.
        exchange: &'static str,
        key: String,
        index: u32,
        source_tile: u32,
        /// The tile holding the conflicting bytes (its allocation's tile:
        /// the source tile for a read, the destination's for a write).
        tile: u32,
        writes: bool,
        allocation: u32,
        start: u32,
        end: u32,
    },
    /// An item of another group of the boundary that cannot move the same
    /// way (moving past it would reorder the two).
    Group {
        group: u32,
        item: &'static str,
        index: u32,
        tile: u32,
        writes: bool,
        allocation: u32,
        start: u32,
        end: u32,
    },
}

/// Why a group cannot move one way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocked {
    /// `write/read`, `read/write` or `write/write`, in program order.
    pub kind: &'static str,
    pub item: ItemAccess,
    pub other: Other,
    /// The alias root both allocations resolve to.
    pub alias_root: u32,
    /// The overlapping bytes (alias-root bytes; the whole root's storage
    /// when its members differ in geometry and accesses are widened).
    pub overlap_start: u32,
    pub overlap_end: u32,
}

/// One `Copies` or `Fills` step of a boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupAudit {
    /// Position within the boundary.
    pub index: u32,
    pub step_path: Vec<u32>,
    /// `copies` or `fills`.
    pub kind: &'static str,
    /// The operator whose expansion made the step.
    pub op: String,
    /// Copies or fills in the step, and how many tiles run them.
    pub items: u32,
    pub tiles: u32,
    pub movable: Movable,
    /// What blocks moving before the preceding exchange, if anything.
    pub before: Option<Blocked>,
    /// What blocks moving after the following exchange, if anything.
    pub after: Option<Blocked>,
}

/// What copy motion decided at a boundary (its decision log entry for the
/// following exchange).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MotionView {
    /// `moved`, `stayed`, `adjacent`, `different operators`, `forwarding`,
    /// `copies` (blocked by the group's hazards both ways), or under
    /// `planning.fusion = "auto"` `not cheaper` / `unpriced`.
    pub outcome: &'static str,
    pub merged: bool,
    /// The phase the following exchange would join (its first constituent)
    /// and the copies and fills motion judged: they differ from the audit's
    /// when earlier merges left more than this boundary's groups pending.
    pub preceding: String,
    pub copies: u32,
    pub fills: u32,
    pub decision: MotionDecision,
}

/// One exchange boundary, the seed's `COPY_BOUNDARY` record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BoundaryAudit {
    /// Always `COPY_BOUNDARY`.
    pub record: &'static str,
    pub index: u32,
    pub in_repeat: bool,
    pub preceding: ExchangeRef,
    pub following: ExchangeRef,
    pub copies: u32,
    pub fills: u32,
    /// Groups that may move before the preceding exchange, after the
    /// following one, both ways, neither way.
    pub movable_before: u32,
    pub movable_after: u32,
    pub movable_both: u32,
    pub movable_neither: u32,
    /// Whether the whole run of groups may move before (after) in one piece,
    /// what copy motion asks.
    pub all_before: bool,
    pub all_after: bool,
    pub groups: Vec<GroupAudit>,
    /// Absent when copy motion is off (no decision log).
    pub motion: Option<MotionView>,
}

/// Totals over every boundary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AuditSummary {
    pub boundaries: u32,
    pub groups: u32,
    pub copies: u32,
    pub fills: u32,
    pub movable_before: u32,
    pub movable_after: u32,
    pub movable_both: u32,
    pub movable_neither: u32,
    /// Boundaries where copy motion merged the two exchanges.
    pub merged: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CopyAudit {
    pub summary: AuditSummary,
    pub boundaries: Vec<BoundaryAudit>,
}

struct Walk<'a> {
    program: &'a LowProgram,
    roots: Roots,
    keys: Vec<String>,
    next_key: usize,
    decisions: &'a [MotionDecision],
    boundaries: Vec<BoundaryAudit>,
}

/// The audit of `program`; `decisions` is copy motion's log for it
/// (`PhaseGroups::decisions`, empty when motion is off).
pub fn audit_copies(program: &LowProgram, decisions: &[MotionDecision]) -> CopyAudit {
    let mut walk = Walk {
        program,
        roots: Roots::new(program),
        keys: exchange_keys(program, &program.steps),
        next_key: 0,
        decisions,
        boundaries: Vec::new(),
    };
    let mut path = Vec::new();
    walk.steps(&program.steps, false, &mut path);
    let mut summary = AuditSummary::default();
    for boundary in &walk.boundaries {
        summary.boundaries += 1;
        summary.groups += boundary.groups.len() as u32;
        summary.copies += boundary.copies;
        summary.fills += boundary.fills;
        summary.movable_before += boundary.movable_before;
        summary.movable_after += boundary.movable_after;
        summary.movable_both += boundary.movable_both;
        summary.movable_neither += boundary.movable_neither;
        summary.merged += u32::from(boundary.motion.as_ref().is_some_and(|view| view.merged));
    }
    CopyAudit {
        summary,
        boundaries: walk.boundaries,
    }
}

fn with_index(path: &[u32], index: usize) -> Vec<u32> {
    let mut path = path.to_vec();
    path.push(index as u32);
    path
}

fn motion_view(decision: &MotionDecision) -> MotionView {
    let (outcome, merged) = match decision.outcome {
        MotionOutcome::Moved => ("moved", true),
        MotionOutcome::StayedAfterMerge => ("stayed", true),
        MotionOutcome::Adjacent => ("adjacent", true),
        MotionOutcome::Blocked(Blocker::DifferentOperators) => ("different operators", false),
        MotionOutcome::Blocked(Blocker::Forwarding(_)) => ("forwarding", false),
        MotionOutcome::Blocked(Blocker::Copies { .. }) => ("copies", false),
        MotionOutcome::Blocked(Blocker::NotCheaper) => ("not cheaper", false),
        MotionOutcome::Blocked(Blocker::Unpriced) => ("unpriced", false),
    };
    MotionView {
        outcome,
        merged,
        preceding: decision.preceding.clone(),
        copies: decision.copies,
        fills: decision.fills,
        decision: decision.clone(),
    }
}

impl Walk<'_> {
    fn steps(&mut self, steps: &[Step], in_repeat: bool, path: &mut Vec<u32>) {
        // The last exchange of this sequence that only copies and fills follow.
        let mut exchange: Option<(usize, usize)> = None;
        let mut run: Vec<usize> = Vec::new();
        for (index, step) in steps.iter().enumerate() {
            match step {
                Step::Exchange { .. } => {
                    let key = self.next_key;
                    self.next_key += 1;
                    if let Some((previous, previous_index)) = exchange
                        && !run.is_empty()
                    {
                        self.boundary(
                            steps,
                            (previous, previous_index),
                            (key, index),
                            &run,
                            in_repeat,
                            path,
                        );
                    }
                    exchange = Some((key, index));
                    run.clear();
                }
                Step::Copies { .. } | Step::Fills { .. } => {
                    if exchange.is_some() {
                        run.push(index);
                    }
                }
                Step::Kernels { .. } | Step::Checkpoint { .. } => {
                    exchange = None;
                    run.clear();
                }
                Step::Repeat { body, .. } => {
                    path.push(index as u32);
                    self.steps(body, true, path);
                    path.pop();
                    exchange = None;
                    run.clear();
                }
            }
        }
    }

    fn exchange_ref(
        &self,
        steps: &[Step],
        (key, index): (usize, usize),
        path: &[u32],
    ) -> ExchangeRef {
        let transfers = match &steps[index] {
            Step::Exchange { transfers, .. } => transfers.len() as u32,
            _ => 0,
        };
        ExchangeRef {
            key: self.keys.get(key).cloned().unwrap_or_default(),
            step_path: with_index(path, index),
            transfers,
        }
    }

    fn boundary(
        &mut self,
        steps: &[Step],
        preceding: (usize, usize),
        following: (usize, usize),
        run: &[usize],
        in_repeat: bool,
        path: &[u32],
    ) {
        let transfers = |index: usize| match &steps[index] {
            Step::Exchange { transfers, .. } => transfers,
            _ => unreachable!("boundaries are between exchanges"),
        };
        let before_exchange = transfers(preceding.1);
        let after_exchange = transfers(following.1);
        let preceding_ref = self.exchange_ref(steps, preceding, path);
        let following_ref = self.exchange_ref(steps, following, path);
        let indices: Vec<GroupIndex> = run
            .iter()
            .map(|&index| GroupIndex::new(&self.roots, std::slice::from_ref(&steps[index])))
            .collect();
        let group_steps: Vec<&Step> = run.iter().map(|&index| &steps[index]).collect();
        let count = run.len();
        // Hazards with the exchanges themselves.
        let mut before: Vec<Option<Blocked>> = (0..count)
            .map(|group| {
                group_against_exchange(
                    &indices[group],
                    &self.roots,
                    before_exchange,
                    Side::Preceding,
                )
                .map(|hazard| {
                    self.exchange_block(
                        hazard,
                        group_steps[group],
                        before_exchange,
                        &preceding_ref.key,
                        Side::Preceding,
                    )
                })
            })
            .collect();
        let mut after: Vec<Option<Blocked>> = (0..count)
            .map(|group| {
                group_against_exchange(
                    &indices[group],
                    &self.roots,
                    after_exchange,
                    Side::Following,
                )
                .map(|hazard| {
                    self.exchange_block(
                        hazard,
                        group_steps[group],
                        after_exchange,
                        &following_ref.key,
                        Side::Following,
                    )
                })
            })
            .collect();
        // Order among the groups: forwards for "before", backwards for "after".
        for group in 0..count {
            if before[group].is_some() {
                continue;
            }
            let stuck = (0..group).find_map(|earlier| {
                before[earlier].as_ref()?;
                let hazard = group_against_group(&indices[earlier], &indices[group])?;
                Some(self.group_block(
                    hazard,
                    false,
                    group_steps[group],
                    earlier,
                    group_steps[earlier],
                ))
            });
            before[group] = stuck;
        }
        for group in (0..count).rev() {
            if after[group].is_some() {
                continue;
            }
            let stuck = (group + 1..count).find_map(|later| {
                after[later].as_ref()?;
                let hazard = group_against_group(&indices[group], &indices[later])?;
                Some(self.group_block(hazard, true, group_steps[group], later, group_steps[later]))
            });
            after[group] = stuck;
        }
        let mut copies = 0;
        let mut fills = 0;
        let mut groups = Vec::with_capacity(count);
        for (group, ((&index, before), after)) in run.iter().zip(before).zip(after).enumerate() {
            let (kind, provenance, items, tiles) = match &steps[index] {
                Step::Copies {
                    provenance,
                    copies: items,
                } => {
                    copies += items.len() as u32;
                    let mut tiles: Vec<u32> = items.iter().map(|copy| copy.tile).collect();
                    tiles.sort_unstable();
                    tiles.dedup();
                    ("copies", provenance, items.len(), tiles.len())
                }
                Step::Fills {
                    provenance,
                    fills: items,
                } => {
                    fills += items.len() as u32;
                    let mut tiles: Vec<u32> = items.iter().map(|fill| fill.tile).collect();
                    tiles.sort_unstable();
                    tiles.dedup();
                    ("fills", provenance, items.len(), tiles.len())
                }
                _ => unreachable!("a boundary's groups are copy and fill steps"),
            };
            groups.push(GroupAudit {
                index: group as u32,
                step_path: with_index(path, index),
                kind,
                op: self
                    .program
                    .names
                    .get(provenance.op as usize)
                    .cloned()
                    .unwrap_or_default(),
                items: items as u32,
                tiles: tiles as u32,
                movable: Movable::of(before.is_none(), after.is_none()),
                before,
                after,
            });
        }
        let tally = |wanted: fn(Movable) -> bool| {
            groups.iter().filter(|group| wanted(group.movable)).count() as u32
        };
        let movable_before = tally(Movable::before);
        let movable_after = tally(Movable::after);
        let movable_both = tally(|movable| movable == Movable::Both);
        let movable_neither = tally(|movable| movable == Movable::Neither);
        let motion = self
            .decisions
            .iter()
            .find(|decision| decision.following == following_ref.key)
            .map(motion_view);
        self.boundaries.push(BoundaryAudit {
            record: "COPY_BOUNDARY",
            index: self.boundaries.len() as u32,
            in_repeat,
            preceding: preceding_ref,
            following: following_ref,
            copies,
            fills,
            movable_before,
            movable_after,
            movable_both,
            movable_neither,
            all_before: movable_before == count as u32,
            all_after: movable_after == count as u32,
            groups,
            motion,
        });
    }

    /// The group's side of a hazard, from its accessor.
    fn item(&self, step: &Step, access: &Access, writes: bool) -> ItemAccess {
        let (item, index) = match access.accessor {
            Accessor::Copy { index } => ("copy", index),
            Accessor::Fill { index } => ("fill", index),
            Accessor::Transfer { index, .. } => ("transfer", index),
        };
        let tile = match step {
            Step::Copies { copies, .. } => copies.get(index as usize).map(|copy| copy.tile),
            Step::Fills { fills, .. } => fills.get(index as usize).map(|fill| fill.tile),
            _ => None,
        }
        .unwrap_or_else(|| self.program.allocation(access.allocation).tile);
        ItemAccess {
            item,
            index,
            tile,
            writes,
            allocation: access.allocation.0,
            start: access.start,
            end: access.end,
        }
    }

    fn exchange_block(
        &self,
        hazard: Hazard,
        step: &Step,
        transfers: &TransferList,
        key: &str,
        side: Side,
    ) -> Blocked {
        // In program order the exchange is earlier before the group and later after it.
        let (exchange, group, exchange_writes, group_writes) = match (side, hazard.kind) {
            (Side::Preceding, HazardKind::ReadAfterWrite) => {
                (hazard.earlier, hazard.later, true, false)
            }
            (Side::Preceding, HazardKind::WriteAfterRead) => {
                (hazard.earlier, hazard.later, false, true)
            }
            (Side::Preceding, HazardKind::WriteAfterWrite) => {
                (hazard.earlier, hazard.later, true, true)
            }
            (Side::Following, HazardKind::ReadAfterWrite) => {
                (hazard.later, hazard.earlier, false, true)
            }
            (Side::Following, HazardKind::WriteAfterRead) => {
                (hazard.later, hazard.earlier, true, false)
            }
            (Side::Following, HazardKind::WriteAfterWrite) => {
                (hazard.later, hazard.earlier, true, true)
            }
        };
        let index = match exchange.accessor {
            Accessor::Transfer { index, .. } => index,
            Accessor::Copy { index } | Accessor::Fill { index } => index,
        };
        let source_tile = transfers
            .source_tile
            .get(index as usize)
            .copied()
            .unwrap_or(0);
        let tile = self.program.allocation(exchange.allocation).tile;
        Blocked {
            kind: kind_name(hazard.kind),
            item: self.item(step, &group, group_writes),
            other: Other::Transfer {
                exchange: match side {
                    Side::Preceding => "preceding",
                    Side::Following => "following",
                },
                key: key.to_string(),
                index,
                source_tile,
                tile,
                writes: exchange_writes,
                allocation: exchange.allocation.0,
                start: exchange.start,
                end: exchange.end,
            },
            alias_root: self.roots.root(group.allocation),
            overlap_start: exchange.start.max(group.start),
            overlap_end: exchange.end.min(group.end),
        }
    }

    /// A block by another group: `hazard` is between `earlier` and `later`
    /// groups; the audited group is the later one when `audited_is_earlier`
    /// is false.
    fn group_block(
        &self,
        hazard: Hazard,
        audited_is_earlier: bool,
        audited: &Step,
        other_group: usize,
        other: &Step,
    ) -> Blocked {
        let (earlier_writes, later_writes) = match hazard.kind {
            HazardKind::ReadAfterWrite => (true, false),
            HazardKind::WriteAfterRead => (false, true),
            HazardKind::WriteAfterWrite => (true, true),
        };
        let (mine, theirs, mine_writes, theirs_writes) = if audited_is_earlier {
            (hazard.earlier, hazard.later, earlier_writes, later_writes)
        } else {
            (hazard.later, hazard.earlier, later_writes, earlier_writes)
        };
        let other_item = self.item(other, &theirs, theirs_writes);
        Blocked {
            kind: kind_name(hazard.kind),
            item: self.item(audited, &mine, mine_writes),
            other: Other::Group {
                group: other_group as u32,
                item: other_item.item,
                index: other_item.index,
                tile: other_item.tile,
                writes: theirs_writes,
                allocation: other_item.allocation,
                start: other_item.start,
                end: other_item.end,
            },
            alias_root: self.roots.root(mine.allocation),
            overlap_start: mine.start.max(theirs.start),
            overlap_end: mine.end.min(theirs.end),
        }
    }
}

/// The copy-boundary audit of `session`'s low program: every exchange
/// boundary with its copy/fill groups, where each may move and what blocks
/// it, beside copy motion's decision there (first half and phase groups
/// only; nothing is scheduled).
pub fn copy_audit(session: &Session) -> Result<CopyAudit, StageError> {
    let program = session.low_program()?;
    let groups = session.phase_groups()?;
    Ok(audit_copies(&program, &groups.decisions))
}

/// [`copy_audit`] beside what copy motion would decide with cross-operator
/// fusion (the seed's experiment, `Fusion::AcrossOperators`), computed for
/// the audit only: the build keeps its phase groups.
pub fn copy_audit_across_operators(session: &Session) -> Result<CopyAudit, StageError> {
    let program = session.low_program()?;
    let groups = group_phases_with(
        &program,
        MotionOptions {
            copy_motion: true,
            fusion: Fusion::AcrossOperators,
        },
    );
    Ok(audit_copies(&program, &groups.decisions))
}

#[cfg(test)]
mod tests;
