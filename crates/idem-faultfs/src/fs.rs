//! The FUSE filesystem: a passthrough to a backing directory whose file data goes through
//! the volatile layer, plus the control file.
//!
//! Why a passthrough: the program under test (RocksDB, idem's snapshot files) must run
//! unchanged, so every call behaves as on a local disk except durability. Data writes and
//! size changes stay in [`Volatile`] until an fsync of the file; namespace operations
//! (create, mkdir, rename, unlink, rmdir, symlink) are applied to the backing directory at
//! once, and are durable when they return unless the strict mode records them in a
//! [`Journal`] until their directory is fsynced (see docs/guarantees.md). Every file is opened with `FOPEN_DIRECT_IO` and attributes and
//! names are not cached by the kernel, so no kernel page cache can keep showing data after a
//! `clear-cache`. File locks are left to the kernel (fuser does not negotiate
//! `FUSE_POSIX_LOCKS`/`FUSE_FLOCK_LOCKS`), which enforces them on the mount locally.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use rustix::fs::OFlags;

use crate::faults::{Command, Report, Stats, Switches, WriteFault};
use crate::inodes::{Inodes, CONTROL, ROOT};
use crate::namespace::{Journal, TRASH};
use crate::volatile::{read_full_at, Volatile};
use crate::CONTROL_FILE;

/// The root's inode number as FUSE types it.
const ROOT_INO: INodeNo = INodeNo(ROOT);

/// Attributes and entries are not cached by the kernel: sizes change under it on a clear.
const TTL: Duration = Duration::ZERO;

/// `fallocate` mode bit: allocate without changing the size.
const FALLOC_FL_KEEP_SIZE: i32 = 1;

/// Open files and how many handles each inode has.
#[derive(Default)]
struct Handles {
    /// The backing file of each handle (read-write when opened for writing).
    files: HashMap<u64, Arc<File>>,
    /// Open handles per inode.
    open: HashMap<u64, u32>,
    /// The next file handle (0 is the control file's and directories').
    next: u64,
}

/// The filesystem.
pub(crate) struct FaultFs {
    /// The backing directory.
    root: PathBuf,
    /// Whether a successful fsync also fdatasyncs the backing file.
    sync_backing: bool,
    /// Inode numbers.
    inodes: Mutex<Inodes>,
    /// Open files.
    handles: Mutex<Handles>,
    /// Namespace operations not yet made durable, in strict mode.
    names: Option<Mutex<Journal>>,
    /// The volatile layer of every file written or truncated since the mount or last clear.
    cache: Mutex<HashMap<u64, Arc<Mutex<Volatile>>>>,
    /// The faults in force.
    switches: Switches,
    /// Counters for the report.
    stats: Stats,
}

impl FaultFs {
    /// A filesystem over `root`; with `strict_names`, namespace operations need a directory
    /// fsync to survive a power loss.
    pub(crate) fn new(root: PathBuf, sync_backing: bool, strict_names: bool) -> io::Result<Self> {
        let names = if strict_names {
            Some(Mutex::new(Journal::new(&root)?))
        } else {
            None
        };
        Ok(FaultFs {
            root,
            sync_backing,
            names,
            inodes: Mutex::new(Inodes::new()),
            handles: Mutex::new(Handles {
                next: 1,
                ..Handles::default()
            }),
            cache: Mutex::new(HashMap::new()),
            switches: Switches::default(),
            stats: Stats::default(),
        })
    }

    /// Whether `name` in `parent` is one of the filesystem's own (control file, trash).
    fn reserved(parent: INodeNo, name: &OsStr) -> bool {
        parent.0 == ROOT && (name == CONTROL_FILE || name == TRASH)
    }

    /// Records a creation at `rel` (strict mode).
    fn record_created(&self, rel: &Path) {
        if let Some(names) = &self.names {
            names.lock().unwrap().created(rel);
        }
    }

    /// The relative backing path of `ino`.
    fn rel(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        let inodes = self.inodes.lock().unwrap();
        inodes.path(ino.0).map(Path::to_owned).ok_or(Errno::ENOENT)
    }

    /// The relative path of `name` in directory `parent`.
    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.rel(parent)?.join(name))
    }

    /// The absolute backing path of a relative one.
    fn abs(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    /// The open file behind `fh`.
    fn handle(&self, fh: FileHandle) -> Result<Arc<File>, Errno> {
        let handles = self.handles.lock().unwrap();
        handles.files.get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    /// Registers an open file and returns its handle.
    fn register(&self, ino: u64, file: File) -> FileHandle {
        let mut handles = self.handles.lock().unwrap();
        let fh = handles.next;
        handles.next += 1;
        handles.files.insert(fh, Arc::new(file));
        *handles.open.entry(ino).or_default() += 1;
        FileHandle(fh)
    }

    /// The volatile layer of `ino`, if it has one.
    fn cached(&self, ino: u64) -> Option<Arc<Mutex<Volatile>>> {
        self.cache.lock().unwrap().get(&ino).cloned()
    }

    /// The volatile layer of `ino`, created over the file `open` gives if there is none.
    fn volatile(
        &self,
        ino: u64,
        open: impl FnOnce() -> Result<Arc<File>, Errno>,
    ) -> Result<Arc<Mutex<Volatile>>, Errno> {
        if let Some(existing) = self.cached(ino) {
            return Ok(existing);
        }
        let layer = Arc::new(Mutex::new(Volatile::new(open()?)?));
        let mut cache = self.cache.lock().unwrap();
        Ok(cache.entry(ino).or_insert(layer).clone())
    }

    /// The volatile layer of `ino`, opening the backing file read-write by path if needed.
    fn volatile_by_path(
        &self,
        ino: INodeNo,
        fh: Option<FileHandle>,
    ) -> Result<Arc<Mutex<Volatile>>, Errno> {
        self.volatile(ino.0, || {
            if let Some(fh) = fh {
                if let Ok(file) = self.handle(fh) {
                    return Ok(file);
                }
            }
            let path = self.abs(&self.rel(ino)?);
            let file = OpenOptions::new().read(true).write(true).open(path)?;
            Ok(Arc::new(file))
        })
    }

    /// The error a write answers with while a write fault is on (counted).
    fn write_fault(&self) -> Option<Errno> {
        let errno = match self.switches.fail_write() {
            WriteFault::Off => return None,
            WriteFault::Enospc => Errno::ENOSPC,
            WriteFault::Eio => Errno::EIO,
        };
        Stats::bump(&self.stats.failed_writes);
        Some(errno)
    }

    /// Whether fsync fails now (counted).
    fn fsync_fault(&self) -> bool {
        let failing = self.switches.fail_fsync();
        if failing {
            Stats::bump(&self.stats.failed_fsyncs);
        }
        failing
    }

    /// Attributes of `ino` from backing metadata, with the size the volatile layer shows.
    fn attr(&self, ino: u64, md: &Metadata) -> FileAttr {
        let size = self
            .cached(ino)
            .map_or(md.len(), |layer| layer.lock().unwrap().size());
        attr_of(ino, md, size)
    }

    /// Attributes of the file at relative path `rel`, numbering it if new.
    fn attr_at(&self, rel: &Path) -> Result<FileAttr, Errno> {
        let md = fs::symlink_metadata(self.abs(rel))?;
        let ino = self.inodes.lock().unwrap().number(rel);
        Ok(self.attr(ino, &md))
    }

    /// An inode lost its path: its volatile layer goes once no handle has it open.
    fn forget_if_closed(&self, ino: Option<u64>) {
        let Some(ino) = ino else { return };
        let open = self.handles.lock().unwrap().open.get(&ino).copied();
        if open.unwrap_or(0) == 0 {
            self.cache.lock().unwrap().remove(&ino);
        }
    }

    /// `clear-cache`: every unsynced write (and, in strict mode, every namespace operation
    /// no directory fsync made durable) is dropped.
    fn clear_cache(&self) -> io::Result<()> {
        if let Some(names) = &self.names {
            let undone = names.lock().unwrap().undo()?;
            self.inodes.lock().unwrap().forget_paths();
            tracing::info!(undone, "namespace operations undone");
        }
        let dropped: HashMap<_, _> = std::mem::take(&mut *self.cache.lock().unwrap());
        let bytes: u64 = dropped
            .values()
            .map(|layer| layer.lock().unwrap().cached_bytes())
            .sum();
        Stats::bump(&self.stats.clears);
        self.stats
            .dropped_bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(files = dropped.len(), bytes, "cache cleared");
        Ok(())
    }

    /// `checkpoint`: every file's unsynced writes are persisted.
    fn checkpoint(&self) -> io::Result<()> {
        let layers: Vec<_> = self.cache.lock().unwrap().values().cloned().collect();
        for layer in layers {
            layer.lock().unwrap().flush(self.sync_backing)?;
        }
        if let Some(names) = &self.names {
            names.lock().unwrap().commit_all()?;
        }
        Ok(())
    }

    /// Runs the commands in `text` (one per line); nothing runs if one does not parse.
    fn run_commands(&self, text: &[u8]) -> Result<(), Errno> {
        let text = std::str::from_utf8(text).map_err(|_| Errno::EINVAL)?;
        let commands = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(str::parse::<Command>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                tracing::warn!("{e}");
                Errno::EINVAL
            })?;
        for command in commands {
            tracing::info!(?command, "control command");
            match command {
                Command::ClearCache => self.clear_cache()?,
                Command::Checkpoint => self.checkpoint()?,
                Command::FailFsync(on) => self.switches.set_fail_fsync(on),
                Command::FailWrite(fault) => self.switches.set_fail_write(fault),
            }
        }
        Ok(())
    }

    /// The control file's contents: the report.
    fn report(&self) -> String {
        let layers: Vec<_> = self.cache.lock().unwrap().values().cloned().collect();
        let (mut dirty_files, mut dirty_bytes) = (0, 0);
        for layer in layers {
            let layer = layer.lock().unwrap();
            if !layer.is_clean().unwrap_or(false) {
                dirty_files += 1;
                dirty_bytes += layer.cached_bytes();
            }
        }
        let unsynced_names = self.names.as_ref().map(|n| n.lock().unwrap().pending());
        Report {
            switches: &self.switches,
            stats: &self.stats,
            dirty_files,
            dirty_bytes,
            unsynced_names,
        }
        .to_string()
    }

    /// The control file's attributes.
    fn control_attr(&self) -> FileAttr {
        let now = SystemTime::now();
        FileAttr {
            ino: INodeNo(CONTROL),
            size: self.report().len() as u64,
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind: FileType::RegularFile,
            perm: 0o600,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Applies the non-size parts of a `setattr` to the backing path.
    fn set_meta(
        path: &Path,
        mode: Option<u32>,
        owner: (Option<u32>, Option<u32>),
        times: (Option<TimeOrNow>, Option<TimeOrNow>),
    ) -> io::Result<()> {
        if let Some(mode) = mode {
            fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o7777))?;
        }
        if owner.0.is_some() || owner.1.is_some() {
            std::os::unix::fs::lchown(path, owner.0, owner.1)?;
        }
        let resolve = |t: TimeOrNow| match t {
            TimeOrNow::SpecificTime(t) => t,
            TimeOrNow::Now => SystemTime::now(),
        };
        if times.0.is_some() || times.1.is_some() {
            let mut file_times = fs::FileTimes::new();
            if let Some(atime) = times.0 {
                file_times = file_times.set_accessed(resolve(atime));
            }
            if let Some(mtime) = times.1 {
                file_times = file_times.set_modified(resolve(mtime));
            }
            File::open(path)?.set_times(file_times)?;
        }
        Ok(())
    }

    /// Lists a directory for `readdir`: `.`, `..` and the backing entries, sorted, with
    /// their inode numbers; the control file is not listed.
    fn list(&self, ino: INodeNo) -> Result<Vec<(u64, FileType, std::ffi::OsString)>, Errno> {
        let rel = self.rel(ino)?;
        let mut names: Vec<_> = fs::read_dir(self.abs(&rel))?
            .filter_map(Result::ok)
            .filter(|e| {
                !(rel.as_os_str().is_empty() && FaultFs::reserved(ROOT_INO, &e.file_name()))
            })
            .map(|e| {
                let kind = e
                    .file_type()
                    .ok()
                    .and_then(FileType::from_std)
                    .unwrap_or(FileType::RegularFile);
                (e.file_name(), kind)
            })
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let mut inodes = self.inodes.lock().unwrap();
        let parent = rel.parent().map_or(ROOT, |p| inodes.number(p));
        let mut out = vec![
            (ino.0, FileType::Directory, ".".into()),
            (parent, FileType::Directory, "..".into()),
        ];
        for (name, kind) in names {
            out.push((inodes.number(&rel.join(&name)), kind, name));
        }
        Ok(out)
    }

    /// Creates a regular file (for `create` and `mknod`) and returns it with its path.
    fn create_file(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        exclusive: bool,
    ) -> Result<(PathBuf, File), Errno> {
        let rel = self.child(parent, name)?;
        let existed = fs::symlink_metadata(self.abs(&rel)).is_ok();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .create_new(exclusive)
            .mode(mode & 0o7777)
            .open(self.abs(&rel))?;
        if exclusive || !existed {
            self.record_created(&rel);
        }
        Ok((rel, file))
    }
}

/// FUSE attributes from backing metadata.
fn attr_of(ino: u64, md: &Metadata, size: u64) -> FileAttr {
    let time = |secs: i64, nanos: i64| {
        UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32)
    };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: md.blocks().max(size.div_ceil(512)),
        atime: time(md.atime(), md.atime_nsec()),
        mtime: time(md.mtime(), md.mtime_nsec()),
        ctime: time(md.ctime(), md.ctime_nsec()),
        crtime: time(md.ctime(), md.ctime_nsec()),
        kind: FileType::from_std(md.file_type()).unwrap_or(FileType::RegularFile),
        perm: (md.mode() & 0o7777) as u16,
        nlink: md.nlink() as u32,
        uid: md.uid(),
        gid: md.gid(),
        rdev: md.rdev() as u32,
        blksize: md.blksize() as u32,
        flags: 0,
    }
}

/// Whether open `flags` ask for writing.
fn writable(flags: i32) -> bool {
    let flags = OFlags::from_bits_retain(flags as u32);
    flags.contains(OFlags::WRONLY) || flags.contains(OFlags::RDWR)
}

/// Whether open `flags` include `O_TRUNC`.
fn truncating(flags: i32) -> bool {
    OFlags::from_bits_retain(flags as u32).contains(OFlags::TRUNC)
}

/// Unwraps a result into a reply: `$ok` on success, the error otherwise.
macro_rules! answer {
    ($reply:expr, $result:expr, $ok:expr) => {
        match $result {
            Ok(value) => $ok(value),
            Err(errno) => $reply.error(errno),
        }
    };
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT && name == CONTROL_FILE {
            return reply.entry(&TTL, &self.control_attr(), Generation(0));
        }
        if FaultFs::reserved(parent, name) {
            return reply.error(Errno::ENOENT);
        }
        let result = self.child(parent, name).and_then(|rel| self.attr_at(&rel));
        answer!(reply, result, |attr| reply.entry(
            &TTL,
            &attr,
            Generation(0)
        ))
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino.0 == CONTROL {
            return reply.attr(&TTL, &self.control_attr());
        }
        let by_path = self
            .rel(ino)
            .and_then(|rel| Ok(fs::symlink_metadata(self.abs(&rel))?));
        let md = match (by_path, fh) {
            (Ok(md), _) => Ok(md),
            (Err(_), Some(fh)) => self.handle(fh).and_then(|file| Ok(file.metadata()?)),
            (Err(e), None) => Err(e),
        };
        answer!(reply, md, |md| reply.attr(&TTL, &self.attr(ino.0, &md)))
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if ino.0 == CONTROL {
            return reply.attr(&TTL, &self.control_attr());
        }
        let result = (|| {
            if let Some(size) = size {
                let layer = self.volatile_by_path(ino, fh)?;
                let mut layer = layer.lock().unwrap();
                if size > layer.size() {
                    if let Some(errno) = self.write_fault() {
                        return Err(errno);
                    }
                }
                layer.truncate(size);
            }
            let path = self.abs(&self.rel(ino)?);
            FaultFs::set_meta(&path, mode, (uid, gid), (atime, mtime))?;
            Ok(fs::symlink_metadata(&path)?)
        })();
        answer!(reply, result, |md| reply.attr(&TTL, &self.attr(ino.0, &md)))
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let result = self
            .rel(ino)
            .and_then(|rel| Ok(fs::read_link(self.abs(&rel))?));
        answer!(reply, result, |target: PathBuf| reply
            .data(target.as_os_str().as_encoded_bytes()))
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        const S_IFMT: u32 = 0o170_000;
        const S_IFREG: u32 = 0o100_000;
        if mode & S_IFMT != S_IFREG {
            return reply.error(Errno::EPERM);
        }
        let result = self
            .create_file(parent, name, mode & !umask, true)
            .and_then(|(rel, _file)| self.attr_at(&rel));
        answer!(reply, result, |attr| reply.entry(
            &TTL,
            &attr,
            Generation(0)
        ))
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let result = self.child(parent, name).and_then(|rel| {
            fs::DirBuilder::new()
                .mode(mode & !umask & 0o7777)
                .create(self.abs(&rel))?;
            self.record_created(&rel);
            self.attr_at(&rel)
        });
        answer!(reply, result, |attr| reply.entry(
            &TTL,
            &attr,
            Generation(0)
        ))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self.child(parent, name).and_then(|rel| {
            match &self.names {
                Some(names) => names.lock().unwrap().remove(&rel, false)?,
                None => fs::remove_file(self.abs(&rel))?,
            }
            let ino = self.inodes.lock().unwrap().detach(&rel);
            self.forget_if_closed(ino);
            Ok(())
        });
        answer!(reply, result, |()| reply.ok())
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self.child(parent, name).and_then(|rel| {
            match &self.names {
                Some(names) => names.lock().unwrap().remove(&rel, true)?,
                None => fs::remove_dir(self.abs(&rel))?,
            }
            self.inodes.lock().unwrap().detach(&rel);
            Ok(())
        });
        answer!(reply, result, |()| reply.ok())
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let result = self.child(parent, link_name).and_then(|rel| {
            std::os::unix::fs::symlink(target, self.abs(&rel))?;
            self.record_created(&rel);
            self.attr_at(&rel)
        });
        answer!(reply, result, |attr| reply.entry(
            &TTL,
            &attr,
            Generation(0)
        ))
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let result = (|| {
            let (from, to) = (self.child(parent, name)?, self.child(newparent, newname)?);
            let flags = rustix::fs::RenameFlags::from_bits(flags.bits()).ok_or(Errno::EINVAL)?;
            if flags.contains(rustix::fs::RenameFlags::EXCHANGE) {
                return Err(Errno::EINVAL);
            }
            if FaultFs::reserved(newparent, newname) {
                return Err(Errno::EPERM);
            }
            if let Some(names) = &self.names {
                let noreplace = flags.contains(rustix::fs::RenameFlags::NOREPLACE);
                names.lock().unwrap().rename(&from, &to, noreplace)?;
            } else {
                let cwd = rustix::fs::CWD;
                rustix::fs::renameat_with(cwd, self.abs(&from), cwd, self.abs(&to), flags)
                    .map_err(|e| Errno::from_i32(e.raw_os_error()))?;
            }
            let replaced = self.inodes.lock().unwrap().rename(&from, &to);
            self.forget_if_closed(replaced);
            Ok(())
        })();
        answer!(reply, result, |()| reply.ok())
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == CONTROL {
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
        }
        let result = (|| {
            let path = self.abs(&self.rel(ino)?);
            let write = writable(flags.0);
            let file = OpenOptions::new().read(true).write(write).open(path)?;
            let fh = self.register(ino.0, file);
            if write && truncating(flags.0) {
                self.volatile_by_path(ino, Some(fh))?
                    .lock()
                    .unwrap()
                    .truncate(0);
            }
            Ok(fh)
        })();
        answer!(reply, result, |fh| reply
            .opened(fh, FopenFlags::FOPEN_DIRECT_IO))
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == CONTROL {
            let report = self.report().into_bytes();
            let start = (offset as usize).min(report.len());
            let end = (start + size as usize).min(report.len());
            return reply.data(&report[start..end]);
        }
        let result = match self.cached(ino.0) {
            Some(layer) => layer
                .lock()
                .unwrap()
                .read(offset, u64::from(size))
                .map_err(Errno::from),
            None => self.handle(fh).and_then(|file| {
                let mut buf = vec![0; size as usize];
                let n = read_full_at(&file, &mut buf, offset)?;
                buf.truncate(n);
                Ok(buf)
            }),
        };
        answer!(reply, result, |data: Vec<u8>| reply.data(&data))
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 == CONTROL {
            return answer!(reply, self.run_commands(data), |()| reply
                .written(data.len() as u32));
        }
        if let Some(errno) = self.write_fault() {
            return reply.error(errno);
        }
        let result = self
            .volatile(ino.0, || self.handle(fh))
            .and_then(|layer| Ok(layer.lock().unwrap().write(offset, data)?));
        answer!(reply, result, |()| reply.written(data.len() as u32))
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let last = {
            let mut handles = self.handles.lock().unwrap();
            if handles.files.remove(&fh.0).is_some() {
                let count = handles.open.entry(ino.0).or_default();
                *count = count.saturating_sub(1);
                if *count == 0 {
                    handles.open.remove(&ino.0);
                    true
                } else {
                    false
                }
            } else {
                false
            }
        };
        if last && self.inodes.lock().unwrap().path(ino.0).is_none() {
            self.cache.lock().unwrap().remove(&ino.0);
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if ino.0 == CONTROL {
            return reply.ok();
        }
        let layer = self.cached(ino.0);
        if self.fsync_fault() {
            if let Some(layer) = layer {
                layer.lock().unwrap().lose();
            }
            return reply.error(Errno::EIO);
        }
        let result = match layer {
            Some(layer) => layer.lock().unwrap().flush(self.sync_backing),
            None if self.sync_backing => self.handle(fh).map_or(Ok(()), |file| file.sync_data()),
            None => Ok(()),
        };
        if result.is_ok() {
            Stats::bump(&self.stats.fsyncs);
        }
        answer!(reply, result.map_err(Errno::from), |()| reply.ok())
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.list(ino) {
            Ok(entries) => entries,
            Err(errno) => return reply.error(errno),
        };
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if self.fsync_fault() {
            return reply.error(Errno::EIO);
        }
        let result = self.rel(ino).and_then(|rel| {
            if self.sync_backing {
                File::open(self.abs(&rel))?.sync_all()?;
            }
            if let Some(names) = &self.names {
                names.lock().unwrap().commit(&rel)?;
            }
            Ok(())
        });
        if result.is_ok() {
            Stats::bump(&self.stats.dir_fsyncs);
        }
        answer!(reply, result, |()| reply.ok())
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match rustix::fs::statvfs(&self.root) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error())),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        if ino.0 == CONTROL {
            return reply.ok();
        }
        let result = self
            .rel(ino)
            .and_then(|rel| Ok(fs::symlink_metadata(self.abs(&rel)).map(drop)?));
        answer!(reply, result, |()| reply.ok())
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let result = (|| {
            let exclusive = OFlags::from_bits_retain(flags as u32).contains(OFlags::EXCL);
            let (rel, file) = self.create_file(parent, name, mode & !umask, exclusive)?;
            let had_data = file.metadata()?.len() > 0;
            let ino = self.inodes.lock().unwrap().number(&rel);
            let fh = self.register(ino, file);
            if had_data && truncating(flags) {
                self.volatile_by_path(INodeNo(ino), Some(fh))?
                    .lock()
                    .unwrap()
                    .truncate(0);
            }
            Ok((self.attr_at(&rel)?, fh))
        })();
        answer!(reply, result, |(attr, fh)| reply.created(
            &TTL,
            &attr,
            Generation(0),
            fh,
            FopenFlags::FOPEN_DIRECT_IO
        ))
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 && mode != FALLOC_FL_KEEP_SIZE {
            return reply.error(Errno::EOPNOTSUPP);
        }
        if let Some(errno) = self.write_fault() {
            return reply.error(errno);
        }
        if mode == FALLOC_FL_KEEP_SIZE {
            return reply.ok();
        }
        let result = self.volatile_by_path(ino, Some(fh)).map(|layer| {
            layer.lock().unwrap().extend(offset.saturating_add(length));
        });
        answer!(reply, result, |()| reply.ok())
    }
}
