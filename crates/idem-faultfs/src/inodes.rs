//! Inode numbers of the mount and the backing paths they stand for.
//!
//! The kernel names files by inode number; the filesystem works on paths under the backing
//! directory. Numbers are handed out on first sight of a path and follow the file through
//! renames, so the volatile layer (kept by inode) stays with the file. An unlinked or
//! replaced inode keeps its number, without a path, while handles to it are open. Numbers
//! are never reused; forgetting them is not worth the bookkeeping for a test filesystem.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The root directory's inode number (FUSE's fixed root).
pub(crate) const ROOT: u64 = 1;
/// The control file's inode number.
pub(crate) const CONTROL: u64 = 2;
/// The first number handed to a backing file.
const FIRST: u64 = 3;

/// The table of inode numbers.
pub(crate) struct Inodes {
    /// Relative path (from the backing root) of each number that still has one.
    paths: HashMap<u64, PathBuf>,
    /// The reverse map.
    numbers: HashMap<PathBuf, u64>,
    /// The next number to hand out.
    next: u64,
}

impl Inodes {
    /// A table knowing only the root.
    pub(crate) fn new() -> Self {
        let mut inodes = Inodes {
            paths: HashMap::new(),
            numbers: HashMap::new(),
            next: FIRST,
        };
        inodes.paths.insert(ROOT, PathBuf::new());
        inodes.numbers.insert(PathBuf::new(), ROOT);
        inodes
    }

    /// The relative path of `ino`, if it still has one.
    pub(crate) fn path(&self, ino: u64) -> Option<&Path> {
        self.paths.get(&ino).map(PathBuf::as_path)
    }

    /// The number of `path`, handed out now if it has none.
    pub(crate) fn number(&mut self, path: &Path) -> u64 {
        if let Some(&ino) = self.numbers.get(path) {
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.paths.insert(ino, path.to_owned());
        self.numbers.insert(path.to_owned(), ino);
        ino
    }

    /// Forgets every path (after a power loss moved names around); numbers handed out
    /// before are never handed out again.
    pub(crate) fn forget_paths(&mut self) {
        self.paths.clear();
        self.numbers.clear();
        self.paths.insert(ROOT, PathBuf::new());
        self.numbers.insert(PathBuf::new(), ROOT);
    }

    /// `path` was removed: its number (if any) loses its path. Returns the number.
    pub(crate) fn detach(&mut self, path: &Path) -> Option<u64> {
        let ino = self.numbers.remove(path)?;
        self.paths.remove(&ino);
        Some(ino)
    }

    /// `from` was renamed to `to`: a number at `to` is detached, and `from`'s number (with
    /// every path below it, for a directory) moves. Returns the detached number.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path) -> Option<u64> {
        let replaced = self.detach(to);
        let moved: Vec<(PathBuf, u64)> = self
            .numbers
            .iter()
            .filter(|(path, _)| path.starts_with(from))
            .map(|(path, &ino)| (path.clone(), ino))
            .collect();
        for (old, ino) in moved {
            // Not `to.join("")` for `from` itself: that would add a trailing slash.
            let below = old.strip_prefix(from).expect("filtered on the prefix");
            let new = if below.as_os_str().is_empty() {
                to.to_owned()
            } else {
                to.join(below)
            };
            self.numbers.remove(&old);
            self.numbers.insert(new.clone(), ino);
            self.paths.insert(ino, new);
        }
        replaced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_renames_of_files_and_directories() {
        let mut t = Inodes::new();
        let dir = t.number(Path::new("d"));
        let file = t.number(Path::new("d/f"));
        let other = t.number(Path::new("e"));
        assert_eq!(t.number(Path::new("d/f")), file);
        assert_eq!(t.rename(Path::new("d"), Path::new("e")), Some(other));
        assert_eq!(t.path(dir).unwrap().as_os_str(), "e", "no trailing slash");
        assert_eq!(t.path(file), Some(Path::new("e/f")));
        assert_eq!(t.path(other), None);
        assert_eq!(t.detach(Path::new("e/f")), Some(file));
        assert_ne!(t.number(Path::new("e/f")), file);
        assert_eq!(t.path(ROOT), Some(Path::new("")));
    }

    #[test]
    fn a_sibling_with_a_common_name_prefix_does_not_move() {
        let mut t = Inodes::new();
        let sibling = t.number(Path::new("ab"));
        t.number(Path::new("a"));
        t.rename(Path::new("a"), Path::new("c"));
        assert_eq!(t.path(sibling), Some(Path::new("ab")));
    }
}
