//! The headline metrics a user watches move between builds, and their diff
//! ("transfers 225,119 (-1,024)").
//!
//! The first half fills the program counts; the back half (schedules, rows,
//! patches, placement, estimate) will fill the optional fields, which print
//! "n/a" until then. This module only formats; it computes nothing itself.

use std::fmt::Write as _;

use crate::expand::summary::ProgramSummary;

/// The numbers that summarise a build for a user iterating on it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeadlineMetrics {
    pub transfers: u64,
    pub exchanges: u64,
    pub local_copies: u64,
    pub kernel_runs: u64,
    pub allocated_bytes: u64,
    /// Estimated cycles per step (filled by the estimate stage).
    pub cycles: Option<u64>,
    /// Largest exchange row table on any tile, in bytes (row tables stage).
    pub exchange_table_bytes_per_tile: Option<u64>,
    /// Words of Repeat and sharing patches (patch lists stage).
    pub patch_words: Option<u64>,
    /// Peak SRAM in use on the fullest tile, in bytes (placement stage).
    pub peak_sram_per_tile: Option<u64>,
}

/// One metric, by label, for printing and diffing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    pub label: &'static str,
    pub value: Option<u64>,
}

impl HeadlineMetrics {
    /// The program counts of the first half; back-half fields stay `None`.
    /// The first half's counts, and the back half's figures when present.
    pub fn from_outcome(outcome: &crate::session::BuildOutcome) -> HeadlineMetrics {
        let mut metrics = HeadlineMetrics::from_summary(&outcome.summary);
        if let Some(back) = &outcome.back {
            metrics.cycles = Some(back.cycles);
            metrics.exchange_table_bytes_per_tile = Some(back.exchange_table_bytes_max);
            metrics.patch_words = Some(back.repeat_patch_words + back.sharing_patch_words);
            metrics.peak_sram_per_tile = Some(back.peak_sram_bytes);
        }
        metrics
    }

    pub fn from_summary(summary: &ProgramSummary) -> HeadlineMetrics {
        HeadlineMetrics {
            transfers: summary.total.transfers,
            exchanges: summary.total.exchanges,
            local_copies: summary.total.local_copies,
            kernel_runs: summary.total.kernel_runs,
            allocated_bytes: summary.allocated_bytes,
            ..HeadlineMetrics::default()
        }
    }

    /// The metrics in display order.
    pub fn entries(&self) -> [Metric; 9] {
        let metric = |label, value| Metric { label, value };
        [
            metric("transfers", Some(self.transfers)),
            metric("exchanges", Some(self.exchanges)),
            metric("local copies", Some(self.local_copies)),
            metric("kernel runs", Some(self.kernel_runs)),
            metric("allocated bytes", Some(self.allocated_bytes)),
            metric("cycles", self.cycles),
            metric(
                "exchange table bytes/tile",
                self.exchange_table_bytes_per_tile,
            ),
            metric("patch words", self.patch_words),
            metric("peak SRAM/tile", self.peak_sram_per_tile),
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
pub fn render_metrics(current: &HeadlineMetrics, previous: Option<&HeadlineMetrics>) -> String {
    let mut out = String::new();
    let before = previous.map(HeadlineMetrics::entries);
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
        let previous = HeadlineMetrics {
            transfers: 226_143,
            ..HeadlineMetrics::default()
        };
        let current = HeadlineMetrics {
            transfers: 225_119,
            cycles: Some(1_500),
            ..HeadlineMetrics::default()
        };
        let text = render_metrics(&current, Some(&previous));
        let transfers = text.lines().next().expect("first line");
        assert!(transfers.contains("transfers"), "{text}");
        assert!(transfers.ends_with("225,119 (-1,024)"), "{text}");
        assert!(text.contains("1,500 (new)"), "{text}");
        assert!(text.contains("patch words"), "{text}");
        assert!(text.lines().any(|line| line.ends_with("n/a")), "{text}");
        assert!(!render_metrics(&current, None).contains('('));
    }
}
