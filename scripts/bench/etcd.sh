#!/usr/bin/env bash
# A local 3-member etcd cluster on loopback, the baseline of the idem benchmarks.
#
#   scripts/bench/etcd.sh up        start members 1..3, wait until the cluster is healthy
#   scripts/bench/etcd.sh down      SIGTERM every member, wait
#   scripts/bench/etcd.sh leader    client endpoint (host:port) of the current leader
#   scripts/bench/etcd.sh pids      NAME=PID of every running member (for --node-pid)
#   scripts/bench/etcd.sh endpoints client endpoints, comma-separated
#
# Member N: client port 2379 / 22379 / 32379, peer port 2380 / 22380 / 32380 (etcd's own
# local-cluster convention; clear of idem's 7400-7599). Default durability: every commit is
# fsynced (no --unsafe-no-fsync), snapshot and compaction settings are etcd's defaults.
#
# Files under $IDEM_ETCD_DIR (default /tmp/idem-bench-etcd): eN/data, eN/etcd.log, eN/pid.
# `up` starts from empty data directories.
set -euo pipefail

DIR="${IDEM_ETCD_DIR:-/tmp/idem-bench-etcd}"
ETCD="${ETCD:-etcd}"
ETCDCTL="${ETCDCTL:-etcdctl}"
MEMBERS=(1 2 3)
READY_TIMEOUT=30

die() {
    echo "etcd.sh: $*" >&2
    exit 1
}

client_port() { case "$1" in 1) echo 2379 ;; 2) echo 22379 ;; 3) echo 32379 ;; esac }
peer_port() { case "$1" in 1) echo 2380 ;; 2) echo 22380 ;; 3) echo 32380 ;; esac }
client_addr() { echo "127.0.0.1:$(client_port "$1")"; }

endpoints() {
    local n list=()
    for n in "${MEMBERS[@]}"; do list+=("$(client_addr "$n")"); done
    local IFS=,
    echo "${list[*]}"
}

pid_of() { [[ -f "$DIR/e$1/pid" ]] && cat "$DIR/e$1/pid"; }

running() {
    local pid
    pid="$(pid_of "$1")" || return 1
    kill -0 "$pid" 2>/dev/null
}

cmd_up() {
    command -v "$ETCD" >/dev/null || die "no etcd binary (Debian: apt-get install etcd-server etcd-client)"
    command -v "$ETCDCTL" >/dev/null || die "no etcdctl binary (Debian: apt-get install etcd-client)"
    local n cluster=() deadline
    for n in "${MEMBERS[@]}"; do
        running "$n" && die "member $n already runs (pid $(pid_of "$n")): run '$0 down' first"
        for port in "$(client_port "$n")" "$(peer_port "$n")"; do
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                die "port $port is in use (another etcd?)"
            fi
        done
        cluster+=("e$n=http://127.0.0.1:$(peer_port "$n")")
    done
    local IFS=,
    local initial="${cluster[*]}"
    unset IFS
    rm -rf "$DIR"
    mkdir -p "$DIR"
    for n in "${MEMBERS[@]}"; do
        mkdir -p "$DIR/e$n"
        nohup "$ETCD" --name "e$n" --data-dir "$DIR/e$n/data" \
            --listen-client-urls "http://$(client_addr "$n")" \
            --advertise-client-urls "http://$(client_addr "$n")" \
            --listen-peer-urls "http://127.0.0.1:$(peer_port "$n")" \
            --initial-advertise-peer-urls "http://127.0.0.1:$(peer_port "$n")" \
            --initial-cluster "$initial" --initial-cluster-token idem-bench \
            --initial-cluster-state new --logger zap --log-outputs stderr \
            >"$DIR/e$n/etcd.log" 2>&1 </dev/null &
        echo $! >"$DIR/e$n/pid"
        echo "etcd member $n: pid $!, client $(client_addr "$n"), peer 127.0.0.1:$(peer_port "$n")"
    done
    deadline=$((SECONDS + READY_TIMEOUT))
    until ETCDCTL_API=3 "$ETCDCTL" --endpoints "$(endpoints)" --command-timeout 2s endpoint health >/dev/null 2>&1; do
        for n in "${MEMBERS[@]}"; do
            running "$n" || {
                tail -n 20 "$DIR/e$n/etcd.log" >&2
                die "member $n exited (log tail above)"
            }
        done
        ((SECONDS < deadline)) || die "cluster not healthy after ${READY_TIMEOUT}s (logs in $DIR)"
        sleep 0.2
    done
    echo "etcd cluster of 3 up in $DIR; leader: $(cmd_leader)"
}

cmd_down() {
    local n pid deadline
    for n in "${MEMBERS[@]}"; do
        pid="$(pid_of "$n")" || continue
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            deadline=$((SECONDS + 20))
            while kill -0 "$pid" 2>/dev/null; do
                ((SECONDS < deadline)) || die "member $n (pid $pid) still runs 20s after SIGTERM"
                sleep 0.1
            done
            echo "etcd member $n: stopped (pid $pid)"
        fi
        rm -f "$DIR/e$n/pid"
    done
}

# The member whose status names itself as leader (`-w fields` prints "MemberID" : N and
# "Leader" : N).
cmd_leader() {
    local n fields member leader
    for n in "${MEMBERS[@]}"; do
        fields="$(ETCDCTL_API=3 "$ETCDCTL" --endpoints "$(client_addr "$n")" --command-timeout 2s \
            endpoint status -w fields 2>/dev/null)" || continue
        member="$(awk -F' : ' '/^"MemberID"/ {print $2}' <<<"$fields")"
        leader="$(awk -F' : ' '/^"Leader"/ {print $2}' <<<"$fields")"
        if [[ -n "$member" && "$member" == "$leader" ]]; then
            client_addr "$n"
            return 0
        fi
    done
    die "no leader found"
}

cmd_pids() {
    local n
    for n in "${MEMBERS[@]}"; do
        running "$n" && echo "etcd$n=$(pid_of "$n")"
    done
    return 0
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
leader) cmd_leader ;;
pids) cmd_pids ;;
endpoints) endpoints ;;
*)
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
