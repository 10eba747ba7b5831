#!/usr/bin/env bash
# CI's Jepsen run: a short test (at most 3 minutes) with partitions and kills under the
# register workload, against 3 namespaced nodes running as production does: TLS on the API
# and Raft ports, authentication on (the harness issues a CA, node certificates and tokens
# with idemctl; workers call with a worker token of their tenant). Exits non-zero when the
# history is invalid or the test cannot run.
#
#   sudo jepsen/ci.sh                  # from anywhere in the repository
#   JEPSEN_SEED=7 JEPSEN_NODES=5 JEPSEN_TIME_LIMIT=60 jepsen/ci.sh
#   JEPSEN_PLAINTEXT=1 jepsen/ci.sh    # plaintext nodes, authentication off
#
# Needs root (network namespaces, iptables) and iproute2/iptables (scripts/bootstrap.sh
# installs them; the harness also installs missing ones with apt-get). The run is stored in
# jepsen/store/<run>/ (jepsen/store/latest points at it).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$( [ -w /var/cache ] && echo /var/cache/idem-target || echo "$PWD/target")}"

if [ "$(id -u)" -ne 0 ]; then
  echo "jepsen/ci.sh: needs root (network namespaces, iptables); run it with sudo" >&2
  exit 2
fi
if [ -x scripts/bootstrap.sh ]; then
  scripts/bootstrap.sh
fi

# Workspace-wide feature resolution (no -p): the same build as `make test` and clippy, so
# nothing is compiled again.
cargo build --release --bin idem-jepsen --bin idemd --bin idemctl
bin="$CARGO_TARGET_DIR/release"

nodes="${JEPSEN_NODES:-3}"
seed="${JEPSEN_SEED:-42}"
time_limit="${JEPSEN_TIME_LIMIT:-45}"
security=()
if [ "${JEPSEN_PLAINTEXT:-0}" = 1 ]; then
  security=(--plaintext)
fi
cd jepsen
status=0
timeout --signal=INT --kill-after=20 175 \
  "$bin/idem-jepsen" test --idemd "$bin/idemd" --idemctl "$bin/idemctl" --nodes "$nodes" \
  --time-limit "$time_limit" --nemesis partition,kill --workload register --seed "$seed" \
  --interval 5s "${security[@]}" || status=$?

if [ "$status" -eq 0 ]; then
  echo "jepsen: 1 passed, 0 failed"
else
  echo "jepsen: run in jepsen/store/latest (exit status $status)" >&2
  echo "jepsen: 0 passed, 1 failed"
fi
exit "$status"
