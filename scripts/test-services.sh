# Services the test suite needs. Source it, don't run it:  source scripts/test-services.sh && pytest
#
# Exports PLANRAIL_TEST_PG_URL, a PostgreSQL database the store tests may create schemas in:
#   1. PLANRAIL_TEST_PG_URL already set: kept as it is;
#   2. a server on 127.0.0.1:5432 with a database "test" and trust auth (role postgres or root);
#   3. otherwise a throwaway cluster in a temporary folder, on a free port, installed with apt-get
#      when PostgreSQL is missing, and stopped and deleted when this shell exits.
# PLANRAIL_TEST_PG_FORCE_THROWAWAY=1 skips step 2 (to test step 3 on a machine with a server).
# On success it prints one line naming the server; if no server can be had it warns and leaves
# the variable unset (the PostgreSQL tests then skip, or fail when CI is set).

_planrail_pg_works() {
    # True if $1 accepts a connection without a password prompt.
    if command -v psql >/dev/null 2>&1; then
        PGCONNECT_TIMEOUT=3 psql -w -X -q -A -t -c 'SELECT 1' "$1" >/dev/null 2>&1
    elif [ -x .venv/bin/python ]; then
        .venv/bin/python -c 'import sys, psycopg; psycopg.connect(sys.argv[1], connect_timeout=3).close()' \
            "$1" >/dev/null 2>&1
    else
        return 1
    fi
}

_planrail_pg_bindir() {
    local initdb dir
    initdb=$(command -v initdb 2>/dev/null)
    if [ -n "$initdb" ] && [ -x "$(dirname "$(readlink -f "$initdb")")/pg_ctl" ]; then
        dirname "$(readlink -f "$initdb")"
        return 0
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

_planrail_pg_install() {
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || return 1
        sudo="sudo -n"
    fi
    command -v apt-get >/dev/null 2>&1 || return 1
    echo "planrail tests: installing PostgreSQL with apt-get (one time)..." >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null 2>&1
}

_planrail_pg_as() {
    # Run a command as the cluster's OS user (postgres refuses to run as root).
    if [ "$(id -u)" = 0 ]; then
        if command -v runuser >/dev/null 2>&1; then
            runuser -u postgres -- "$@"
        else
            su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
        fi
    else
        "$@"
    fi
}

_planrail_pg_stop() {
    if [ -n "${_PLANRAIL_PG_DIR:-}" ] && [ -d "$_PLANRAIL_PG_DIR" ]; then
        _planrail_pg_as "$_PLANRAIL_PG_BIN/pg_ctl" -D "$_PLANRAIL_PG_DIR/data" -m immediate \
            stop >/dev/null 2>&1
        rm -rf "$_PLANRAIL_PG_DIR"
    fi
    _PLANRAIL_PG_DIR=""
}

_planrail_pg_throwaway() {
    local bin dir port
    bin=$(_planrail_pg_bindir) || { _planrail_pg_install && bin=$(_planrail_pg_bindir); } || {
        echo "planrail tests: no PostgreSQL (install it, or set PLANRAIL_TEST_PG_URL);" \
            "PostgreSQL tests will skip" >&2
        return 1
    }
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin postgres >/dev/null 2>&1 || {
            echo "planrail tests: cannot create the postgres OS user to run a cluster" >&2
            return 1
        }
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/planrail-pg.XXXXXX") || return 1
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    chmod 700 "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    _PLANRAIL_PG_DIR=$dir
    _PLANRAIL_PG_BIN=$bin
    if ! _planrail_pg_as "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale \
        --no-sync >"$dir/initdb.log" 2>&1; then
        echo "planrail tests: initdb failed:" >&2
        tail -n 5 "$dir/initdb.log" >&2
        _planrail_pg_stop
        return 1
    fi
    if ! _planrail_pg_as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off" \
        start >/dev/null 2>&1; then
        echo "planrail tests: PostgreSQL did not start:" >&2
        tail -n 5 "$dir/server.log" >&2
        _planrail_pg_stop
        return 1
    fi
    trap '_planrail_pg_stop' EXIT
    if ! _planrail_pg_as "$bin/createdb" -h "$dir" -p "$port" -U postgres test >/dev/null 2>&1; then
        echo "planrail tests: createdb failed" >&2
        _planrail_pg_stop
        return 1
    fi
    export PLANRAIL_TEST_PG_URL="postgresql://postgres@127.0.0.1:$port/test"
    echo "planrail tests: PostgreSQL throwaway cluster at $PLANRAIL_TEST_PG_URL (removed on exit)"
}

_planrail_pg_main() {
    local role url
    if [ -n "${PLANRAIL_TEST_PG_URL:-}" ]; then
        echo "planrail tests: PostgreSQL at $PLANRAIL_TEST_PG_URL (from PLANRAIL_TEST_PG_URL)"
        return 0
    fi
    if [ -z "${PLANRAIL_TEST_PG_FORCE_THROWAWAY:-}" ]; then
        for role in postgres root; do
            url="postgresql://$role@127.0.0.1:5432/test"
            if _planrail_pg_works "$url"; then
                export PLANRAIL_TEST_PG_URL=$url
                echo "planrail tests: PostgreSQL at $url"
                return 0
            fi
        done
    fi
    _planrail_pg_throwaway
}

_planrail_pg_main || true
