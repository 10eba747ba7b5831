#!/bin/bash
# Start script of an idem pod (StatefulSet): gives the node a stable address and brings it
# into the cluster.
#
# idemd records IP addresses in the Raft membership, and a pod's IP changes when the pod is
# recreated. So each pod has its own ClusterIP Service (named like the pod), whose address
# lives as long as the Service: the node listens on 0.0.0.0 and is known to its peers by
# that Service's address (kube-proxy forwards it to the pod, whatever its IP).
#
# Start, by what the data volume holds:
#   node.toml present   the node has Raft state: exec idemd (it recovers and rejoins).
#   empty, a cluster answers at the client Service
#                       start idemd --join, then `idemctl member add` (learner, returns once
#                       caught up) and `member promote`. A member of the same id still listed
#                       (a pod whose volume was lost) is removed first: a voter must never
#                       come back with an empty log under its old identity.
#   empty, no cluster, ordinal 0
#                       bootstrap. A node that initializes a group records its own
#                       listening address, which here is 0.0.0.0; so a throwaway seed node
#                       (id 1000, on loopback) initializes a one-node group, adds this node
#                       by its Service address, promotes it, hands it the leadership and is
#                       removed. The group then holds only stable addresses.
#   empty, no cluster, ordinal > 0
#                       wait for ordinal 0 to bootstrap, then join as above.
#
# Environment (set by the StatefulSet): POD_NAME (<name>-<ordinal>; node id = ordinal + 1),
# POD_NAMESPACE, IDEM_REGION, IDEM_ZONE (default <region>-a), IDEM_DATA_DIR,
# IDEM_CLIENT_SERVICE (the client Service, default idem), IDEM_AUTH_CREDENTIALS (the
# credentials file) and IDEMCTL_TOKEN (an admin token of it, for the idemctl calls below).
# IDEM_SELF_ADDR and IDEM_CLUSTER_ENDPOINTS replace the DNS look-ups (tests, or networks with
# stable pod IPs).
set -euo pipefail

log() { echo "idem-start: $*" >&2; }

ordinal="${POD_NAME##*-}"
[[ "$ordinal" =~ ^[0-9]+$ ]] || { log "no ordinal in POD_NAME=${POD_NAME:-}"; exit 2; }
id=$((ordinal + 1))
SEED_ID=1000

# The first IPv4 address of a DNS name, waiting up to two minutes for it to appear.
resolve() {
    local deadline=$((SECONDS + 120)) ip=""
    while :; do
        ip="$(getent ahostsv4 "$1" | awk '{print $1; exit}')" || true
        [[ -n "$ip" ]] && { echo "$ip"; return; }
        ((SECONDS < deadline)) || { log "cannot resolve $1"; exit 1; }
        sleep 2
    done
}

self="${IDEM_SELF_ADDR:-$(resolve "$POD_NAME.$POD_NAMESPACE.svc")}"
endpoints="${IDEM_CLUSTER_ENDPOINTS:-$(resolve "${IDEM_CLIENT_SERVICE:-idem}.$POD_NAMESPACE.svc"):7400}"
export IDEM_NODE_ID="$id" IDEM_RAFT_ADDR=0.0.0.0:7410 IDEM_API_ADDR=0.0.0.0:7400
export IDEM_REGION="${IDEM_REGION:-local}"
export IDEM_ZONE="${IDEM_ZONE:-$IDEM_REGION-a}"
member=(--id "$id" --raft-addr "$self:7410" --api-addr "$self:7400"
    --region "$IDEM_REGION" --zone "$IDEM_ZONE")

ctl() { IDEMCTL_ENDPOINTS="$endpoints" idemctl --max-attempts 2 --request-timeout 10s "$@"; }

if [[ -e "$IDEM_DATA_DIR/node.toml" ]]; then
    log "node $id ($self): data directory in use, starting"
    exec idemd
fi

# Runs until an operator command succeeds (each attempt bounded by ctl's own timeouts).
retry() {
    until "$@" >/dev/null 2>&1; do
        kill -0 "$node" 2>/dev/null || { log "idemd exited"; wait "$node"; exit 1; }
        sleep 2
    done
}

# Whether a cluster answers: one short attempt (a node without a leader answers after its
# read timeout, 5 s by default).
answers() { IDEMCTL_ENDPOINTS="$endpoints" idemctl --max-attempts 1 --request-timeout 3s member list >/dev/null 2>&1; }

listed() { ctl -w json member list 2>/dev/null | grep -Eq "\"id\": ?$1[,}]"; }

bootstrap_with_seed() {
    local seed_dir=/tmp/idem-seed
    rm -rf "$seed_dir"
    log "no cluster answers at $endpoints: node $id bootstraps it through a seed node"
    # The seed listens on loopback and lives for seconds: authentication off.
    idemd --node-id "$SEED_ID" --data-dir "$seed_dir" --raft-addr 127.0.0.1:7420 \
        --api-addr 127.0.0.1:7430 --http-addr 127.0.0.1:7490 --auth off &
    local seed=$!
    seedctl() { IDEMCTL_ENDPOINTS=127.0.0.1:7430 idemctl --max-attempts 2 "$@"; }
    retry seedctl member list
    retry seedctl member add "${member[@]}"
    retry seedctl member promote "$id"
    retry seedctl leader transfer "$id"
    IDEMCTL_ENDPOINTS=127.0.0.1:7400 retry idemctl member remove "$SEED_ID"
    kill -TERM "$seed"
    wait "$seed" || true
    rm -rf "$seed_dir"
    log "cluster bootstrapped: node $id leads, at $self"
}

join() {
    if listed "$id"; then
        log "node $id is still a member but its volume is empty: removing it, then adding it again"
        retry ctl member remove "$id"
    fi
    log "joining as node $id at $self"
    retry ctl member add "${member[@]}"
    retry ctl member promote "$id"
    log "node $id is a voter"
}

idemd --join &
node=$!
trap 'kill -TERM "$node" 2>/dev/null' TERM INT

misses=0
while :; do
    if answers; then
        join
        break
    fi
    misses=$((misses + 1))
    # Ordinal 0 bootstraps only after 5 straight misses (15-25 s), so a cluster that is
    # merely restarting is not taken for an absent one.
    if [[ "$ordinal" == 0 && "$misses" -ge 5 ]]; then
        bootstrap_with_seed
        break
    fi
    kill -0 "$node" 2>/dev/null || { log "idemd exited"; wait "$node"; exit 1; }
    sleep 2
done
status=0
wait "$node" || status=$?
# A TERM interrupts the first wait; the second one lets idemd finish its drain.
if kill -0 "$node" 2>/dev/null; then
    status=0
    wait "$node" || status=$?
fi
exit "$status"
