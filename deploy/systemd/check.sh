#!/usr/bin/env bash
# Checks the systemd files offline (part of make deploy-check):
#   1. `systemd-analyze verify idemd.service`: any message (unknown key, bad value, missing
#      executable) fails the check;
#   2. `systemd-analyze security --offline`: the exposure score must stay ≤ 2.0 ("OK");
#   3. `systemd-sysusers --root` creates the user idem from idem.sysusers.conf in a scratch root;
#   4. the example idemd.toml is a valid configuration (`idemd --print-config`), with the
#      idem image's idemd when the image exists, else the target directory's.
# Prints "N passed, 0 failed"; exits 1 at the first failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$([[ -w /var/cache ]] && echo /var/cache/idem-target || echo "$ROOT/target")}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
passed=0
pass() { passed=$((passed + 1)); echo "systemd: ok: $*"; }
fail() { echo "systemd: FAILED: $*" >&2; echo "$passed passed, 1 failed"; exit 1; }

command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (Debian package systemd)"

# verify stats ExecStart's program: point it at a real executable in the scratch directory.
install -m 0755 /bin/true "$scratch/idemd"
sed "s#/usr/local/bin/idemd#$scratch/idemd#" "$HERE/idemd.service" >"$scratch/idemd.service"
out="$(systemd-analyze verify "$scratch/idemd.service" 2>&1)" || fail "verify: $out"
[[ -z "$out" ]] || fail "verify printed: $out"
pass "systemd-analyze verify idemd.service: no message"

score="$(systemd-analyze security --offline=yes "$scratch/idemd.service" 2>&1 | sed -n 's/.*exposure level for idemd.service: \([0-9.]*\).*/\1/p')"
[[ -n "$score" ]] || fail "security: no score"
systemd-analyze security --offline=yes --threshold=20 "$scratch/idemd.service" >/dev/null 2>&1 ||
    fail "security: exposure $score > 2.0"
pass "systemd-analyze security --offline: exposure $score (≤ 2.0)"

mkdir -p "$scratch/root/etc"
command -v systemd-sysusers >/dev/null || fail "systemd-sysusers is missing"
systemd-sysusers --root="$scratch/root" "$HERE/idem.sysusers.conf" >/dev/null 2>&1 ||
    fail "systemd-sysusers rejected idem.sysusers.conf"
grep -q '^idem:x:[0-9]*:[0-9]*:idem node:/var/lib/idem:' "$scratch/root/etc/passwd" ||
    fail "sysusers did not create the user idem: $(cat "$scratch/root/etc/passwd")"
grep -q '^idem:' "$scratch/root/etc/group" || fail "sysusers did not create the group idem"
pass "systemd-sysusers creates user and group idem"

# The image's idemd first: it is built from a commit, where the target directory of a shared
# checkout may hold a build of work in progress.
if docker image inspect idem:latest >/dev/null 2>&1; then
    # Without the image's IDEM_* defaults, which would override the file's keys.
    out="$(docker run --rm -v "$HERE/idemd.toml:/etc/idem/idemd.toml:ro" --entrypoint env \
        idem:latest -u IDEM_DATA_DIR -u IDEM_API_ADDR -u IDEM_HTTP_ADDR -u IDEM_LOG_FORMAT \
        idemd --config /etc/idem/idemd.toml --print-config 2>&1)" || fail "idemd.toml: $out"
    pass "idemd.toml is valid (idem:latest --print-config)"
elif [[ -x "$TARGET/release/idemd" ]]; then
    out="$("$TARGET/release/idemd" --config "$HERE/idemd.toml" --print-config 2>&1)" ||
        fail "idemd.toml: $out"
    pass "idemd.toml is valid ($TARGET/release/idemd --print-config)"
else
    fail "no idemd to check idemd.toml with: make image, or cargo build --release --bin idemd"
fi
echo "$passed passed, 0 failed"
