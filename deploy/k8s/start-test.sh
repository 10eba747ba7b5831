#!/usr/bin/env bash
# Runs the pods' start script (base/idem-start.sh) in plain containers, as the StatefulSet
# would, since no Kubernetes cluster is reachable here (part of make compose-test; ~1 min;
# needs the image: make image).
#
# Each "pod" idem-N is a container with the StatefulSet's settings (user 10001, read-only
# root, no capabilities, /data volume, the script from the ConfigMap); its fixed container
# address stands for its per-pod Service's ClusterIP (IDEM_SELF_ADDR) and the list of all of
# them for the client Service (IDEM_CLUSTER_ENDPOINTS). Checks:
#   1. three pods started together: idem-0 bootstraps through the seed, the others join;
#      three voters at their stable addresses, no seed left;
#   2. a record written; idem-1 restarted: it starts from its volume and catches up;
#   3. idem-2 recreated with an empty volume: removed and added again, caught up;
#   4. a fourth pod (the five overlay's growth): it adds itself as a voter;
#   5. every pod restarted at once: the cluster comes back and replays the record.
# The pods run with authentication on, as the StatefulSet's do: a credentials file (made with
# the image's idemctl) mounted like the Secret idem-credentials, and its admin token in
# IDEMCTL_TOKEN for the script's and the checks' idemctl calls. And TLS on both ports, as the
# StatefulSet's: one node certificate for every pod (idemctl cert, naming every pod address
# and 127.0.0.1, the bootstrap's seed) mounted like the Secret idem-tls at /etc/idem/tls with
# the manifest's variables; the checks' idemctl verifies with the CA, and a plaintext call is
# refused.
# Prints "N passed, 0 failed"; exits 1 at the first failed check; removes its containers,
# volumes and network (IDEM_K8S_TEST_NET, default 172.29.84) at the end.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
IMAGE="${IDEM_IMAGE:-idem:latest}"
NET="${IDEM_K8S_TEST_NET:-172.29.84}"
NAME=idem-k8s-start-test
ENDPOINTS="$NET.10:7400,$NET.11:7400,$NET.12:7400,$NET.13:7400"
AUTH="$(mktemp -d /tmp/idem-k8s-start-test-auth.XXXXXX)"
passed=0

say() { echo "k8s-start-test: $*" >&2; }
pass() { passed=$((passed + 1)); say "ok: $*"; }
fail() {
    say "FAILED: $*"
    for o in 0 1 2 3; do
        docker logs --tail=15 "$NAME-$o" 2>&1 | grep -v '"level":"INFO"' | sed "s/^/idem-$o: /" >&2 || true
    done
    echo "$passed passed, 1 failed"
    exit 1
}

cleanup() {
    local o
    for o in 0 1 2 3; do
        docker rm -f "$NAME-$o" >/dev/null 2>&1 || true
        docker volume rm "$NAME-$o" >/dev/null 2>&1 || true
    done
    docker network rm "$NAME" >/dev/null 2>&1 || true
}
trap 'cleanup; rm -rf "$AUTH"' EXIT
trap 'exit 130' INT TERM

docker image inspect "$IMAGE" >/dev/null 2>&1 || { say "no image $IMAGE: make image"; exit 2; }
cleanup
docker network create --subnet "$NET.0/24" "$NAME" >/dev/null

# The Secret idem-credentials: credentials.toml with an admin token's digest, and the token.
TOKEN="$(docker run --rm --user "$(id -u):$(id -g)" -v "$AUTH:/auth" --entrypoint idemctl "$IMAGE" \
    -w json auth token create --credentials /auth/credentials.toml --name k8s-admin --role admin \
    --tenant '*' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
chmod 0755 "$AUTH"
chmod 0644 "$AUTH/credentials.toml"

# The Secret idem-tls: tls.crt, tls.key (naming every pod's address) and ca.crt.
TLS="$AUTH/tls"
mkdir -p "$TLS"
docker run --rm --user "$(id -u):$(id -g)" -v "$TLS:/tls" --entrypoint bash "$IMAGE" -c "
    idemctl cert create-ca --dir /tls >/dev/null &&
    idemctl cert node --dir /tls --name idem-node --ip 127.0.0.1 --ip $NET.10 --ip $NET.11 \
        --ip $NET.12 --ip $NET.13 --dns idem >/dev/null" || { say "certificates failed"; exit 1; }
mv "$TLS/idem-node.pem" "$TLS/tls.crt"; mv "$TLS/idem-node-key.pem" "$TLS/tls.key"
mv "$TLS/ca.pem" "$TLS/ca.crt"; rm -f "$TLS/ca-key.pem"
chmod 0755 "$TLS"; chmod 0644 "$TLS"/*
TLS_ENV=(-v "$TLS:/etc/idem/tls:ro"
    -e IDEM_TLS_CERT=/etc/idem/tls/tls.crt -e IDEM_TLS_KEY=/etc/idem/tls/tls.key
    -e IDEM_PEER_TLS_CERT=/etc/idem/tls/tls.crt -e IDEM_PEER_TLS_KEY=/etc/idem/tls/tls.key
    -e IDEM_PEER_TLS_CA=/etc/idem/tls/ca.crt -e IDEMCTL_CACERT=/etc/idem/tls/ca.crt)

pod() { # ordinal: (re)creates the container of pod idem-<ordinal>
    docker rm -f "$NAME-$1" >/dev/null 2>&1 || true
    docker run -d --name "$NAME-$1" --network "$NAME" --ip "$NET.1$1" \
        --user 10001:10001 --read-only --tmpfs /tmp --cap-drop ALL \
        --security-opt no-new-privileges \
        -v "$NAME-$1:/data" -v "$HERE/base/idem-start.sh:/scripts/idem-start.sh:ro" \
        -e POD_NAME="idem-$1" -e POD_NAMESPACE=test -e IDEM_REGION=local \
        -e IDEM_DATA_DIR=/data -e IDEM_LOG_FORMAT=json \
        -e IDEM_SELF_ADDR="$NET.1$1" -e IDEM_CLUSTER_ENDPOINTS="$ENDPOINTS" \
        -v "$AUTH:/etc/idem/auth:ro" -e IDEM_AUTH_CREDENTIALS=/etc/idem/auth/credentials.toml \
        -e IDEMCTL_TOKEN="$TOKEN" "${TLS_ENV[@]}" \
        --entrypoint /bin/bash "$IMAGE" /scripts/idem-start.sh >/dev/null
}

# CTL_TLS: how the checks' idemctl reaches the pods (the CA; empty for a plaintext call).
CTL_TLS=(-v "$TLS:/etc/idem/tls:ro" -e IDEMCTL_CACERT=/etc/idem/tls/ca.crt)
ctl() {
    docker run --rm --network "$NAME" "${CTL_TLS[@]}" \
        -e IDEMCTL_ENDPOINTS="$ENDPOINTS" -e IDEMCTL_TOKEN="$TOKEN" \
        -e IDEMCTL_TENANT=t -e IDEMCTL_ENV=test -e IDEMCTL_ACTOR=ops \
        -e "IDEMCTL_ENDPOINT=POST /v1/charges" --entrypoint idemctl "$IMAGE" -w json "$@"
}

# members_ok N: the leader lists exactly ids 1..N, all voters, at their stable addresses,
# caught up (lag 0).
members_ok() {
    ctl member list 2>/dev/null | python3 -c '
import json, sys
n, net = int(sys.argv[1]), sys.argv[2]
d = json.load(sys.stdin)
members = {m["id"]: m for m in d["members"]}
assert sorted(members) == list(range(1, n + 1)), sorted(members)
for i, m in members.items():
    assert m["voter"], m
    assert m["raft_addr"] == f"{net}.{9 + i}:7410" and m["api_addr"] == f"{net}.{9 + i}:7400", m
    assert m.get("lag") in (0, None), m
' "$1" "$NET" 2>/dev/null
}

wait_members() {
    local deadline=$((SECONDS + $2))
    until members_ok "$1"; do
        ((SECONDS < deadline)) || fail "$3: members: $(ctl member list 2>&1 | head -c 600)"
        sleep 2
    done
}

logged() { # ordinal text: the pod's log has the text (read whole: grep -q would cut the pipe)
    local log
    log="$(docker logs "$NAME-$1" 2>&1)"
    [[ "$log" == *"$2"* ]]
}

replays() {
    local deadline=$((SECONDS + 30)) out
    until out="$(ctl claim --key k8s-1 --body '{"n":1}' 2>/dev/null)" &&
        [[ "$out" == *'"outcome":"COMPLETED"'* && "$out" == *'"resource_id":"r1"'* ]]; do
        ((SECONDS < deadline)) || fail "$1: no replay of k8s-1: $out"
        sleep 1
    done
}

started=$SECONDS
say "1. three pods at once"
pod 0; pod 1; pod 2
wait_members 3 120 "bootstrap"
logged 0 "bootstraps it through a seed node" || fail "idem-0 did not bootstrap through the seed"
logged 1 "node 2 is a voter" && logged 2 "node 3 is a voter" || fail "idem-1/idem-2 did not join"
out="$(CTL_TLS=(); ctl member list 2>&1 || true)"
[[ "$out" != *'"members"'* ]] || fail "a plaintext call was answered: $out"
pass "idem-0 bootstrapped over TLS, idem-1 and idem-2 joined: 3 voters at stable addresses in $((SECONDS - started))s; plaintext refused"

say "2. a record; idem-1 restarted"
out="$(ctl claim --key k8s-1 --body '{"n":1}')" || fail "claim: $out"
fence="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["fence"])' <<<"$out")"
ctl complete --key k8s-1 --fence "$fence" --status 200 --resource-id r1 >/dev/null || fail "complete"
docker restart "$NAME-1" >/dev/null
wait_members 3 60 "restart"
logged 1 "data directory in use, starting" || fail "idem-1 did not start from its volume"
replays "restart"
pass "idem-1 restarted from its volume, caught up"

say "3. idem-2 with an empty volume"
docker rm -f "$NAME-2" >/dev/null
docker volume rm "$NAME-2" >/dev/null
pod 2
sleep 3
wait_members 3 90 "empty volume"
logged 2 "still a member but its volume is empty" || fail "idem-2 was not removed and added again"
pass "idem-2 removed and added again, caught up"

say "4. a fourth pod"
pod 3
wait_members 4 90 "growth"
pass "idem-3 added itself as voter 4"

say "5. every pod restarted at once"
docker restart "$NAME-0" "$NAME-1" "$NAME-2" "$NAME-3" >/dev/null
wait_members 4 90 "full restart"
replays "full restart"
pass "the cluster came back and replays k8s-1 ($((SECONDS - started))s in all)"
echo "$passed passed, 0 failed"
