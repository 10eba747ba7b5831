#!/usr/bin/env bash
# Checks the observability kit (part of make deploy-check):
#   1. `promtool check rules` and `promtool check config` on the alert rules and the example
#      Prometheus configuration;
#   2. `promtool test rules`: the alerts' unit tests (idem-alerts.test.yml);
#   3. the dashboard and the alerts query only metrics idemd exports: a dev node (idemd from
#      the target directory, loopback ports, a scratch data directory) serves a small
#      idemctl session, its /metrics is scraped and compared (check_metrics.py).
# Prints "N passed, N failed"; exits 1 at the first failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$([[ -w /var/cache ]] && echo /var/cache/idem-target || echo "$ROOT/target")}"
scratch="$(mktemp -d)"
node_pid=""
cleanup() {
    if [[ -n "$node_pid" ]]; then kill "$node_pid" 2>/dev/null || true; wait "$node_pid" 2>/dev/null || true; fi
    rm -rf "$scratch"
}
trap cleanup EXIT
passed=0
pass() { passed=$((passed + 1)); echo "observability: ok: $*"; }
fail() { echo "observability: FAILED: $*" >&2; echo "$passed passed, 1 failed"; exit 1; }

command -v promtool >/dev/null || fail "promtool is missing (Debian package prometheus)"
out="$(promtool check rules "$HERE/idem-alerts.yml" 2>&1)" || fail "check rules: $out"
pass "promtool check rules idem-alerts.yml"
out="$(cd "$HERE" && promtool check config prometheus.yml 2>&1)" || fail "check config: $out"
pass "promtool check config prometheus.yml"
out="$(cd "$HERE" && promtool test rules idem-alerts.test.yml 2>&1)" || fail "test rules: $out"
pass "promtool test rules idem-alerts.test.yml"

for bin in idemd idemctl; do
    [[ -x "$TARGET/release/$bin" ]] ||
        fail "no $bin in $TARGET/release: cargo build --release --bin idemd --bin idemctl"
done
get() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' "$1"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
api="127.0.0.1:$(free_port)" raft="127.0.0.1:$(free_port)" http="127.0.0.1:$(free_port)"
# A claim rate of 1 per second so that the session also produces a RATE_LIMITED refusal.
env -i PATH="$PATH" IDEM_LIMITS_CLAIMS_RATE=1 IDEM_LIMITS_CLAIMS_BURST=1 \
    "$TARGET/release/idemd" --node-id 1 --data-dir "$scratch/data" \
    --api-addr "$api" --raft-addr "$raft" --http-addr "$http" --auth off >"$scratch/idemd.log" 2>&1 &
node_pid=$!
for _ in $(seq 100); do
    get "http://$http/healthz" >/dev/null 2>&1 && break
    kill -0 "$node_pid" 2>/dev/null || fail "idemd exited: $(tail -5 "$scratch/idemd.log")"
    sleep 0.2
done
get "http://$http/healthz" >/dev/null || fail "the dev node is not healthy: $(tail -5 "$scratch/idemd.log")"

ctl() {
    IDEMCTL_ENDPOINTS="$api" IDEMCTL_TENANT=acme IDEMCTL_ENV=test IDEMCTL_ACTOR=check \
        IDEMCTL_ENDPOINT='POST /v1/charges' "$TARGET/release/idemctl" --max-attempts 1 "$@"
}
ctl claim --key obs-1 --body '{"amount": 1}' >/dev/null || fail "idemctl claim"
ctl complete --key obs-1 --fence 1 --status 201 >/dev/null || fail "idemctl complete"
# The claim bucket (1 token) is empty: refused with RATE_LIMITED.
ctl claim --key obs-2 --body '{"amount": 1}' >/dev/null 2>&1 && fail "a claim over the rate limit was served"
# A wrong fence: refused (STALE_FENCE or WRONG_STATE), counted by reason.
ctl complete --key obs-1 --fence 7 --status 201 >/dev/null 2>&1 || true
ctl cluster mode region-affinity >/dev/null || fail "idemctl cluster mode region-affinity"
ctl region add local >/dev/null || fail "idemctl region add local"
# The steward publishes region group gauges within a poll or two.
for _ in $(seq 50); do
    get "http://$http/metrics" >"$scratch/metrics.txt" || fail "scraping /metrics"
    grep -q '^idem_group_term' "$scratch/metrics.txt" && break
    sleep 0.2
done
pass "dev node at $http served an idemctl session; /metrics scraped ($(grep -c '^# TYPE' "$scratch/metrics.txt") metrics)"

out="$(python3 "$HERE/check_metrics.py" "$scratch/metrics.txt" \
    "$ROOT/crates/idem-server/src/metrics.rs" "$HERE/idem-dashboard.json" "$HERE/idem-alerts.yml" 2>&1)" ||
    fail "metrics the kit uses but idemd does not export:
$(grep FAILED <<<"$out")"
pass "dashboard and alerts use only idemd's metrics ($(grep -c 'metrics: ok' <<<"$out") names; $(grep -c 'not seen' <<<"$out") registered but not exercised here)"
echo "$passed passed, 0 failed"
