#!/usr/bin/env bash
# A throw-away PostgreSQL server on loopback, for the PostgreSQL pass of the tests.
#
#   .ci/postgres.sh start DIR   initdb into DIR (created if missing), start the server on
#                               127.0.0.1 on a free port, create the database `sporal`, and
#                               print its SQLAlchemy URL (the only line on stdout):
#                               postgresql+psycopg://sporal@127.0.0.1:PORT/sporal
#   .ci/postgres.sh stop DIR    stop that server and delete DIR.
#
# Example for a developer:
#   dir=$(mktemp -d) && export SPORAL_TEST_POSTGRES_URL=$(.ci/postgres.sh start "$dir")
#   python -m pytest -q tests/reliability -m postgres; .ci/postgres.sh stop "$dir"
#
# Installs Debian's `postgresql` package with apt-get when no server binaries are found.
# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` system user
# (created by the Debian package), which then owns DIR. Authentication is `trust`, which is
# safe only because the server listens on 127.0.0.1 and on a socket inside DIR.
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

# Debian's newest installed major version first, then other usual places.
find_bindir() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) \
            /usr/local/pgsql/bin /usr/local/bin /usr/bin; do
        if [[ -x "$dir/pg_ctl" && -x "$dir/initdb" && -x "$dir/postgres" ]]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

ensure_installed() {
    if find_bindir >/dev/null; then
        return 0
    fi
    log "no PostgreSQL server found; installing Debian's package"
    if [[ $(id -u) -ne 0 ]]; then
        log "need root to install postgresql with apt-get"
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends postgresql >&2
    find_bindir >/dev/null || { log "postgresql installed but pg_ctl/initdb not found"; exit 1; }
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Run a server binary as the unprivileged owner of the data directory.
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

start() {
    local dir=$1
    ensure_installed
    local bindir
    bindir=$(find_bindir)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || useradd --system --home-dir "$dir" postgres
        chown postgres: "$dir"
    fi
    chmod 700 "$dir"
    as_owner "$bindir/initdb" -D "$dir/data" -U sporal -A trust -E UTF8 --no-locale >&2
    local port
    port=$(free_port)
    # Loopback TCP only, unix socket inside DIR (the default /var/run/postgresql may not exist),
    # enough connections for two workers, their pools and the test clients.
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >&2 || {
        log "server did not start; its log:"; cat "$dir/server.log" >&2; exit 1; }
    echo "$port" > "$dir/port"
    "$bindir/createdb" -h 127.0.0.1 -p "$port" -U sporal sporal >&2
    echo "postgresql+psycopg://sporal@127.0.0.1:$port/sporal"
}

stop() {
    local dir=$1
    [[ -d "$dir/data" ]] || { log "no server data in $dir"; return 0; }
    local bindir
    bindir=$(find_bindir)
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    rm -rf "$dir"
}

case "${1:-}" in
    start) start "${2:?usage: $0 start DIR}" ;;
    stop) stop "${2:?usage: $0 stop DIR}" ;;
    *) echo "usage: $0 start DIR | stop DIR" >&2; exit 2 ;;
esac
