#!/usr/bin/env bash
# The compose cluster's end-to-end test (make compose-test): 5 nodes in 3 regions.
#
#   deploy/compose/test.sh            needs the image (make image); root or the docker group
#
#  1. up; wait until every node's healthcheck (/healthz) passes;
#  2. checks the region delays are in place (an HTTP round trip eu -> ap takes ≥ its RTT);
#  3. region-affinity mode with regions eu, us, ap (a Raft group each besides the global
#     one); tenant demo homed in eu, tenant asia in ap;
#     an idemctl session from a container, as the operator (client certificate; the nodes
#     run TLS on both ports and authentication, certs.sh): claim, a retry (IN_PROGRESS),
#     complete, replay, another request on the same key (FINGERPRINT_MISMATCH); plus RECORDS
#     more keys claimed and completed; the same read without a credential: UNAUTHENTICATED;
#  4. docker kill of the leader's container; the cluster elects another leader and keeps
#     answering the stored result of every key; a new key is written without that node;
#  5. restarts the killed container and waits until it is healthy and has caught up;
#  6. down (volumes kept) and up again; every record is still there with its result, and the
#     only volumes are the nodes' five;
#  7. disaster recovery: idemctl snapshot save from the running cluster (every group, each
#     at its applied index); a record written after it; the whole cluster stopped (lost);
#     idemctl snapshot restore into a new volume, and a new node container started on it
#     at n1's address (a cluster of one): every record of the backup is there with its
#     result, in both region groups; the record written after the backup is not;
#  8. down -v: containers, network and volumes removed (also on failure or interrupt).
#
# Its own project (idem-compose-test) and /24 (IDEM_COMPOSE_NET, default 172.29.86), so a
# cluster started by hand with the defaults is left alone. Prints "N passed, 0 failed" at
# the end; exits 1 at the first failed check.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-idem-compose-test}"
export IDEM_COMPOSE_NET="${IDEM_COMPOSE_NET:-172.29.86}"
export IDEM_IMAGE="${IDEM_IMAGE:-idem:latest}"
RECORDS="${RECORDS:-20}"
NET="$IDEM_COMPOSE_NET"
compose=(docker-compose -f "$HERE/docker-compose.yml")
passed=0
started=$SECONDS

say() { echo "compose-test: $*" >&2; }
pass() { passed=$((passed + 1)); say "ok: $*"; }
fail() {
    say "FAILED: $*"
    "${compose[@]}" ps >&2 || true
    "${compose[@]}" logs --tail=30 >&2 || true
    echo "$passed passed, 1 failed"
    exit 1
}

# The cluster's certificates and credentials file (certs.sh), apart from a hand-started
# cluster's deploy/compose/certs.
IDEM_COMPOSE_CERTS="$(mktemp -d /tmp/idem-compose-test-certs.XXXXXX)"
export IDEM_COMPOSE_CERTS

# The backup of step 7, on this machine.
BACKUPS="$(mktemp -d /tmp/idem-compose-test-backup.XXXXXX)"
RESTORED="$COMPOSE_PROJECT_NAME-restored"

cleanup() {
    docker rm -f -v "$COMPOSE_PROJECT_NAME-ctl" "$RESTORED" >/dev/null 2>&1 || true
    docker volume rm "${RESTORED}-data" >/dev/null 2>&1 || true
    "${compose[@]}" --profile tools down -v --remove-orphans >/dev/null 2>&1 || true
}
trap 'cleanup; rm -rf "$IDEM_COMPOSE_CERTS" "$BACKUPS"' EXIT
trap 'exit 130' INT TERM

docker image inspect "$IDEM_IMAGE" >/dev/null 2>&1 ||
    { say "no image $IDEM_IMAGE: build it with make image"; exit 2; }
cleanup
"$HERE/certs.sh" "$IDEM_COMPOSE_CERTS" >&2

# A long-lived idemctl container on the cluster's network (docker exec is much faster than
# a `run` per command).
ctl_up() {
    docker rm -f -v "$COMPOSE_PROJECT_NAME-ctl" >/dev/null 2>&1 || true
    "${compose[@]}" run -d --name "$COMPOSE_PROJECT_NAME-ctl" --entrypoint sleep idemctl infinity >/dev/null
}
# CTL_ENV: extra `docker exec` arguments (e.g. -e IDEMCTL_TENANT=asia).
CTL_ENV=()
ctl() { docker exec "${CTL_ENV[@]}" "$COMPOSE_PROJECT_NAME-ctl" idemctl -w json "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {}, {'d': d}))" "$1"; }

container() { "${compose[@]}" ps -q "n$1"; }

wait_healthy() {
    local deadline=$((SECONDS + ${2:-120})) id state
    for id in $1; do
        while :; do
            state="$(docker inspect -f '{{.State.Health.Status}}' "$(container "$id")" 2>/dev/null || echo missing)"
            [[ "$state" == healthy ]] && break
            ((SECONDS < deadline)) || fail "node $id is $state after ${2:-120}s"
            sleep 1
        done
    done
}

leader() { ctl cluster status | json "[n['id'] for n in d['nodes'] if n['role'] == 'leader'][0]"; }

# claim_until KEY BODY EXPECTED_OUTCOME: claims until the outcome is EXPECTED (an election
# may answer UNAVAILABLE for a moment), at most 30 s; prints the last answer.
claim_until() {
    local deadline=$((SECONDS + 30)) out
    while :; do
        out="$(ctl claim --key "$1" --body "$2" 2>/dev/null || true)"
        [[ "$(json "d.get('outcome')" <<<"$out" 2>/dev/null)" == "$3" ]] && { echo "$out"; return; }
        ((SECONDS < deadline)) || fail "claim $1: expected $3, last answer: $out"
        sleep 0.5
    done
}

check_replays() {
    local i out
    for i in $(seq 1 "$RECORDS"); do
        out="$(claim_until "rec-$i" "{\"n\":$i}" COMPLETED)"
        [[ "$(json "d['result']['resource_id']" <<<"$out")" == "res_$i" ]] ||
            fail "rec-$i replayed another result: $out"
    done
    out="$(claim_until order-1 '{"amount":1000,"currency":"EUR"}' COMPLETED)"
    [[ "$(json "(d['result']['status_code'], d['result']['resource_id'], d['result']['fields']['amount'])" <<<"$out")" == "(201, 'ch_1', '1000')" ]] ||
        fail "order-1 replayed another result: $out"
}

say "1. up ($IDEM_IMAGE, network $NET.0/24)"
"${compose[@]}" up -d --build --quiet-pull >/dev/null 2>&1 || "${compose[@]}" up -d --build
wait_healthy "1 2 3 4 5"
ctl_up
pass "5 nodes healthy in $((SECONDS - started))s"

say "2. region delays"
rtt_ms() { # from node $1 to node $2's HTTP port: one request and its answer, in ms
    docker exec "$(container "$1")" bash -c '
        s=$(date +%s%N); exec 3<>/dev/tcp/'"$NET.$((10 + $2))"'/7480
        printf "GET /healthz HTTP/1.0\r\n\r\n" >&3; cat <&3 >/dev/null; e=$(date +%s%N)
        echo $(( (e - s) / 1000000 ))'
}
eu_ap="$(rtt_ms 1 5)"
((eu_ap >= 40)) || fail "eu -> ap took ${eu_ap}ms, expected ≥ 40 (the emulated RTT)"
pass "eu -> ap HTTP round trip ${eu_ap}ms (emulated RTT 40 ms), eu -> eu $(rtt_ms 1 2)ms"

say "3. regions; idemctl session"
ctl cluster mode region-affinity >/dev/null || fail "cluster mode region-affinity"
for region in eu us ap; do
    ctl region add "$region" >/dev/null || fail "region add $region"
done
ctl tenant bind demo --home eu >/dev/null || fail "tenant bind demo"
ctl tenant bind asia --home ap >/dev/null || fail "tenant bind asia"
CTL_ENV=(-e IDEMCTL_TENANT=asia)
out="$(claim_until asia-1 '{"n":1}' ACQUIRED)"
ctl complete --key asia-1 --fence "$(json "d['fence']" <<<"$out")" --status 200 --resource-id r_asia >/dev/null ||
    fail "complete asia-1"
CTL_ENV=()
out="$(claim_until order-1 '{"amount":1000,"currency":"EUR"}' ACQUIRED)"
fence="$(json "d['fence']" <<<"$out")"
claim_until order-1 '{"currency":"EUR","amount":1000}' IN_PROGRESS >/dev/null
ctl complete --key order-1 --fence "$fence" --status 201 --resource-id ch_1 --field amount=1000 >/dev/null ||
    fail "complete order-1"
claim_until order-1 '{"amount":1000,"currency":"EUR"}' COMPLETED >/dev/null
claim_until order-1 '{"amount":2000,"currency":"EUR"}' FINGERPRINT_MISMATCH >/dev/null
for i in $(seq 1 "$RECORDS"); do
    out="$(claim_until "rec-$i" "{\"n\":$i}" ACQUIRED)"
    ctl complete --key "rec-$i" --fence "$(json "d['fence']" <<<"$out")" --status 200 \
        --resource-id "res_$i" >/dev/null || fail "complete rec-$i"
done
check_replays
out="$(docker exec "$COMPOSE_PROJECT_NAME-ctl" env -u IDEMCTL_CERT -u IDEMCTL_KEY \
    idemctl -w json get --key order-1 2>&1 || true)"
[[ "$out" == *UNAUTHENTICATED* ]] || fail "a read without a credential was not refused: $out"
pass "region-affinity (eu, us, ap); claim, retry, complete, replay, mismatch; $RECORDS more records completed and replayed; no credential, no access"

say "4. kill the leader's container"
old="$(leader)"
docker kill "$(container "$old")" >/dev/null
[[ "$(docker inspect -f '{{.State.Running}}' "$(container "$old")")" == false ]] || fail "node $old still runs"
check_replays
new="$(leader)"
[[ -n "$new" && "$new" != "$old" ]] || fail "no new leader (old $old, now '$new')"
out="$(claim_until during-outage '{"x":1}' ACQUIRED)"
ctl complete --key during-outage --fence "$(json "d['fence']" <<<"$out")" --status 200 --resource-id r_out >/dev/null ||
    fail "complete during-outage"
pass "leader n$old killed; n$new leads; every stored result replayed; a new record written"

say "5. restart n$old"
"${compose[@]}" start "n$old" >/dev/null
wait_healthy "$old" 60
deadline=$((SECONDS + 60))
until [[ "$(ctl cluster status | json "all(n['reachable'] and n['lag'] == 0 for n in d['nodes'])")" == True ]]; do
    ((SECONDS < deadline)) || fail "n$old did not catch up: $(ctl cluster status)"
    sleep 1
done
pass "n$old back, every node reachable and caught up"

say "6. down and up again (volumes kept)"
docker rm -f -v "$COMPOSE_PROJECT_NAME-ctl" >/dev/null
"${compose[@]}" down >/dev/null 2>&1
"${compose[@]}" up -d >/dev/null 2>&1
wait_healthy "1 2 3 4 5"
ctl_up
check_replays
claim_until during-outage '{"x":1}' COMPLETED >/dev/null
# The only volumes are the nodes' named ones (the holders and idemctl have a tmpfs at /data).
for c in $("${compose[@]}" ps -q) "$COMPOSE_PROJECT_NAME-ctl"; do
    for v in $(docker inspect -f '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' "$c"); do
        [[ "$v" =~ ^${COMPOSE_PROJECT_NAME}_n[1-5]-data$ ]] || fail "container $c has volume $v"
    done
done
pass "after down/up: all $((RECORDS + 2)) records there with their results; only the nodes' volumes"

say "7. back up, lose the cluster, restore into a new one"
out="$(ctl snapshot save /data/backup.idembk)" || fail "snapshot save: $out"
groups="$(json "d['groups']" <<<"$out")"
[[ "$groups" =~ ^0@[0-9]+,1@[0-9]+,2@[0-9]+,3@[0-9]+$ ]] || fail "the backup's groups: $groups"
# `docker cp` cannot read the tmpfs the file is on; cat through `docker exec` (no tty).
docker exec "$COMPOSE_PROJECT_NAME-ctl" cat /data/backup.idembk >"$BACKUPS/backup.idembk" ||
    fail "copy the backup out of the idemctl container"
chmod 0755 "$BACKUPS"; chmod 0644 "$BACKUPS/backup.idembk"
out="$(claim_until after-backup '{"x":2}' ACQUIRED)"
docker rm -f -v "$COMPOSE_PROJECT_NAME-ctl" >/dev/null
"${compose[@]}" stop >/dev/null 2>&1
# The new node: idemctl snapshot restore seeds its volume, idemd starts on it as node 1 at
# n1's address (its certificate names that address), with no initial members.
docker volume create "${RESTORED}-data" >/dev/null
docker run --rm -v "${RESTORED}-data:/data" -v "$BACKUPS:/backup:ro" --entrypoint idemctl "$IDEM_IMAGE" \
    -w json snapshot restore /backup/backup.idembk --data-dir /data --node-id 1 \
    --raft-addr "$NET.11:7410" --api-addr "$NET.11:7400" --region eu --zone eu-a >/dev/null ||
    fail "snapshot restore"
certs="$IDEM_COMPOSE_CERTS"
docker run -d --name "$RESTORED" --network "${COMPOSE_PROJECT_NAME}_idem" --ip "$NET.11" \
    -v "${RESTORED}-data:/data" -v "$certs/n1:/certs:ro" -v "$certs/auth:/auth:ro" \
    -e IDEM_NODE_ID=1 -e IDEM_REGION=eu -e IDEM_ZONE=eu-a -e IDEM_LOG_FORMAT=text \
    -e IDEM_API_ADDR="$NET.11:7400" -e IDEM_RAFT_ADDR="$NET.11:7410" \
    -e IDEM_TLS_CERT=/certs/node.crt -e IDEM_TLS_KEY=/certs/node.key -e IDEM_TLS_CA=/certs/ca.crt \
    -e IDEM_PEER_TLS_CERT=/certs/node.crt -e IDEM_PEER_TLS_KEY=/certs/node.key \
    -e IDEM_PEER_TLS_CA=/certs/ca.crt -e IDEM_AUTH=on -e IDEM_AUTH_CREDENTIALS=/auth/credentials.toml \
    "$IDEM_IMAGE" >/dev/null || fail "start the restored node"
deadline=$((SECONDS + 60))
until [[ "$(docker inspect -f '{{.State.Health.Status}}' "$RESTORED")" == healthy ]]; do
    ((SECONDS < deadline)) || { docker logs --tail 30 "$RESTORED" >&2; fail "the restored node is not healthy"; }
    sleep 1
done
ctl_up
CTL_ENV=(-e IDEMCTL_ENDPOINTS="$NET.11:7400")
check_replays
claim_until during-outage '{"x":1}' COMPLETED >/dev/null
out="$(CTL_ENV+=(-e IDEMCTL_TENANT=asia); claim_until asia-1 '{"n":1}' COMPLETED)"
[[ "$(json "d['result']['resource_id']" <<<"$out")" == r_asia ]] || fail "asia-1 replayed another result: $out"
claim_until after-backup '{"x":2}' ACQUIRED >/dev/null
CTL_ENV=()
pass "backup of groups $groups restored into a new node: every record of eu's and ap's groups there with its result; the one written after the backup is not"

say "8. down -v"
cleanup
[[ -z "$(docker volume ls -q --filter "name=${COMPOSE_PROJECT_NAME}_")" ]] || fail "volumes left behind"
pass "torn down in $((SECONDS - started))s in all"
echo "$passed passed, 0 failed"
