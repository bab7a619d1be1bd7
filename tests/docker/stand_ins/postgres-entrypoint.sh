#!/usr/bin/env bash
# First start: initdb with POSTGRES_USER as superuser and POSTGRES_PASSWORD for network logins, create
# POSTGRES_DB, run /docker-entrypoint-initdb.d/*.sql and *.sh; then (every start) the server on all
# interfaces. Init runs on a private socket directory, so pg_isready (the healthcheck) only answers once
# the real server is up.
set -euo pipefail
: "${POSTGRES_PASSWORD:?the postgres stand-in needs POSTGRES_PASSWORD}"
POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"

if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
  password_file="$(mktemp)"
  printf '%s' "$POSTGRES_PASSWORD" > "$password_file"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$password_file" -E UTF8 \
    --auth-local=trust --auth-host=scram-sha-256 > /dev/null
  rm -f "$password_file"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"

  init_socket="$(mktemp -d)"
  pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=$init_socket" start > /dev/null
  run_sql() { psql -v ON_ERROR_STOP=1 -h "$init_socket" -U "$POSTGRES_USER" --no-psqlrc -q "$@"; }
  if [[ "$POSTGRES_DB" != "postgres" ]]; then
    run_sql -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  for script in /docker-entrypoint-initdb.d/*; do
    case "$script" in
      *.sql) echo "postgres-entrypoint: running $script"; run_sql -d "$POSTGRES_DB" -f "$script" ;;
      *.sh) echo "postgres-entrypoint: running $script"; PGHOST="$init_socket" . "$script" ;;
      *) ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop > /dev/null
  rmdir "$init_socket"
  echo "postgres-entrypoint: database $POSTGRES_DB initialised for $POSTGRES_USER"
fi

exec postgres -D "$PGDATA" "$@"
