#!/usr/bin/env bash
# The 10-million-records check of issue #7: does a full store keep its claim latency and a
# bounded memory? Starts a fresh 3-node idem cluster, measures claims on the empty store,
# preloads N completed records through the API, measures again, and reports the p50 ratio
# (target: within 20 %) and every node's RSS before and after, and the data directories' size.
#
#   scripts/bench/large.sh                      N = 10,000,000 (takes hours on 2 cores)
#   BENCH_LARGE_RECORDS=1000000 scripts/bench/large.sh
#
# Environment: BENCH_LARGE_RECORDS [10000000], BENCH_LARGE_CLIENTS [256] (preload
# concurrency), BENCH_DURATION [10s], BENCH_SETTLE [600] (most seconds to wait for the
# nodes to go idle after the preload; settle.log says which threads kept them busy),
# BENCH_OUT [/tmp/idem-bench/large-<time>], BENCH_WORK,
# CARGO_TARGET_DIR, BENCH_NO_BUILD=1 (as compare.sh). The cluster is torn down at the end and
# its directory (gigabytes) removed after a successful run unless BENCH_WORK was given.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -z "${CARGO_TARGET_DIR:-}" ]]; then
    if [[ -w /var/cache ]]; then CARGO_TARGET_DIR=/var/cache/idem-target; else CARGO_TARGET_DIR="$ROOT/target"; fi
fi
export CARGO_TARGET_DIR
BENCH="$CARGO_TARGET_DIR/release/idem-bench"
RECORDS="${BENCH_LARGE_RECORDS:-10000000}"
PRELOAD_CLIENTS="${BENCH_LARGE_CLIENTS:-256}"
DURATION="${BENCH_DURATION:-10s}"
OUT="${BENCH_OUT:-/tmp/idem-bench/large-$(date -u +%Y%m%dT%H%M%SZ)}"
WORK="${BENCH_WORK:-}"
if [[ -z "$WORK" ]]; then
    WORK="$(mktemp -d /tmp/idem-bench-large.XXXXXX)"
    REMOVE_WORK=1
fi
export IDEM_CLUSTER_DIR="$WORK/idem"
mkdir -p "$OUT"

log() { echo "large.sh: $*" >&2; }
trap '"$ROOT/deploy/local/cluster.sh" down >&2 || true' EXIT

for port in 7510 7520 7530 7511 7521 7531; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "large.sh: port $port is in use: stop the cluster that uses it first" >&2
        exit 1
    fi
done

if [[ "${BENCH_NO_BUILD:-}" != 1 ]]; then
    (cd "$ROOT" && cargo build --release --bin idemd --bin idemctl --bin idem-bench) >&2
fi
IDEM_CLUSTER_NO_BUILD=1 "$ROOT/deploy/local/cluster.sh" up 3 >&2
pids=()
for n in 1 2 3; do pids+=(--node-pid "n$n=$(cat "$IDEM_CLUSTER_DIR/n$n/pid")"); done

rss() { # one line: nN=RSS MiB (peak MiB) for every node
    local n pid line=()
    for n in 1 2 3; do
        pid="$(cat "$IDEM_CLUSTER_DIR/n$n/pid")"
        line+=("n$n=$(awk '/^VmRSS/ {r=$2} /^VmHWM/ {h=$2} END {printf "%.0fMiB(peak %.0fMiB)", r/1024, h/1024}' "/proc/$pid/status")")
    done
    echo "${line[*]}"
}

# CPU ticks (1/100 s) the three nodes have used so far.
cpu_ticks() {
    local n total=0
    for n in 1 2 3; do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$(cat "$IDEM_CLUSTER_DIR/n$n/pid")/stat")))
    done
    echo "$total"
}

# What the idle cluster uses in 10 s (heartbeats, ticks): "settled" is measured against it.
idle_before=$(cpu_ticks)
sleep 10
idle_ticks=$(($(cpu_ticks) - idle_before))

# p50 / p99 of the claim column of `idem-bench run`'s table.
measure() { # name clients
    "$BENCH" run --workload claim --clients "$2" --duration "$DURATION" --warmup 2s \
        "${pids[@]}" --run-id "large-$1-c$2-$$" --out "$OUT/$1-c$2.json" | tee "$OUT/$1-c$2.txt" >&2
    awk '$1 == "idem" && $2 == "claim" {print $7, $9, $5}' "$OUT/$1-c$2.txt"
}

log "empty store"
read -r empty_p50_1 empty_p99_1 empty_tput_1 < <(measure empty 1)
read -r empty_p50_64 empty_p99_64 empty_tput_64 < <(measure empty 64)
rss_empty="$(rss)"

log "preloading $RECORDS records ($PRELOAD_CLIENTS concurrent loops)"
preload_started=$SECONDS
# Every node's RSS once a minute while the store fills ($OUT/rss.log): bounded or growing?
(while sleep 60; do echo "$((SECONDS - preload_started))s $(rss)"; done >"$OUT/rss.log" 2>/dev/null) &
sampler=$!
"$BENCH" preload --records "$RECORDS" --clients "$PRELOAD_CLIENTS" --prefix "large-$$" | tee "$OUT/preload.txt" >&2
preload_secs=$((SECONDS - preload_started))
kill "$sampler" 2>/dev/null || true
rss_loaded="$(rss)"

# Right after the load, RocksDB may still compact gigabytes in the background; measuring then
# measures that debt, not the store. Wait (at most BENCH_SETTLE seconds) until the three
# nodes together use no more than when idle and empty, plus 10 % of a core, over 10 s.
# CPU ticks of every thread, summed per node and thread name ("n1 rocksdb:low 1234").
thread_ticks() {
    local n pid
    for n in 1 2 3; do
        pid="$(cat "$IDEM_CLUSTER_DIR/n$n/pid")"
        for t in /proc/"$pid"/task/*; do
            echo "n$n $(tr -d ' ' <"$t/comm") $(awk '{print $14 + $15}' "$t/stat" 2>/dev/null || echo 0)"
        done
    done | awk '{s[$1 " " $2] += $3} END {for (k in s) print k, s[k]}' | sort
}
# Where the settling CPU goes ($OUT/settle.log): per 10 s window, the busiest threads
# (threads that exit during a window show a negative figure).
settle_started=$SECONDS
while ((SECONDS - settle_started < ${BENCH_SETTLE:-600})); do
    before=$(cpu_ticks); threads_before="$(thread_ticks)"; sleep 10; after=$(cpu_ticks)
    {
        echo "$((SECONDS - settle_started))s: $((after - before)) ticks in 10 s, busiest threads:"
        join -j1 <(echo "$threads_before" | awk '{print $1 "/" $2, $3}' | sort) \
            <(thread_ticks | awk '{print $1 "/" $2, $3}' | sort) |
            awk '{print $3 - $2, $1}' | sort -rn | head -n 6 | sed 's/^/    /'
    } >>"$OUT/settle.log"
    # ticks are 1/100 s: 10 ticks in 10 s is 10 % of a core
    if ((after - before <= idle_ticks + 10)); then break; fi
done
settle_secs=$((SECONDS - settle_started))
log "full store (after ${settle_secs}s of background compaction)"
read -r full_p50_1 full_p99_1 full_tput_1 < <(measure full 1)
read -r full_p50_64 full_p99_64 full_tput_64 < <(measure full 64)
rss_full="$(rss)"
data="$(du -sh "$IDEM_CLUSTER_DIR"/n1/data | cut -f1) per node (n1)"

{
    echo "records preloaded: $RECORDS in ${preload_secs}s ($(tail -n 1 "$OUT/preload.txt")); settled in ${settle_secs}s"
    echo "claim @1  client : empty p50=${empty_p50_1}ms p99=${empty_p99_1}ms ${empty_tput_1} ops/s | full p50=${full_p50_1}ms p99=${full_p99_1}ms ${full_tput_1} ops/s"
    echo "claim @64 clients: empty p50=${empty_p50_64}ms p99=${empty_p99_64}ms ${empty_tput_64} ops/s | full p50=${full_p50_64}ms p99=${full_p99_64}ms ${full_tput_64} ops/s"
    echo "rss empty:  $rss_empty"
    echo "rss loaded: $rss_loaded"
    echo "rss after:  $rss_full"
    echo "rss while loading (every 60 s, seconds into the preload):"
    sed 's/^/    /' "$OUT/rss.log"
    echo "data dir:   $data"
    echo "settling (first and last windows of settle.log: busiest threads, CPU ticks of 1/100 s in 10 s; idle and empty: $idle_ticks ticks):"
    { head -n 7 "$OUT/settle.log"; echo "..."; tail -n 7 "$OUT/settle.log"; } | sed 's/^/    /'
    awk -v e="$empty_p50_1" -v f="$full_p50_1" -v n="$RECORDS" 'BEGIN {
        r = f / e; printf "large: records=%d claim_p50_full/empty=%.2f (target <= 1.20: %s)\n", n, r, (r <= 1.2 ? "met" : "NOT met") }'
} | tee "$OUT/summary.txt"
"$ROOT/deploy/local/cluster.sh" down >&2
trap - EXIT
if [[ "${REMOVE_WORK:-}" == 1 ]]; then rm -rf "$WORK"; fi
