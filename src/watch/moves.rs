//! Which phases moved most between two builds: each exchange phase's
//! horizon times its executions, by key, and the largest changes (phases
//! that appeared or vanished count in full).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::session::BuildOutcome;
use crate::text::thousands;

/// Phase lines shown after a rebuild.
pub const PHASE_MOVES: usize = 5;

/// Each phase's horizon × executions, by key.
pub type PhaseCosts = BTreeMap<String, u64>;

/// The phase costs of a built outcome (empty without a back half).
pub fn phase_costs(outcome: &BuildOutcome) -> PhaseCosts {
    outcome
        .back
        .iter()
        .flat_map(|back| &back.phases)
        .map(|phase| {
            (
                phase.key.clone(),
                u64::from(phase.horizon) * u64::from(phase.executions),
            )
        })
        .collect()
}

/// The `count` phases whose cost changed most, largest change first (ties
/// by key); nothing when no phase moved.
pub fn render_phase_moves(previous: &PhaseCosts, current: &PhaseCosts, count: usize) -> String {
    let mut moves: Vec<(&str, Option<u64>, Option<u64>, i128)> = previous
        .keys()
        .chain(current.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter_map(|key| {
            let before = previous.get(key).copied();
            let after = current.get(key).copied();
            let delta = i128::from(after.unwrap_or(0)) - i128::from(before.unwrap_or(0));
            (before != after).then_some((key.as_str(), before, after, delta))
        })
        .collect();
    if moves.is_empty() {
        return String::new();
    }
    moves.sort_by(|a, b| b.3.abs().cmp(&a.3.abs()).then(a.0.cmp(b.0)));
    let mut text = format!(
        "phases that moved most ({} of {} changed; horizon x executions):\n",
        moves.len().min(count),
        moves.len()
    );
    let show = |value: Option<u64>| value.map_or_else(|| "absent".to_string(), thousands);
    for (key, before, after, delta) in moves.into_iter().take(count) {
        let sign = if delta < 0 { "-" } else { "+" };
        let _ = writeln!(
            text,
            "  {key:<44} {} -> {} ({sign}{})",
            show(before),
            show(after),
            thousands(delta.unsigned_abs())
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_changes_first_with_new_and_vanished_phases() {
        let previous: PhaseCosts = [("a#0", 1000), ("b#0", 500), ("c#0", 70)]
            .into_iter()
            .map(|(key, cost)| (key.to_string(), cost))
            .collect();
        let current: PhaseCosts = [("a#0", 900), ("b#0", 500), ("d#0", 2000)]
            .into_iter()
            .map(|(key, cost)| (key.to_string(), cost))
            .collect();
        let text = render_phase_moves(&previous, &current, 2);
        assert_eq!(
            text,
            "phases that moved most (2 of 3 changed; horizon x executions):\n  \
             d#0                                          absent -> 2,000 (+2,000)\n  \
             a#0                                          1,000 -> 900 (-100)\n"
        );
        assert_eq!(render_phase_moves(&previous, &previous, 5), "");
    }
}
