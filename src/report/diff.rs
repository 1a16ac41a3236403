//! Comparison of two build reports (`superstep diff A B`): the view of a
//! `report.json` this comparison reads (its own `Deserialize` structs, only
//! the fields it needs), and the pure function from two such views to a
//! [`ReportDiff`]: the totals side by side with their deltas, and every
//! exchange phase whose cost or choice moved, largest cycle delta first.
//! It owns no I/O and builds nothing; the command (`cli::diff`) reads the
//! files or builds the queries and renders the result.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::schedule::SchedulePolicy;
use crate::schedule::vocabulary::policy_text;
use crate::session::Headline;
pub use crate::session::PolicySource;

/// A build report as it is written: the back half may be missing.
#[derive(Debug, Deserialize)]
struct ReportRecord {
    #[serde(default)]
    schema_version: u32,
    name: String,
    model: String,
    tiles: u32,
    layers: u32,
    batch: u32,
    back: Option<BackView>,
}

/// What `diff` reads of a build report: who it is, and its back half.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportView {
    pub name: String,
    pub model: String,
    pub tiles: u32,
    pub layers: u32,
    pub batch: u32,
    pub back: BackView,
}

/// What `diff` reads of a report's back half: the headline figures and
/// each phase.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct BackView {
    #[serde(flatten)]
    pub headline: Headline,
    pub phases: Vec<PhaseView>,
}

/// What `diff` reads of one exchange phase.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PhaseView {
    pub key: String,
    pub executions: u32,
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub policy_source: PolicySource,
    #[serde(with = "policy_text")]
    pub chosen: SchedulePolicy,
    pub horizon: u32,
    pub max_row_bytes: u64,
    pub total_row_bytes: u64,
    pub patch_words: u64,
    /// Under `auto`: the candidates tried (only the winner's pairing is read).
    #[serde(default)]
    pub candidates: Vec<CandidateView>,
}

/// What `diff` reads of one `auto` candidate.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct CandidateView {
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub pairing: String,
    pub chosen: bool,
}

impl PhaseView {
    /// The concrete choice as reports show it: the policy, and under `auto`
    /// the pairing of the winning candidate (`B64/selected`).
    pub fn chosen_label(&self) -> String {
        match self.candidates.iter().find(|candidate| candidate.chosen) {
            Some(candidate) => format!("{}/{}", candidate.policy, candidate.pairing),
            None => self.chosen.to_string(),
        }
    }

    /// Cycles this phase costs over the whole program (horizon × executions).
    pub fn cycles(&self) -> u64 {
        u64::from(self.horizon) * u64::from(self.executions)
    }
}

/// Why a report cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum ReportViewError {
    #[error("it is not a superstep build report: {0}")]
    NotAReport(#[from] serde_json::Error),
    #[error(
        "it has report schema {found}, and this superstep reads schema {expected}: rebuild it with this superstep"
    )]
    Schema { found: u32, expected: u32 },
    #[error("it has no back-half figures (`back` is null): the build stopped before the estimate")]
    NoBackHalf,
    #[error("phase `{0}` appears more than once")]
    RepeatedPhase(String),
}

impl ReportView {
    /// Parses a `report.json` text.
    pub fn parse(text: &str) -> Result<ReportView, ReportViewError> {
        ReportView::checked(serde_json::from_str(text)?)
    }

    /// The view of a report built in this process: the same fields its
    /// `report.json` would give, read the same way.
    pub fn of<Report: Serialize>(report: &Report) -> Result<ReportView, ReportViewError> {
        ReportView::checked(serde_json::from_value(serde_json::to_value(report)?)?)
    }

    /// A record with its back half, and every phase key once.
    fn checked(record: ReportRecord) -> Result<ReportView, ReportViewError> {
        if record.schema_version != super::REPORT_SCHEMA_VERSION {
            return Err(ReportViewError::Schema {
                found: record.schema_version,
                expected: super::REPORT_SCHEMA_VERSION,
            });
        }
        let back = record.back.ok_or(ReportViewError::NoBackHalf)?;
        let mut keys = BTreeSet::new();
        for phase in &back.phases {
            if !keys.insert(phase.key.as_str()) {
                return Err(ReportViewError::RepeatedPhase(phase.key.clone()));
            }
        }
        Ok(ReportView {
            name: record.name,
            model: record.model,
            tiles: record.tiles,
            layers: record.layers,
            batch: record.batch,
            back,
        })
    }
}

/// One figure in both builds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Change<Value, Difference> {
    pub a: Value,
    pub b: Value,
    /// `b - a`.
    pub delta: Difference,
    /// `delta` over `a`, in percent (absent when `a` is 0 and `b` is not).
    pub percent: Option<f64>,
}

/// A count (cycles, bytes, words) in both builds.
pub type CountChange = Change<u64, i64>;

/// `b - a` of two counts, saturating at the ends of `i64`.
pub fn signed_difference(a: u64, b: u64) -> i64 {
    let difference = i128::from(b) - i128::from(a);
    i64::try_from(difference).unwrap_or(if difference < 0 { i64::MIN } else { i64::MAX })
}

fn percent(a: f64, b: f64) -> Option<f64> {
    if a == b {
        Some(0.0)
    } else if a == 0.0 {
        None
    } else {
        Some((b - a) / a * 100.0)
    }
}

fn count_change(a: u64, b: u64) -> CountChange {
    Change {
        a,
        b,
        delta: signed_difference(a, b),
        percent: percent(a as f64, b as f64),
    }
}

fn fraction_change(a: f64, b: f64) -> Change<f64, f64> {
    Change {
        a,
        b,
        delta: b - a,
        percent: percent(a, b),
    }
}

/// The build totals, each in both builds (field names as in `report.json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Totals {
    pub milliseconds: Change<f64, f64>,
    pub total_cycles: CountChange,
    pub compute_cycles: CountChange,
    pub exchange_cycles: CountChange,
    pub sync_cycles: CountChange,
    pub patch_cycles: CountChange,
    pub barriers: CountChange,
    pub exchange_table_bytes_per_tile_max: CountChange,
    pub peak_sram_bytes_per_tile: CountChange,
    pub repeat_patch_words: CountChange,
    pub sharing_patch_words: CountChange,
}

impl Totals {
    fn of(a: &BackView, b: &BackView) -> Totals {
        let count = |figure: fn(&BackView) -> u64| count_change(figure(a), figure(b));
        Totals {
            milliseconds: fraction_change(
                a.headline.estimate.milliseconds,
                b.headline.estimate.milliseconds,
            ),
            total_cycles: count(|back| back.headline.estimate.total_cycles),
            compute_cycles: count(|back| back.headline.estimate.compute_cycles),
            exchange_cycles: count(|back| back.headline.estimate.exchange_cycles),
            sync_cycles: count(|back| back.headline.estimate.sync_cycles),
            patch_cycles: count(|back| back.headline.estimate.patch_cycles),
            barriers: count(|back| back.headline.estimate.barriers),
            exchange_table_bytes_per_tile_max: count(|back| {
                back.headline.exchange_table_bytes_per_tile_max
            }),
            peak_sram_bytes_per_tile: count(|back| back.headline.peak_sram_bytes_per_tile),
            repeat_patch_words: count(|back| back.headline.repeat_patch_words),
            sharing_patch_words: count(|back| back.headline.sharing_patch_words),
        }
    }

    /// The count totals with their report field names, in display order.
    pub fn counts(&self) -> [(&'static str, &CountChange); 10] {
        [
            ("total_cycles", &self.total_cycles),
            ("compute_cycles", &self.compute_cycles),
            ("exchange_cycles", &self.exchange_cycles),
            ("sync_cycles", &self.sync_cycles),
            ("patch_cycles", &self.patch_cycles),
            ("barriers", &self.barriers),
            (
                "exchange_table_bytes_per_tile_max",
                &self.exchange_table_bytes_per_tile_max,
            ),
            ("peak_sram_bytes_per_tile", &self.peak_sram_bytes_per_tile),
            ("repeat_patch_words", &self.repeat_patch_words),
            ("sharing_patch_words", &self.sharing_patch_words),
        ]
    }
}

/// Which builds have a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    Both,
    OnlyInA,
    OnlyInB,
}

/// What moved in a phase present in both builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Aspect {
    Executions,
    Horizon,
    Policy,
    /// The concrete policy (under `auto`, the winner and its pairing).
    Chosen,
    /// Row bytes of the fullest tile or over all tiles.
    Rows,
    PatchWords,
}

/// One phase as one build has it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseSide {
    pub executions: u32,
    pub horizon: u32,
    /// `horizon × executions`.
    pub cycles: u64,
    #[serde(with = "policy_text")]
    pub policy: SchedulePolicy,
    pub policy_source: PolicySource,
    /// The concrete choice as a label, not a policy alone: under `auto`
    /// the winner with its pairing (`B64/selected`, see
    /// [`PhaseView::chosen_label`]).
    pub chosen: String,
    pub max_row_bytes: u64,
    pub total_row_bytes: u64,
    pub patch_words: u64,
}

impl PhaseSide {
    fn of(phase: &PhaseView) -> PhaseSide {
        PhaseSide {
            executions: phase.executions,
            horizon: phase.horizon,
            cycles: phase.cycles(),
            policy: phase.policy,
            policy_source: phase.policy_source,
            chosen: phase.chosen_label(),
            max_row_bytes: phase.max_row_bytes,
            total_row_bytes: phase.total_row_bytes,
            patch_words: phase.patch_words,
        }
    }
}

/// A phase that changed, or that only one build has.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseDiff {
    pub key: String,
    pub presence: Presence,
    /// What moved (empty for a phase only one build has).
    pub changes: Vec<Aspect>,
    /// B's cycles minus A's (a missing phase counts 0 cycles).
    pub cycle_delta: i64,
    pub a: Option<PhaseSide>,
    pub b: Option<PhaseSide>,
}

/// What moved between two phases of the same key.
fn changed_aspects(a: &PhaseSide, b: &PhaseSide) -> Vec<Aspect> {
    let checks = [
        (Aspect::Executions, a.executions != b.executions),
        (Aspect::Horizon, a.horizon != b.horizon),
        (
            Aspect::Policy,
            a.policy != b.policy || a.policy_source != b.policy_source,
        ),
        (Aspect::Chosen, a.chosen != b.chosen),
        (
            Aspect::Rows,
            a.max_row_bytes != b.max_row_bytes || a.total_row_bytes != b.total_row_bytes,
        ),
        (Aspect::PatchWords, a.patch_words != b.patch_words),
    ];
    checks
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(aspect, _)| aspect)
        .collect()
}

/// The phase of `key` in both builds, or `None` when nothing moved.
fn phase_diff(key: &str, a: Option<&PhaseView>, b: Option<&PhaseView>) -> Option<PhaseDiff> {
    let a = a.map(PhaseSide::of);
    let b = b.map(PhaseSide::of);
    let (presence, changes) = match (&a, &b) {
        (Some(a), Some(b)) => (Presence::Both, changed_aspects(a, b)),
        (Some(_), None) => (Presence::OnlyInA, Vec::new()),
        (None, Some(_)) => (Presence::OnlyInB, Vec::new()),
        (None, None) => return None,
    };
    if presence == Presence::Both && changes.is_empty() {
        return None;
    }
    let cycles = |side: &Option<PhaseSide>| side.as_ref().map_or(0, |side| side.cycles);
    Some(PhaseDiff {
        key: key.to_string(),
        presence,
        changes,
        cycle_delta: signed_difference(cycles(&a), cycles(&b)),
        a,
        b,
    })
}

/// Who is compared: a report's identity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Identity {
    pub name: String,
    pub model: String,
    pub tiles: u32,
    pub layers: u32,
    pub batch: u32,
}

impl Identity {
    fn of(report: &ReportView) -> Identity {
        Identity {
            name: report.name.clone(),
            model: report.model.clone(),
            tiles: report.tiles,
            layers: report.layers,
            batch: report.batch,
        }
    }
}

/// Two builds compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportDiff {
    pub a: Identity,
    pub b: Identity,
    pub totals: Totals,
    /// Exchange phases in A, in B, and in both.
    pub phases_in_a: usize,
    pub phases_in_b: usize,
    /// Every phase that changed or that one build lacks (before `--top`).
    pub changed_phases: usize,
    /// The changed phases, largest absolute cycle delta first (then by key).
    pub phases: Vec<PhaseDiff>,
}

impl ReportDiff {
    /// Keeps the first `count` phase lines (`changed_phases` still counts all).
    pub fn keep_phases(&mut self, count: usize) {
        self.phases.truncate(count);
    }
}

/// The phases of both builds that changed, sorted by absolute cycle delta.
fn phase_diffs(a: &[PhaseView], b: &[PhaseView]) -> Vec<PhaseDiff> {
    let by_key = |phases: &'_ [PhaseView]| -> BTreeMap<String, usize> {
        phases
            .iter()
            .enumerate()
            .map(|(index, phase)| (phase.key.clone(), index))
            .collect()
    };
    let (in_a, in_b) = (by_key(a), by_key(b));
    let keys: BTreeSet<&String> = in_a.keys().chain(in_b.keys()).collect();
    let mut diffs: Vec<PhaseDiff> = keys
        .into_iter()
        .filter_map(|key| {
            let side_a = in_a.get(key).map(|&index| &a[index]);
            let side_b = in_b.get(key).map(|&index| &b[index]);
            phase_diff(key, side_a, side_b)
        })
        .collect();
    diffs.sort_by(|left, right| {
        Reverse(left.cycle_delta.unsigned_abs())
            .cmp(&Reverse(right.cycle_delta.unsigned_abs()))
            .then_with(|| left.key.cmp(&right.key))
    });
    diffs
}

/// Compares build A with build B.
pub fn compare(a: &ReportView, b: &ReportView) -> ReportDiff {
    let phases = phase_diffs(&a.back.phases, &b.back.phases);
    ReportDiff {
        a: Identity::of(a),
        b: Identity::of(b),
        totals: Totals::of(&a.back, &b.back),
        phases_in_a: a.back.phases.len(),
        phases_in_b: b.back.phases.len(),
        changed_phases: phases.len(),
        phases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(key: &str, executions: u32, horizon: u32, policy: &str) -> PhaseView {
        PhaseView {
            key: key.to_string(),
            executions,
            policy: policy.parse().expect("a policy"),
            policy_source: PolicySource::Default,
            chosen: policy.parse().expect("a policy"),
            horizon,
            max_row_bytes: 1_000,
            total_row_bytes: 10_000,
            patch_words: 0,
            candidates: Vec::new(),
        }
    }

    fn back(total_cycles: u64, phases: Vec<PhaseView>) -> BackView {
        BackView {
            headline: Headline {
                estimate: crate::estimate::Estimate {
                    total_cycles,
                    milliseconds: total_cycles as f64 / 1.5e6,
                    compute_cycles: 600,
                    exchange_cycles: 300,
                    sync_cycles: 100,
                    patch_cycles: 0,
                    barriers: 10,
                    compute_steps: 20,
                },
                exchange_table_bytes_per_tile_max: 4_096,
                peak_sram_bytes_per_tile: 500_000,
                peak_sram_tile: 0,
                element_conflicts: 0,
                fetch_conflicts: 0,
                same_allocation_elements: 0,
                repeat_patch_words: 0,
                sharing_patch_words: 0,
            },
            phases,
        }
    }

    fn report(back: BackView) -> ReportView {
        ReportView {
            name: "tiny".to_string(),
            model: "custom".to_string(),
            tiles: 16,
            layers: 2,
            batch: 1,
            back,
        }
    }

    fn compared(a: BackView, b: BackView) -> ReportDiff {
        compare(&report(a), &report(b))
    }

    fn keys(diff: &ReportDiff) -> Vec<&str> {
        diff.phases.iter().map(|phase| phase.key.as_str()).collect()
    }

    #[test]
    fn equal_reports_have_no_phase_lines_and_zero_deltas() {
        let phases = vec![phase("a#0", 2, 100, "latency")];
        let diff = compared(back(1_000, phases.clone()), back(1_000, phases));
        assert!(diff.phases.is_empty());
        assert_eq!(diff.changed_phases, 0);
        assert_eq!(diff.totals.total_cycles.delta, 0);
        assert_eq!(diff.totals.total_cycles.percent, Some(0.0));
        assert_eq!(diff.totals.milliseconds.delta, 0.0);
    }

    #[test]
    fn totals_deltas_are_b_minus_a_with_percentages() {
        let mut b = back(750, Vec::new());
        b.headline.estimate.compute_cycles = 900;
        b.headline.estimate.barriers = 0;
        b.headline.repeat_patch_words = 12;
        let diff = compared(back(1_000, Vec::new()), b);
        let totals = &diff.totals;
        assert_eq!(
            totals.total_cycles,
            Change {
                a: 1_000,
                b: 750,
                delta: -250,
                percent: Some(-25.0)
            }
        );
        assert_eq!(totals.compute_cycles.delta, 300);
        assert_eq!(totals.compute_cycles.percent, Some(50.0));
        assert_eq!(totals.barriers.delta, -10);
        assert_eq!(totals.barriers.percent, Some(-100.0));
        // From zero: a delta but no percentage.
        assert_eq!(totals.repeat_patch_words.delta, 12);
        assert_eq!(totals.repeat_patch_words.percent, None);
        let milliseconds = totals.milliseconds;
        assert!((milliseconds.delta - (-250.0 / 1.5e6)).abs() < 1e-15);
        assert!((milliseconds.percent.expect("a is not 0") + 25.0).abs() < 1e-9);
        assert_eq!(totals.counts()[0].0, "total_cycles");
    }

    #[test]
    fn a_changed_horizon_is_listed_with_its_cycle_delta() {
        let a = back(1_000, vec![phase("x#0", 3, 100, "B1024")]);
        let b = back(1_000, vec![phase("x#0", 3, 80, "B1024")]);
        let diff = compared(a, b);
        assert_eq!(diff.phases.len(), 1);
        let line = &diff.phases[0];
        assert_eq!(line.key, "x#0");
        assert_eq!(line.presence, Presence::Both);
        assert_eq!(line.changes, vec![Aspect::Horizon]);
        assert_eq!(line.cycle_delta, -60);
        assert_eq!(line.a.as_ref().map(|side| side.cycles), Some(300));
        assert_eq!(line.b.as_ref().map(|side| side.cycles), Some(240));
    }

    #[test]
    fn a_changed_policy_is_listed_even_at_an_equal_horizon() {
        let mut overridden = phase("x#0", 1, 100, "latency");
        overridden.policy_source = PolicySource::Override;
        let diff = compared(
            back(1_000, vec![phase("x#0", 1, 100, "B1024")]),
            back(1_000, vec![overridden]),
        );
        assert_eq!(diff.phases.len(), 1);
        assert_eq!(diff.phases[0].changes, vec![Aspect::Policy, Aspect::Chosen]);
        assert_eq!(diff.phases[0].cycle_delta, 0);
    }

    #[test]
    fn auto_winner_pairing_is_the_chosen_label() {
        let mut a = phase("x#0", 1, 100, "auto");
        a.chosen = SchedulePolicy::Balanced { words: 64 };
        let mut b = a.clone();
        a.candidates = vec![CandidateView {
            policy: SchedulePolicy::Balanced { words: 64 },
            pairing: "none".to_string(),
            chosen: true,
        }];
        b.candidates = vec![CandidateView {
            policy: SchedulePolicy::Balanced { words: 64 },
            pairing: "selected".to_string(),
            chosen: true,
        }];
        let diff = compared(back(1, vec![a]), back(1, vec![b]));
        assert_eq!(diff.phases[0].changes, vec![Aspect::Chosen]);
        let chosen = |side: &Option<PhaseSide>| side.as_ref().map(|side| side.chosen.clone());
        assert_eq!(chosen(&diff.phases[0].a).as_deref(), Some("B64/none"));
        assert_eq!(chosen(&diff.phases[0].b).as_deref(), Some("B64/selected"));
    }

    #[test]
    fn rows_and_patch_words_are_changes() {
        let mut b = phase("x#0", 1, 100, "latency");
        b.total_row_bytes = 12_000;
        b.patch_words = 7;
        let diff = compared(
            back(1, vec![phase("x#0", 1, 100, "latency")]),
            back(1, vec![b]),
        );
        assert_eq!(
            diff.phases[0].changes,
            vec![Aspect::Rows, Aspect::PatchWords]
        );
    }

    #[test]
    fn a_phase_only_in_b_counts_all_its_cycles() {
        let shared = phase("x#0", 1, 100, "latency");
        let diff = compared(
            back(1, vec![shared.clone()]),
            back(1, vec![shared, phase("y#0", 4, 50, "latency")]),
        );
        assert_eq!(diff.phases_in_a, 1);
        assert_eq!(diff.phases_in_b, 2);
        assert_eq!(diff.phases.len(), 1);
        let line = &diff.phases[0];
        assert_eq!(line.key, "y#0");
        assert_eq!(line.presence, Presence::OnlyInB);
        assert!(line.changes.is_empty());
        assert_eq!(line.cycle_delta, 200);
        assert!(line.a.is_none());
        assert_eq!(line.b.as_ref().map(|side| side.horizon), Some(50));
    }

    #[test]
    fn phases_sort_by_absolute_cycle_delta_then_key() {
        let a = back(
            1,
            vec![
                phase("small#0", 1, 100, "latency"),
                phase("large#0", 10, 100, "latency"),
                phase("gone#0", 2, 100, "latency"),
                phase("tie#0", 1, 100, "latency"),
            ],
        );
        let b = back(
            1,
            vec![
                phase("small#0", 1, 90, "latency"),   // -10
                phase("large#0", 10, 150, "latency"), // +500
                phase("tie#0", 1, 100, "B1024"),      // 0
                phase("new#0", 1, 200, "latency"),    // +200
            ],
        );
        let mut diff = compared(a, b);
        // gone#0: -200, ties with new#0 (+200) and sorts by key.
        assert_eq!(
            keys(&diff),
            vec!["large#0", "gone#0", "new#0", "small#0", "tie#0"]
        );
        let deltas: Vec<i64> = diff.phases.iter().map(|line| line.cycle_delta).collect();
        assert_eq!(deltas, vec![500, -200, 200, -10, 0]);
        diff.keep_phases(2);
        assert_eq!(keys(&diff), vec!["large#0", "gone#0"]);
        assert_eq!(diff.changed_phases, 5);
    }

    #[test]
    fn a_report_text_parses_and_a_foreign_one_does_not() {
        let text = r#"{"schema_version":3,"name":"t","model":"custom","tiles":16,"layers":2,"batch":1,
            "ops":[],"back":{"total_cycles":10,"milliseconds":0.1,"compute_cycles":5,
            "exchange_cycles":3,"sync_cycles":2,"patch_cycles":0,"barriers":1,
            "exchange_table_bytes_per_tile_max":8,"peak_sram_bytes_per_tile":9,
            "peak_sram_tile":3,"element_conflicts":0,"fetch_conflicts":0,
            "repeat_patch_words":0,"sharing_patch_words":0,
            "phases":[{"key":"x#0","executions":2,"policy":"latency","policy_source":"Default",
            "chosen":"latency","horizon":4,"max_row_bytes":1,"total_row_bytes":2,
            "patch_words":0,"candidates":[]}]}}"#;
        let view = ReportView::parse(text).expect("a report");
        assert_eq!(view.back.phases[0].cycles(), 8);
        assert_eq!(view.back.phases[0].policy_source, PolicySource::Default);
        assert!(matches!(
            ReportView::parse(r#"{"name":"t"}"#),
            Err(ReportViewError::NotAReport(_))
        ));
        let no_back = r#"{"schema_version":3,"name":"t","model":"m","tiles":1,"layers":0,"batch":1,"back":null}"#;
        assert!(matches!(
            ReportView::parse(no_back),
            Err(ReportViewError::NoBackHalf)
        ));
        let twice = text.replace(
            r#""phases":[{"#,
            r#""phases":[{"key":"x#0","executions":1,"policy":"latency","policy_source":"Override","chosen":"latency","horizon":1,"max_row_bytes":1,"total_row_bytes":1,"patch_words":0},{"#,
        );
        assert!(matches!(
            ReportView::parse(&twice),
            Err(ReportViewError::RepeatedPhase(key)) if key == "x#0"
        ));
        // A report of another layout (or from before versions) is refused by name.
        for old in [
            text.replace(r#""schema_version":3,"#, ""),
            text.replace(r#""schema_version":3"#, r#""schema_version":2"#),
        ] {
            let error = ReportView::parse(&old).expect_err("another schema");
            assert!(
                error.to_string().contains("this superstep reads schema 3"),
                "{error}"
            );
        }
    }

    #[test]
    fn signed_difference_saturates() {
        assert_eq!(signed_difference(5, 3), -2);
        assert_eq!(signed_difference(0, u64::MAX), i64::MAX);
        assert_eq!(signed_difference(u64::MAX, 0), i64::MIN);
    }
}
