//! The filesystem's semantics on a real mount: what survives `clear-cache`, renames,
//! failing fsyncs and writes, the control file. Skipped (with a message) without /dev/fuse.

use crate::common;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

use common::Fixture;

const EIO: i32 = 5;
const ENOSPC: i32 = 28;

/// Writes `data` to a new file at `path`, fsynced or not.
fn write_file(path: &std::path::Path, data: &[u8], sync: bool) {
    let mut file = File::create(path).unwrap();
    file.write_all(data).unwrap();
    if sync {
        file.sync_all().unwrap();
    }
}

#[test]
fn unsynced_writes_are_lost_on_clear_cache_and_synced_ones_kept() {
    let Some(fx) = Fixture::new() else { return };
    write_file(&fx.path("synced"), b"durable", true);
    write_file(&fx.path("unsynced"), b"volatile", false);
    let datasynced = fx.path("datasynced");
    write_file(&datasynced, b"first", false);
    OpenOptions::new()
        .write(true)
        .open(&datasynced)
        .unwrap()
        .sync_data()
        .unwrap();
    // Visible to readers at once, and not yet in the backing directory.
    assert_eq!(fs::read(fx.path("unsynced")).unwrap(), b"volatile");
    assert_eq!(fs::metadata(fx.path("unsynced")).unwrap().len(), 8);
    assert_eq!(fs::read(fx.backing.join("unsynced")).unwrap(), b"");
    assert_eq!(fs::read(fx.backing.join("synced")).unwrap(), b"durable");
    // Overwrite a synced file without syncing again.
    let file = OpenOptions::new()
        .write(true)
        .open(fx.path("synced"))
        .unwrap();
    file.write_all_at(b"DUR", 0).unwrap();
    file.write_all_at(b" and more", 7).unwrap();
    drop(file);
    assert_eq!(fs::read(fx.path("synced")).unwrap(), b"DURable and more");
    assert!(fx.counter("dirty-files") >= 2);

    fx.control("clear-cache");
    assert_eq!(fs::read(fx.path("synced")).unwrap(), b"durable");
    assert_eq!(fs::read(fx.path("datasynced")).unwrap(), b"first");
    assert_eq!(
        fs::read(fx.path("unsynced")).unwrap(),
        b"",
        "the file was created (namespace operations are durable), its data was not synced"
    );
    assert_eq!(fx.counter("clears"), 1);
    assert!(fx.counter("dropped-bytes") > 0);
    assert_eq!(fx.counter("dirty-files"), 0);
}

#[test]
fn an_open_file_sees_the_clear_and_a_truncate_is_undone() {
    let Some(fx) = Fixture::new() else { return };
    let path = fx.path("log");
    write_file(&path, &[7u8; 10_000], true);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.set_len(100).unwrap();
    file.write_all_at(b"tail", 20_000).unwrap();
    let mut seen = Vec::new();
    file.read_to_end(&mut seen).unwrap();
    let mut expected = vec![7u8; 100];
    expected.resize(20_000, 0);
    expected.extend_from_slice(b"tail");
    assert_eq!(seen, expected, "old bytes past the truncate read as zeros");

    fx.control("clear-cache");
    let mut after = vec![0; 20_000];
    let n = file.read_at(&mut after, 0).unwrap();
    assert_eq!(
        &after[..n],
        &[7u8; 10_000][..],
        "the open handle reads the synced state"
    );
    assert_eq!(file.metadata().unwrap().len(), 10_000);
}

#[test]
fn checkpoint_persists_everything() {
    let Some(fx) = Fixture::new() else { return };
    write_file(&fx.path("a"), b"alpha", false);
    fx.control("checkpoint");
    fx.control("clear-cache");
    assert_eq!(fs::read(fx.path("a")).unwrap(), b"alpha");
}

#[test]
fn rename_moves_the_name_at_once_and_the_data_only_if_synced() {
    let Some(fx) = Fixture::new() else { return };
    fs::create_dir(fx.path("dir")).unwrap();
    write_file(&fx.path("dir/CURRENT"), b"MANIFEST-1\n", true);
    // The safe pattern: write a temporary file, fsync it, rename over, fsync the directory.
    write_file(&fx.path("dir/tmp"), b"MANIFEST-2\n", true);
    fs::rename(fx.path("dir/tmp"), fx.path("dir/CURRENT")).unwrap();
    File::open(fx.path("dir")).unwrap().sync_all().unwrap();
    assert_eq!(fx.counter("dir-fsyncs"), 1);
    // The unsafe one: rename data that was never fsynced.
    write_file(&fx.path("dir/tmp2"), b"unsynced\n", false);
    fs::rename(fx.path("dir/tmp2"), fx.path("dir/OTHER")).unwrap();
    assert_eq!(fs::read(fx.path("dir/OTHER")).unwrap(), b"unsynced\n");
    assert!(!fx.path("dir/tmp2").exists());
    // A renamed file keeps its unsynced data and is synced under its new name.
    write_file(&fx.path("moved"), b"moved data", false);
    fs::rename(fx.path("moved"), fx.path("dir/moved")).unwrap();
    File::open(fx.path("dir/moved"))
        .unwrap()
        .sync_all()
        .unwrap();

    fx.control("clear-cache");
    assert_eq!(fs::read(fx.path("dir/CURRENT")).unwrap(), b"MANIFEST-2\n");
    assert_eq!(
        fs::read(fx.path("dir/OTHER")).unwrap(),
        b"",
        "renamed, but its data was never synced"
    );
    assert_eq!(fs::read(fx.path("dir/moved")).unwrap(), b"moved data");
    let names: Vec<_> = fs::read_dir(fx.path("dir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["CURRENT", "OTHER", "moved"]);
}

#[test]
fn unlinked_open_file_keeps_its_data_until_closed() {
    let Some(fx) = Fixture::new() else { return };
    let path = fx.path("gone");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.write_all(b"still here").unwrap();
    fs::remove_file(&path).unwrap();
    assert!(!path.exists());
    let mut buf = [0; 10];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"still here");
    file.sync_all().unwrap();
    drop(file);
    write_file(&path, b"new", true);
    assert_eq!(fs::read(&path).unwrap(), b"new");
}

#[test]
fn failing_fsync_returns_eio_and_drops_the_data_from_write_back() {
    let Some(fx) = Fixture::new() else { return };
    let path = fx.path("wal");
    write_file(&path, b"synced;", true);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(b"acked?", 7).unwrap();
    assert!(fx.control("fail-fsync on").contains("fail-fsync on"));
    let err = file.sync_data().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(EIO));
    let err = File::open(fx.mnt()).unwrap().sync_all().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(EIO), "directory fsync fails too");
    assert_eq!(fx.counter("failed-fsyncs"), 2);
    assert_eq!(fs::read(&path).unwrap(), b"synced;acked?", "still readable");
    fx.control("fail-fsync off");
    // Like Linux after a writeback error: the retry succeeds, the data is not on disk.
    file.sync_data().unwrap();
    fx.control("clear-cache");
    assert_eq!(fs::read(&path).unwrap(), b"synced;");
}

#[test]
fn failing_writes_return_enospc_or_eio_until_turned_off() {
    let Some(fx) = Fixture::new() else { return };
    let path = fx.path("data");
    write_file(&path, b"before", true);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    fx.control("fail-write enospc");
    let err = file.write_all_at(b"x", 6).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(ENOSPC));
    let err = file.set_len(1 << 20).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(ENOSPC), "growing is writing");
    file.set_len(3).unwrap();
    fx.control("fail-write eio");
    let err = file.write_all_at(b"x", 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(EIO));
    assert_eq!(fx.counter("failed-writes"), 3);
    assert_eq!(fs::read(&path).unwrap(), b"bef");
    fx.control("fail-write off");
    file.write_all_at(b"!", 3).unwrap();
    file.sync_all().unwrap();
    assert_eq!(fs::read(fx.backing.join("data")).unwrap(), b"bef!");
}

#[test]
fn control_file_refuses_unknown_commands_and_stays_hidden() {
    let Some(fx) = Fixture::new() else { return };
    let control = fx.path(idem_faultfs::CONTROL_FILE);
    let err = OpenOptions::new()
        .write(true)
        .open(&control)
        .unwrap()
        .write_all(b"format-disk\n")
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(22), "EINVAL");
    assert!(idem_faultfs::control(fx.mnt(), "fail-fsync maybe").is_err());
    fs::write(&control, "fail-write eio\n").unwrap();
    assert!(fs::read_to_string(&control)
        .unwrap()
        .contains("fail-write eio"));
    write_file(&fx.path("visible"), b"", true);
    let names: Vec<_> = fs::read_dir(fx.mnt())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["visible"]);
    let stat = rustix::fs::statvfs(fx.mnt()).unwrap();
    assert!(stat.f_blocks > 0, "statfs passes through");
}

/// Strict mode: names need a directory fsync. The safe rename pattern survives, a rename,
/// create or unlink in a directory nobody fsynced is undone, data synced under a name that
/// was never made durable is gone with the name.
#[test]
fn strict_mode_undoes_namespace_operations_not_followed_by_a_directory_fsync() {
    let Some(fx) = Fixture::strict() else { return };
    fs::create_dir(fx.path("dir")).unwrap();
    File::open(fx.mnt()).unwrap().sync_all().unwrap();
    write_file(&fx.path("dir/CURRENT"), b"MANIFEST-1\n", true);
    write_file(&fx.path("dir/doomed"), b"bye", true);
    File::open(fx.path("dir")).unwrap().sync_all().unwrap();
    // Durable: write, fsync, rename over, fsync the directory.
    write_file(&fx.path("dir/tmp"), b"MANIFEST-2\n", true);
    fs::rename(fx.path("dir/tmp"), fx.path("dir/CURRENT")).unwrap();
    File::open(fx.path("dir")).unwrap().sync_all().unwrap();
    // Not durable: no directory fsync after these.
    write_file(&fx.path("dir/tmp"), b"MANIFEST-3\n", true);
    fs::rename(fx.path("dir/tmp"), fx.path("dir/CURRENT")).unwrap();
    write_file(&fx.path("dir/new"), b"synced data, unsynced name", true);
    fs::remove_file(fx.path("dir/doomed")).unwrap();
    fs::create_dir(fx.path("other")).unwrap();
    assert_eq!(fs::read(fx.path("dir/CURRENT")).unwrap(), b"MANIFEST-3\n");
    assert_eq!(fx.counter("unsynced-names"), 5);
    let names: Vec<_> = fs::read_dir(fx.mnt())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["dir", "other"], "the trash is hidden");

    fx.control("clear-cache");
    assert_eq!(fs::read(fx.path("dir/CURRENT")).unwrap(), b"MANIFEST-2\n");
    assert_eq!(fs::read(fx.path("dir/doomed")).unwrap(), b"bye");
    assert!(!fx.path("dir/new").exists());
    assert!(!fx.path("dir/tmp").exists());
    assert!(!fx.path("other").exists());
    assert_eq!(fx.counter("unsynced-names"), 0);
}

/// Strict mode keeps `rename(2)`'s refusals.
#[test]
fn strict_mode_rename_refuses_what_rename_refuses() {
    let Some(fx) = Fixture::strict() else { return };
    fs::create_dir(fx.path("full")).unwrap();
    write_file(&fx.path("full/x"), b"", false);
    fs::create_dir(fx.path("empty")).unwrap();
    write_file(&fx.path("file"), b"f", false);
    let code = |r: std::io::Result<()>| r.unwrap_err().raw_os_error();
    assert_eq!(
        code(fs::rename(fx.path("empty"), fx.path("full"))),
        Some(39),
        "ENOTEMPTY"
    );
    assert_eq!(
        code(fs::rename(fx.path("empty"), fx.path("file"))),
        Some(20),
        "ENOTDIR"
    );
    assert_eq!(
        code(fs::rename(fx.path("file"), fx.path("empty"))),
        Some(21),
        "EISDIR"
    );
    assert_eq!(code(fs::remove_dir(fx.path("full"))), Some(39));
    assert_eq!(code(fs::remove_file(fx.path("full"))), Some(21));
    assert!(fx.path("full/x").exists() && fx.path("file").exists());
    fs::rename(fx.path("file"), fx.path("full/x")).unwrap();
    assert_eq!(fs::read(fx.path("full/x")).unwrap(), b"f");
}
