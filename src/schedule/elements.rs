//! Memory elements as a scheduling resource (IPU21.md, "Exchange rules
//! confirmed on hardware"): on one tile, in one event, a send may not read
//! the memory element an incoming payload writes. The scheduler sees
//! symbolic addresses, so it keeps the part of the rule it can decide
//! before placement: a send and a receive payload on one tile that touch
//! the same allocation root within one element's reach of each other (a
//! gap of less than the largest element, 32 KiB, between their byte ranges
//! over every Repeat binding) never share an event. Different roots are the
//! placer's part: it keeps a phase's send sources and receive destinations
//! in different elements (`crate::place::separation`).
//!
//! The one exception is a piece whose own receive on its own sender tile
//! lands in the root it reads: no start separates a piece from itself.
//!
//! Owns the per-tile access windows of one placement under construction and
//! the earliest start they allow; the validator re-checks the rule with its
//! own code (`super::validate::elements`).

use super::problem::{ExchangeProblem, SymbolicAddress, WORD_BYTES};
use crate::target::memory::LARGEST_ELEMENT_BYTES;

/// One send or receive payload on a tile: its events and what it touches.
#[derive(Clone, Copy, Debug)]
struct Window {
    start: i64,
    end: i64,
    reach: Reach,
}

/// The bytes of one root an access touches, over every Repeat binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    pub root: u32,
    pub low: u64,
    pub high: u64,
}

impl Reach {
    /// What `words` words at `address` touch in `problem`.
    pub fn of(problem: &ExchangeProblem, address: SymbolicAddress, words: u32) -> Reach {
        let root = problem.allocations[address.allocation as usize].alias_root;
        let bytes = u64::from(words) * u64::from(WORD_BYTES);
        let bindings = problem.bindings(address.allocation);
        let mut low = problem.bound_offset(address, 0);
        let mut high = low + bytes;
        for binding in 1..bindings {
            let offset = problem.bound_offset(address, binding);
            low = low.min(offset);
            high = high.max(offset + bytes);
        }
        Reach { root, low, high }
    }

    /// Whether the two may touch one element wherever their root is placed.
    pub fn may_share_element(self, other: Reach) -> bool {
        let reach = u64::from(LARGEST_ELEMENT_BYTES) - 1;
        self.root == other.root && other.low < self.high + reach && self.low < other.high + reach
    }
}

/// Per tile: its sends and its receive payloads so far, each ascending and
/// disjoint (a tile's outgoing stream and its receive port carry one piece
/// at a time, and the placer only appends).
#[derive(Clone, Default)]
pub struct ElementWindows {
    sends: Vec<Vec<Window>>,
    receives: Vec<Vec<Window>>,
}

/// The first window of `windows` that overlaps `start..end` and may share
/// an element with `reach`: its end.
fn blocking(windows: &[Window], start: i64, end: i64, reach: Reach) -> Option<i64> {
    let first = windows.partition_point(|window| window.end <= start);
    windows[first..]
        .iter()
        .take_while(|window| window.start < end)
        .find(|window| window.reach.may_share_element(reach))
        .map(|window| window.end)
}

impl ElementWindows {
    pub fn new(tiles: usize) -> ElementWindows {
        ElementWindows {
            sends: vec![Vec::new(); tiles],
            receives: vec![Vec::new(); tiles],
        }
    }

    /// The earliest start at or after `start` at which a send of `events`
    /// events from `source` on `sender` and its receives (`(tile, payload
    /// delay from the start, reach)`) meet no earlier window of their tiles
    /// in a shared element.
    pub fn earliest(
        &self,
        sender: usize,
        source: Reach,
        receives: &[(usize, i64, Reach)],
        mut start: i64,
        events: i64,
    ) -> i64 {
        loop {
            let before = start;
            while let Some(end) = blocking(&self.receives[sender], start, start + events, source) {
                start = end;
            }
            for &(tile, delay, reach) in receives {
                while let Some(end) = blocking(
                    &self.sends[tile],
                    start + delay,
                    start + delay + events,
                    reach,
                ) {
                    start = end - delay;
                }
            }
            if start == before {
                return start;
            }
        }
    }

    /// Records a placed piece's send and receive payload windows.
    pub fn commit(
        &mut self,
        sender: usize,
        source: Reach,
        receives: &[(usize, i64, Reach)],
        start: i64,
        events: i64,
    ) {
        self.sends[sender].push(Window {
            start,
            end: start + events,
            reach: source,
        });
        for &(tile, delay, reach) in receives {
            self.receives[tile].push(Window {
                start: start + delay,
                end: start + delay + events,
                reach,
            });
        }
    }
}
