//! The report artifacts of a built session, written the same way by
//! `superstep build` and by `watch` after each successful rebuild:
//! `report.json`, `phases.csv`, `compute.csv` and `report.html` in
//! `outputs.directory/NAME`, each as `[outputs]` asks. The package file and the `--why` record are
//! the commands' own business.

use std::path::{Path, PathBuf};

use super::html::{ReportPage, render};
use super::{BackReport, BuildReport, build_report};
use crate::build_file::BuildQuery;
use crate::expand::expansion::OpExpansion;
use crate::session::{BackendError, BuildOutcome, Session, StageError};
use crate::studies::suggestions::SUGGESTION_CANDIDATES;
use crate::studies::suggestions::Suggestion;

/// An artifact that could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Write(#[from] crate::output_file::OutputFileError),
    #[error("serialising {path}: {source}")]
    Serialise {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// `outputs.directory/NAME`.
pub fn artifacts_directory(query: &BuildQuery) -> PathBuf {
    Path::new(&query.outputs.directory).join(&query.name)
}

/// The report of a session built by `outcome`.
pub fn session_report(
    session: &Session,
    query: &BuildQuery,
    outcome: &BuildOutcome,
) -> Result<BuildReport, ArtifactError> {
    let layouts = session.layouts()?;
    let program = session.low_program()?;
    let expansions = session.op_expansions()?;
    let references: Vec<&OpExpansion> = expansions.iter().map(AsRef::as_ref).collect();
    let mut report = build_report(
        &query.name,
        &query.workload.model.name,
        query.workload.batch,
        session.graph(),
        &layouts,
        &references,
        &program,
        &outcome.summary,
    );
    report.back = outcome.back.as_ref().map(BackReport::from_outcome);
    if let Some(back) = report.back.as_mut() {
        back.number_steps(&*session.profile()?);
    }
    report.activation_calibration = session
        .activation_calibration()
        .map(|calibration| calibration.as_ref().clone());
    Ok(report)
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, ArtifactError> {
    crate::output_file::write_atomically(&path, text.as_bytes())?;
    Ok(path)
}

/// Writes the CSV files, `report.json` and `report.html` (with the
/// session's memory view and `suggestions`, if measured) that `query.outputs` asks for;
/// returns the paths written, in order.
pub fn write_reports(
    session: &Session,
    query: &BuildQuery,
    report: &BuildReport,
    suggestions: Option<&[Suggestion]>,
) -> Result<Vec<PathBuf>, ArtifactError> {
    let directory = artifacts_directory(query);
    let mut written = Vec::new();
    if let Some(back) = &report.back
        && query.outputs.phases_csv
    {
        written.push(write(directory.join("phases.csv"), &back.phases_csv())?);
        written.push(write(directory.join("compute.csv"), &back.compute_csv())?);
    }
    if query.outputs.report {
        let path = directory.join("report.json");
        let mut text =
            serde_json::to_string_pretty(report).map_err(|source| ArtifactError::Serialise {
                path: path.clone(),
                source,
            })?;
        text.push('\n');
        written.push(write(path, &text)?);
    }
    if let Some(back) = &report.back
        && query.outputs.html
    {
        let memory = session.memory_view()?;
        let step_loads = session.step_loads()?;
        let page = render(&ReportPage {
            report,
            back,
            memory: &memory,
            step_loads: &step_loads,
            suggestions,
            suggestion_candidates: SUGGESTION_CANDIDATES,
        });
        written.push(write(directory.join("report.html"), &page)?);
    }
    Ok(written)
}
