//! `[schedule]` and its `[[schedule.override]]` entries: the policy
//! (with a spelling suggestion when it is close to one), the transfer
//! width, `auto`'s row allowance and pruning, and each phase override's
//! key, policy and optional width, once per phase.

use std::ops::Range;

use toml::Spanned;

use super::keys::*;
use super::{
    DEFAULT_POLICY, DEFAULT_PRUNE_BY_BOUNDS, DEFAULT_ROW_ALLOWANCE_BYTES, MAX_ROW_ALLOWANCE_BYTES,
    Resolver, WIDTH_OPTIONS, policy_suggestion, width_names,
};
use crate::build_file::error::{Issue, Origin};
use crate::build_file::fields::PHASE_OVERRIDE_PREFIX;
use crate::build_file::schema::QueryFile;
use crate::build_file::{PhaseOverride, ScheduleSettings};
use crate::schedule::{SchedulePolicy, TransferWidth};

impl Resolver<'_> {
    pub(super) fn policy(
        &self,
        path: &str,
        field: &Spanned<String>,
    ) -> Result<SchedulePolicy, Issue> {
        field
            .get_ref()
            .parse()
            .map_err(|error: crate::build_file::PolicyParseError| {
                let advice = "write \"auto\" (every candidate order, the best per phase), \
                              \"list\", \"matching\", \"latency\", \"S<W>\" (stream) or \"B<W>\" \
                              (balanced) with W wave words in 1..=65536, e.g. \"S256\" or \"B1024\"";
                let help = match policy_suggestion(field.get_ref()) {
                    Some(suggestion) => format!("did you mean \"{suggestion}\"? {advice}"),
                    None => advice.to_string(),
                };
                Issue::new(path, self.origin(path, field), format!("{path}: {error}"))
                    .label("not a schedule policy")
                    .help(help)
            })
    }

    pub(super) fn schedule(&self, file: &QueryFile) -> Result<ScheduleSettings, Issue> {
        let section = &file.schedule;
        let policy = match &section.policy {
            Some(field) => self.policy(SCHEDULE_POLICY, field)?,
            None => DEFAULT_POLICY,
        };
        let width = match &section.width {
            Some(field) => self.choice(SCHEDULE_WIDTH, field, WIDTH_OPTIONS)?,
            None => TransferWidth::Auto,
        };
        let row_allowance = match &section.row_allowance {
            Some(field) => self.unsigned(
                SCHEDULE_ROW_ALLOWANCE,
                field,
                0,
                MAX_ROW_ALLOWANCE_BYTES,
                &format!(
                    "bytes an `auto` candidate's largest row may exceed the smallest \
                     candidate's by, 0..={MAX_ROW_ALLOWANCE_BYTES} (the default is \
                     {DEFAULT_ROW_ALLOWANCE_BYTES})"
                ),
            )?,
            None => DEFAULT_ROW_ALLOWANCE_BYTES,
        };
        let prune_by_bounds = section
            .prune_by_bounds
            .as_ref()
            .map_or(DEFAULT_PRUNE_BY_BOUNDS, |field| *field.get_ref());
        Ok(ScheduleSettings {
            policy,
            width,
            row_allowance,
            prune_by_bounds,
        })
    }

    pub(super) fn phase_overrides(&self, file: &QueryFile) -> Result<Vec<PhaseOverride>, Issue> {
        let mut resolved: Vec<PhaseOverride> = Vec::new();
        let mut first_seen: Vec<(String, String, Origin)> = Vec::new();
        for (index, entry) in file.schedule.overrides.iter().enumerate() {
            let entry_path = format!("schedule.override[{index}]");
            let origin_of = |field_span: Range<usize>| match &entry.set_argument {
                Some(argument) => Origin::Set(argument.clone()),
                None => Origin::File(field_span),
            };
            let Some(phase_field) = &entry.phase else {
                let span = entry.policy.as_ref().map_or(0..0, Spanned::span);
                return Err(Issue::new(
                    format!("{entry_path}.phase"),
                    origin_of(span),
                    format!("{entry_path} has no `phase`"),
                )
                .label("this override names no phase")
                .help("add phase = \"OPERATOR#ORDINAL\", e.g. phase = \"layer.mlp.up#0\""));
            };
            let phase = phase_field.get_ref();
            let phase_origin = origin_of(phase_field.span());
            let well_formed = phase.rsplit_once('#').is_some_and(|(provenance, ordinal)| {
                !provenance.is_empty()
                    && !provenance.chars().any(char::is_whitespace)
                    && !ordinal.is_empty()
                    && ordinal.chars().all(|character| character.is_ascii_digit())
                    && ordinal.parse::<u32>().is_ok()
            });
            if !well_formed {
                return Err(Issue::new(
                    format!("{entry_path}.phase"),
                    phase_origin,
                    format!("{entry_path}.phase = \"{phase}\" is not a phase key"),
                )
                .label("expected OPERATOR#ORDINAL")
                .help(
                    "a phase key is the operator's provenance, '#', and the phase's ordinal \
                     within it, e.g. \"layer.mlp.up#0\" (`superstep phases --kind exchange` lists them)",
                ));
            }
            let Some(policy_field) = &entry.policy else {
                return Err(Issue::new(
                    format!("{entry_path}.policy"),
                    phase_origin,
                    format!("{entry_path} (phase \"{phase}\") has no `policy`"),
                )
                .label("this override names no policy")
                .help("add policy = \"latency\", \"S256\", \"B1024\", ..."));
            };
            let policy = match &entry.set_argument {
                Some(argument) => policy_field.get_ref().parse().map_err(
                    |error: crate::build_file::PolicyParseError| {
                        Issue::new(
                            format!("{PHASE_OVERRIDE_PREFIX}{phase}"),
                            Origin::Set(argument.clone()),
                            error.to_string(),
                        )
                    },
                )?,
                None => self.policy(&format!("{entry_path}.policy"), policy_field)?,
            };
            let width = match &entry.width {
                None => None,
                Some(width_field) => Some(match &entry.set_argument {
                    Some(argument) => {
                        let text = width_field.get_ref().as_str();
                        WIDTH_OPTIONS
                            .iter()
                            .find(|(name, _)| *name == text)
                            .map(|(_, width)| *width)
                            .ok_or_else(|| {
                                Issue::new(
                                    format!("{PHASE_OVERRIDE_PREFIX}{phase}"),
                                    Origin::Set(argument.clone()),
                                    format!(
                                        "`{text}` is not a transfer width; expected one of: {}",
                                        width_names()
                                    ),
                                )
                                .label("not a transfer width")
                                .help(format!(
                                    "write POLICY or POLICY/WIDTH, e.g. \
                                     --set schedule.override.{phase}=S64/paired64"
                                ))
                            })?
                    }
                    None => {
                        self.choice(&format!("{entry_path}.width"), width_field, WIDTH_OPTIONS)?
                    }
                }),
            };
            if let Some((_, first_path, first_origin)) =
                first_seen.iter().find(|(seen, _, _)| seen == phase)
            {
                return Err(Issue::new(
                    format!("{entry_path}.phase"),
                    phase_origin,
                    format!(
                        "{entry_path}.phase = \"{phase}\" overrides the same phase as \
                         {first_path}.phase; each phase may be overridden once"
                    ),
                )
                .label("second override of this phase")
                .related("first override of this phase", first_origin.clone())
                .help("keep one [[schedule.override]] entry per phase"));
            }
            first_seen.push((phase.clone(), entry_path.clone(), phase_origin));
            resolved.push(PhaseOverride {
                phase: phase.clone(),
                policy,
                width,
            });
        }
        Ok(resolved)
    }
}
