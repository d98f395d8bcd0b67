# shellcheck shell=bash
# shellcheck disable=SC2164 # file-wide: a failed cd stops as the sourcing script's set -e says (hostile.sh has none)
# What tests/bench/run.sh, scale.sh and floors.sh share: sourced, not run. From the repository's root:
# Postgres' address (PGPORT, PGUSER), the load's concurrency (CONCURRENCY), and helpers.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# shellcheck disable=SC2034 # read by the scripts that source this file
concurrency=${CONCURRENCY:-64}
pghost=127.0.0.1
pgport=${PGPORT:-5432}
pguser=${PGUSER:-postgres}

say() { printf '==> [%3ds] %s\n' "$SECONDS" "$*" >&2; }
# psql on the benchmark's Postgres, stopping at the first error; give -d.
sql() { psql -X -q -h "$pghost" -p "$pgport" -U "$pguser" -v ON_ERROR_STOP=1 "$@"; }
# An empty database named $1, dropped first if it exists.
fresh_db() { sql -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null; }
# Each measurement starts with Postgres' dirty pages written out, so that none pays for
# the writes of the one before.
quiesce() { sql -d postgres -c CHECKPOINT >/dev/null; sync; sleep 2; }
build() {
  say "release build"
  cargo build --release --quiet -p argo-results-server -p argo-results-tests \
    --bin argo-results-server --bin loadgen --bin floor
}
build_loadgen() {
  say "release build of loadgen and floor"
  cargo build --release --quiet -p argo-results-tests --bin loadgen --bin floor
}
# One RS256 check (a 2048-bit RSA verification) as `openssl speed` measures it, in
# verifications per second: the verify/s column, wherever this OpenSSL puts it (3.2 added
# encrypt and decrypt). About 6 s, 12 with OpenSSL 3.2 and later.
rsa2048_verifies_per_s() {
  local rate
  rate=$(openssl speed -seconds 3 rsa2048 2>/dev/null | awk '
    !column { for (i = 1; i <= NF; i++) if ($i == "verify/s") column = i + 3 }
    /^rsa 2048 bits/ && column { print $column }')
  [[ -n $rate ]] || { echo "openssl speed printed no rate" >&2; return 1; }
  echo "$rate"
}
# Pre-fills database $1 with results $2 to $3, 1,000 per workflow (row i is node
# prefill-W-(1000000000+i) of workflow prefill-W, W = (i-1)/1000, UID prefill-W-uid), each
# completed with loadgen's outputs, and their changes: written straight into the tables
# after the store's head revision, with the server stopped (it reads no row it did not
# write until it starts). One transaction per million rows keeps each one's memory bounded.
prefill_results() {
  local db=$1 first=$2 last=$3 head payload from to
  head=$(sql -d "$db" -tA -c "SELECT revision FROM store_state")
  payload=$(target/release/loadgen outputs | sed "s/'/''/g")
  for ((from = first; from <= last; from += 1000000)); do
    to=$((from + 999999 < last ? from + 999999 : last))
    sql -d "$db" <<SQL
BEGIN;
CREATE TEMP TABLE prefill ON COMMIT DROP AS
SELECT $head - $first + 1 + i AS revision,
       format('prefill-%s', lpad(((i - 1) / 1000)::text, 5, '0')) AS workflow,
       format('prefill-%s-uid', lpad(((i - 1) / 1000)::text, 5, '0')) AS workflow_uid,
       format('prefill-%s-%s', lpad(((i - 1) / 1000)::text, 5, '0'), 1000000000 + i) AS node_id,
       format('prefill-%s-main-%s', lpad(((i - 1) / 1000)::text, 5, '0'), 1000000000 + i) AS pod_name,
       format('prefill-pod-%s', i) AS pod_uid,
       (extract(epoch FROM now()) * 1000)::bigint AS at
FROM generate_series($from, $to) AS i;
INSERT INTO results (namespace, workflow_uid, node_id, workflow, pod_name, pod_uid, state,
  outputs, sequence, revision, created_revision, created_at, updated_at, completed_at)
SELECT 'argo', workflow_uid, node_id, workflow, pod_name, pod_uid, 'completed',
  '$payload', 1, revision, revision, at, at, at FROM prefill;
INSERT INTO changes (revision, namespace, item, recorded_at)
SELECT revision, 'argo', json_build_object('type', 'upserted', 'revision', revision,
  'result', json_build_object('namespace', 'argo', 'workflow', workflow,
    'workflowUid', workflow_uid, 'nodeId', node_id, 'podName', pod_name, 'podUid', pod_uid,
    'instanceId', NULL, 'state', 'completed', 'phase', NULL, 'message', NULL,
    'progress', NULL, 'outputs', '$payload'::json, 'sequence', 1, 'revision', revision,
    'createdAt', to_char(to_timestamp(at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'updatedAt', to_char(to_timestamp(at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'completedAt', to_char(to_timestamp(at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'abandonReason', NULL))::text, at FROM prefill;
UPDATE store_state SET revision = $head - $first + 1 + $to;
COMMIT;
SQL
    say "  $to rows"
  done
  sql -d "$db" -c "VACUUM ANALYZE results" -c "VACUUM ANALYZE changes" >/dev/null
}
