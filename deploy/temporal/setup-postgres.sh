#!/bin/sh
# Creates (or upgrades) Temporal's schemas in PostgreSQL. Idempotent: safe to
# run on every `docker compose up`. Runs in temporalio/admin-tools, and in
# `make test-cluster` (test/cluster) with ./bin/temporal-sql-tool and the
# schema files of the server module (TEMPORAL_SCHEMA_DIR).
set -eu
: "${POSTGRES_SEEDS:=postgresql}" "${DB_PORT:=5432}" "${POSTGRES_USER:=temporal}"
export SQL_PASSWORD="${POSTGRES_PWD:-temporal}"
: "${TEMPORAL_SCHEMA_DIR:=/etc/temporal/schema/postgresql/v12}"

echo "waiting for PostgreSQL at ${POSTGRES_SEEDS}:${DB_PORT}..."
i=0
until ! command -v nc >/dev/null || nc -z -w 2 "$POSTGRES_SEEDS" "$DB_PORT"; do
  i=$((i + 1)); [ "$i" -lt 60 ] || { echo "PostgreSQL not reachable"; exit 1; }
  sleep 1
done

tool() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"; }
for db in temporal:temporal temporal_visibility:visibility; do
  name=${db%%:*} dir=${db##*:}
  tool --db "$name" create 2>/dev/null || echo "database $name exists"
  # setup-schema -v 0.0 only creates the version table; it fails harmlessly
  # when a previous run did it. update-schema then applies what is missing.
  tool --db "$name" setup-schema -v 0.0 2>/dev/null || echo "schema of $name already initialized"
  tool --db "$name" update-schema -d "$TEMPORAL_SCHEMA_DIR/$dir/versioned"
done
echo "schemas ready"
