#!/usr/bin/env bash
# make jepsen-matrix: every nemesis × workload × node count × seed, one `idem-jepsen test`
# each, then a summary (idem-jepsen matrix-summary): summary.md, summary.json and matrix.png
# under jepsen/store/matrix-<time>/, beside every run's own directory (runs/<run>/: history,
# results, latency and rate plots, node logs). The full default matrix is 8 nemesis
# combinations × 4 workloads × {3, 5} nodes × 3 seeds = 192 runs of 60 s: about 4 hours.
# Narrow it with (space-separated lists):
#
#   JEPSEN_MATRIX_NEMESES    default: each nemesis alone, then all of them together
#   JEPSEN_MATRIX_WORKLOADS  default: register conflict takeover high-risk
#   JEPSEN_MATRIX_NODES      default: 3 5
#   JEPSEN_MATRIX_SEEDS      default: 1 2 3
#   JEPSEN_MATRIX_TIME_LIMIT seconds of workload per run, default 60
#   JEPSEN_MATRIX_SNAPSHOT_LOGS  the nodes' snapshot floor (--snapshot-logs), default idemd's
#   JEPSEN_MATRIX_NICE       nice level of the runs, default 10
#   JEPSEN_BIN               directory of idem-jepsen, idemd and idemctl (default: built here)
#
#   sudo JEPSEN_MATRIX_NODES=3 JEPSEN_MATRIX_SEEDS=1 JEPSEN_MATRIX_TIME_LIMIT=20 jepsen/matrix.sh
#
# Needs what jepsen/ci.sh needs (root, iproute2, iptables, libfaketime, /dev/fuse). Exits 0
# when every run was valid, 1 otherwise; a run's row names the command that reruns it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$( [ -w /var/cache ] && echo /var/cache/idem-target || echo "$PWD/target")}"

all="partition,kill,pause,clock,membership,power-loss,bitflip"
nemeses="${JEPSEN_MATRIX_NEMESES:-${all//,/ } $all}"
workloads="${JEPSEN_MATRIX_WORKLOADS:-register conflict takeover high-risk}"
node_counts="${JEPSEN_MATRIX_NODES:-3 5}"
seeds="${JEPSEN_MATRIX_SEEDS:-1 2 3}"
time_limit="${JEPSEN_MATRIX_TIME_LIMIT:-60}"
niceness="${JEPSEN_MATRIX_NICE:-10}"
extra=()
if [ -n "${JEPSEN_MATRIX_SNAPSHOT_LOGS:-}" ]; then
  extra+=(--snapshot-logs "$JEPSEN_MATRIX_SNAPSHOT_LOGS")
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "jepsen/matrix.sh: needs root (network namespaces, iptables); run it with sudo" >&2
  exit 2
fi
if [ -z "${JEPSEN_BIN:-}" ]; then
  [ ! -x scripts/bootstrap.sh ] || scripts/bootstrap.sh
  cargo build --release --bin idem-jepsen --bin idemd --bin idemctl
fi
bin="${JEPSEN_BIN:-$CARGO_TARGET_DIR/release}"

dir="$PWD/jepsen/store/matrix-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$dir/runs"
: >"$dir/runs.tsv"
{
  echo "nemeses: $nemeses"
  echo "workloads: $workloads"
  echo "nodes: $node_counts"
  echo "seeds: $seeds"
  echo "time limit: ${time_limit}s ${extra[*]}"
  echo "idemd: $("$bin/idemd" --version 2>/dev/null || echo "$bin/idemd")"
} | tee "$dir/matrix.txt"

for nodes in $node_counts; do
  for workload in $workloads; do
    for nemesis in $nemeses; do
      for seed in $seeds; do
        echo "matrix: $nemesis × $workload × $nodes nodes × seed $seed"
        started=$(date +%s)
        status=0
        timeout --signal=INT --kill-after=15 $((time_limit + 150)) \
          nice -n "$niceness" "$bin/idem-jepsen" test --idemd "$bin/idemd" --idemctl "$bin/idemctl" \
          --nodes "$nodes" --time-limit "$time_limit" --nemesis "$nemesis" --workload "$workload" \
          --seed "$seed" --store "$dir/runs" --prefix idemm "${extra[@]}" \
          >"$dir/last-run.log" 2>&1 || status=$?
        run=$(readlink "$dir/runs/latest" || echo none)
        [ ! -d "$dir/runs/$run" ] || mv "$dir/last-run.log" "$dir/runs/$run/test.log"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$nemesis" "$workload" "$nodes" "$seed" "$status" \
          "$(($(date +%s) - started))" "$run" >>"$dir/runs.tsv"
        echo "matrix: exit status $status: $dir/runs/$run"
      done
    done
  done
done

"$bin/idem-jepsen" matrix-summary "$dir"
