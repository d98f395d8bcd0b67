#!/usr/bin/env bash
# What a schema migration's locks cost the writers, on a `results` table of the real schema
# (migrations/postgres/) holding 10 million rows: for each statement, how long it ran and
# the longest time a single-row write from another session (one every 50 ms, from 1 s
# before the statement until 1 s after it) was held up. The figures of docs/operations.md,
# "Upgrades and migrations".
#
#   bash tests/bench/migration_lock.sh                   # 10,000,000 results
#   ROWS=1000000 bash tests/bench/migration_lock.sh      # fewer (a multiple of 1,000)
#
# Postgres as for the tests: 127.0.0.1:5432, user postgres without a password (PGPORT,
# PGUSER). Works in a scratch database, migration_lock, dropped at exit even on failure or
# Ctrl-C. At 10 million rows: about 15 GB of disk at peak (the rewrite, g, copies the
# table and its indexes) and 6 to 8 minutes on 2 cores, half of it the load. One line per
# measurement on stdout (tests/bench/migration_lock.py prints most), progress on stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

export PGHOST=127.0.0.1 PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
export PGDATABASE=migration_lock
rows=${ROWS:-10000000}
# Cron workflows on a per-minute schedule, each with --claim-retention's 30 days of
# claims (43,200): the claims migration 0003 updates.
crons=${CRON_WORKFLOWS:-10}
claims=$((crons * 43200))
if ((rows < 1000 || rows % 1000 != 0)); then
  echo "ROWS must be a positive multiple of 1,000 (1,000 nodes per workflow)" >&2
  exit 2
fi
workflows=$((rows / 1000))
helper=tests/bench/migration_lock.py

say() { printf '==> [%4ds] %s\n' "$SECONDS" "$*" >&2; }

# The command running in the background, so that a signal is handled at once (bash runs
# a trap only once its foreground command has ended) and the command is ended with it;
# its standard input kept (a background command's is /dev/null unless redirected).
child=
run() {
  "$@" <&0 &
  child=$!
  wait "$child"
  child=
}
sql() { run psql -X -q -v ON_ERROR_STOP=1 "$@"; }
value() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
drop_db() {
  psql -X -q -d postgres -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $PGDATABASE WITH (FORCE)"
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -n $child ]]; then kill "$child" 2>/dev/null || true; fi
  # FORCE ends the sessions the helper may have left open.
  if drop_db; then say "dropped database $PGDATABASE"; else say "could not drop $PGDATABASE"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# As sqlx applies a migration: in one transaction, unless its first line is
# `-- no-transaction` (sqlx-core 0.8.6, migrate/source.rs, resolve_blocking).
apply_migration() {
  local file=$1 first
  IFS= read -r first <"$file" || true
  if [[ $first == "-- no-transaction"* ]]; then sql -f "$file"; else sql -1 -f "$file"; fi
}
# Each measurement starts with the dirty pages written out, none paying for another's.
quiesce() { sql -c CHECKPOINT; sync; sleep 2; }
measure() {
  quiesce
  run python3 "$helper" measure "$@"
}

printf 'migration_lock: %s, %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
printf 'postgres: %s\n' "$(value -d postgres -c 'SELECT version()')"
printf 'settings: %s\n' "$(value -d postgres -c "SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'maintenance_work_mem', 'max_parallel_maintenance_workers', 'max_wal_size', 'deadlock_timeout', 'lock_timeout', 'synchronous_commit')")"
printf 'machine: %s cores (%s), %s GiB memory, %s\n' "$(nproc)" \
  "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
  "$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" \
  "$(df -h --output=avail "$(value -d postgres -c 'SHOW data_directory')" 2>/dev/null | tail -n 1 | tr -d ' ') free for the data directory"
# Other work on the machine slows the builds: the load average says how much there was.
printf 'load average at the start: %s\n' "$(cut -d ' ' -f 1-3 /proc/loadavg)"

say "database $PGDATABASE, migrations 0001 and 0002"
drop_db
sql -d postgres -c "CREATE DATABASE $PGDATABASE"
apply_migration migrations/postgres/0001_results.sql
apply_migration migrations/postgres/0002_retention.sql

say "$claims cron claims as a release before leases stored them ($crons cron workflows, 30 days each)"
sql <<SQL
INSERT INTO cron_claims (cron_workflow_uid, scheduled_time, namespace, cron_workflow,
  workflow_name, claimed_at)
SELECT md5('cron' || c)::uuid::text, tick, format('team-%s', lpad((c % 20)::text, 2, '0')),
  format('cron-%s', c), format('cron-%s-%s', c, tick / 1000), tick + 150
FROM generate_series(0, $crons - 1) AS c,
  LATERAL (SELECT (extract(epoch FROM date_trunc('minute', now())) * 1000)::bigint
    - k::bigint * 60000 AS tick FROM generate_series(0, 43199) AS k) AS ticks;
VACUUM ANALYZE cron_claims;
SQL

# e: the claim migration as it is, with a release before leases claiming ticks meanwhile.
measure e "migration 0003_claim_leases as sqlx applies it (one transaction) on cron_claims" \
  "$claims" --file migrations/postgres/0003_claim_leases.sql --transaction --writes claims
apply_migration migrations/postgres/0004_epoch.sql

# f: a `-- no-transaction` migration, CREATE INDEX CONCURRENTLY, run by one replica while
# another waits for sqlx's migration lock; then by hand, the repair; then with a waiter
# that polls instead.
say "two replicas migrating at once"
run python3 "$helper" race f1 cron_claims cron_claims_by_workflow '(workflow_name)' \
  --waiter blocking --rows "$claims"
quiesce
start=$(date +%s.%N)
sql -c "DROP INDEX CONCURRENTLY IF EXISTS cron_claims_by_workflow" \
  -c "CREATE INDEX CONCURRENTLY cron_claims_by_workflow ON cron_claims (workflow_name)"
printf 'f2  the repair, DROP INDEX CONCURRENTLY then CREATE INDEX CONCURRENTLY: rows=%s duration=%.2f s cron_claims_by_workflow indisvalid=%s\n' \
  "$claims" "$(awk -v start="$start" -v end="$(date +%s.%N)" 'BEGIN { print end - start }')" \
  "$(value -c "SELECT indisvalid FROM pg_index WHERE indexrelid = 'cron_claims_by_workflow'::regclass")"
sql -c "DROP INDEX CONCURRENTLY cron_claims_by_workflow"
run python3 "$helper" race f3 cron_claims cron_claims_by_workflow '(workflow_name)' \
  --waiter polling --rows "$claims"
sql -c "DROP INDEX CONCURRENTLY cron_claims_by_workflow"

# h: sqlx sends a migration's file as one query string (conn.execute): a second statement
# puts CREATE INDEX CONCURRENTLY in the string's implicit transaction; psql -c does the same.
outcome=$(psql -X -q -c "CREATE INDEX CONCURRENTLY IF NOT EXISTS h1 ON cron_claims (claimed_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS h2 ON cron_claims (settled_at)" 2>&1 || true)
printf 'h   two statements in one -- no-transaction file (one query string): %s\n' \
  "$(grep -m 1 -o 'ERROR:.*' <<<"$outcome" | tr -s ' ' || echo "no error: $outcome")"

say "loading $rows results ($workflows workflows of 1,000 nodes) in batches of a million"
sql <<SQL
CREATE TABLE bench_workflows AS
SELECT w, format('team-%s', lpad((w % 20)::text, 2, '0')) AS namespace,
  format('pipeline-%s-%s', w % 500, substr(md5('name' || w), 1, 5)) AS name,
  md5('uid' || w)::uuid::text AS uid,
  -- spread over --result-retention's 7 days, the newest now
  (extract(epoch FROM now()) * 1000)::bigint - 604800000
    + w * (604800000 / $workflows) AS started_at
FROM generate_series(0, $workflows - 1) AS w;
SQL
load_start=$SECONDS
for ((first = 0; first < workflows; first += 1000)); do
  last=$((first + 999 < workflows - 1 ? first + 999 : workflows - 1))
  sql <<SQL
INSERT INTO results (namespace, workflow_uid, node_id, workflow, pod_name, pod_uid,
  instance_id, state, phase, message, progress, outputs, sequence, revision,
  created_revision, created_at, updated_at, completed_at, abandon_reason)
SELECT wf.namespace, wf.uid, node.id, wf.name, node.pod, md5('pod' || i)::uuid::text,
  NULL, kind.state,
  CASE kind.state WHEN 'completed' THEN CASE WHEN kind.failed THEN 'Failed' ELSE 'Succeeded' END
    WHEN 'reporting' THEN 'Running' END,
  CASE WHEN kind.state = 'completed' AND kind.failed THEN 'Error (exit code 1)' END,
  CASE kind.state WHEN 'completed' THEN '1/1' WHEN 'reporting' THEN '0/1' END,
  CASE WHEN kind.state IN ('completed', 'reporting') THEN format(
    '{"parameters":[{"name":"rows","value":"%s"},{"name":"digest","value":"%s"}],'
    '"artifacts":[{"name":"main-logs","s3":{"key":"%s/%s/main.log"}}],"exitCode":"%s"}',
    i * 37 % 100000, substr(md5('out' || i), 1, 16), wf.name, node.pod,
    CASE WHEN kind.failed THEN 1 ELSE 0 END) END,
  CASE WHEN kind.state <> 'expected' THEN 1 + n % 3 END,
  i, wf.w * 1000 + 1,
  wf.started_at + n * 20, wf.started_at + n * 20 + 30000,
  CASE WHEN kind.state = 'completed' THEN wf.started_at + n * 20 + 30000 END,
  CASE WHEN kind.state = 'abandoned' THEN 'the pod was deleted before it reported' END
FROM bench_workflows AS wf
CROSS JOIN generate_series(0, 999) AS n
CROSS JOIN LATERAL (SELECT wf.w * 1000 + n + 1 AS i,
  -- Argo's node IDs: the workflow's name and a 10-digit number, unique in the workflow
  wf.name || '-' || (1000000000 + n * 2654435761 % 3000000000) AS id,
  wf.name || '-main-' || (1000000000 + n * 2654435761 % 3000000000) AS pod) AS node
CROSS JOIN LATERAL (SELECT
  CASE WHEN (n * 7919 + wf.w) % 100 < 90 THEN 'completed'
    WHEN (n * 7919 + wf.w) % 100 < 95 THEN 'reporting'
    WHEN (n * 7919 + wf.w) % 100 < 98 THEN 'expected' ELSE 'abandoned' END AS state,
  (n * 7919 + wf.w) % 20 = 0 AS failed) AS kind
WHERE wf.w BETWEEN $first AND $last
ORDER BY wf.w, n;
SQL
  say "  $(((last + 1) * 1000)) rows"
done
sql -c "DROP TABLE bench_workflows" -c "VACUUM ANALYZE results"
printf 'loaded: rows=%s in %d s (with VACUUM ANALYZE); results %s with its indexes (%s table), outputs %s bytes on average; states %s\n' \
  "$rows" "$((SECONDS - load_start))" \
  "$(value -c "SELECT pg_size_pretty(pg_total_relation_size('results'))")" \
  "$(value -c "SELECT pg_size_pretty(pg_table_size('results'))")" \
  "$(value -c "SELECT round(avg(octet_length(outputs))) FROM results WHERE revision % 97 = 0")" \
  "$(value -c "SELECT string_agg(state || '=' || n, ' ' ORDER BY state) FROM (SELECT state, count(*) AS n FROM results WHERE revision % 97 = 0 GROUP BY state) s") (one row in 97)"

index='(namespace, workflow, updated_at)'
measure a "CREATE INDEX results_by_name_update ON results $index" "$rows" \
  --sql "CREATE INDEX results_by_name_update ON results $index"
sql -c "DROP INDEX results_by_name_update"
measure b "CREATE INDEX CONCURRENTLY IF NOT EXISTS results_by_name_update ON results $index" "$rows" \
  --sql "CREATE INDEX CONCURRENTLY IF NOT EXISTS results_by_name_update ON results $index"
printf 'b   results_by_name_update indisvalid=%s\n' \
  "$(value -c "SELECT indisvalid FROM pg_index WHERE indexrelid = 'results_by_name_update'::regclass")"
sql -c "DROP INDEX CONCURRENTLY results_by_name_update"
measure c1 "ALTER TABLE results ADD COLUMN x TEXT" "$rows" \
  --sql "ALTER TABLE results ADD COLUMN x TEXT"
measure c2 "ALTER TABLE results ADD COLUMN y BIGINT NOT NULL DEFAULT 0" "$rows" \
  --sql "ALTER TABLE results ADD COLUMN y BIGINT NOT NULL DEFAULT 0"
# d: the same kind of statement behind a transaction that has read the table and stays
# open 8 s more (a long report, a pg_dump): the ALTER queues for its lock, and every
# write queues behind the ALTER; lock_timeout bounds that.
measure d1 "ALTER TABLE results ADD COLUMN z TEXT, behind an 8 s open transaction" "$rows" \
  --sql "ALTER TABLE results ADD COLUMN z TEXT" --hold 8
measure d2 "SET lock_timeout = '1s'; ALTER TABLE results ADD COLUMN z2 TEXT, behind an 8 s open transaction" "$rows" \
  --sql "SET lock_timeout = '1s'; ALTER TABLE results ADD COLUMN z2 TEXT" --hold 8
# g: a volatile default rewrites the table and rebuilds every index under ACCESS EXCLUSIVE.
rewrite="ALTER TABLE results ADD COLUMN seen_at BIGINT NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
measure g "$rewrite" "$rows" --sql "$rewrite"
printf 'load average at the end: %s\n' "$(cut -d ' ' -f 1-3 /proc/loadavg)"
say "done"
