# Sourced by .ci/run: a PostgreSQL server for the service's persistence tests, and DLSCHED_TEST_POSTGRES_URL.
#
# A URL given from outside is used as it is. Otherwise a server already running on this machine's default
# socket gets a fresh database (when we may act as its postgres user); failing that, a throwaway server is
# initialised in a temporary folder and started on a free loopback port, and stopped when .ci/run exits.
# The Debian package is installed first when no server binary is present.

_pg_as_owner() {  # run a PostgreSQL program as the cluster's owner (initdb and postgres refuse root)
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

_pg_bindir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

dlsched_start_postgres() {
  if [ -n "${DLSCHED_TEST_POSTGRES_URL:-}" ]; then
    echo "postgres: using the given DLSCHED_TEST_POSTGRES_URL" >&2
    return 0
  fi
  local bindir
  bindir="$(_pg_bindir)"
  if [ -z "$bindir" ] || [ ! -x "$bindir/postgres" ]; then
    echo "postgres: no server binary; installing the Debian package" >&2
    local sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    bindir="$(_pg_bindir)"
  fi
  local db="dlsched_test_$$"
  # a server already running on the default socket, which root may use as its postgres user
  if [ "$(id -u)" = 0 ] && "$bindir/pg_isready" -q -h /var/run/postgresql 2>/dev/null \
      && runuser -u postgres -- "$bindir/psql" -h /var/run/postgresql -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
    local port password
    port="$(runuser -u postgres -- "$bindir/psql" -h /var/run/postgresql -d postgres -Atqc 'show port')"
    password="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    runuser -u postgres -- "$bindir/psql" -h /var/run/postgresql -d postgres -qc \
      "create role $db login password '$password'" >/dev/null
    runuser -u postgres -- "$bindir/createdb" -h /var/run/postgresql -O "$db" "$db"
    DLSCHED_PG_CLEANUP="runuser -u postgres -- $bindir/dropdb -h /var/run/postgresql --if-exists $db; runuser -u postgres -- $bindir/psql -h /var/run/postgresql -d postgres -qc 'drop role if exists $db'"
    export DLSCHED_TEST_POSTGRES_URL="postgresql+psycopg://$db:$password@127.0.0.1:$port/$db"
    echo "postgres: database $db on the running server (port $port)" >&2
    return 0
  fi
  # a throwaway server of our own
  local dir port
  dir="$(mktemp -d /tmp/dlsched-pg.XXXXXX)"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  _pg_as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; return 1; }
  _pg_as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off" start >/dev/null \
    || { cat "$dir/server.log" >&2; return 1; }
  DLSCHED_PG_CLEANUP="$(printf '%q ' runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop) >/dev/null; rm -rf $(printf '%q' "$dir")"
  if [ "$(id -u)" != 0 ]; then DLSCHED_PG_CLEANUP="${DLSCHED_PG_CLEANUP#runuser -u postgres -- }"; fi
  "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db"
  export DLSCHED_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$port/$db"
  echo "postgres: a throwaway server in $dir on 127.0.0.1:$port" >&2
}

dlsched_stop_postgres() {
  if [ -n "${DLSCHED_PG_CLEANUP:-}" ]; then eval "$DLSCHED_PG_CLEANUP" || true; fi
}
