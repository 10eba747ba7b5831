#!/usr/bin/env bash
# The rolling-upgrade test (make upgrade-test): a 3-node cluster on the previous release,
# upgraded one node at a time to this tree under load, then one node rolled back and
# forward again; every acknowledged write must survive (tests/upgrade.rs).
#
#   scripts/upgrade-test.sh [COMMIT]     COMMIT: the previous release (default: $UPGRADE_FROM,
#                                        else a61c250, the release deployed before versions)
#
# The previous release is built from git, never from this working tree: `git archive COMMIT`
# is unpacked under $UPGRADE_CACHE/idem-prev-src/<sha> and built with its own target
# directory, $UPGRADE_CACHE/idem-prev-target (never this tree's: two trees in one target
# directory spoil each other's incremental state). Both stay, so a second run of the same
# commit builds nothing. The first build takes ~10 minutes of CPU; it runs at nice 19.
#
# Environment: UPGRADE_FROM, UPGRADE_CACHE (default /var/cache when writable, else
# ./target), CARGO_TARGET_DIR (this tree's, as the Makefile sets it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FROM="${1:-${UPGRADE_FROM:-a61c250}}"
if [[ -z "${UPGRADE_CACHE:-}" ]]; then
    if [[ -w /var/cache ]]; then UPGRADE_CACHE=/var/cache; else UPGRADE_CACHE="$ROOT/target"; fi
fi
if [[ -z "${CARGO_TARGET_DIR:-}" ]]; then
    if [[ -w /var/cache ]]; then CARGO_TARGET_DIR=/var/cache/idem-target; else CARGO_TARGET_DIR="$ROOT/target"; fi
fi
export CARGO_TARGET_DIR

sha="$(git rev-parse --verify "${FROM}^{commit}")" || {
    echo "upgrade-test: $FROM is not a commit of this repository" >&2
    exit 2
}
src="$UPGRADE_CACHE/idem-prev-src/$sha"
prev_target="$UPGRADE_CACHE/idem-prev-target"
if [[ "$(realpath -m "$prev_target")" == "$(realpath -m "$CARGO_TARGET_DIR")" ]]; then
    echo "upgrade-test: the previous release needs its own target directory" >&2
    exit 2
fi

if [[ ! -d "$src" ]]; then
    echo "upgrade-test: unpacking $FROM ($sha) into $src"
    mkdir -p "$(dirname "$src")"
    tmp="$(mktemp -d "$src.XXXXXX")"
    git archive "$sha" | tar -x -C "$tmp"
    mv "$tmp" "$src"
fi
echo "upgrade-test: building the previous release's idemd in $prev_target (nice 19)"
(cd "$src" && CARGO_TARGET_DIR="$prev_target" nice -n 19 cargo build --release --locked --bin idemd)
previous="$prev_target/release/idemd"

echo "upgrade-test: building this tree's idemd"
# Workspace-wide, tests included: the feature set of `make test`, so after it nothing of this
# tree is compiled again.
cargo build --release --workspace --bins --tests
echo "upgrade-test: rolling upgrade from $sha to $(git rev-parse --short HEAD) (plus uncommitted changes, if any)"
IDEM_PREVIOUS_IDEMD="$previous" cargo test --release --workspace --test upgrade -- \
    --ignored --nocapture
