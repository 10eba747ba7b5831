#!/usr/bin/env bash
# A single PostgreSQL server on loopback: the durable single-node baseline of the idem
# benchmarks (issue #21).
#
#   scripts/bench/postgres.sh up        initdb a fresh cluster, start it, wait until it answers
#   scripts/bench/postgres.sh down      fast shutdown (pg_ctl stop -m fast), wait
#   scripts/bench/postgres.sh pids      pg=<postmaster pid> (for idem-bench --node-tree)
#   scripts/bench/postgres.sh endpoint  host:port of the server
#   scripts/bench/postgres.sh bin       directory of the PostgreSQL binaries used
#
# Durability: fsync=on, synchronous_commit=on, full_page_writes=on. These are PostgreSQL's
# defaults, written out so that no tuned configuration weakens them: a COMMIT returns once
# its WAL is flushed to disk (fdatasync, the default wal_sync_method on Linux), as idem's
# nodes and etcd's members sync before they acknowledge. Otherwise stock settings, except
# shared_buffers=128MB, max_connections=200 (the benchmark gives every client a connection),
# locale C (byte-order keys), and listening on 127.0.0.1:$IDEM_POSTGRES_PORT (default 25432)
# and on a Unix socket in $IDEM_POSTGRES_DIR. Authentication: trust for user idem_bench on
# database idem_bench from 127.0.0.1 only; the superuser by peer on the socket. The
# benchmark's table is created by idem-bench's first connection.
#
# Postgres forks a process per connection (and a WAL writer, checkpointer, ...): its CPU is
# that of the postmaster's whole process tree, which idem-bench reads with --node-tree.
#
# As root, the server runs as the `postgres` system user (initdb and postgres refuse root),
# so every parent of $IDEM_POSTGRES_DIR must be searchable by it; otherwise it runs as the
# caller. Files under $IDEM_POSTGRES_DIR (default /tmp/idem-bench-postgres): data/,
# postgres.log, initdb.log. `up` starts from an empty data directory. PG_BIN overrides the
# directory of the binaries (default: the newest /usr/lib/postgresql/*/bin, else PATH).
set -euo pipefail

DIR="${IDEM_POSTGRES_DIR:-/tmp/idem-bench-postgres}"
PORT="${IDEM_POSTGRES_PORT:-25432}"
NAME=idem_bench
READY_TIMEOUT=60

die() {
    echo "postgres.sh: $*" >&2
    exit 1
}

if [[ "$(id -u)" == 0 ]]; then
    OWNER=postgres
    as_owner() { runuser -u "$OWNER" -- "$@"; }
else
    OWNER="$(id -un)"
    as_owner() { "$@"; }
fi

cmd_bin() {
    local dir
    if [[ -n "${PG_BIN:-}" ]]; then
        dir="$PG_BIN"
    else
        dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1)"
        if [[ -z "$dir" ]] && command -v initdb >/dev/null; then
            dir="$(dirname "$(command -v initdb)")"
        fi
    fi
    [[ -n "$dir" && -x "$dir/initdb" && -x "$dir/pg_ctl" && -x "$dir/psql" ]] ||
        die "no PostgreSQL binaries (Debian: apt-get install postgresql; or set PG_BIN)"
    echo "$dir"
}

pid_of() { [[ -f "$DIR/data/postmaster.pid" ]] && head -n 1 "$DIR/data/postmaster.pid"; }

running() {
    local pid
    pid="$(pid_of)" || return 1
    kill -0 "$pid" 2>/dev/null
}

configure() {
    cat >>"$DIR/data/postgresql.conf" <<EOF

# scripts/bench/postgres.sh
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
max_connections = 200
shared_buffers = 128MB
fsync = on
synchronous_commit = on
full_page_writes = on
EOF
    cat >"$DIR/data/pg_hba.conf" <<EOF
# scripts/bench/postgres.sh: the superuser on the socket, the benchmark from loopback.
local all $OWNER peer
host $NAME $NAME 127.0.0.1/32 trust
EOF
}

cmd_up() {
    local bin
    bin="$(cmd_bin)"
    if [[ "$OWNER" == postgres ]] && ! id postgres >/dev/null 2>&1; then
        die "no postgres system user (it comes with the postgresql package)"
    fi
    running && die "already runs (pid $(pid_of)): run '$0 down' first"
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        die "port $PORT is in use (another PostgreSQL?)"
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR"
    chown "$OWNER" "$DIR"
    chmod 700 "$DIR"
    as_owner test -w "$DIR" ||
        die "$DIR is out of reach of user $OWNER: a parent directory is not searchable by it"
    as_owner "$bin/initdb" -D "$DIR/data" -U "$OWNER" --auth-local=peer --auth-host=reject \
        -E UTF8 --locale=C >"$DIR/initdb.log" 2>&1 || {
        tail -n 20 "$DIR/initdb.log" >&2
        die "initdb failed (log tail above)"
    }
    configure
    as_owner "$bin/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w -t "$READY_TIMEOUT" start \
        >/dev/null || {
        tail -n 20 "$DIR/postgres.log" >&2
        die "the server did not start (log tail above)"
    }
    as_owner "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U "$OWNER" -d postgres \
        -c "CREATE ROLE $NAME LOGIN" -c "CREATE DATABASE $NAME OWNER $NAME"
    echo "postgres: pid $(pid_of), 127.0.0.1:$PORT, database and user $NAME, in $DIR ($("$bin/postgres" --version))"
}

cmd_down() {
    running || return 0
    local pid
    pid="$(pid_of)"
    as_owner "$(cmd_bin)/pg_ctl" -D "$DIR/data" -m fast -w -t 30 stop >/dev/null ||
        die "the server (pid $pid) did not stop within 30s"
    echo "postgres: stopped (pid $pid)"
}

cmd_pids() {
    running && echo "pg=$(pid_of)"
    return 0
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
pids) cmd_pids ;;
endpoint) echo "127.0.0.1:$PORT" ;;
bin) cmd_bin ;;
*)
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
