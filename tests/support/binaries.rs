//! Locating the binaries under test.
//!
//! `cargo test` builds a package's binaries only for that package's own tests, so this
//! crate finds `idemd` and `idemctl` in the target directory it was built into and builds
//! them (same profile) when they are missing.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

static BUILD: Mutex<()> = Mutex::new(());

/// Path of the `idemctl` binary.
pub fn idemctl() -> PathBuf {
    binary("idemctl")
}

/// Path of a workspace binary (`idemd`, `idemctl`), built on first use if needed.
pub fn binary(name: &str) -> PathBuf {
    let path = profile_dir().join(name);
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "--bin", name])
            .status()
            .expect("run cargo build");
        assert!(
            status.success(),
            "cargo build --release --bin {name} failed"
        );
    }
    assert!(path.exists(), "{} not found", path.display());
    path
}

/// The profile directory: test executables live in `<profile>/deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    deps.parent().expect("profile directory").to_path_buf()
}
