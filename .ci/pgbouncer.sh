#!/usr/bin/env bash
# Start PgBouncer in transaction pooling mode on a loopback port, in front of a PostgreSQL
# server, and print the DSN that goes through it. Idempotent: a bouncer already running on
# that port with the same settings is left alone and its DSN printed again; one started with
# other settings (another upstream server) is restarted with these.
#
#   .ci/pgbouncer.sh [start]     install Debian's pgbouncer if missing, start it, print the DSN
#   .ci/pgbouncer.sh stop        stop the bouncer on that port and remove its files
#
# Settings (environment):
#   KESTREL_PGBOUNCER_PORT       port it listens on, on 127.0.0.1   (default 6439)
#   KESTREL_PGBOUNCER_UPSTREAM   host:port of the PostgreSQL server (default 127.0.0.1:5432)
#   KESTREL_PGBOUNCER_POOL_SIZE  server connections per (database, user) (default 20)
#   KESTREL_PGBOUNCER_DIR        where its config, pid file and log go
#                                (default /tmp/kestrel-pgbouncer-PORT)
#
# Every database name is passed through to the upstream server (wildcard entry), with the
# client's user name; authentication is `trust` for the users listed in userlist.txt
# (postgres and the kestrel test roles). Test setup only: do not expose this port.
set -euo pipefail

PORT="${KESTREL_PGBOUNCER_PORT:-6439}"
UPSTREAM="${KESTREL_PGBOUNCER_UPSTREAM:-127.0.0.1:5432}"
POOL_SIZE="${KESTREL_PGBOUNCER_POOL_SIZE:-20}"
MAX_CLIENTS="${KESTREL_PGBOUNCER_MAX_CLIENTS:-1000}"
DIR="${KESTREL_PGBOUNCER_DIR:-/tmp/kestrel-pgbouncer-$PORT}"
UP_HOST="${UPSTREAM%:*}"
UP_PORT="${UPSTREAM##*:}"
DSN="host=127.0.0.1 port=$PORT user=postgres dbname=postgres"
RUN_AS=postgres  # pgbouncer refuses to run as root

say() { echo "pgbouncer.sh: $*" >&2; }

find_binary() {
    command -v pgbouncer 2>/dev/null || { [ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer; } || true
}

install_pgbouncer() {
    if [ -n "$(find_binary)" ]; then return 0; fi
    if [ "$(id -u)" != 0 ]; then
        say "error: pgbouncer is not installed and installing it needs root (apt-get install pgbouncer)"
        exit 1
    fi
    say "installing Debian's pgbouncer"
    export DEBIAN_FRONTEND=noninteractive
    # Debian's package starts its own service from /etc/pgbouncer; keep it from starting.
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
    fi
    if ! apt-get install -y -q --no-install-recommends pgbouncer >/dev/null 2>&1; then
        apt-get update -q >/dev/null 2>&1 || true
        apt-get install -y -q --no-install-recommends pgbouncer >/dev/null
    fi
    if [ "$created_policy" = 1 ]; then rm -f "$policy"; fi
    [ -n "$(find_binary)" ] || { say "error: pgbouncer still not found after apt-get install"; exit 1; }
}

running_pid() {
    local pid
    pid="$(cat "$DIR/pgbouncer.pid" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q pgbouncer "/proc/$pid/cmdline" 2>/dev/null; then
        echo "$pid"
    fi
}

answers() {
    # The admin console answers once the listener is up.
    psql "host=127.0.0.1 port=$PORT user=postgres dbname=pgbouncer connect_timeout=2" -Atqc "SHOW VERSION" >/dev/null 2>&1
}

config() {
    cat <<EOF
; Written by .ci/pgbouncer.sh: edits are lost at the next start.
[databases]
* = host=$UP_HOST port=$UP_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
pool_mode = transaction
auth_type = trust
auth_file = $DIR/userlist.txt
admin_users = postgres
max_client_conn = $MAX_CLIENTS
default_pool_size = $POOL_SIZE
; Clients (psycopg) send these at startup; pgbouncer would refuse the connection otherwise.
ignore_startup_parameters = extra_float_digits
; Retry a server login every second (default 15 s) so a restarted server is found quickly.
server_login_retry = 1
server_connect_timeout = 5
query_wait_timeout = 60
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
EOF
}

write_config() {
    mkdir -p "$DIR"
    config >"$DIR/pgbouncer.ini"
    {
        for user in postgres kestrel_worker kestrel_operator kestrel_test_worker kestrel_test_operator; do
            printf '"%s" ""\n' "$user"
        done
    } >"$DIR/userlist.txt"
    chown -R "$RUN_AS" "$DIR"
}

start() {
    install_pgbouncer
    if [ -n "$(running_pid)" ] && answers; then
        if [ "$(config)" = "$(cat "$DIR/pgbouncer.ini" 2>/dev/null)" ]; then
            echo "$DSN"
            return 0
        fi
        # Left running with other settings, by a run against another server (another
        # KESTREL_TEST_DSN): reused as it is, it would send every connection there.
        say "restarting the bouncer on 127.0.0.1:$PORT, started with other settings" \
            "($(grep -s '^\* = ' "$DIR/pgbouncer.ini" || echo 'unknown upstream')), for $UP_HOST:$UP_PORT"
        stop
    fi
    local binary files
    binary="$(find_binary)"
    write_config
    # A descriptor per client and per server connection, and a few of its own: PgBouncer does
    # not raise its soft limit (often 1024) itself, and past it refuses logins ("accept()
    # failed: Too many open files"), which clients see as connection timeouts.
    files=$((MAX_CLIENTS + POOL_SIZE + 64))
    local hard
    hard="$(ulimit -Hn)"
    if [ "$hard" != unlimited ] && [ "$files" -gt "$hard" ]; then
        say "warning: PgBouncer may take $MAX_CLIENTS clients but this shell may open $hard files at most"
        files="$hard"
    fi
    if [ "$(id -u)" = 0 ]; then
        su -s /bin/sh "$RUN_AS" -c "ulimit -n $files && exec $binary -d -q '$DIR/pgbouncer.ini'"
    else
        (ulimit -n "$files" && exec "$binary" -d -q "$DIR/pgbouncer.ini")
    fi
    for _ in $(seq 1 100); do
        if answers; then
            echo "$DSN"
            return 0
        fi
        sleep 0.1
    done
    say "error: pgbouncer did not answer on 127.0.0.1:$PORT within 10 s; its log:"
    tail -n 20 "$DIR/pgbouncer.log" >&2 || true
    exit 1
}

stop() {
    local pid
    pid="$(running_pid)"
    if [ -n "$pid" ]; then
        kill -INT "$pid"
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    # Only the files written here; the directory goes if nothing else is in it.
    rm -f "$DIR/pgbouncer.ini" "$DIR/userlist.txt" "$DIR/pgbouncer.log" "$DIR/pgbouncer.pid"
    rmdir "$DIR" 2>/dev/null || true
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    *) say "usage: $0 [start|stop]"; exit 2 ;;
esac
