#!/bin/sh
# One-shot (service temporal-schema): create Temporal's two PostgreSQL databases
# and bring their schemas up to date. Safe to run again on every `up`: the
# steps are idempotent, and update-schema only applies newer versions.
set -eu

: "${POSTGRES_SEEDS:=postgresql}"
: "${DB_PORT:=5432}"
: "${POSTGRES_USER:=temporal}"
: "${DBNAME:=temporal}"
: "${VISIBILITY_DBNAME:=temporal_visibility}"
export SQL_PASSWORD="${POSTGRES_PWD:-${SQL_PASSWORD:-}}"
SCHEMA_ROOT="${TEMPORAL_HOME:-/etc/temporal}/schema/postgresql/v12"

echo "waiting for PostgreSQL at ${POSTGRES_SEEDS}:${DB_PORT}"
until nc -z "${POSTGRES_SEEDS}" "${DB_PORT}"; do sleep 1; done

sql() {
  temporal-sql-tool --plugin postgres12 --ep "${POSTGRES_SEEDS}" -p "${DB_PORT}" -u "${POSTGRES_USER}" "$@"
}

for pair in "${DBNAME}:temporal" "${VISIBILITY_DBNAME}:visibility"; do
  db="${pair%%:*}"
  schema="${pair##*:}"
  echo "database ${db}: create, set up and update the ${schema} schema"
  sql --db "${db}" create || echo "database ${db} exists already"
  sql --db "${db}" setup-schema -v 0.0
  sql --db "${db}" update-schema -d "${SCHEMA_ROOT}/${schema}/versioned"
done
echo "PostgreSQL schemas are up to date"
