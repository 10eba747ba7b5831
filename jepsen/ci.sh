#!/usr/bin/env bash
# CI's Jepsen step: a short rotation. Each CI run draws a seed (printed), and each of its
# JEPSEN_RUNS runs (default 2) takes the next seed and, from that seed, one entry of the
# rotation below: a combination of nemeses and a workload. Successive CI runs thus cover
# different faults, and every entry comes up within a few runs. Each run lasts at most 2
# minutes (a 30-second workload by default), against 3 namespaced nodes running as
# production does: TLS on the API and Raft ports, authentication on (the harness issues a CA,
# node certificates and tokens with idemctl; workers call with a worker token of their
# tenant). A failing run prints the one command that reruns it. Exits non-zero when a
# history is invalid or a test cannot run.
#
#   sudo jepsen/ci.sh                           # from anywhere in the repository
#   sudo JEPSEN_SEED=1234 JEPSEN_RUNS=1 jepsen/ci.sh       # rerun one run of a rotation
#   sudo JEPSEN_NEMESIS=power-loss,kill JEPSEN_WORKLOAD=takeover JEPSEN_SEED=7 jepsen/ci.sh
#   JEPSEN_NODES=5 JEPSEN_TIME_LIMIT=60 JEPSEN_PLAINTEXT=1 jepsen/ci.sh   # 5 nodes, no TLS/auth
#
# Needs root (network namespaces, iptables), iproute2/iptables, libfaketime (clock nemesis)
# and /dev/fuse with fusermount3 (power-loss nemesis); scripts/bootstrap.sh installs the
# packages. Runs are stored in jepsen/store/<run>/ (jepsen/store/latest points at the last).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$( [ -w /var/cache ] && echo /var/cache/idem-target || echo "$PWD/target")}"

# The rotation: "nemeses workload [options]". Every nemesis and workload appears; power
# losses, kills and pauses hit one node, a majority or every node (drawn from the run's seed).
# --snapshot-logs 100 (a low snapshot floor) makes the nodes build snapshots all the time and
# install them on followers that fall behind during partitions and membership changes;
# --clock-monotonic moves the nodes' monotonic clocks with their wall clocks.
rotation=(
  "partition,kill register"
  "power-loss,partition register --snapshot-logs 100"
  "kill,pause takeover"
  "clock,partition takeover --clock-monotonic"
  "power-loss,pause conflict"
  "membership,kill conflict --snapshot-logs 100"
  "pause,clock register"
  "power-loss,kill,clock takeover"
  "bitflip,partition high-risk --snapshot-logs 100"
  "membership,bitflip,pause high-risk --snapshot-logs 100"
)

if [ "$(id -u)" -ne 0 ]; then
  echo "jepsen/ci.sh: needs root (network namespaces, iptables); run it with sudo" >&2
  exit 2
fi
if [ -x scripts/bootstrap.sh ]; then
  scripts/bootstrap.sh
fi

# The same feature resolution as `make test` (workspace-wide, dev-dependencies' features
# included through --tests), so that in `make verify` nothing is compiled again.
cargo build --release --workspace --bins --tests
bin="$CARGO_TARGET_DIR/release"

nodes="${JEPSEN_NODES:-3}"
runs="${JEPSEN_RUNS:-2}"
time_limit="${JEPSEN_TIME_LIMIT:-30}"
seed="${JEPSEN_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
security=()
if [ "${JEPSEN_PLAINTEXT:-0}" = 1 ]; then
  security=(--plaintext)
fi
echo "jepsen: seed $seed, $runs run(s) of ${time_limit}s on $nodes nodes"

cd jepsen
status=0
passed=0
failed=0
for ((i = 0; i < runs; i++)); do
  run_seed=$((seed + i))
  read -r nemesis workload options <<<"${rotation[run_seed % ${#rotation[@]}]}"
  nemesis="${JEPSEN_NEMESIS:-$nemesis}"
  workload="${JEPSEN_WORKLOAD:-$workload}"
  read -r -a extra <<<"$options"
  echo "jepsen: run $((i + 1))/$runs: seed $run_seed, nemesis $nemesis, workload $workload ${options}"
  run_status=0
  # 2 minutes at most per run: the workload, start-up, the final heal and reads, the checks.
  timeout --signal=INT --kill-after=10 110 \
    "$bin/idem-jepsen" test --idemd "$bin/idemd" --idemctl "$bin/idemctl" --nodes "$nodes" \
    --time-limit "$time_limit" --nemesis "$nemesis" --workload "$workload" --seed "$run_seed" \
    --interval 5s "${security[@]}" "${extra[@]}" || run_status=$?
  if [ "$run_status" -eq 0 ]; then
    passed=$((passed + 1))
    continue
  fi
  failed=$((failed + 1))
  [ "$status" -ne 0 ] || status=$run_status
  rerun="JEPSEN_SEED=$run_seed JEPSEN_RUNS=1"
  [ -z "${JEPSEN_NEMESIS:-}" ] || rerun+=" JEPSEN_NEMESIS=$nemesis"
  [ -z "${JEPSEN_WORKLOAD:-}" ] || rerun+=" JEPSEN_WORKLOAD=$workload"
  [ "$nodes" = 3 ] || rerun+=" JEPSEN_NODES=$nodes"
  [ "$time_limit" = 30 ] || rerun+=" JEPSEN_TIME_LIMIT=$time_limit"
  [ "${JEPSEN_PLAINTEXT:-0}" != 1 ] || rerun+=" JEPSEN_PLAINTEXT=1"
  echo "jepsen: run $((i + 1)) FAILED (exit status $run_status): jepsen/store/$(readlink store/latest)" >&2
  echo "jepsen: reproduce with: sudo $rerun jepsen/ci.sh" >&2
done

echo "jepsen: $passed passed, $failed failed (seed $seed)"
exit "$status"
