#!/usr/bin/env bash
# A throwaway PostgreSQL server to try Lobster's shared store: a new cluster in a temporary
# folder, listening only on a unix socket there (no TCP port, trust auth for one user), with
# durability off because nothing in it is meant to last.
#
#   eval "$(scripts/throwaway-postgres.sh start)"   sets LOBSTER_STORE to the server's URL
#   scripts/throwaway-postgres.sh stop DIR          stops it and deletes DIR
#
# `start` prints the export line on stdout and how to stop the server on stderr. It needs the
# server binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql (Debian and Ubuntu:
# apt-get install postgresql); run as root, the server runs as the postgres (or nobody) user,
# since PostgreSQL refuses to run as root.
set -euo pipefail

find_bin() {
    command -v "$1" 2>/dev/null && return
    ls -1d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -n 1
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$OWNER" -- "$@"; else "$@"; fi
}

OWNER=postgres
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then OWNER=nobody; fi

case "${1:-}" in
start)
    initdb="$(find_bin initdb)"; pg_ctl="$(find_bin pg_ctl)"
    if [ -z "$initdb" ] || [ -z "$pg_ctl" ]; then
        echo "throwaway-postgres: initdb and pg_ctl not found (apt-get install postgresql)" >&2
        exit 1
    fi
    dir="$(mktemp -d "${TMPDIR:-/tmp}/lobster-pg.XXXXXX")"
    if [ "$(id -u)" = 0 ]; then chown "$OWNER" "$dir"; fi
    if ! as_owner "$initdb" -D "$dir/data" -A trust -U lobster -E UTF8 --no-sync \
            --no-instructions >"$dir/initdb.log" 2>&1 \
        || ! as_owner "$pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 -o \
            "-c listen_addresses='' -k $dir -c fsync=off -c synchronous_commit=off" \
            start >/dev/null 2>&1; then
        echo "throwaway-postgres: the server did not start; see $dir/initdb.log and $dir/log" >&2
        exit 1
    fi
    echo "export LOBSTER_STORE='postgresql://lobster@/postgres?host=$dir'"
    echo "throwaway-postgres: started; stop it with: $0 stop $dir" >&2
    ;;
stop)
    dir="${2:?usage: $0 stop DIR}"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        echo "throwaway-postgres: $dir holds no server this script started" >&2
        exit 1
    fi
    as_owner "$(find_bin pg_ctl)" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start | $0 stop DIR" >&2
    exit 2
    ;;
esac
