//! Unsynced namespace operations, for the strict mode (`Options::lose_unsynced_names`).
//!
//! POSIX makes a new, renamed or removed name durable only once its directory is fsynced;
//! a real disk usually persists it sooner (ext4 commits its journal every few seconds and
//! on any fsync), so a program that forgets a directory fsync rarely loses anything in
//! practice, but may. In strict mode every create, mkdir, symlink, rename and unlink/rmdir
//! is applied to the backing directory at once (so the tree is always real) and recorded
//! here with what undoes it; removed and replaced files are kept in a trash directory
//! instead of being deleted. An fsync of a directory commits the operations whose new name
//! is in it (and empties their trash); a power loss undoes the rest, newest first. Undoing
//! works on paths, best effort: an operation whose path is gone by then is skipped.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The trash directory's name, at the root of the backing directory (hidden from the mount).
pub(crate) const TRASH: &str = ".idem-faultfs-trash";

/// One recorded operation (paths relative to the backing root, trash paths absolute).
enum Op {
    /// A file, directory or symlink was created.
    Created { path: PathBuf },
    /// `from` was renamed to `to`, moving what was at `to` (if anything) to the trash.
    Renamed {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<PathBuf>,
    },
    /// A file or empty directory was removed: it waits in the trash.
    Removed { path: PathBuf, trash: PathBuf },
}

impl Op {
    /// The directory whose fsync makes the operation durable.
    fn dir(&self) -> &Path {
        let path = match self {
            Op::Created { path } | Op::Removed { path, .. } => path,
            Op::Renamed { to, .. } => to,
        };
        path.parent().unwrap_or(Path::new(""))
    }

    /// The trash this operation holds, if any.
    fn trash(&self) -> Option<&Path> {
        match self {
            Op::Renamed { replaced, .. } => replaced.as_deref(),
            Op::Removed { trash, .. } => Some(trash),
            Op::Created { .. } => None,
        }
    }
}

/// The operations not yet made durable by a directory fsync.
pub(crate) struct Journal {
    /// The backing root.
    root: PathBuf,
    /// Pending operations, oldest first.
    ops: Vec<Op>,
    /// The next trash entry's number.
    next: u64,
}

impl Journal {
    /// A journal over `root`, with an empty trash (what an earlier mount left is durable).
    pub(crate) fn new(root: &Path) -> io::Result<Self> {
        let trash = root.join(TRASH);
        if trash.exists() {
            fs::remove_dir_all(&trash)?;
        }
        fs::create_dir(&trash)?;
        Ok(Journal {
            root: root.to_owned(),
            ops: Vec::new(),
            next: 0,
        })
    }

    /// Operations waiting for a directory fsync.
    pub(crate) fn pending(&self) -> usize {
        self.ops.len()
    }

    /// Records that `rel` was created.
    pub(crate) fn created(&mut self, rel: &Path) {
        self.ops.push(Op::Created {
            path: rel.to_owned(),
        });
    }

    /// Removes the file (or, with `dir`, the empty directory) at `rel` into the trash.
    pub(crate) fn remove(&mut self, rel: &Path, dir: bool) -> io::Result<()> {
        let abs = self.root.join(rel);
        let md = fs::symlink_metadata(&abs)?;
        match (dir, md.is_dir()) {
            (false, true) => return Err(errno(rustix::io::Errno::ISDIR)),
            (true, false) => return Err(errno(rustix::io::Errno::NOTDIR)),
            (true, true) if fs::read_dir(&abs)?.next().is_some() => {
                return Err(errno(rustix::io::Errno::NOTEMPTY))
            }
            _ => {}
        }
        let trash = self.trash_slot();
        fs::rename(&abs, &trash)?;
        self.ops.push(Op::Removed {
            path: rel.to_owned(),
            trash,
        });
        Ok(())
    }

    /// Renames `from` to `to`, keeping what `to` named in the trash.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path, noreplace: bool) -> io::Result<()> {
        let (src, dst) = (self.root.join(from), self.root.join(to));
        let source = fs::symlink_metadata(&src)?;
        let replaced = match fs::symlink_metadata(&dst) {
            Ok(_) if from == to => return Ok(()),
            Ok(_) if noreplace => return Err(errno(rustix::io::Errno::EXIST)),
            Ok(target) => {
                check_replace(source.is_dir(), target.is_dir(), &dst)?;
                let trash = self.trash_slot();
                fs::rename(&dst, &trash)?;
                Some(trash)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if let Err(e) = fs::rename(&src, &dst) {
            if let Some(trash) = &replaced {
                fs::rename(trash, &dst)?;
            }
            return Err(e);
        }
        self.ops.push(Op::Renamed {
            from: from.to_owned(),
            to: to.to_owned(),
            replaced,
        });
        Ok(())
    }

    /// A directory fsync of `dir`: the operations naming something in it are durable.
    pub(crate) fn commit(&mut self, dir: &Path) -> io::Result<()> {
        let (durable, pending) = std::mem::take(&mut self.ops)
            .into_iter()
            .partition(|op| op.dir() == dir);
        self.ops = pending;
        empty_trash(durable)
    }

    /// Every operation is durable (`checkpoint`).
    pub(crate) fn commit_all(&mut self) -> io::Result<()> {
        empty_trash(std::mem::take(&mut self.ops))
    }

    /// The power loss: undoes every pending operation, newest first; returns how many.
    pub(crate) fn undo(&mut self) -> io::Result<usize> {
        let ops = std::mem::take(&mut self.ops);
        let count = ops.len();
        for op in ops.into_iter().rev() {
            self.undo_one(op)?;
        }
        Ok(count)
    }

    /// Undoes one operation if its paths are still there.
    fn undo_one(&self, op: Op) -> io::Result<()> {
        let abs = |rel: &Path| self.root.join(rel);
        match op {
            Op::Created { path } => match fs::symlink_metadata(abs(&path)) {
                Ok(md) if md.is_dir() => fs::remove_dir_all(abs(&path)),
                Ok(_) => fs::remove_file(abs(&path)),
                Err(_) => Ok(()),
            },
            Op::Renamed { from, to, replaced } => {
                if fs::symlink_metadata(abs(&to)).is_ok()
                    && fs::symlink_metadata(abs(&from)).is_err()
                {
                    fs::rename(abs(&to), abs(&from))?;
                }
                match replaced {
                    Some(trash) if fs::symlink_metadata(abs(&to)).is_err() => {
                        fs::rename(trash, abs(&to))
                    }
                    _ => Ok(()),
                }
            }
            Op::Removed { path, trash } => {
                if fs::symlink_metadata(abs(&path)).is_err() {
                    fs::rename(trash, abs(&path))?;
                }
                Ok(())
            }
        }
    }

    /// A fresh path in the trash.
    fn trash_slot(&mut self) -> PathBuf {
        self.next += 1;
        self.root.join(TRASH).join(self.next.to_string())
    }
}

/// Deletes the trash the durable operations held.
fn empty_trash(durable: Vec<Op>) -> io::Result<()> {
    for op in &durable {
        if let Some(trash) = op.trash() {
            match fs::symlink_metadata(trash) {
                Ok(md) if md.is_dir() => fs::remove_dir_all(trash)?,
                Ok(_) => fs::remove_file(trash)?,
                Err(_) => {}
            }
        }
    }
    Ok(())
}

/// The checks `rename(2)` makes before replacing `dst` (the replaced entry is moved away
/// first here, so the system call can no longer make them).
fn check_replace(source_dir: bool, target_dir: bool, dst: &Path) -> io::Result<()> {
    match (source_dir, target_dir) {
        (true, false) => Err(errno(rustix::io::Errno::NOTDIR)),
        (false, true) => Err(errno(rustix::io::Errno::ISDIR)),
        (true, true) if fs::read_dir(dst)?.next().is_some() => {
            Err(errno(rustix::io::Errno::NOTEMPTY))
        }
        _ => Ok(()),
    }
}

/// An `io::Error` from an errno.
fn errno(errno: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(errno.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_operations_are_undone_and_synced_ones_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("d")).unwrap();
        fs::write(root.join("d/CURRENT"), "old").unwrap();
        fs::write(root.join("d/gone"), "kept").unwrap();
        let mut j = Journal::new(root).unwrap();
        fs::write(root.join("d/tmp"), "new").unwrap();
        j.created(Path::new("d/tmp"));
        j.rename(Path::new("d/tmp"), Path::new("d/CURRENT"), false)
            .unwrap();
        j.remove(Path::new("d/gone"), false).unwrap();
        fs::create_dir(root.join("e")).unwrap();
        j.created(Path::new("e"));
        assert_eq!(j.pending(), 4);
        j.commit(Path::new("")).unwrap();
        assert_eq!(j.pending(), 3, "mkdir e is durable");
        assert_eq!(j.undo().unwrap(), 3);
        assert_eq!(fs::read_to_string(root.join("d/CURRENT")).unwrap(), "old");
        assert_eq!(fs::read_to_string(root.join("d/gone")).unwrap(), "kept");
        assert!(!root.join("d/tmp").exists());
        assert!(root.join("e").is_dir());
    }

    #[test]
    fn a_committed_rename_is_kept_and_its_trash_emptied() {
        let dir = tempfile::TempDir::new().unwrap();
        let root = dir.path();
        fs::write(root.join("a"), "A").unwrap();
        fs::write(root.join("b"), "B").unwrap();
        let mut j = Journal::new(root).unwrap();
        j.rename(Path::new("a"), Path::new("b"), false).unwrap();
        j.commit(Path::new("")).unwrap();
        assert_eq!(j.undo().unwrap(), 0);
        assert_eq!(fs::read_to_string(root.join("b")).unwrap(), "A");
        assert_eq!(fs::read_dir(root.join(TRASH)).unwrap().count(), 0);
        let err = j.rename(Path::new("b"), Path::new("b2"), false);
        assert!(err.is_ok());
        fs::create_dir(root.join("full")).unwrap();
        fs::write(root.join("full/x"), "").unwrap();
        fs::create_dir(root.join("empty")).unwrap();
        let err = j.rename(Path::new("empty"), Path::new("full"), false);
        assert_eq!(
            err.unwrap_err().raw_os_error(),
            Some(rustix::io::Errno::NOTEMPTY.raw_os_error())
        );
        assert!(
            root.join("full/x").exists(),
            "a refused rename changes nothing"
        );
        assert_eq!(
            j.remove(Path::new("full"), true)
                .unwrap_err()
                .raw_os_error(),
            Some(rustix::io::Errno::NOTEMPTY.raw_os_error())
        );
    }
}
