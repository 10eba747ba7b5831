#!/usr/bin/env bash
# idem, etcd and PostgreSQL side by side on this machine (`make bench`): builds, starts a
# 3-node idem cluster (deploy/local/cluster.sh), a 3-member etcd (scripts/bench/etcd.sh) and
# a single durable PostgreSQL server (scripts/bench/postgres.sh), measures the disk and
# loopback floors, runs the same sweep of workloads against each, alternating (idem, etcd,
# postgres, idem, etcd, postgres, ...), tears them down and prints the comparison. The last
# line is
#
#   ratio idem/etcd: claim_throughput=… p50=… p99=… retry_throughput=… contention_throughput=…
#     postgres_throughput=… postgres_single=…   (one line)
#
# (medians over the repetitions; throughputs and p99 at the largest concurrency, p50 at one
# client; postgres_*: idem's claim throughput over Postgres's at the largest concurrency and
# at one client). About 9 minutes with the defaults, 6 without Postgres.
#
# Postgres gets one connection per client (--connection-per-client: a connection is one
# server process that runs its statements one at a time, so pgbench does the same), and its
# CPU is that of the postmaster's whole process tree (--node-tree).
#
# Environment (defaults in brackets):
#   BENCH_REPS [3]                     repetitions per store
#   BENCH_WORKLOADS [claim,retry,contention]
#   BENCH_CLIENTS [1,8,64]             concurrencies of the sweep
#   BENCH_DURATION [4s] BENCH_WARMUP [1s]   per run
#   BENCH_DUP_SHARE [1.0]              share of retries in the retry workload
#   BENCH_IDEM_ARGS []                 extra idem-bench arguments for idem only, e.g.
#                                      "--idem-batch 1" (every call alone, no coalescing)
#   BENCH_POSTGRES [1]                 0: leave the PostgreSQL baseline out
#   IDEM_POSTGRES_PORT [25432]         as scripts/bench/postgres.sh
#   BENCH_OUT [/tmp/idem-bench/<time>] results (JSON per sweep, probes, plots, summary.txt)
#   BENCH_WORK                         cluster directories [a fresh mktemp -d under /tmp,
#                                      removed after a successful run, kept on failure; run as
#                                      root, the postgres user must be able to search it]
#   BENCH_BUILD [release]              release: the build that ships (scripts/release.sh:
#                                      RocksDB without assertions, its own target directory;
#                                      ~15 min of C++ the first time); dev: the development
#                                      build (Debian's RocksDB, CARGO_TARGET_DIR)
#   CARGO_TARGET_DIR                   as deploy/local/cluster.sh (BENCH_BUILD=dev)
#   BENCH_NO_BUILD=1                   use the binaries already built
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BENCH_BUILD:-release}"
case "$BUILD" in
    release) CARGO_TARGET_DIR="$("$ROOT/scripts/release.sh" target-dir)" ;;
    dev)
        if [[ -z "${CARGO_TARGET_DIR:-}" ]]; then
            if [[ -w /var/cache ]]; then CARGO_TARGET_DIR=/var/cache/idem-target; else CARGO_TARGET_DIR="$ROOT/target"; fi
        fi
        ;;
    *) echo "compare.sh: BENCH_BUILD is release or dev, not $BUILD" >&2; exit 2 ;;
esac
export CARGO_TARGET_DIR
BENCH="$CARGO_TARGET_DIR/release/idem-bench"
REPS="${BENCH_REPS:-3}"
WORKLOADS="${BENCH_WORKLOADS:-claim,retry,contention}"
CLIENTS="${BENCH_CLIENTS:-1,8,64}"
DURATION="${BENCH_DURATION:-4s}"
WARMUP="${BENCH_WARMUP:-1s}"
DUP_SHARE="${BENCH_DUP_SHARE:-1.0}"
POSTGRES="${BENCH_POSTGRES:-1}"
PG_PORT="${IDEM_POSTGRES_PORT:-25432}"
stores=(idem etcd)
if [[ "$POSTGRES" != 0 ]]; then stores+=(postgres); fi
OUT="${BENCH_OUT:-/tmp/idem-bench/$(date -u +%Y%m%dT%H%M%SZ)}"
WORK="${BENCH_WORK:-}"
if [[ -z "$WORK" ]]; then
    WORK="$(mktemp -d /tmp/idem-bench-work.XXXXXX)"
    # Searchable (not listable) by others: Postgres runs as its own user under it.
    chmod 711 "$WORK"
    REMOVE_WORK=1
fi
export IDEM_CLUSTER_DIR="$WORK/idem" IDEM_ETCD_DIR="$WORK/etcd" IDEM_POSTGRES_DIR="$WORK/postgres"
mkdir -p "$OUT"

log() { echo "compare.sh: $*" >&2; }

teardown() {
    "$ROOT/deploy/local/cluster.sh" down >&2 || true
    "$ROOT/scripts/bench/etcd.sh" down >&2 || true
    if [[ "$POSTGRES" != 0 ]]; then "$ROOT/scripts/bench/postgres.sh" down >&2 || true; fi
}
trap teardown EXIT

for tool in etcd etcdctl; do
    command -v "$tool" >/dev/null ||
        { echo "compare.sh: no $tool (Debian: apt-get install etcd-server etcd-client)" >&2; exit 1; }
done
if [[ "$POSTGRES" != 0 ]]; then "$ROOT/scripts/bench/postgres.sh" bin >/dev/null; fi

# A node left over from an earlier run would answer in place of the new one (the new one
# cannot bind its port, and the health checks would ask the old one).
ports=(7510 7520 7530 7511 7521 7531 2379 22379 32379 2380 22380 32380)
if [[ "$POSTGRES" != 0 ]]; then ports+=("$PG_PORT"); fi
for port in "${ports[@]}"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "compare.sh: port $port is in use: stop the cluster that uses it first" >&2
        exit 1
    fi
done

if [[ "${BENCH_NO_BUILD:-}" != 1 ]]; then
    if [[ "$BUILD" == release ]]; then
        "$ROOT/scripts/release.sh" build idemd idemctl idem-bench
    else
        log "building idemd, idemctl, idem-bench (development build, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
        (cd "$ROOT" && cargo build --release --bin idemd --bin idemctl --bin idem-bench) >&2
    fi
fi

# The floors: probed before the clusters start and again before every repetition (a shared
# disk's sync latency moves a lot within minutes); summarize uses the median p50s.
probes=()
probe() { # name
    "$BENCH" fsync-probe --dir "$WORK" --count 1000 --out "$OUT/fsync-$1.json" >&2
    "$BENCH" rtt-probe --count 10000 --out "$OUT/rtt-$1.json" >&2
    probes+=(--probe "$OUT/fsync-$1.json" --probe "$OUT/rtt-$1.json")
}
log "floors: fsync on the disk of $WORK, loopback RTT"
probe start

log "starting idem (3 nodes, $IDEM_CLUSTER_DIR) and etcd (3 members, $IDEM_ETCD_DIR)"
IDEM_CLUSTER_NO_BUILD=1 "$ROOT/deploy/local/cluster.sh" up 3 >&2
"$ROOT/scripts/bench/etcd.sh" up >&2
pg_target=()
if [[ "$POSTGRES" != 0 ]]; then
    log "starting PostgreSQL (one server, $IDEM_POSTGRES_DIR)"
    "$ROOT/scripts/bench/postgres.sh" up >&2
    pg_target=(--backend postgres --endpoints "$("$ROOT/scripts/bench/postgres.sh" endpoint)"
        --connection-per-client)
    for p in $("$ROOT/scripts/bench/postgres.sh" pids); do pg_target+=(--node-tree "$p"); done
fi

idem_pids=()
for n in 1 2 3; do idem_pids+=(--node-pid "n$n=$(cat "$IDEM_CLUSTER_DIR/n$n/pid")"); done
etcd_pids=()
for p in $("$ROOT/scripts/bench/etcd.sh" pids); do etcd_pids+=(--node-pid "$p"); done
# idem's SDK finds the leader itself; etcd gets its leader's endpoint, so that neither store
# pays a follower's forward.
etcd_leader="$("$ROOT/scripts/bench/etcd.sh" leader)"

common=(--workloads "$WORKLOADS" --clients "$CLIENTS" --duration "$DURATION" --warmup "$WARMUP"
    --dup-share "$DUP_SHARE")
results=()
for ((rep = 1; rep <= REPS; rep++)); do
    probe "rep$rep"
    for store in "${stores[@]}"; do
        log "repetition $rep/$REPS: $store"
        case "$store" in
        idem)
            # shellcheck disable=SC2206 # word splitting of the extra arguments is wanted
            target=(--backend idem "${idem_pids[@]}" ${BENCH_IDEM_ARGS:-})
            ;;
        etcd) target=(--backend etcd --endpoints "$etcd_leader" "${etcd_pids[@]}") ;;
        postgres) target=("${pg_target[@]}") ;;
        esac
        "$BENCH" sweep "${target[@]}" "${common[@]}" --label "rep$rep" --run-id "$store-r$rep-$$" \
            --out "$OUT/$store-$rep.json" >&2
        results+=("$OUT/$store-$rep.json")
    done
done

trap - EXIT
teardown
if [[ "${REMOVE_WORK:-}" == 1 ]]; then rm -rf "$WORK"; fi
log "results, plots (plots/) and summary.txt in $OUT"
echo "idem build: $BUILD ($CARGO_TARGET_DIR/release/idemd)" | tee "$OUT/build.txt"
"$BENCH" summarize "${results[@]}" "${probes[@]}" --plots "$OUT/plots" | tee "$OUT/summary.txt"
