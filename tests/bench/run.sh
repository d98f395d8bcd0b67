#!/usr/bin/env bash
# The ingest benchmark: argo-results against its two baselines, and the server's CPU
# against its floor, in one run on one machine.
#
#   bash tests/bench/run.sh
#   ARGO_RESULTS_BENCH_SERVER=/path/to/argo-results-server bash tests/bench/run.sh
#
# ARGO_RESULTS_BENCH_SERVER measures that server binary instead of this tree's release
# build (only loadgen is built then): build an older commit in a scratch clone and pass its
# binary to measure "before" with the same script and the same load generator. It must take
# the flags used below (--database-url, --listen, --jwks-file, --issuer, --reader,
# --require-expectation, --log-format, --max-answer-memory, --tls-cert, --tls-key), and
# its schema must be the one of migrations/postgres/ here.
#
# 1. argo-results-server (release, --jwks-file) on a fresh database, loaded by loadgen:
#    closed loop, distinct nodes, one final report each with its pod's own token (minted
#    before the clock starts, as the kubelet does); RSS sampled. No controller registers
#    the nodes first, so the server runs with --require-expectation=false (the first pod to
#    report binds its node, as before that rule existed); with --jwks-file it would
#    answer every report 409 not_expected. The server's CPU time
#    (utime + stime of /proc/PID/stat, read by loadgen when the measured seconds start
#    and end) divided by the reports answered 2xx in them: server_cpu_us_per_report.
#    Then three reports per pod for 10 s (the token cache at work), and one report at a
#    time over one keep-alive connection (lone reports: server_cpu_us_per_lone_report).
# 2. The floor, on the same server: loadgen GETs /healthz at the same concurrency, and the
#    server's CPU per request, plus one RS256 check as `openssl speed rsa2048` measures it
#    (as floors.sh does), is floor_cpu_us_per_request; server_cpu_vs_floor is the ratio.
# 3. Listing: one workflow of 1,000 nodes that step 1's reports wrote (loadgen puts 1,000
#    nodes in each workflow; the first one the database holds complete is taken), listed
#    in one page (limit=1000) through the API by loadgen at the same concurrency, then the
#    same rows selected by pgbench (a prepared `SELECT * ... ORDER BY node_id LIMIT 1000`)
#    with the server stopped, READ_DURATION each: list_ratio_vs_raw_select is the select
#    rate over the API's (lower is better).
# 3b. Pods as deployed: each simulated pod opens a fresh TLS 1.3 connection (offering
#    suites in the order of Go's crypto/tls, as Argo's wait container), sends one
#    final report (or three: start, progress, final) and closes, 64 pods in flight and one
#    at a time, on a server with an ECDSA P-256 and then an RSA-2048 certificate (loadgen
#    `certs`: a private CA and the two). The floor: tests/src/bin/floor.rs (hyper and
#    rustls as the server uses them, one fixed answer) takes the same fresh connections;
#    its CPU per connection plus one RS256 check (each pod's token is new) is
#    floor_cpu_us_per_pod_*. Plain fresh connections to /healthz, against the floor's
#    plain ones: fresh_connection_vs_floor.
# 3c. Visibility: the same pods (ECDSA, 64 in flight) while a controller follows the change
#    feed of a second replica on the same database, so that each change crosses a Postgres
#    notification: the Rust Reconciler, then the Go Follower (tests/bench/follower, built
#    with .ci/go). From each final report's 2xx to the controller holding it completed:
#    visible_p50_ms, visible_p99_ms, visible_max_ms (the slower follower's; each's as
#    visible_*_ms_rust and _go) and visible_never_seen (not held 10 s after the load).
#    loadgen reads a 2xx late when its thread is busy, which shortens these; from the
#    result's updatedAt (the writer's clock before the commit), visible_since_write_*_ms
#    bound them from above.
# 4. pgbench: the same single-row upsert of the same ~1 KB outputs into the same results
#    table, one transaction each, at the same concurrency (what one transaction per
#    request can do at best).
# 5. etcd: `etcdctl check perf --load=xl` against a private etcd on loopback (the upper
#    bound of the WorkflowTaskResult path, which adds the API server on top).
# 6. The status quo beside argo-results (tests/bench/status_quo.sh): a real kube-apiserver
#    and etcd (tests/kube), pods with tokens bound to their Pods (tests/bench/pods) doing
#    what argoexec v4 does with a WorkflowTaskResult, against the same pods' final reports
#    to the server (--kube-jwks, Postgres); the CPU of each side per pod, the lag until each
#    side's controller holds a result (also under a background load of Pod status
#    updates), a controller's relist at 10,000 and 100,000 results and one workflow's
#    deletion, and a control from the processes' own counters (with its negative control:
#    pods that leave out a write must make it refuse). Its keys are status_quo_*
#    and their argo-results counterparts (docs/performance.md opens with them).
# Each starts after a CHECKPOINT, so that none pays for the writes of the one before.
#
# Needs Postgres on 127.0.0.1:5432 (user postgres, trust), pgbench, psql, openssl, kubectl,
# curl and Go (/usr/local/go); installs Debian's etcd-server and etcd-client when missing. Prints a table with the
# performance targets (docs/performance.md, "Method") beside the figures (a benchmark's targets: nothing fails on them),
# then as its last line one JSON object. Knobs: CONCURRENCY (64), DURATION (20 s),
# READ_DURATION (10 s), PGPORT, PGUSER, ARGO_RESULTS_BENCH_SERVER.
set -euo pipefail
# Before common.sh moves to the repository's root: a relative path is the caller's.
server_bin=
if [[ -n ${ARGO_RESULTS_BENCH_SERVER:-} ]]; then
  server_bin=$(realpath -e "$ARGO_RESULTS_BENCH_SERVER")
  [[ -x $server_bin ]] || { echo "$server_bin is not executable" >&2; exit 1; }
fi
source "$(dirname "$0")/common.sh"

duration=${DURATION:-20}
read_duration=${READ_DURATION:-10}
reader=system:serviceaccount:argo:argo-server
clock_ticks=$(getconf CLK_TCK)
service_db=argo_results_bench
pgbench_db=argo_results_pgbench
etcd_client=127.0.0.1:23790
etcd_peer=127.0.0.1:23800
port=18480

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for db in "$service_db" "$pgbench_db"; do
    sql -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -n $server_bin ]]; then
  build_loadgen
else
  build
  server_bin=target/release/argo-results-server
fi
say "server: $server_bin ($(stat -c %y "$server_bin" | cut -d. -f1))"
loadgen_bin=target/release/loadgen
say "the Go follower (tests/bench/follower) for the visibility phases"
.ci/go -C tests/bench/follower build -o "$work/follower" .
"$loadgen_bin" keygen "$work/keys"
"$loadgen_bin" certs "$work/certs"
mkdir "$work/phases"

# --- the service --------------------------------------------------------------------------
say "argo-results-server on a fresh database; loadgen: $concurrency in flight, ${duration}s"
fresh_db "$service_db"
quiesce
"$server_bin" --database-url "postgres://$pguser@$pghost:$pgport/$service_db" \
  --listen "127.0.0.1:$port" --jwks-file "$work/keys/jwks.json" --issuer https://kubernetes.default.svc.cluster.local \
  --reader "$reader" --require-expectation=false --log-format json \
  --max-answer-memory 1073741824 \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
pids+=("$server_pid")
for _ in $(seq 1 100); do grep -q listening "$work/server.out" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$work/server.out" || { cat "$work/server.log" >&2; exit 1; }

# The peak resident set of the server, sampled every 200 ms while loadgen runs.
(
  peak=0
  while kill -0 "$server_pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || echo 0)
    ((rss > peak)) && peak=$rss && echo "$peak" >"$work/rss_kib"
    sleep 0.2
  done
) &
rss_sampler=$!
pids+=("$rss_sampler")

# The workflows are ingest-00000, ingest-00001, ...: 1,000 nodes each.
service=$("$loadgen_bin" run --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" \
  --concurrency "$concurrency" --duration "$duration" --warmup 3 --run-id ingest \
  --server-pid "$server_pid")
# The same with three reports per pod (started, progress, final), as Argo's wait
# container sends them: two of three requests find their token already verified.
say "loadgen again, three reports per pod: the token cache at work (10 s)"
per_pod=$("$loadgen_bin" run --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" \
  --concurrency "$concurrency" --duration 10 --warmup 2 --reports-per-node 3 --run-id per-pod)
quiesce
say "one report at a time on one keep-alive connection (lone reports, ${read_duration}s)"
"$loadgen_bin" run --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" \
  --concurrency 1 --duration "$read_duration" --warmup 2 --premint 20000 --run-id lone \
  --server-pid "$server_pid" >"$work/phases/lone_report.json"
# The peak is the reports': the lists below hold up to 64 pages of 1,000 results at once.
kill "$rss_sampler" 2>/dev/null || true
rss_kib=$(cat "$work/rss_kib" 2>/dev/null || echo 0)
stored=$(sql -tA -d "$service_db" \
  -c "SELECT COUNT(*) FROM results")

# --- the floor: /healthz on the same server -----------------------------------------------
quiesce
say "the floor: loadgen GETs /healthz, $concurrency in flight, ${read_duration}s"
healthz=$("$loadgen_bin" get --url "http://127.0.0.1:$port" --path /healthz \
  --concurrency "$concurrency" --duration "$read_duration" --server-pid "$server_pid")

# --- listing a 1,000-node workflow: the API, then the same rows selected raw ---------------
# Its rows are those step 1's reports wrote: the first workflow stored whole.
read -r list_workflow list_uid < <(sql -tA -F ' ' -d "$service_db" -c "
  SELECT workflow, workflow_uid FROM results WHERE namespace = 'argo' AND workflow LIKE 'ingest-%'
  GROUP BY workflow, workflow_uid HAVING COUNT(*) = 1000 ORDER BY workflow LIMIT 1") || true
[[ -n ${list_uid:-} ]] || { echo "no workflow of 1,000 nodes was written" >&2; exit 1; }
list_path="/api/v1/namespaces/argo/workflows/$list_workflow/results?workflowUid=$list_uid&limit=1000"
listed=$("$loadgen_bin" list --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" \
  --subject "$reader" --workflow "$list_workflow" --requests 1)
[[ $(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["items"])' "$listed") == 1000 ]] \
  || { echo "listing $list_workflow: $listed" >&2; exit 1; }
quiesce
say "listing $list_workflow (1,000 nodes, one page) through the API, $concurrency in flight, ${read_duration}s"
list=$("$loadgen_bin" get --url "http://127.0.0.1:$port" --path "$list_path" \
  --key "$work/keys/signing-key.pem" --subject "$reader" \
  --concurrency "$concurrency" --duration "$read_duration" --server-pid "$server_pid")
kill "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true

# --- pods as deployed: a fresh TLS connection each, against the floor's ------------------
database_url="postgres://$pguser@$pghost:$pgport/$service_db"
# Starts $@ (a server), waits until it listens, and sets listening_pid.
start_listening() {
  "$@" >"$work/listening.out" 2>"$work/listening.log" &
  listening_pid=$!
  pids+=("$listening_pid")
  for _ in $(seq 1 100); do grep -q listening "$work/listening.out" 2>/dev/null && break; sleep 0.1; done
  grep -q listening "$work/listening.out" || { cat "$work/listening.log" >&2; exit 1; }
}
stop_listening() { kill "$listening_pid" 2>/dev/null || true; wait "$listening_pid" 2>/dev/null || true; }
# loadgen $1 (run or get) into phase $2 against the listening server, with the rest.
phase() {
  local command=$1 name=$2
  shift 2
  quiesce
  "$loadgen_bin" "$command" --duration "$read_duration" --warmup 2 --server-pid "$listening_pid" \
    "$@" >"$work/phases/$name.json"
}
pod_flags=(--key "$work/keys/signing-key.pem" --fresh --ca "$work/certs/ca.pem")
for kind in ecdsa rsa; do
  say "pods on fresh TLS connections, $kind certificate: $concurrency in flight and one at a time"
  start_listening "$server_bin" --database-url "$database_url" --listen "127.0.0.1:$((port + 1))" \
    --tls-cert "$work/certs/$kind.crt" --tls-key "$work/certs/$kind.key" \
    --jwks-file "$work/keys/jwks.json" --issuer https://kubernetes.default.svc.cluster.local \
    --reader "$reader" --require-expectation=false --log-format json
  url="https://127.0.0.1:$((port + 1))"
  phase run "pods_$kind" --url "$url" "${pod_flags[@]}" --concurrency "$concurrency" \
    --premint 60000 --run-id "pods-$kind"
  if [[ $kind == ecdsa ]]; then
    phase run pods_3_reports_ecdsa --url "$url" "${pod_flags[@]}" --concurrency "$concurrency" \
      --premint 30000 --reports-per-node 3 --run-id pods-3-ecdsa
    phase run lone_pod_ecdsa --url "$url" "${pod_flags[@]}" --concurrency 1 --premint 10000 \
      --run-id lone-ecdsa
    say "visibility: the same pods, and a controller following a second replica's feed"
    "$server_bin" --database-url "$database_url" --listen "127.0.0.1:$((port + 3))" \
      --tls-cert "$work/certs/$kind.crt" --tls-key "$work/certs/$kind.key" \
      --jwks-file "$work/keys/jwks.json" --issuer https://kubernetes.default.svc.cluster.local \
      --reader "$reader" --require-expectation=false --log-format json \
      >"$work/replica.out" 2>"$work/replica.log" &
    replica_pid=$!
    pids+=("$replica_pid")
    for _ in $(seq 1 100); do grep -q listening "$work/replica.out" 2>/dev/null && break; sleep 0.1; done
    grep -q listening "$work/replica.out" || { cat "$work/replica.log" >&2; exit 1; }
    for follower in rust go; do
      command=rust
      [[ $follower == go ]] && command=$work/follower
      phase run "visible_$follower" --url "$url" "${pod_flags[@]}" --concurrency "$concurrency" \
        --premint 30000 --run-id "visible-$follower" \
        --visible-via "https://127.0.0.1:$((port + 3))" --follower "$command"
    done
    kill "$replica_pid" 2>/dev/null || true
    wait "$replica_pid" 2>/dev/null || true
  fi
  stop_listening
  say "the floor on fresh TLS connections, $kind certificate"
  start_listening target/release/floor --listen "127.0.0.1:$((port + 2))" \
    --tls-cert "$work/certs/$kind.crt" --tls-key "$work/certs/$kind.key"
  url="https://127.0.0.1:$((port + 2))"
  phase get "floor_$kind" --url "$url" --ca "$work/certs/ca.pem" --fresh --path / \
    --concurrency "$concurrency"
  if [[ $kind == ecdsa ]]; then
    phase get floor_lone_ecdsa --url "$url" --ca "$work/certs/ca.pem" --fresh --path / \
      --concurrency 1
  fi
  stop_listening
done
say "plain fresh connections: /healthz on the server, then the floor"
start_listening "$server_bin" --database-url "$database_url" --listen "127.0.0.1:$((port + 1))" \
  --jwks-file "$work/keys/jwks.json" --issuer https://kubernetes.default.svc.cluster.local \
  --log-format json
phase get fresh_server --url "http://127.0.0.1:$((port + 1))" --fresh --path /healthz \
  --concurrency "$concurrency"
stop_listening
start_listening target/release/floor --listen "127.0.0.1:$((port + 2))"
phase get fresh_floor --url "http://127.0.0.1:$((port + 2))" --fresh --path / \
  --concurrency "$concurrency"
stop_listening

quiesce
say "the same rows selected by pgbench, $concurrency clients, ${read_duration}s"
cat >"$work/select.sql" <<SQL
SELECT * FROM results WHERE namespace = 'argo' AND workflow_uid = '$list_uid'
  ORDER BY node_id LIMIT 1000;
SQL
select_out=$(pgbench -n -M prepared -h "$pghost" -p "$pgport" -U "$pguser" -c "$concurrency" -j 2 \
  -T "$read_duration" -f "$work/select.sql" "$service_db" 2>&1)
select_tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$select_out" | head -n 1)
[[ -n $select_tps ]] || { echo "$select_out" >&2; echo "pgbench printed no tps" >&2; exit 1; }
sql -d postgres -c "DROP DATABASE $service_db" >/dev/null

say "one RS256 check: openssl speed rsa2048 (a few seconds)"
rsa_verifies=$(rsa2048_verifies_per_s)

# --- baseline 1: pgbench ------------------------------------------------------------------
say "pgbench: single-row upsert of the same payload, $concurrency clients, ${duration}s"
fresh_db "$pgbench_db"
sql -d "$pgbench_db" -f migrations/postgres/0001_results.sql >/dev/null
quiesce
# The outputs loadgen sends, quoted for SQL.
payload=$("$loadgen_bin" outputs | sed "s/'/''/g")
cat >"$work/upsert.sql" <<SQL
\set node random(1, 2000000000)
INSERT INTO results (namespace, workflow_uid, node_id, workflow, pod_name, pod_uid, state,
  outputs, sequence, revision, created_revision, created_at, updated_at, completed_at)
VALUES ('argo', 'bench-uid', 'bench-' || :node, 'bench', 'bench-main-' || :node,
  'pod-' || :node, 'completed', '$payload', 1, :node, :node, 0, 0, 0)
ON CONFLICT (namespace, workflow_uid, node_id) DO UPDATE SET
  pod_name = excluded.pod_name, pod_uid = excluded.pod_uid, state = excluded.state,
  outputs = excluded.outputs, sequence = excluded.sequence, revision = excluded.revision,
  updated_at = excluded.updated_at, completed_at = excluded.completed_at;
SQL
pgbench_out=$(pgbench -n -h "$pghost" -p "$pgport" -U "$pguser" -c "$concurrency" -j 2 \
  -T "$duration" -f "$work/upsert.sql" "$pgbench_db" 2>&1)
pgbench_tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$pgbench_out" | head -n 1)
[[ -n $pgbench_tps ]] || { echo "$pgbench_out" >&2; echo "pgbench printed no tps" >&2; exit 1; }
sql -d postgres -c "DROP DATABASE $pgbench_db" >/dev/null

# --- baseline 2: etcd ---------------------------------------------------------------------
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
  say "installing Debian's etcd-server and etcd-client"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q etcd-server etcd-client >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q etcd-server etcd-client >/dev/null; }
fi
quiesce
say "etcd: etcdctl check perf --load=xl on a private etcd (60 s)"
etcd --name bench --data-dir "$work/etcd" \
  --listen-client-urls "http://$etcd_client" --advertise-client-urls "http://$etcd_client" \
  --listen-peer-urls "http://$etcd_peer" --initial-advertise-peer-urls "http://$etcd_peer" \
  --initial-cluster "bench=http://$etcd_peer" >"$work/etcd.log" 2>&1 &
pids+=($!)
export ETCDCTL_API=3
for _ in $(seq 1 50); do etcdctl --endpoints "$etcd_client" endpoint health >/dev/null 2>&1 && break; sleep 0.2; done
# check perf exits non-zero when a criterion fails; its throughput is the figure we want.
etcd_out=$(etcdctl --endpoints "$etcd_client" check perf --load=xl 2>&1 || true)
etcd_wps=$(grep -o 'Throughput is [0-9.]*' <<<"$etcd_out" | grep -o '[0-9.]*$' | head -n 1 || true)
if [[ -z $etcd_wps ]]; then
  etcd_wps=$(grep -oi 'throughput[^0-9]*[0-9.]*' <<<"$etcd_out" | grep -o '[0-9.]*$' | head -n 1 || true)
fi
[[ -n $etcd_wps ]] || { echo "$etcd_out" >&2; echo "etcdctl printed no throughput" >&2; exit 1; }
kill "${pids[-1]}" 2>/dev/null || true

# --- the status quo, on a real API server and etcd ------------------------------------------
# Its progress lines go on counting from this run's start.
BENCH_SECONDS=$SECONDS bash tests/bench/status_quo.sh "$work" "$server_bin"

python3 tests/bench/run_report.py "$service" "$per_pod" "$pgbench_tps" "$etcd_wps" "$rss_kib" "$stored" "$concurrency" "$duration" \
  "$healthz" "$list" "$select_tps" "$rsa_verifies" "$clock_ticks" "$read_duration" "$list_workflow" \
  "$work/phases" "$work/status-quo/summary.json"
