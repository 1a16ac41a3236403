//! Phase groups: the ordered exchange phases of a low program, each with a
//! stable key (operator provenance + ordinal), its transfer list and where it
//! runs, after optional copy motion (seed 000): an exchange separated from
//! the previous one only by local copies and zero fills merges with it when
//! byte-range hazards allow the copy group to move before the previous
//! exchange or to stay after the merged one. Every boundary decision is
//! recorded (moved, stayed, or blocked and by which hazard).
//!
//! `planning.fusion` picks the rule: [`Fusion::SameOperator`] (the seed's
//! retained rule after its cross-operator experiment ran slower on
//! hardware), [`Fusion::AcrossOperators`] (every boundary hazards allow),
//! or [`Fusion::Auto`] (the build default): same-operator merges, plus a
//! cross-operator merge only when the caller's pricer finds the merged
//! horizon below the two separate horizons plus the barrier saved. In the
//! current expansion every operator has at most one exchange between kernels,
//! so same-operator merges nothing and cross-operator fusion is what removes
//! phases (e.g. `layer.ln1.gamma.broadcast` with `layer.ln1.beta.broadcast`).
//!
//! A merged exchange keeps bulk-synchronous semantics (all sends read memory
//! as before the phase), so a merge whose second list reads what the first
//! writes (receive-then-forward) is blocked and recorded as `Forwarding`.
//!
//! The copy-boundary audit (which copy/fill groups could move before or
//! after which exchange, and what blocks each direction) is a study over
//! these hazards: `crate::studies::copy_audit`.
//!
//! This module is a pure core over `LowProgram`; it must not schedule,
//! place or encode, and it never expands strided copies into words.

pub mod access;
pub mod hazard;
pub mod keys;
pub mod motion;

#[cfg(test)]
pub(crate) mod tests;

use serde::Serialize;

pub use hazard::{Access, Accessor, Hazard, HazardKind, Side};
pub use motion::{
    Blocker, BoundaryVerdict, Fusion, FusionCost, FusionPricer, MotionDecision, MotionOptions,
    MotionOutcome, merged_transfers,
};

use crate::expand::program::{LowProgram, Step, TransferList};

/// One exchange phase of the transformed step sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExchangePhase {
    /// `op#ordinal` of its first constituent exchange.
    pub key: String,
    pub in_repeat: bool,
    /// How often the phase runs (the Repeat's iterations inside the body).
    pub executions: u32,
    /// Indices from `PhaseGroups::steps` down to the exchange step
    /// (`[repeat, index in body]` inside the Repeat).
    pub step_path: Vec<u32>,
    pub transfer_count: u32,
    /// Keys of every original exchange merged into it, in order (one for an
    /// unmerged phase).
    pub merged_from: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PhaseGroups {
    /// The transformed steps: same representation as `LowProgram::steps`.
    pub steps: Vec<Step>,
    pub phases: Vec<ExchangePhase>,
    pub decisions: Vec<MotionDecision>,
}

impl PhaseGroups {
    /// Exchange phases of the original program (before motion).
    pub fn original_phase_count(&self) -> usize {
        self.phases
            .iter()
            .map(|phase| phase.merged_from.len())
            .sum()
    }
}

/// Phase groups with same-operator fusion (see the module notes).
pub fn group_phases(program: &LowProgram, copy_motion: bool) -> PhaseGroups {
    group_phases_with(
        program,
        MotionOptions {
            copy_motion,
            fusion: Fusion::SameOperator,
        },
    )
}

/// Phase groups under `options`; `Fusion::Auto` without a pricer merges
/// only within an operator (see [`group_phases_priced`]).
pub fn group_phases_with(program: &LowProgram, options: MotionOptions) -> PhaseGroups {
    group_phases_priced(program, options, None)
}

/// Phase groups under `options`, with `pricer` deciding each cross-operator
/// merge hazards allow under `Fusion::Auto` (greedily, in program order: a
/// merged phase is priced again against the next exchange).
pub fn group_phases_priced<'pricer>(
    program: &LowProgram,
    options: MotionOptions,
    pricer: Option<&'pricer mut FusionPricer<'pricer>>,
) -> PhaseGroups {
    group_phases_replaying(program, options, pricer, &[])
}

/// [`group_phases_priced`], with the first boundaries decided as `verdicts`
/// records them instead of judged (hazards and prices alike): for a record
/// of this very program's grouping, made by a compiler the caller trusts.
pub fn group_phases_replaying<'pricer>(
    program: &LowProgram,
    options: MotionOptions,
    pricer: Option<&'pricer mut FusionPricer<'pricer>>,
    verdicts: &[BoundaryVerdict],
) -> PhaseGroups {
    let keys = keys::exchange_keys(program, &program.steps);
    let mut motion = motion::Motion::new(program, options, keys, pricer, verdicts);
    let steps = motion.run(&program.steps);
    let mut phases = Vec::with_capacity(motion.parts.len());
    let mut path = Vec::new();
    list_phases(&steps, 1, false, &mut path, &mut phases);
    for (phase, parts) in phases.iter_mut().zip(&motion.parts) {
        phase.merged_from = parts
            .iter()
            .filter_map(|&part| motion.keys.get(part).cloned())
            .collect();
        phase.key = phase.merged_from.first().cloned().unwrap_or_default();
    }
    PhaseGroups {
        steps,
        phases,
        decisions: motion.decisions,
    }
}

/// A run of cross-operator boundaries `auto` fusion prices one after
/// another: each boundary's preceding exchange is the previous one's
/// following exchange (merged with it when that merge is taken), so the
/// greedy decisions along a chain depend on one another but on nothing
/// outside it. As seen with no cross-operator merge taken: the chain's first
/// exchange, each following exchange in order, and the Repeat iterations
/// around them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionChain {
    pub first: TransferList,
    pub following: Vec<TransferList>,
    pub iterations: u32,
}

/// What `Fusion::Auto` will ask its pricer, found without pricing: the
/// chains of boundaries hazards allow a cross-operator merge at, in program
/// order, and how many boundaries the pass decides in all (priced or not;
/// the same whatever the pricer answers). A caller can walk each chain's
/// greedy decisions ahead, chains in parallel, so that
/// [`group_phases_priced`] finds every merge priced.
pub fn fusion_chains(program: &LowProgram) -> (Vec<FusionChain>, usize) {
    let mut chains: Vec<FusionChain> = Vec::new();
    let decisions = {
        let mut recorder = |preceding: &TransferList,
                            following: &TransferList,
                            _merged: &TransferList,
                            iterations: u32| {
            let continues = chains.last().is_some_and(|chain| {
                chain.iterations == iterations && chain.following.last() == Some(preceding)
            });
            match chains.last_mut() {
                Some(chain) if continues => chain.following.push(following.clone()),
                _ => chains.push(FusionChain {
                    first: preceding.clone(),
                    following: vec![following.clone()],
                    iterations,
                }),
            }
            None
        };
        let options = MotionOptions {
            copy_motion: true,
            fusion: Fusion::Auto,
        };
        group_phases_priced(program, options, Some(&mut recorder))
            .decisions
            .len()
    };
    (chains, decisions)
}

fn list_phases(
    steps: &[Step],
    executions: u32,
    in_repeat: bool,
    path: &mut Vec<u32>,
    phases: &mut Vec<ExchangePhase>,
) {
    for (index, step) in steps.iter().enumerate() {
        path.push(index as u32);
        match step {
            Step::Exchange { transfers, .. } => phases.push(ExchangePhase {
                key: String::new(),
                in_repeat,
                executions,
                step_path: path.clone(),
                transfer_count: transfers.len() as u32,
                merged_from: Vec::new(),
            }),
            Step::Repeat { iterations, body } => list_phases(
                body,
                executions.saturating_mul(*iterations),
                true,
                path,
                phases,
            ),
            _ => {}
        }
        path.pop();
    }
}
