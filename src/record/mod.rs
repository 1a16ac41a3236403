//! Per-phase records of a build (what `superstep snapshot` writes and the
//! project's snapshot tests pin): one text file per exchange phase, one per
//! compute step and one for the program, each made only of figures local to
//! it, so that a change of one phase is a change of that phase's file (and
//! of the program file, which holds the aggregates).
//!
//! It reads a built session through its facade (phases, placement, row
//! table, profile, estimate), never a query, and writes nothing: the
//! folder (`folder`) and the command (`crate::cli::snapshot`) do that.
//! Not to be confused with `crate::snapshot`, the seed system's exchange
//! capture format.

mod compute;
mod exchange;
pub mod folder;
mod identity;
mod program;
pub mod sheet;
mod stages;

pub use identity::{
    Detail, FULL_DETAIL_LIMIT, FileKind, Identity, Record, RecordError, RecordFile, file_stem,
};
pub use stages::Stage;

use crate::build_file::BuildQuery;
use crate::session::{Session, StepKind};

/// The record of a built session (`Session::build` has run).
pub fn record(
    session: &Session,
    query: &BuildQuery,
    detail: Detail,
) -> Result<Record, RecordError> {
    let identity = Identity::of(query, detail);
    let header = identity.header();
    let profile = session.profile()?;
    let phases = session.phases();
    if detail == Detail::Full {
        let mut events = 0u64;
        for phase in &phases {
            let problem = phase
                .problem()
                .map_err(|error| RecordError::Inconsistent(error.to_string()))?;
            events += (problem.pieces() + problem.receives()) as u64;
        }
        if events > FULL_DETAIL_LIMIT {
            return Err(RecordError::TooLarge {
                events,
                limit: FULL_DETAIL_LIMIT,
            });
        }
    }
    let shared = exchange::Shared::of(session)?;
    let by_index: Vec<Option<&crate::estimate::profile::ProfileEntry>> = {
        let mut entries = vec![None; phases.len()];
        for entry in &profile.entries {
            if entry.kind == StepKind::Exchange
                && let Some(slot) = entries.get_mut(entry.index)
            {
                *slot = Some(entry);
            }
        }
        entries
    };
    let exchange_texts: Vec<Result<String, RecordError>> = session.map_phases(|phase| {
        let entry = by_index.get(phase.index).copied().flatten();
        exchange::text(&phase, entry, &shared, detail).map(|sheet| sheet.finish(&header))
    });
    let mut files = vec![RecordFile {
        path: "program.txt".to_string(),
        kind: FileKind::Program,
        key: "program".to_string(),
        text: program::text(session, query, &profile, &shared)?.finish(&header),
    }];
    for (phase, text) in phases.iter().zip(exchange_texts) {
        files.push(RecordFile {
            path: format!("exchange/{}.txt", file_stem(phase.key())),
            kind: FileKind::Exchange,
            key: phase.key().to_string(),
            text: text?,
        });
    }
    for (key, sheet) in compute::sheets(session, &profile, detail)? {
        files.push(RecordFile {
            path: format!("compute/{}.txt", file_stem(&key)),
            kind: FileKind::Compute,
            key,
            text: sheet.finish(&header),
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for file in &files {
        // Case-insensitive file systems (macOS, Windows) fold names.
        if !seen.insert(file.path.to_lowercase()) {
            return Err(RecordError::Inconsistent(format!(
                "two steps of the build map to the file name {} (keys differ only in case)",
                file.path
            )));
        }
    }
    Ok(Record { identity, files })
}
