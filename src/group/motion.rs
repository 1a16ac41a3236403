//! Copy motion over one step sequence (recursing into Repeat bodies): an
//! exchange that only local copies and zero fills separate from the previous
//! exchange merges with it when the copy group can move before the previous
//! exchange or stay after the merged one, and the second exchange does not
//! read what the first writes.
//!
//! Owns the transformation and its decision log. Kernels, checkpoints and
//! Repeat boundaries are barriers; copies keep their relative order; merged
//! transfer lists keep their original order. It must not judge hazards
//! itself (`hazard` does) nor name phases (`keys` does).

use serde::{Deserialize, Serialize};

use super::access::Roots;
use super::hazard::{GroupIndex, Hazard, Side, forwarding, group_against_exchange};
use crate::expand::program::{LowProgram, Step, TransferList};

/// Which exchanges may merge at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Fusion {
    /// Only exchanges of the same operator (the seed's retained rule: its
    /// cross-operator experiment merged more but ran 0.83% slower).
    SameOperator,
    /// Exchanges of any operators (explicit opt-in; the merged phase keeps
    /// the first exchange's provenance and lists every constituent key).
    AcrossOperators,
    /// Same-operator merges as `SameOperator`; a cross-operator merge that
    /// hazards allow is priced by the caller's [`FusionPricer`] and taken
    /// only when [`FusionCost::merges`] says it is cheaper.
    Auto,
}

impl Fusion {
    /// The build-file spelling (`planning.fusion`).
    pub fn name(self) -> &'static str {
        match self {
            Fusion::SameOperator => "same-operator",
            Fusion::AcrossOperators => "across-operators",
            Fusion::Auto => "auto",
        }
    }
}

/// What an `auto` cross-operator merge costs and saves, in cycles per execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FusionCost {
    /// The scheduled horizon of the merged exchange; `None` when it was not
    /// scheduled because its lower bound already showed the merge cannot
    /// be cheaper (pruned).
    pub merged_horizon: Option<u64>,
    /// A lower bound of every merged schedule's horizon (the larger of the
    /// latency-aware and the dependency bound, `crate::schedule::bound`).
    pub merged_bound: u64,
    /// The two exchanges apart, summed: their scheduled horizons, or,
    /// when `separate_scheduled` is false, their lower bounds (the merged
    /// horizon was already below those plus the barrier, so the merge pays
    /// whatever their schedules would be, and they were not scheduled).
    pub separate_sum: u64,
    /// Whether `separate_sum` adds scheduled horizons (true) or lower
    /// bounds (false).
    pub separate_scheduled: bool,
    /// The phase barrier (sync and setup) a merge saves.
    pub sync_saved: u64,
}

impl FusionCost {
    /// What a merged horizon must stay below for the merge to pay.
    pub fn threshold(&self) -> u64 {
        self.separate_sum.saturating_add(self.sync_saved)
    }

    /// Whether a merged schedule could pay at all: its lower bound is below
    /// the threshold (when not, scheduling the merge is pointless).
    pub fn may_merge(&self) -> bool {
        self.merged_bound < self.threshold()
    }

    /// Whether merging is cheaper: merged horizon < separate sum + sync
    /// saved (a pruned merge never is: its bound is not).
    pub fn merges(&self) -> bool {
        self.merged_horizon
            .is_some_and(|horizon| horizon < self.threshold())
    }

    /// Whether the merge was decided by its bound alone (not scheduled).
    pub fn pruned(&self) -> bool {
        self.merged_horizon.is_none()
    }

    /// Whether the merge was taken against the separate exchanges' lower
    /// bounds, without scheduling them.
    pub fn taken_by_bounds(&self) -> bool {
        !self.separate_scheduled
    }
}

/// Prices a cross-operator merge for [`Fusion::Auto`]: the preceding
/// exchange's transfers (possibly already merged), the following
/// exchange's, their merge, and the Repeat iterations around them. `None`
/// when a list cannot be priced (the merge is then not taken).
pub type FusionPricer<'pricer> =
    dyn FnMut(&TransferList, &TransferList, &TransferList, u32) -> Option<FusionCost> + 'pricer;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MotionOptions {
    pub copy_motion: bool,
    pub fusion: Fusion,
}

/// Why a boundary did not merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Blocker {
    /// The two exchanges belong to different operators (under `SameOperator`).
    DifferentOperators,
    /// The second exchange reads bytes the first writes.
    Forwarding(Hazard),
    /// The group can neither move before the preceding exchange (`before`)
    /// nor stay after the following one (`after`).
    Copies { before: Hazard, after: Hazard },
    /// Under `Auto`: hazards allow the merge but it is not cheaper
    /// (the decision's `cost` holds both numbers).
    NotCheaper,
    /// Under `Auto`: the merge could not be priced.
    Unpriced,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MotionOutcome {
    /// The group moved before the preceding exchange; the exchanges merged.
    Moved,
    /// The group stays after the merged exchange.
    StayedAfterMerge,
    /// Nothing separated the two exchanges; they merged.
    Adjacent,
    Blocked(Blocker),
}

/// One boundary between two exchanges separated only by copies and fills.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MotionDecision {
    /// Key of the preceding phase (its first constituent) and of the following exchange.
    pub preceding: String,
    pub following: String,
    /// Copies and fills in the group.
    pub copies: u32,
    pub fills: u32,
    pub outcome: MotionOutcome,
    /// Under `Auto`, at a cross-operator boundary hazards allow: the
    /// pricing the decision followed.
    pub cost: Option<FusionCost>,
}

/// A boundary's decision as a kept record replays it: what hazards allowed
/// and what the pricer answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundaryVerdict {
    pub outcome: MotionOutcome,
    pub cost: Option<FusionCost>,
}

impl From<&MotionDecision> for BoundaryVerdict {
    fn from(decision: &MotionDecision) -> BoundaryVerdict {
        BoundaryVerdict {
            outcome: decision.outcome,
            cost: decision.cost,
        }
    }
}

pub struct Motion<'program, 'pricer> {
    pub program: &'program LowProgram,
    pub options: MotionOptions,
    pub roots: Roots,
    /// Keys of the original exchanges in depth-first order.
    pub keys: Vec<String>,
    next_key: usize,
    /// Constituent key indices of every emitted exchange, depth-first.
    pub parts: Vec<Vec<usize>>,
    pub decisions: Vec<MotionDecision>,
    /// Prices cross-operator merges under `Auto` (without one, `Auto`
    /// merges only within an operator).
    pricer: Option<&'pricer mut FusionPricer<'pricer>>,
    /// Iterations of the Repeat being transformed (1 outside).
    iterations: u32,
    /// Decisions taken as recorded instead of judged, in boundary order
    /// (a record of this program's grouping that its reader trusts);
    /// boundaries past its end are judged.
    replay: &'program [BoundaryVerdict],
}

/// `first` followed by `second`: the transfer list of their merge.
pub fn merged_transfers(first: &TransferList, second: &TransferList) -> TransferList {
    let mut merged = first.clone();
    merged.reserve_exact_for(second);
    append(&mut merged, second);
    merged
}

fn append(target: &mut TransferList, other: &TransferList) {
    let first = target.len() as u32;
    target.segment_starts.push(first);
    target
        .segment_starts
        .extend(other.segment_starts.iter().map(|&start| start + first));
    let base = target.destinations.len() as u32;
    target.source_tile.extend_from_slice(&other.source_tile);
    target
        .source_location
        .extend_from_slice(&other.source_location);
    target.words.extend_from_slice(&other.words);
    target
        .destination_start
        .extend(other.destination_start.iter().map(|&start| start + base));
    target.destinations.extend_from_slice(&other.destinations);
}

fn counts(group: &[Step]) -> (u32, u32) {
    group
        .iter()
        .fold((0, 0), |(copies, fills), step| match step {
            Step::Copies { copies: items, .. } => (copies + items.len() as u32, fills),
            Step::Fills { fills: items, .. } => (copies, fills + items.len() as u32),
            _ => (copies, fills),
        })
}

impl<'program, 'pricer> Motion<'program, 'pricer> {
    pub fn new(
        program: &'program LowProgram,
        options: MotionOptions,
        keys: Vec<String>,
        pricer: Option<&'pricer mut FusionPricer<'pricer>>,
        replay: &'program [BoundaryVerdict],
    ) -> Motion<'program, 'pricer> {
        Motion {
            program,
            options,
            roots: Roots::new(program),
            keys,
            next_key: 0,
            parts: Vec::new(),
            decisions: Vec::new(),
            pricer,
            iterations: 1,
            replay,
        }
    }

    /// Decides the boundary between `out[pending]` (an exchange) and
    /// `following`, with `out[pending + 1..]` the copy group between them.
    fn decide(
        &mut self,
        out: &[Step],
        pending: usize,
        following: &Step,
    ) -> (MotionOutcome, Option<FusionCost>) {
        let (
            Step::Exchange {
                provenance: first,
                transfers: preceding,
            },
            Step::Exchange {
                provenance: second,
                transfers: next,
            },
        ) = (&out[pending], following)
        else {
            return (MotionOutcome::Blocked(Blocker::DifferentOperators), None);
        };
        let across = first.op != second.op;
        let priced = match self.options.fusion {
            Fusion::SameOperator if across => {
                return (MotionOutcome::Blocked(Blocker::DifferentOperators), None);
            }
            Fusion::Auto if across && self.pricer.is_none() => {
                return (MotionOutcome::Blocked(Blocker::DifferentOperators), None);
            }
            Fusion::Auto => across,
            Fusion::SameOperator | Fusion::AcrossOperators => false,
        };
        let outcome = self.hazard_outcome(out, pending, preceding, next);
        if !priced || matches!(outcome, MotionOutcome::Blocked(_)) {
            return (outcome, None);
        }
        let merged = merged_transfers(preceding, next);
        let iterations = self.iterations;
        let cost = self
            .pricer
            .as_mut()
            .and_then(|pricer| pricer(preceding, next, &merged, iterations));
        match cost {
            Some(cost) if cost.merges() => (outcome, Some(cost)),
            Some(cost) => (MotionOutcome::Blocked(Blocker::NotCheaper), Some(cost)),
            None => (MotionOutcome::Blocked(Blocker::Unpriced), None),
        }
    }

    /// What hazards allow at the boundary, operators aside.
    fn hazard_outcome(
        &self,
        out: &[Step],
        pending: usize,
        preceding: &TransferList,
        next: &TransferList,
    ) -> MotionOutcome {
        if let Some(hazard) = forwarding(&self.roots, preceding, next) {
            return MotionOutcome::Blocked(Blocker::Forwarding(hazard));
        }
        let group = &out[pending + 1..];
        if group.is_empty() {
            return MotionOutcome::Adjacent;
        }
        let index = GroupIndex::new(&self.roots, group);
        let Some(before) = group_against_exchange(&index, &self.roots, preceding, Side::Preceding)
        else {
            return MotionOutcome::Moved;
        };
        let Some(after) = group_against_exchange(&index, &self.roots, next, Side::Following) else {
            return MotionOutcome::StayedAfterMerge;
        };
        MotionOutcome::Blocked(Blocker::Copies { before, after })
    }

    /// The transformed sequence of `steps`.
    pub fn run(&mut self, steps: &[Step]) -> Vec<Step> {
        let mut out: Vec<Step> = Vec::with_capacity(steps.len());
        // Index in `out` of the last exchange that may still merge: every
        // step after it is a copy or fill step.
        let mut pending: Option<usize> = None;
        for step in steps {
            match step {
                Step::Exchange { .. } => {
                    let key = self.next_key;
                    self.next_key += 1;
                    let Some(at) = pending.filter(|_| self.options.copy_motion) else {
                        out.push(step.clone());
                        self.parts.push(vec![key]);
                        pending = Some(out.len() - 1);
                        continue;
                    };
                    let (outcome, cost) = match self.replay.get(self.decisions.len()) {
                        Some(verdict) => (verdict.outcome, verdict.cost),
                        None => self.decide(&out, at, step),
                    };
                    let (copies, fills) = counts(&out[at + 1..]);
                    let preceding = self.parts.last().map_or(0, |parts| parts[0]);
                    self.decisions.push(MotionDecision {
                        preceding: self.keys.get(preceding).cloned().unwrap_or_default(),
                        following: self.keys.get(key).cloned().unwrap_or_default(),
                        copies,
                        fills,
                        outcome,
                        cost,
                    });
                    let Step::Exchange {
                        transfers: next, ..
                    } = step
                    else {
                        continue;
                    };
                    match outcome {
                        MotionOutcome::Blocked(_) => {
                            out.push(step.clone());
                            self.parts.push(vec![key]);
                            pending = Some(out.len() - 1);
                            continue;
                        }
                        MotionOutcome::Moved => {
                            // [E1, G...] becomes [G..., E1]: rotate E1 to the end.
                            out[at..].rotate_left(1);
                            pending = Some(out.len() - 1);
                        }
                        MotionOutcome::StayedAfterMerge | MotionOutcome::Adjacent => {}
                    }
                    if let Some(Step::Exchange { transfers, .. }) =
                        pending.and_then(|at| out.get_mut(at))
                    {
                        append(transfers, next);
                    }
                    if let Some(parts) = self.parts.last_mut() {
                        parts.push(key);
                    }
                }
                Step::Copies { .. } | Step::Fills { .. } => out.push(step.clone()),
                Step::Kernels { .. } | Step::Checkpoint { .. } => {
                    out.push(step.clone());
                    pending = None;
                }
                Step::Repeat { iterations, body } => {
                    let outside = std::mem::replace(&mut self.iterations, *iterations);
                    let body = self.run(body);
                    self.iterations = outside;
                    out.push(Step::Repeat {
                        iterations: *iterations,
                        body,
                    });
                    pending = None;
                }
            }
        }
        // Merges grew their lists by appends: the grouped program keeps
        // none of that spare room.
        Step::shrink_exchanges(&mut out);
        out
    }
}
