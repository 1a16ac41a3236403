//! The pipeline stages a record's sections belong to, and a record's view
//! of one stage (its sections from every file): what the project's
//! snapshot tests pin, one reviewable text per stage.

use super::identity::Record;
use super::sheet;

/// The stages of the pipeline a record's sections belong to (the project's
/// snapshot tests pin one view per stage).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Layouts,
    Expansion,
    PhaseGroups,
    Schedules,
    Rows,
    Patches,
    Placement,
    Estimate,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::Layouts,
        Stage::Expansion,
        Stage::PhaseGroups,
        Stage::Schedules,
        Stage::Rows,
        Stage::Patches,
        Stage::Placement,
        Stage::Estimate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Layouts => "layouts",
            Stage::Expansion => "expansion",
            Stage::PhaseGroups => "phase_groups",
            Stage::Schedules => "schedules",
            Stage::Rows => "rows",
            Stage::Patches => "patches",
            Stage::Placement => "placement",
            Stage::Estimate => "estimate",
        }
    }

    /// The record sections that hold this stage's output.
    pub fn sections(self) -> &'static [&'static str] {
        match self {
            Stage::Layouts => &["build", "ops"],
            Stage::Expansion => &["transfers", "compute"],
            Stage::PhaseGroups => &["steps", "phase"],
            Stage::Schedules => &["schedule", "events"],
            Stage::Rows => &["rows", "row words", "row table"],
            Stage::Patches => &["patches", "patch lists"],
            Stage::Placement => &["placement"],
            Stage::Estimate => &["estimate", "shares"],
        }
    }
}

impl Record {
    /// This stage's sections of every file, each file's under its title:
    /// one text per stage for review.
    pub fn stage_view(&self, stage: Stage) -> String {
        let wanted = stage.sections();
        let mut view = String::new();
        for file in &self.files {
            let mut keep = false;
            let mut title_written = false;
            for line in file.text.lines().skip(2) {
                if let Some(name) = line
                    .strip_prefix('[')
                    .and_then(|rest| rest.strip_suffix(']'))
                {
                    keep = wanted.contains(&name);
                    if keep && !title_written {
                        view.push_str(&format!("== {} {}\n", file.kind.name(), file.key));
                        title_written = true;
                    }
                    if keep {
                        view.push_str(line);
                        view.push('\n');
                    }
                    continue;
                }
                if keep && !line.is_empty() && !line.starts_with(sheet::END_PREFIX) {
                    view.push_str(line);
                    view.push('\n');
                }
            }
        }
        view
    }
}
