//! File-system notifications for one build file, as `WatchEvent`s.
//!
//! Watches the file's parent folder, not the file: editors save by writing a
//! temporary file and renaming it over the target, which replaces the inode
//! a file watch would follow, so a file watch misses every save after the
//! first. Events are filtered to the build file's name; reads (open and
//! close-without-write, including our own) are ignored. Debouncing and
//! content comparison are the `Watcher`'s job. A build file that is a
//! symbolic link is followed: its target's folder is watched too (for the
//! target's name), so edits made through the link or to its target are
//! seen, as well as the link itself being replaced.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};

use super::watcher::WatchEvent;

/// A live folder watch; dropping it stops the notifications.
pub struct FolderWatch {
    _watcher: RecommendedWatcher,
    _target_watcher: Option<RecommendedWatcher>,
    folder: PathBuf,
    target: Option<PathBuf>,
}

impl FolderWatch {
    /// The folder being watched.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// The file a symbolic-link build file points to, when it is one (its
    /// folder is watched too).
    pub fn target(&self) -> Option<&Path> {
        self.target.as_deref()
    }
}

/// A watcher of `folder` that sends `Touched` for events naming `file_name`.
fn folder_watcher(
    folder: &Path,
    file_name: OsString,
    events: Sender<WatchEvent>,
) -> notify::Result<RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |result: notify::Result<Event>| {
        let touched = match &result {
            Ok(event) => touches(event, &file_name),
            // A lost or failed notification: look at the file to be safe.
            Err(_) => true,
        };
        if touched {
            // The loop may have ended; then nobody needs the event.
            let _ = events.send(WatchEvent::Touched);
        }
    })?;
    watcher.watch(folder, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

/// Whether `event` may have changed the file named `file_name`.
pub fn touches(event: &Event, file_name: &OsString) -> bool {
    let reads_only = matches!(
        event.kind,
        EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write)
    );
    !reads_only
        && event
            .paths
            .iter()
            .any(|path| path.file_name() == Some(file_name.as_os_str()))
}

/// Starts watching `file`'s folder; sends `WatchEvent::Touched` to `events`
/// whenever an event names the file.
pub fn watch_file(file: &Path, events: Sender<WatchEvent>) -> notify::Result<FolderWatch> {
    let file_name = file
        .file_name()
        .map(OsString::from)
        .ok_or_else(|| notify::Error::path_not_found().add_path(file.to_path_buf()))?;
    let folder = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let watcher = folder_watcher(&folder, file_name, events.clone())?;
    let is_link =
        std::fs::symlink_metadata(file).is_ok_and(|metadata| metadata.file_type().is_symlink());
    let target = is_link.then(|| std::fs::canonicalize(file).ok()).flatten();
    let target_watcher = match &target {
        Some(target) => match (target.parent(), target.file_name()) {
            (Some(parent), Some(name)) => Some(folder_watcher(parent, name.to_owned(), events)?),
            _ => None,
        },
        None => None,
    };
    Ok(FolderWatch {
        _watcher: watcher,
        _target_watcher: target_watcher,
        folder,
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, ModifyKind, RenameMode};

    fn event(kind: EventKind, paths: &[&str]) -> Event {
        let mut event = Event::new(kind);
        for path in paths {
            event = event.add_path(PathBuf::from(path));
        }
        event
    }

    #[test]
    fn an_edit_through_a_symbolic_link_is_seen() {
        let directory =
            std::env::temp_dir().join(format!("superstep-watch-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        let (real, linked) = (directory.join("real"), directory.join("linked"));
        std::fs::create_dir_all(&real).expect("folder");
        std::fs::create_dir_all(&linked).expect("folder");
        let target = real.join("build.toml");
        std::fs::write(&target, "name = \"a\"\n").expect("target");
        let link = linked.join("query.toml");
        std::os::unix::fs::symlink(&target, &link).expect("link");
        let (sender, receiver) = std::sync::mpsc::channel();
        let watch = watch_file(&link, sender).expect("watches");
        assert_eq!(
            watch.target(),
            Some(std::fs::canonicalize(&target).expect("canonical").as_path())
        );
        // The edit lands on the target, in another folder than the link.
        std::fs::write(&target, "name = \"b\"\n").expect("edit");
        let seen = receiver.recv_timeout(std::time::Duration::from_secs(5));
        assert!(
            matches!(seen, Ok(WatchEvent::Touched)),
            "an edit of the link's target is seen: {seen:?}"
        );
        drop(watch);
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn keeps_writes_and_renames_onto_the_file_and_drops_reads() {
        let name = OsString::from("vit.toml");
        let rename_over = event(
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            &["/q/.vit.toml.swp", "/q/vit.toml"],
        );
        assert!(touches(&rename_over, &name));
        assert!(touches(
            &event(EventKind::Create(CreateKind::File), &["/q/vit.toml"]),
            &name
        ));
        let closed_after_write = EventKind::Access(AccessKind::Close(AccessMode::Write));
        assert!(touches(&event(closed_after_write, &["/q/vit.toml"]), &name));
        let opened = EventKind::Access(AccessKind::Open(AccessMode::Any));
        assert!(!touches(&event(opened, &["/q/vit.toml"]), &name));
        let other_file = EventKind::Modify(ModifyKind::Any);
        assert!(!touches(&event(other_file, &["/q/other.toml"]), &name));
    }
}
