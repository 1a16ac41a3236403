//! The metrics a user watches move between builds (not a second headline
//! type: the program counts plus the session's `Headline`), and their diff
//! ("transfers 225,119 (-1,024)").
//!
//! The first half fills the program counts; the back half's headline
//! figures (the session's `Headline`) fill the rest, which print "n/a"
//! until then. This module only formats; it computes nothing itself.

use std::fmt::Write as _;

use crate::expand::summary::ProgramSummary;
use crate::session::Headline;

/// The numbers that summarise a build for a user iterating on it: the
/// program counts of the first half and the back half's headline figures
/// (the session's one [`Headline`] type), which print "n/a" until a build
/// has a back half.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchMetrics {
    pub transfers: u64,
    pub exchanges: u64,
    pub local_copies: u64,
    pub kernel_runs: u64,
    pub allocated_bytes: u64,
    /// The back half's figures, when it ran.
    pub headline: Option<Headline>,
}

/// One metric, by label, for printing and diffing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    pub label: &'static str,
    pub value: Option<u64>,
}

impl WatchMetrics {
    /// The first half's counts, and the back half's figures when present.
    pub fn from_outcome(outcome: &crate::session::BuildOutcome) -> WatchMetrics {
        WatchMetrics {
            headline: outcome.back.as_ref().map(|back| back.headline.clone()),
            ..WatchMetrics::from_summary(&outcome.summary)
        }
    }

    /// The program counts of the first half; the headline stays `None`.
    pub fn from_summary(summary: &ProgramSummary) -> WatchMetrics {
        WatchMetrics {
            transfers: summary.total.transfers,
            exchanges: summary.total.exchanges,
            local_copies: summary.total.local_copies,
            kernel_runs: summary.total.kernel_runs,
            allocated_bytes: summary.allocated_bytes,
            headline: None,
        }
    }

    /// The metrics in display order.
    pub fn entries(&self) -> [Metric; 9] {
        let metric = |label, value| Metric { label, value };
        let figure = |read: fn(&Headline) -> u64| self.headline.as_ref().map(read);
        [
            metric("transfers", Some(self.transfers)),
            metric("exchanges", Some(self.exchanges)),
            metric("local copies", Some(self.local_copies)),
            metric("kernel runs", Some(self.kernel_runs)),
            metric("allocated bytes", Some(self.allocated_bytes)),
            metric("cycles", figure(|headline| headline.estimate.total_cycles)),
            metric(
                "exchange table bytes/tile",
                figure(|headline| headline.exchange_table_bytes_per_tile_max),
            ),
            metric(
                "patch words",
                figure(|headline| headline.repeat_patch_words + headline.sharing_patch_words),
            ),
            metric(
                "peak SRAM/tile",
                figure(|headline| headline.peak_sram_bytes_per_tile),
            ),
        ]
    }
}

pub use crate::text::thousands;

/// A signed change with separators: `+1,024`, `-3`, `±0`.
pub fn signed_change(old: u64, new: u64) -> String {
    match new.cmp(&old) {
        std::cmp::Ordering::Equal => String::from("±0"),
        std::cmp::Ordering::Greater => format!("+{}", thousands(new - old)),
        std::cmp::Ordering::Less => format!("-{}", thousands(old - new)),
    }
}

/// One line per metric, `  transfers   225,119 (-1,024)`; without a
/// previous build, values only. Absent values print "n/a".
pub fn render_metrics(current: &WatchMetrics, previous: Option<&WatchMetrics>) -> String {
    let mut out = String::new();
    let before = previous.map(WatchMetrics::entries);
    for (index, metric) in current.entries().iter().enumerate() {
        let value = metric.value.map_or_else(|| String::from("n/a"), thousands);
        let change = match (
            before.as_ref().map(|entries| entries[index].value),
            metric.value,
        ) {
            (Some(Some(old)), Some(new)) => format!(" ({})", signed_change(old, new)),
            (Some(None), Some(_)) => String::from(" (new)"),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {:<26} {value:>14}{change}", metric.label);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_values_and_changes() {
        assert_eq!(thousands(0u64), "0");
        assert_eq!(thousands(225_119u64), "225,119");
        assert_eq!(thousands(1_000_000u64), "1,000,000");
        assert_eq!(signed_change(226_143, 225_119), "-1,024");
        assert_eq!(signed_change(5, 6), "+1");
        assert_eq!(signed_change(5, 5), "±0");
    }

    #[test]
    fn renders_a_diff_and_absent_metrics() {
        let previous = WatchMetrics {
            transfers: 226_143,
            ..WatchMetrics::default()
        };
        let current = WatchMetrics {
            transfers: 225_119,
            headline: Some(Headline {
                estimate: crate::estimate::Estimate {
                    total_cycles: 1_500,
                    milliseconds: 0.001,
                    compute_cycles: 1_000,
                    exchange_cycles: 400,
                    sync_cycles: 100,
                    patch_cycles: 0,
                    barriers: 2,
                    compute_steps: 4,
                },
                exchange_table_bytes_per_tile_max: 64,
                peak_sram_bytes_per_tile: 4_096,
                peak_sram_tile: 0,
                element_conflicts: 0,
                fetch_conflicts: 0,
                same_allocation_elements: 0,
                repeat_patch_words: 0,
                sharing_patch_words: 0,
            }),
            ..WatchMetrics::default()
        };
        let text = render_metrics(&current, Some(&previous));
        let transfers = text.lines().next().expect("first line");
        assert!(transfers.contains("transfers"), "{text}");
        assert!(transfers.ends_with("225,119 (-1,024)"), "{text}");
        assert!(text.contains("1,500 (new)"), "{text}");
        assert!(text.contains("patch words"), "{text}");
        assert!(text.contains("4,096 (new)"), "{text}");
        assert!(!text.contains("n/a"), "{text}");
        let first_half_only = render_metrics(&previous, None);
        assert!(
            first_half_only.lines().any(|line| line.ends_with("n/a")),
            "{first_half_only}"
        );
        assert!(!render_metrics(&current, None).contains('('));
    }
}
