#!/usr/bin/env bash
# Builds of idem side by side: is a change to idemd cheaper, on a machine whose speed drifts
# by more than most changes move? Each round starts a fresh 3-node cluster of every build in
# turn (deploy/local/cluster.sh up 3), runs one idem-bench sweep against it and tears it down;
# the order rotates from round to round. `idem-bench compare-builds` then divides each build's
# figures by the base build's of the same round (the first build named is the base) and
# prints, per point, the medians and the per-round ratios with their range.
#
#   scripts/bench/builds.sh base=/var/cache/idem-base new=/var/cache/idem-target
#
# A build is a cargo target directory holding release/idemd and release/idemctl: build the
# commit to compare against in a worktree with its own CARGO_TARGET_DIR, or copy the two
# binaries into <dir>/release/. The load generator is this tree's idem-bench (one binary
# for every build, so the client side is the same).
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS [4]                 rounds (each runs every build once)
#   BENCH_WORKLOADS [claim,retry]    BENCH_CLIENTS [1,64]
#   BENCH_DURATION [5s] BENCH_WARMUP [1s]
#   BENCH_OUT [/tmp/idem-bench/builds-<time>]   one JSON per build and round, summary.txt
#   CARGO_TARGET_DIR                 where idem-bench is (as the Makefile)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -z "${CARGO_TARGET_DIR:-}" ]]; then
    if [[ -w /var/cache ]]; then CARGO_TARGET_DIR=/var/cache/idem-target; else CARGO_TARGET_DIR="$ROOT/target"; fi
fi
BENCH="$CARGO_TARGET_DIR/release/idem-bench"
ROUNDS="${BENCH_ROUNDS:-4}"
OUT="${BENCH_OUT:-/tmp/idem-bench/builds-$(date -u +%Y%m%dT%H%M%SZ)}"
CLUSTER="$OUT/cluster"

die() { echo "builds.sh: $*" >&2; exit 2; }
log() { echo "builds.sh: $*" >&2; }

(($# >= 2)) || die "usage: builds.sh <name>=<target dir> <name>=<target dir> ... (the first is the base)"
for build in "$@"; do
    name="${build%%=*}" dir="${build#*=}"
    [[ "$name" =~ ^[A-Za-z0-9_.]+$ && "$build" == *=* ]] || die "$build: want <name>=<target dir>, name of A-Z a-z 0-9 _ ."
    [[ -x "$dir/release/idemd" && -x "$dir/release/idemctl" ]] || die "$dir/release has no idemd and idemctl"
done
[[ -x "$BENCH" ]] || (cd "$ROOT" && cargo build --release --bin idem-bench)
mkdir -p "$OUT"

teardown() { CARGO_TARGET_DIR="$1" IDEM_CLUSTER_DIR="$CLUSTER" "$ROOT/deploy/local/cluster.sh" down >/dev/null 2>&1 || true; }

# One run: a fresh cluster of the build, a sweep, the cluster gone again.
run() { # name dir round
    local name=$1 dir=$2 round=$3
    rm -rf "$CLUSTER"
    trap 'teardown "$dir"' EXIT
    CARGO_TARGET_DIR="$dir" IDEM_CLUSTER_DIR="$CLUSTER" IDEM_CLUSTER_NO_BUILD=1 \
        "$ROOT/deploy/local/cluster.sh" up 3 >"$OUT/$name-r$round.cluster.log" 2>&1 ||
        die "$name: the cluster did not start ($OUT/$name-r$round.cluster.log)"
    local pids=()
    for n in 1 2 3; do pids+=(--node-pid "n$n=$(cat "$CLUSTER/n$n/pid")"); done
    "$BENCH" sweep --backend idem "${pids[@]}" --workloads "${BENCH_WORKLOADS:-claim,retry}" \
        --clients "${BENCH_CLIENTS:-1,64}" --duration "${BENCH_DURATION:-5s}" \
        --warmup "${BENCH_WARMUP:-1s}" --label "$name-r$round" --run-id "$name-r$round-$$" \
        --out "$OUT/$name-r$round.json" >/dev/null
    teardown "$dir"
    trap - EXIT
}

builds=("$@")
for ((round = 1; round <= ROUNDS; round++)); do
    for ((i = 0; i < ${#builds[@]}; i++)); do
        build="${builds[$(((i + round) % ${#builds[@]}))]}"
        log "round $round/$ROUNDS: ${build%%=*}"
        run "${build%%=*}" "${build#*=}" "$round"
    done
done
rm -rf "$CLUSTER"
"$BENCH" compare-builds --base "${1%%=*}" "$OUT"/*.json | tee "$OUT/summary.txt"
