//! The `idem-faultfs` binary as a nemesis calls it: `ctl` on a mount, `bitflip` on a file.

use crate::common;

use std::process::Command;

use common::Fixture;

/// Runs the binary; returns (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_idem-faultfs"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn bitflip_flips_and_prints_each_bit() {
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("000012.sst");
    let original = vec![0u8; 1000];
    std::fs::write(&file, &original).unwrap();
    let path = file.to_str().unwrap();
    let (ok, out, err) = run(&["bitflip", path, "--count", "3", "--seed", "9"]);
    assert!(ok, "{err}");
    let damaged = std::fs::read(&file).unwrap();
    let mut flipped = Vec::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[..2], [path, "offset"], "{line}");
        let (offset, bit): (usize, u8) = (words[2].parse().unwrap(), words[4].parse().unwrap());
        assert_eq!(damaged[offset] & (1 << bit), 1 << bit, "{line}");
        flipped.push((offset, bit));
    }
    assert_eq!(flipped.len(), 3);
    let bits: u32 = damaged.iter().map(|b| b.count_ones()).sum();
    assert_eq!(bits, 3, "exactly the printed bits changed");
    let (ok, _, err) = run(&["bitflip", path, "--count", "9000"]);
    assert!(!ok && err.contains("9000 bits asked"), "{err}");
}

#[test]
fn ctl_sends_commands_and_prints_the_report() {
    let Some(fx) = Fixture::new() else { return };
    let mnt = fx.mnt().to_str().unwrap();
    let (ok, out, err) = run(&["ctl", mnt, "fail-fsync", "on"]);
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l == "fail-fsync on"), "{out}");
    let (ok, out, _) = run(&["ctl", mnt]);
    assert!(ok && out.contains("fail-fsync on"), "{out}");
    let (ok, _, err) = run(&["ctl", mnt, "fail-write", "full"]);
    assert!(!ok && err.contains("unknown control command"), "{err}");
    assert!(fx.control("clear-cache").contains("clears 1"));
}
