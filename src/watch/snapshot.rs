//! `watch --snapshot DIR`: after each successful build the snapshot folder
//! (`crate::record`) is brought up to date, and the files that changed are
//! named with what changed in each. A folder of another build, compiler or
//! detail, or a damaged file, is left as it is with a warning (replace it
//! with `superstep snapshot --accept`).

use std::io::{self, Write};
use std::path::PathBuf;

use crate::build_file::BuildQuery;
use crate::record::folder::{self, change_line};
use crate::record::{Detail, record};
use crate::session::Session;

/// Where watch keeps a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotOptions {
    pub dir: PathBuf,
    pub detail: Detail,
}

/// Changed figures shown per file.
const ITEMS: usize = 4;

/// Brings the snapshot folder to the session's build and reports on `out`.
pub fn update(
    session: &Session,
    query: &BuildQuery,
    options: &SnapshotOptions,
    out: &mut impl Write,
) -> io::Result<()> {
    let shown = options.dir.display();
    let made = match record(session, query, options.detail) {
        Ok(made) => made,
        Err(error) => return writeln!(out, "warning: snapshot {shown} not updated: {error}"),
    };
    let stored = match folder::read(&options.dir) {
        Ok(stored) => stored,
        Err(error) => return writeln!(out, "warning: snapshot not updated: {error}"),
    };
    let comparison = folder::compare(&made, &stored);
    if let Some(mismatch) = &comparison.mismatch {
        return writeln!(
            out,
            "warning: snapshot {shown} not updated: {mismatch} (replace it with `superstep snapshot --accept`)"
        );
    }
    if let Some((path, why)) = comparison.damaged.first() {
        return writeln!(
            out,
            "warning: snapshot {shown} not updated: {path}: {why} (rewrite it with `superstep snapshot --accept`)"
        );
    }
    if comparison.is_equal() {
        return writeln!(out, "snapshot {shown}: no file changed");
    }
    let fresh = stored.files.is_empty();
    if let Err(error) = folder::apply(&options.dir, &made, &comparison) {
        return writeln!(out, "warning: snapshot {shown} not updated: {error}");
    }
    if fresh {
        return writeln!(out, "snapshot {shown}: wrote {} files", made.files.len());
    }
    writeln!(
        out,
        "snapshot {shown}: {} changed, {} added, {} removed",
        comparison.changed.len(),
        comparison.added.len(),
        comparison.removed.len()
    )?;
    for change in &comparison.changed {
        writeln!(out, "  {} ({})", change.path, change_line(change, ITEMS))?;
    }
    for (path, _, _) in &comparison.added {
        writeln!(out, "  {path} (added)")?;
    }
    for (path, _) in &comparison.removed {
        writeln!(out, "  {path} (removed)")?;
    }
    Ok(())
}
