#!/usr/bin/env bash
# A local idem cluster on loopback: 3 or 5 idemd processes (more with `add`), one
# directory, one TOML config, one data directory and one log per node.
#
#   deploy/local/cluster.sh up 3|5 [--regions r1,r2,r3] [--tls]
#                                                          build, configure, start, wait for health;
#                                                          --tls: throwaway CA, TLS on API and Raft
#                                                          ports, authentication on (an admin client
#                                                          certificate in the credentials file)
#   deploy/local/cluster.sh status                         idemctl cluster status
#   deploy/local/cluster.sh leader                         id of the current leader
#   deploy/local/cluster.sh kill N | stop N | restart N    kill -9 | SIGTERM | stop + start
#   deploy/local/cluster.sh add N                          start node N with --join, member add + promote
#   deploy/local/cluster.sh remove N                       member remove N, then stop it
#   deploy/local/cluster.sh logs N [-f]                    the node's log (follow with -f)
#   deploy/local/cluster.sh env                            export IDEMCTL_ENDPOINTS=... (and, with
#                                                          --tls, IDEMCTL_CACERT/CERT/KEY of the admin)
#   deploy/local/cluster.sh token TENANT                   (--tls) a new worker token of TENANT: its
#                                                          digest goes into the credentials file (the
#                                                          nodes re-read it), the token to stdout
#   deploy/local/cluster.sh down                           SIGTERM every node, wait
#
# Ports of node N (1..9): API 75N0, Raft 75N1, HTTP 75N2 (node 1: 7510/7511/7512). They never
# collide with the single dev node (`make run`: 7400/7410/7480).
#
# Files under $IDEM_CLUSTER_DIR (default ./.cluster):
#   cluster.env          node count and regions of `up`
#   nN/idemd.toml        node N's configuration (rerun by hand: idemd --config nN/idemd.toml)
#   nN/data/             node N's data directory
#   nN/idemd.log         node N's log (appended across restarts)
#   nN/pid               node N's process id while it runs
#   nN/removed           present once node N was removed from the group
#   certs/               with --tls: ca.pem (+ ca-key.pem), nodeN.pem/-key.pem (API and peer
#                        certificate of node N: localhost, 127.0.0.1), admin.pem/-key.pem
#   credentials.toml     with --tls: the credentials file every node reads ([auth]): the
#                        certificate name "admin" (role admin, every tenant) and the digests
#                        of the tokens `token` created (mode 0600)
#
# Environment: IDEM_CLUSTER_DIR, CARGO_TARGET_DIR (as the Makefile: /var/cache/idem-target
# when writable, else ./target), IDEM_CLUSTER_NO_BUILD=1 (use the binaries already built),
# IDEM_CLUSTER_HEARTBEAT / IDEM_CLUSTER_ELECTION (Raft timings, default 100ms / 500ms).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${IDEM_CLUSTER_DIR:-./.cluster}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
[[ -e "$DIR/.gitignore" ]] || echo '*' >"$DIR/.gitignore" # keep ./.cluster out of git
if [[ -z "${CARGO_TARGET_DIR:-}" ]]; then
    if [[ -w /var/cache ]]; then
        CARGO_TARGET_DIR=/var/cache/idem-target
    else
        CARGO_TARGET_DIR="$ROOT/target"
    fi
fi
export CARGO_TARGET_DIR
IDEMD="$CARGO_TARGET_DIR/release/idemd"
IDEMCTL="$CARGO_TARGET_DIR/release/idemctl"
HEARTBEAT="${IDEM_CLUSTER_HEARTBEAT:-100ms}"
ELECTION="${IDEM_CLUSTER_ELECTION:-500ms}"
READY_TIMEOUT=30

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

usage() {
    sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
}

api_addr() { echo "127.0.0.1:75${1}0"; }
raft_addr() { echo "127.0.0.1:75${1}1"; }
http_addr() { echo "127.0.0.1:75${1}2"; }
node_dir() { echo "$DIR/n$1"; }

check_id() {
    [[ "$1" =~ ^[1-9]$ ]] || die "node id must be 1..9 (ports 75N0..75N2), got '$1'"
}

# Ids of every node that has a directory and was not removed.
nodes() {
    local d id
    for d in "$DIR"/n[1-9]; do
        [[ -d "$d" && ! -e "$d/removed" ]] || continue
        id="${d##*/n}"
        echo "$id"
    done
}

endpoints() {
    local id list=()
    for id in $(nodes); do
        list+=("$(api_addr "$id")")
    done
    local IFS=,
    echo "${list[*]}"
}

CERTS="$DIR/certs"
CREDENTIALS="$DIR/credentials.toml"

# True when the cluster of $DIR runs on TLS (`up --tls`).
tls_on() {
    [[ -f "$DIR/cluster.env" ]] && grep -qx 'TLS=1' "$DIR/cluster.env"
}

# idemctl's TLS flags for the admin client certificate (none for a plaintext cluster).
tls_flags() {
    if tls_on; then
        echo --cacert "$CERTS/ca.pem" --cert "$CERTS/admin.pem" --key "$CERTS/admin-key.pem"
    fi
}

ctl() {
    # shellcheck disable=SC2046 # tls_flags is a list of words without spaces
    "$IDEMCTL" $(tls_flags) --endpoints "$(endpoints)" "$@"
}

# The throwaway CA and the admin client certificate of a --tls cluster.
make_ca() {
    rm -rf "$CERTS"
    "$IDEMCTL" cert create-ca --dir "$CERTS" --name "idem local cluster CA" >/dev/null
    "$IDEMCTL" cert client --dir "$CERTS" --name admin >/dev/null
    echo "certificates in $CERTS (CA, admin client)"
}

# Node N's certificate: server (API and Raft port) and peer client, for localhost/127.0.0.1.
make_node_cert() { # id
    "$IDEMCTL" cert node --dir "$CERTS" --name "node$1" --dns localhost --ip 127.0.0.1 >/dev/null
}

# The credentials file of a --tls cluster: the admin client certificate (its CN "admin")
# is an administrator of every tenant; workers' tokens are added by `token`.
make_credentials() {
    (
        umask 077
        printf '[[certificate]]\nname = "admin"\nrole = "admin"\ntenants = ["*"]\n' >"$CREDENTIALS"
    )
    echo "credentials in $CREDENTIALS (certificate admin: role admin, every tenant)"
}

# The [tls], [peer_tls] and [auth] sections of node N: clients may present the admin
# certificate (client_auth optional, so token clients connect too); peers must; every API
# call needs a credential of the credentials file.
tls_config() { # id
    local cert="$CERTS/node$1.pem" key="$CERTS/node$1-key.pem" ca="$CERTS/ca.pem"
    printf '[tls]\ncert = "%s"\nkey = "%s"\nca = "%s"\nclient_auth = "optional"\n\n' \
        "$cert" "$key" "$ca"
    printf '[peer_tls]\ncert = "%s"\nkey = "%s"\nca = "%s"\n\n' "$cert" "$key" "$ca"
    printf '[auth]\nmode = "on"\ncredentials = "%s"\n\n' "$CREDENTIALS"
}

pid_of() {
    local file
    file="$(node_dir "$1")/pid"
    [[ -f "$file" ]] && cat "$file"
}

running() {
    local pid
    pid="$(pid_of "$1")" || return 1
    kill -0 "$pid" 2>/dev/null
}

build() {
    if [[ "${IDEM_CLUSTER_NO_BUILD:-}" == 1 ]]; then
        [[ -x "$IDEMD" && -x "$IDEMCTL" ]] || die "no binaries in $CARGO_TARGET_DIR/release"
        return
    fi
    echo "building idemd and idemctl (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    (cd "$ROOT" && cargo build --release --bin idemd --bin idemctl)
}

region_of() { # id
    local regions
    IFS=, read -r -a regions <<<"$REGIONS"
    echo "${regions[$((($1 - 1) % ${#regions[@]}))]}"
}

load_env() {
    [[ -f "$DIR/cluster.env" ]] || die "no cluster in $DIR (run: $0 up 3)"
    # shellcheck source=/dev/null
    source "$DIR/cluster.env"
}

# Writes nN/idemd.toml. Initial members list every node 1..COUNT; a joining node gets
# `join = true` and no list.
write_config() { # id join
    local id="$1" join="$2" dir region m
    dir="$(node_dir "$id")"
    region="$(region_of "$id")"
    mkdir -p "$dir/data"
    {
        echo "# node $id of the local cluster (deploy/local/cluster.sh)"
        echo "node_id = $id"
        echo "data_dir = \"$dir/data\""
        echo "api_addr = \"$(api_addr "$id")\""
        echo "raft_addr = \"$(raft_addr "$id")\""
        echo "http_addr = \"$(http_addr "$id")\""
        echo "region = \"$region\""
        echo "zone = \"$region-a\""
        echo
        if tls_on; then
            tls_config "$id"
        fi
        echo "[raft]"
        echo "heartbeat_interval = \"$HEARTBEAT\""
        echo "election_timeout = \"$ELECTION\""
        echo
        if ! tls_on; then
            echo "[auth]"
            echo "mode = \"off\"   # a plaintext development cluster: anyone may call anything"
            echo
        fi
        echo "[cluster]"
        if [[ "$join" == true ]]; then
            echo "join = true"
        else
            echo "join = false"
            echo "initial_members = ["
            for ((m = 1; m <= COUNT; m++)); do
                region="$(region_of "$m")"
                printf '  { id = %d, raft_addr = "%s", api_addr = "%s", region = "%s", zone = "%s-a" },\n' \
                    "$m" "$(raft_addr "$m")" "$(api_addr "$m")" "$region" "$region"
            done
            echo "]"
        fi
    } >"$dir/idemd.toml"
}

start_node() { # id
    local dir
    dir="$(node_dir "$1")"
    if running "$1"; then
        die "node $1 already runs (pid $(pid_of "$1"))"
    fi
    [[ -f "$dir/idemd.toml" ]] || die "node $1 has no configuration"
    echo "--- start $(date -u +%FT%TZ) ---" >>"$dir/idemd.log"
    nohup "$IDEMD" --config "$dir/idemd.toml" >>"$dir/idemd.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    echo "node $1: pid $!, api $(api_addr "$1"), raft $(raft_addr "$1"), http $(http_addr "$1")"
}

healthy() {
    curl -fsS -m 1 "http://$(http_addr "$1")/healthz" >/dev/null 2>&1
}

wait_healthy() { # id
    local deadline=$((SECONDS + READY_TIMEOUT))
    until healthy "$1"; do
        if ! running "$1"; then
            tail -n 20 "$(node_dir "$1")/idemd.log" >&2
            die "node $1 exited (log tail above)"
        fi
        ((SECONDS < deadline)) || die "node $1 not healthy after ${READY_TIMEOUT}s (see $0 logs $1)"
        sleep 0.2
    done
    echo "node $1: healthy ($(curl -fsS -m 1 "http://$(http_addr "$1")/healthz"))"
}

wait_listening() { # id
    local deadline=$((SECONDS + READY_TIMEOUT))
    until (exec 3<>"/dev/tcp/127.0.0.1/75${1}1") 2>/dev/null; do
        running "$1" || die "node $1 exited (see $0 logs $1)"
        ((SECONDS < deadline)) || die "node $1 does not listen on $(raft_addr "$1")"
        sleep 0.2
    done
}

signal_and_wait() { # signal id
    local pid deadline=$((SECONDS + 20))
    pid="$(pid_of "$2")" || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill "-$1" "$pid"
        while kill -0 "$pid" 2>/dev/null; do
            ((SECONDS < deadline)) || die "node $2 (pid $pid) still runs 20s after SIG$1"
            sleep 0.1
        done
        echo "node $2: stopped (SIG$1, pid $pid)"
    fi
    rm -f "$(node_dir "$2")/pid"
}

cmd_up() {
    local count="${1:-}" id
    [[ "$count" == 3 || "$count" == 5 ]] || die "usage: up 3|5 [--regions r1,r2,r3]"
    shift
    REGIONS=r1,r2,r3
    TLS=0
    while (($#)); do
        case "$1" in
        --regions)
            REGIONS="${2:?--regions needs a list}"
            shift 2
            ;;
        --regions=*)
            REGIONS="${1#--regions=}"
            shift
            ;;
        --tls)
            TLS=1
            shift
            ;;
        *) die "unknown option '$1'" ;;
        esac
    done
    [[ "$REGIONS" =~ ^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$ ]] || die "bad --regions '$REGIONS'"
    for id in $(nodes); do
        if running "$id"; then
            die "node $id of $DIR still runs: run '$0 down' first"
        fi
    done
    [[ -z "$(nodes)" ]] || die "$DIR holds an earlier cluster: run '$0 down' and remove it, or set IDEM_CLUSTER_DIR"
    build
    COUNT="$count"
    printf 'COUNT=%s\nREGIONS=%s\n' "$COUNT" "$REGIONS" >"$DIR/cluster.env"
    echo "TLS=$TLS" >>"$DIR/cluster.env"
    if ((TLS)); then
        make_ca
        make_credentials
        for ((id = 1; id <= COUNT; id++)); do
            make_node_cert "$id"
        done
    fi
    for ((id = 1; id <= COUNT; id++)); do
        write_config "$id" false
    done
    for ((id = 1; id <= COUNT; id++)); do
        start_node "$id"
    done
    for ((id = 1; id <= COUNT; id++)); do
        wait_healthy "$id"
    done
    echo
    echo "cluster of $COUNT up in $DIR; leader: $(leader_id)"
    cmd_env
}

cmd_down() {
    local id d
    for d in "$DIR"/n[1-9]; do
        [[ -d "$d" ]] || continue
        id="${d##*/n}"
        signal_and_wait TERM "$id"
    done
    echo "cluster down (files kept in $DIR)"
}

leader_id() {
    local id leader
    for id in $(nodes); do
        running "$id" || continue
        leader="$(curl -fsS -m 1 "http://$(http_addr "$id")/healthz" 2>/dev/null | grep -o 'leader [0-9]*' | cut -d' ' -f2)" || continue
        if [[ -n "$leader" ]]; then
            echo "$leader"
            return 0
        fi
    done
    echo "none"
}

cmd_add() {
    local id="${1:?usage: add N}"
    check_id "$id"
    load_env
    [[ ! -e "$(node_dir "$id")/idemd.toml" || -e "$(node_dir "$id")/removed" ]] ||
        die "node $id exists already"
    rm -rf "$(node_dir "$id")"
    if tls_on; then
        make_node_cert "$id"
    fi
    write_config "$id" true
    start_node "$id"
    wait_listening "$id"
    local region
    region="$(region_of "$id")"
    ctl member add --id "$id" --raft-addr "$(raft_addr "$id")" --api-addr "$(api_addr "$id")" \
        --region "$region" --zone "$region-a"
    ctl member promote "$id"
    wait_healthy "$id"
    cmd_env
}

cmd_remove() {
    local id="${1:?usage: remove N}"
    check_id "$id"
    load_env
    ctl member remove "$id"
    signal_and_wait TERM "$id"
    touch "$(node_dir "$id")/removed"
    echo "node $id removed (its files stay in $(node_dir "$id"))"
    cmd_env
}

cmd_restart() {
    local id="${1:?usage: restart N}"
    check_id "$id"
    signal_and_wait TERM "$id"
    start_node "$id"
    wait_healthy "$id"
}

cmd_logs() {
    local id="${1:?usage: logs N [-f]}" log
    check_id "$id"
    log="$(node_dir "$id")/idemd.log"
    [[ -f "$log" ]] || die "no log for node $id"
    if [[ "${2:-}" == -f ]]; then
        exec tail -n 50 -f "$log"
    fi
    tail -n "${LINES:-100}" "$log"
}

# What idemctl needs, as `export` lines for eval: endpoints, and on a --tls cluster the CA
# and the admin client certificate (https:// follows from the CA).
cmd_env() {
    echo "export IDEMCTL_ENDPOINTS=$(endpoints)"
    if tls_on; then
        echo "export IDEMCTL_CACERT=$CERTS/ca.pem IDEMCTL_CERT=$CERTS/admin.pem IDEMCTL_KEY=$CERTS/admin-key.pem"
    fi
}

# A new worker token of one tenant: `idemctl auth token create` adds its digest to the
# credentials file (the nodes re-read it within a second) and the token goes to stdout, alone,
# for `TOKEN=$(cluster.sh token acme)`.
cmd_token() {
    local tenant="${1:?usage: token TENANT}" name out token
    [[ "$tenant" =~ ^[A-Za-z0-9._-]{1,64}$ ]] || die "bad tenant '$tenant' (letters, digits, . _ -)"
    load_env
    tls_on || die "tokens need authentication: this cluster is plaintext with auth off (up 3 --tls)"
    [[ -f "$CREDENTIALS" ]] || die "no credentials file $CREDENTIALS"
    name="worker-$tenant-$(date -u +%Y%m%dT%H%M%S)-$RANDOM"
    out="$("$IDEMCTL" -w json auth token create --credentials "$CREDENTIALS" \
        --name "$name" --role worker --tenant "$tenant")"
    chmod 600 "$CREDENTIALS"
    token="$(sed -n 's/.*"token" *: *"\(idem_[0-9a-f]*\)".*/\1/p' <<<"$out")"
    [[ -n "$token" ]] || die "idemctl printed no token"
    echo "token $name: role worker, tenant $tenant (revoke: idemctl auth token revoke --credentials $CREDENTIALS --name $name)" >&2
    # The nodes poll the file every 250 ms: give them a beat so the token works at once.
    sleep 0.5
    echo "$token"
}

main() {
    local command="${1:-}"
    (($#)) && shift
    case "$command" in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status) ctl cluster status ;;
    leader) leader_id ;;
    kill)
        check_id "${1:?usage: kill N}"
        signal_and_wait KILL "$1"
        ;;
    stop)
        check_id "${1:?usage: stop N}"
        signal_and_wait TERM "$1"
        ;;
    restart) cmd_restart "$@" ;;
    add) cmd_add "$@" ;;
    remove) cmd_remove "$@" ;;
    logs) cmd_logs "$@" ;;
    env) cmd_env ;;
    token) cmd_token "$@" ;;
    -h | --help | help) usage ;;
    *) usage ;;
    esac
}

main "$@"
