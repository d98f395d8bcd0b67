#!/usr/bin/env bash
# Floors: what the parts of a report cost alone on this machine, to set the service's
# figures against (docs/performance.md, "What remains, and why").
#
#   bash tests/bench/floors.sh
#
# 1. The HTTP stack: wrk, 64 connections on 2 threads, on the release server's /healthz
#    (every middleware and its log line; no token, no database), 10 s.
# 2. One RS256 check: `openssl speed rsa2048`.
# 3. Postgres alone doing the group-commit writer's writing, serially as the revision
#    counter's lock makes it: pgbench, one client, each transaction locking the counter,
#    upserting 32 new results with loadgen's outputs, recording their 32 feed items and
#    moving the counter (without the writer's lookup and NOTIFY); then the same without
#    the feed items. 10 s each. Its figure is the wall time of a serial stream, fsync
#    waits included.
#
# Needs what tests/bench/run.sh needs; installs Debian's wrk when missing. Prints a
# table, then as its last line one JSON object. Knobs: PGPORT, PGUSER.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/common.sh"

db=argo_results_floors
port=18482
rows=32

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  sql -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT


build
target/release/loadgen keygen "$work/keys"
if ! command -v wrk >/dev/null; then
  say "installing Debian's wrk"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q wrk >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }
fi

# --- the HTTP stack -------------------------------------------------------------------------
say "wrk on /healthz: 64 connections, 10 s"
fresh_db "$db"
target/release/argo-results-server --database-url "postgres://$pguser@$pghost:$pgport/$db" \
  --listen "127.0.0.1:$port" --jwks-file "$work/keys/jwks.json" --issuer https://kubernetes.default.svc.cluster.local --log-format json \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/server.out" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$work/server.out" || { cat "$work/server.log" >&2; exit 1; }
quiesce
wrk_out=$(wrk -t 2 -c 64 -d 10s "http://127.0.0.1:$port/healthz")
http_rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' <<<"$wrk_out")
[[ -n $http_rps ]] || { echo "$wrk_out" >&2; echo "wrk printed no rate" >&2; exit 1; }
if grep -q "Non-2xx" <<<"$wrk_out"; then echo "$wrk_out" >&2; echo "/healthz failed" >&2; exit 1; fi
kill "$server_pid"
wait "$server_pid" || true
server_pid=

# --- one RS256 check ------------------------------------------------------------------------
say "openssl speed rsa2048 (a few seconds)"
rsa_verifies=$(rsa2048_verifies_per_s)

# --- Postgres doing the writer's work -------------------------------------------------------
payload=$(target/release/loadgen outputs | sed "s/'/''/g")
writer() { # $1: "feed" to record the feed items too
  fresh_db "$db"
  for migration in migrations/postgres/*.sql; do sql -d "$db" -f "$migration" >/dev/null; done
  {
    echo "BEGIN;"
    echo "SELECT revision AS head FROM store_state WHERE id = 1 FOR UPDATE \\gset"
    cat <<SQL
INSERT INTO results (namespace, workflow_uid, node_id, workflow, pod_name, pod_uid, state,
  outputs, sequence, revision, created_revision, created_at, updated_at, completed_at)
SELECT 'argo', 'floor-uid', 'floor-' || (:head + g), 'floor', 'floor-main-' || (:head + g),
  'pod-' || (:head + g), 'completed', '$payload', 1, :head + g, :head + g, 0, 0, 0
FROM generate_series(1, $rows) AS g
ON CONFLICT (namespace, workflow_uid, node_id) DO UPDATE SET outputs = excluded.outputs,
  revision = excluded.revision, updated_at = excluded.updated_at;
SQL
    if [[ $1 == feed ]]; then
      cat <<SQL
INSERT INTO changes (revision, namespace, item, recorded_at)
SELECT :head + g, 'argo',
  '{"type":"upserted","revision":' || (:head + g) || ',"result":{"outputs":$payload}}', 0
FROM generate_series(1, $rows) AS g;
SQL
    fi
    echo "UPDATE store_state SET revision = :head + $rows WHERE id = 1;"
    echo "COMMIT;"
  } >"$work/writer.sql"
  quiesce
  local out
  out=$(pgbench -n -h "$pghost" -p "$pgport" -U "$pguser" -c 1 -T 10 -f "$work/writer.sql" "$db" 2>&1) \
    || { echo "$out" >&2; echo "pgbench failed" >&2; exit 1; }
  sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -n 1 | grep . \
    || { echo "$out" >&2; echo "pgbench printed no tps" >&2; exit 1; }
}
say "Postgres alone: $rows results, their feed items and the counter per transaction (10 s)"
writer_tps=$(writer feed)
say "the same without the feed items (10 s)"
writer_nofeed_tps=$(writer none)

python3 tests/bench/floors_report.py "$http_rps" "$rsa_verifies" "$writer_tps" "$writer_nofeed_tps" "$rows"
