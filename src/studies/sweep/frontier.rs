//! The Pareto frontier of one phase's points on (horizon, max row bytes,
//! total row bytes), all three smaller-is-better: a validated point is on
//! the frontier when no other validated point is at most as large on every
//! axis and smaller on one. Points with equal figures are all kept.

use super::points::SweepPhase;

/// Whether `first` dominates `second`: no larger anywhere, smaller somewhere.
pub fn dominates(first: (u64, u64, u64), second: (u64, u64, u64)) -> bool {
    first.0 <= second.0 && first.1 <= second.1 && first.2 <= second.2 && first != second
}

/// The indices (into `phase.points`) of the frontier, in point order.
pub fn frontier(phase: &SweepPhase) -> Vec<usize> {
    let measured: Vec<(usize, (u64, u64, u64))> = phase
        .points
        .iter()
        .enumerate()
        .filter_map(|(index, point)| point.objectives().map(|objectives| (index, objectives)))
        .collect();
    measured
        .iter()
        .filter(|(_, candidate)| {
            !measured
                .iter()
                .any(|(_, other)| dominates(*other, *candidate))
        })
        .map(|(index, _)| *index)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domination_needs_one_strict_axis() {
        assert!(dominates((1, 2, 3), (1, 2, 4)));
        assert!(!dominates((1, 2, 3), (1, 2, 3)));
        assert!(!dominates((1, 5, 3), (2, 2, 3)));
    }
}
