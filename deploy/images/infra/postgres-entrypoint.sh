#!/bin/sh
# The official postgres image's first start, in short: initdb into an empty
# PGDATA with POSTGRES_HOST_AUTH_METHOD for every host, create POSTGRES_DB,
# then run the server as postgres, listening on every address.
set -e
if [ "$1" != postgres ]; then exec "$@"; fi
as() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
user="${POSTGRES_USER:-postgres}"
auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=""
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    pwfile="$(mktemp)"; printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"; chown postgres "$pwfile"
  elif [ "$auth" != trust ]; then
    echo "postgres: set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust" >&2; exit 1
  fi
  as initdb --username="$user" ${pwfile:+--pwfile="$pwfile"} --auth-local=trust --auth-host="$auth" -D "$PGDATA" >/dev/null
  [ -n "$pwfile" ] && rm -f "$pwfile"
  printf 'host all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
  db="${POSTGRES_DB:-$user}"
  if [ "$db" != postgres ]; then
    as pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    as psql -q -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres -c "CREATE DATABASE \"$db\""
    as pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
fi
shift
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -c listen_addresses='*' "$@"
