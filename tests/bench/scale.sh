#!/usr/bin/env bash
# Scale: does a full database slow argo-results down?
#
#   bash tests/bench/scale.sh            # 1,000,000 stored results
#   bash tests/bench/scale.sh --10m      # 10,000,000 (about 30 GB of Postgres data)
#
# 1. Ingest rate on an empty database (loadgen, closed loop, final reports).
# 2. Pre-fill: N completed results in workflows of 1,000 nodes, each with the same ~1 KB
#    outputs and its change in the feed, written by SQL in the shapes the server writes
#    (a million requests through the API would take longer than the measurement).
# 3. Ingest rate again, with N stored: the target is at least 90 % of the empty rate.
# 4. Listing one 1,000-node workflow (one page), 200 times: p50 and p99.
# 5. Feed catch-up: the N pre-filled changes read from the start in pages of 1,000, as a
#    restarted controller would: changes per second.
#
# loadgen registers no nodes first, so the server runs with --require-expectation=false, as
# run.sh does. Needs what tests/bench/run.sh needs (Postgres on 127.0.0.1:5432, psql).
# Prints a table, then one JSON line. Knobs: CONCURRENCY (64), DURATION (15 s), PGPORT,
# PGUSER.
set -euo pipefail
source "$(dirname "$0")/common.sh"

results=1000000
[[ ${1:-} == --10m ]] && results=10000000
duration=${DURATION:-15}
db=argo_results_scale
port=18481
reader=system:serviceaccount:argo:argo-server

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  # The pre-filled database is 3 GB (30 GB with --10m): never leave it behind.
  sql -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

start_server() {
  target/release/argo-results-server --database-url "postgres://$pguser@$pghost:$pgport/$db" \
    --listen "127.0.0.1:$port" --jwks-file "$work/keys/jwks.json" --issuer https://kubernetes.default.svc.cluster.local --reader "$reader" \
    --require-expectation=false >"$work/server.out" 2>>"$work/server.log" &
  server_pid=$!
  for _ in $(seq 1 100); do grep -q listening "$work/server.out" 2>/dev/null && return; sleep 0.1; done
  cat "$work/server.log" >&2
  exit 1
}
stop_server() { kill "$server_pid"; wait "$server_pid" || true; server_pid=; }
ingest() {
  target/release/loadgen run --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" \
    --concurrency "$concurrency" --duration "$duration" --warmup 3 --run-id "$1"
}
reading() { echo --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" --subject "$reader"; }

build
target/release/loadgen keygen "$work/keys"
fresh_db "$db"

say "ingest on an empty database (${duration}s)"
quiesce
start_server
empty=$(ingest empty)
stop_server

head=$(sql -d "$db" -tA -c "SELECT revision FROM store_state")
say "pre-filling $results results and their changes after revision $head"
started=$(date +%s)
prefill_results "$db" 1 "$results"
prefill_s=$(($(date +%s) - started))
size=$(sql -d "$db" -tA -c "SELECT pg_database_size('$db')")

say "ingest with $results stored (${duration}s)"
quiesce
start_server
full=$(ingest full)
quiesce
say "listing one 1,000-node workflow, 200 times"
# shellcheck disable=SC2046
list=$(target/release/loadgen list $(reading) --workflow prefill-00042 --requests 200)
say "feed catch-up from before the pre-fill: its $results changes and the ingest after them"
# shellcheck disable=SC2046
catch_up=$(target/release/loadgen catch-up $(reading) --since "$head")
stop_server

python3 tests/bench/scale_report.py "$results" "$empty" "$full" "$list" "$catch_up" "$size" "$prefill_s"
