#!/usr/bin/env bash
# The multi-region scenario: 5 idemd nodes in 3 emulated regions (the same emulation as
# `idem-jepsen cluster up --regions 3 --rtt ...`): global vs region-affinity latency, local
# replays, concurrent first claims from every region, the home region cut off and healed.
# Builds idem-jepsen and idemd, runs `idem-jepsen regions`, prints the figures and checks,
# and exits 0 only when every check passed (1: a check failed, 2: could not run, 130:
# interrupted). About a minute with the defaults; bounded to 5 minutes.
#
#   sudo jepsen/regions.sh                          # writes jepsen/store/regions-<time>/
#   sudo jepsen/regions.sh --samples 200 --rtt 30ms
#   sudo jepsen/regions.sh --dir /tmp/regions       # any `idem-jepsen regions` option
#
# Needs root (network namespaces, iptables) and iproute2/iptables (scripts/bootstrap.sh
# installs them). The run directory holds regions.json (every figure and check), the
# history, results.json, latency.png/rate.png and each node's config and log (n<i>/).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$( [ -w /var/cache ] && echo /var/cache/idem-target || echo "$PWD/target")}"

if [ "$(id -u)" -ne 0 ]; then
  echo "jepsen/regions.sh: needs root (network namespaces, iptables); run it with sudo" >&2
  exit 2
fi
if [ -x scripts/bootstrap.sh ]; then
  scripts/bootstrap.sh
fi

# Workspace-wide feature resolution (no -p): the same build as `make test` and clippy, so
# nothing is compiled again.
cargo build --release --bin idem-jepsen --bin idemd
bin="$CARGO_TARGET_DIR/release"

args=("$@")
case " $* " in
  *" --dir "* | *" --dir="*) ;;
  *) args+=(--dir "jepsen/store/regions-$(date -u +%Y%m%dT%H%M%SZ)") ;;
esac

status=0
timeout --signal=INT --kill-after=20 300 \
  "$bin/idem-jepsen" regions --idemd "$bin/idemd" "${args[@]}" || status=$?
exit "$status"
