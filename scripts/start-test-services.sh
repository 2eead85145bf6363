#!/usr/bin/env bash
# Services the tracking tests use, installed from Debian's packages and started here:
#   - PostgreSQL, for the team-server test (a real `mlflow server` on a PostgreSQL store);
#   - chromium and chromedriver, for the MLflow UI test (headless screenshots).
# Prints the `export` lines the tests read; .ci/run evals them. Needs root (apt-get, su).
# Idempotent: installed packages, a running cluster, the role and the database are reused.
set -euo pipefail
need=()
command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
if ((${#need[@]})); then
  echo "installing ${need[*]} (apt-get)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main"' | grep -q .; then
  pg_createcluster "$ver" main >&2
fi
pg_ctlcluster "$ver" main start >&2 2>/dev/null || true  # already running is fine
port=$(pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" {print $3}')
psql_as_postgres() { su postgres -c "psql -p $port -tAc \"$1\""; }
for _ in $(seq 1 30); do psql_as_postgres "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
psql_as_postgres "SELECT 1 FROM pg_roles WHERE rolname='wai_test'" | grep -q 1 \
  || psql_as_postgres "CREATE ROLE wai_test LOGIN PASSWORD 'wai_test'" >/dev/null
psql_as_postgres "SELECT 1 FROM pg_database WHERE datname='wai_mlflow_test'" | grep -q 1 \
  || su postgres -c "createdb -p $port -O wai_test wai_mlflow_test"
echo "export WAI_EXP_TEST_POSTGRES_URI=postgresql+psycopg2://wai_test:wai_test@127.0.0.1:$port/wai_mlflow_test"
echo "export WAI_EXP_TEST_CHROMIUM=$(command -v chromium)"
echo "export WAI_EXP_TEST_CHROMEDRIVER=$(command -v chromedriver)"
