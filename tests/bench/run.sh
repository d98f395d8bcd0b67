#!/usr/bin/env bash
# The ingest benchmark: argo-results against its two baselines, in one run on one machine.
#
#   bash tests/bench/run.sh
#
# 1. argo-results-server (release, --jwks-file) on a fresh database, loaded by loadgen:
#    closed loop, distinct nodes, one final report each with its pod's own token (minted
#    before the clock starts, as the kubelet does); RSS sampled.
# 2. pgbench: the same single-row upsert of the same ~1 KB outputs into the same results
#    table, one transaction each, at the same concurrency (what one transaction per
#    request can do at best).
# 3. etcd: `etcdctl check perf --load=xl` against a private etcd on loopback (the upper
#    bound of the WorkflowTaskResult path, which adds the API server on top).
# Each starts after a CHECKPOINT, so that none pays for the writes of the one before.
#
# Needs Postgres on 127.0.0.1:5432 (user postgres, trust), pgbench and psql; installs
# Debian's etcd-server and etcd-client when missing. Prints a table, then as its last
# line one JSON object. Knobs: CONCURRENCY (64), DURATION (20 s), PGPORT, PGUSER.
set -euo pipefail
source "$(dirname "$0")/common.sh"

duration=${DURATION:-20}
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

build
server_bin=target/release/argo-results-server
loadgen_bin=target/release/loadgen
"$loadgen_bin" keygen "$work/keys"

# --- the service --------------------------------------------------------------------------
say "argo-results-server on a fresh database; loadgen: $concurrency in flight, ${duration}s"
fresh_db "$service_db"
quiesce
"$server_bin" --database-url "postgres://$pguser@$pghost:$pgport/$service_db" \
  --listen "127.0.0.1:$port" --jwks-file "$work/keys/jwks.json" --issuer https://kubernetes.default.svc.cluster.local --log-format json \
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
pids+=($!)

service=$("$loadgen_bin" run --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" \
  --concurrency "$concurrency" --duration "$duration" --warmup 3)
# The same with three reports per pod (started, progress, final), as Argo's wait
# container sends them: two of three requests find their token already verified.
say "loadgen again, three reports per pod: the token cache at work (10 s)"
per_pod=$("$loadgen_bin" run --url "http://127.0.0.1:$port" --key "$work/keys/signing-key.pem" \
  --concurrency "$concurrency" --duration 10 --warmup 2 --reports-per-node 3 --run-id per-pod)
rss_kib=$(cat "$work/rss_kib" 2>/dev/null || echo 0)
stored=$(sql -tA -d "$service_db" \
  -c "SELECT COUNT(*) FROM results")
kill "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
sql -d postgres -c "DROP DATABASE $service_db" >/dev/null

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

python3 - "$service" "$per_pod" "$pgbench_tps" "$etcd_wps" "$rss_kib" "$stored" "$concurrency" "$duration" <<'PY'
import json, sys
service, per_pod = json.loads(sys.argv[1]), json.loads(sys.argv[2])
pgbench_tps, etcd_wps = float(sys.argv[3]), float(sys.argv[4])
rss_mib = int(sys.argv[5]) / 1024
stored, concurrency, duration = int(sys.argv[6]), sys.argv[7], sys.argv[8]
rps = service["rps"]
rows = [
    ("argo-results (loadgen, final reports)", f"{rps:,.0f} req/s",
     f"p50 {service['p50_ms']:.2f} ms, p99 {service['p99_ms']:.2f} ms, max {service['max_ms']:.1f} ms"),
    ("  three reports per pod (10 s)", f"{per_pod['rps']:,.0f} req/s",
     f"p50 {per_pod['p50_ms']:.2f} ms, p99 {per_pod['p99_ms']:.2f} ms, errors {per_pod['errors']}"),
    ("pgbench single-row upsert", f"{pgbench_tps:,.0f} tps", f"{concurrency} clients"),
    ("etcd check perf --load=xl", f"{etcd_wps:,.0f} writes/s", "private etcd on loopback"),
    ("server peak RSS", f"{rss_mib:.1f} MiB", ""),
    ("errors", str(service["errors"]), f"statuses {service['statuses']}, {stored} results stored"),
]
print(f"\n{'':40} {'measured':>18}   notes ({duration} s each)")
for name, value, note in rows:
    print(f"{name:40} {value:>18}   {note}")
print(f"{'ratio vs pgbench':40} {rps / pgbench_tps:>18.2f}")
print(f"{'ratio vs etcd':40} {rps / etcd_wps:>18.2f}\n")
print(json.dumps({
    "service_rps": round(rps, 1),
    "service_p50_ms": service["p50_ms"],
    "service_p99_ms": service["p99_ms"],
    "pgbench_tps": round(pgbench_tps, 1),
    "etcd_wps": round(etcd_wps, 1),
    "ratio_vs_pgbench": round(rps / pgbench_tps, 2),
    "ratio_vs_etcd": round(rps / etcd_wps, 2),
    "server_rss_mib": round(rss_mib, 1),
    "errors": service["errors"],
    "service_rps_3_reports_per_pod": round(per_pod["rps"], 1),
}))
PY
