#!/usr/bin/env bash
# The PostgreSQL store's test server (tests/store/engines.py): PostgreSQL from Debian packages on
# 127.0.0.1:5432, trusting local connections as user postgres (a test machine only; every test makes
# and drops a database of its own).  Idempotent; skipped when PARTNERS_TEST_PG_DSN names another server.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

[ -n "${PARTNERS_TEST_PG_DSN:-}" ] && exit 0
if ! command -v pg_lsclusters >/dev/null; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql >/dev/null
fi
for hba in /etc/postgresql/*/main/pg_hba.conf; do
  if ! as_root grep -q "^host all all 127.0.0.1/32 trust" "$hba"; then
    as_root sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
  fi
done
pg_lsclusters --no-header | while read -r version cluster _; do
  as_root pg_ctlcluster "$version" "$cluster" start 2>/dev/null || as_root pg_ctlcluster "$version" "$cluster" reload
done
pg_isready -q -h 127.0.0.1 -p 5432
