#!/usr/bin/env bash
# The release build of idem (`make release`, `make release-check`, the container image and
# `make bench`): the same sources as the development build, with RocksDB compiled from the
# binding's bundled sources (RocksDB 7.9.2 and Snappy, both with NDEBUG, linked statically)
# instead of Debian's shared librocksdb 7.8.3.
#
# Why two builds: Debian's library keeps its assertions (about 6,400 `__assert_fail` call
# sites, and its test SyncPoints run in production code). Without them a node spends 0.83x
# the CPU per claim+complete at 64 clients and serves 1.16x the claims (docs/performance.md,
# "Issue #21, item 0"). Compiling RocksDB's C++ takes about 15 minutes on two cores, so the
# development build, the tests and CI keep linking Debian's library (.cargo/config.toml),
# and this build has a target directory of its own: switching one directory between the two
# would rebuild RocksDB each time.
#
# Both builds read and write the same files: Snappy is compiled in (the default compression
# of both), and `make release-check` runs every test against this build, then a rolling
# switch of a live cluster from the development build to this one and a rollback of one node.
#
#   scripts/release.sh build [BIN...]   build BINs (default idemd, idemctl, idem-bench)
#   scripts/release.sh check            every test of the workspace on this build, then the
#                                       switch from the development build (tests/upgrade.rs)
#   scripts/release.sh target-dir       print the target directory (binaries in <it>/release)
#
# Environment: IDEM_RELEASE_TARGET_DIR [/var/cache/idem-target-release when /var/cache is
# writable, else ./target-release]; CARGO_TARGET_DIR: the development build's, used by
# `check` (as the Makefile sets it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ -z "${IDEM_RELEASE_TARGET_DIR:-}" ]]; then
    if [[ -w /var/cache ]]; then
        IDEM_RELEASE_TARGET_DIR=/var/cache/idem-target-release
    else
        IDEM_RELEASE_TARGET_DIR="$ROOT/target-release"
    fi
fi
DEV_TARGET_DIR="${CARGO_TARGET_DIR:-$([[ -w /var/cache ]] && echo /var/cache/idem-target || echo "$ROOT/target")}"
if [[ "$(realpath -m "$IDEM_RELEASE_TARGET_DIR")" == "$(realpath -m "$DEV_TARGET_DIR")" ]]; then
    echo "release.sh: the release build needs its own target directory (IDEM_RELEASE_TARGET_DIR)" >&2
    exit 2
fi

# Compile RocksDB and Snappy (these win over the *_LIB_DIR of .cargo/config.toml).
release_cargo() {
    ROCKSDB_COMPILE=1 SNAPPY_COMPILE=1 CARGO_TARGET_DIR="$IDEM_RELEASE_TARGET_DIR" cargo "$@"
}

build() {
    local bins=("$@")
    [[ ${#bins[@]} -gt 0 ]] || bins=(idemd idemctl idem-bench)
    local args=()
    for bin in "${bins[@]}"; do args+=(--bin "$bin"); done
    echo "release.sh: building ${bins[*]} with the bundled RocksDB in $IDEM_RELEASE_TARGET_DIR" >&2
    release_cargo build --release --locked "${args[@]}" >&2
}

check() {
    echo "release.sh: every test on the release build ($IDEM_RELEASE_TARGET_DIR)" >&2
    release_cargo test --release --locked --workspace
    echo "release.sh: building the development idemd ($DEV_TARGET_DIR)" >&2
    # Workspace-wide, tests included: the feature set of `make test`, so after it nothing of
    # the development build is compiled again.
    (CARGO_TARGET_DIR="$DEV_TARGET_DIR" cargo build --release --locked --workspace --bins --tests)
    echo "release.sh: a live cluster switched from the development build to the release build" >&2
    IDEM_PREVIOUS_IDEMD="$DEV_TARGET_DIR/release/idemd" \
        release_cargo test --release --locked --workspace --test upgrade -- --ignored --nocapture
}

case "${1:-build}" in
    build) shift $(($# > 0 ? 1 : 0)); build "$@" ;;
    check) check ;;
    target-dir) echo "$IDEM_RELEASE_TARGET_DIR" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
    *) echo "release.sh: unknown command $1 (build, check, target-dir; --help)" >&2; exit 2 ;;
esac
