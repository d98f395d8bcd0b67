#!/usr/bin/env bash
# The status quo beside argo-results, on one real kube-apiserver and etcd (tests/kube): a
# phase of tests/bench/run.sh, which runs it as
#
#   bash tests/bench/status_quo.sh WORK SERVER
#
# WORK is run.sh's directory (its certs/ecdsa.*, its Go follower, its phases/), SERVER the
# argo-results-server binary it measures. Each phase writes WORK/status-quo/NAME.json; the
# last step reads them into WORK/status-quo/summary.json: the keys run.sh's JSON line gains
# ("keys"), the rows of its comparison table ("rows") and the control ("control").
#
# The pods are tests/bench/pods (`pods run`): each a Pod object with its own token from the
# TokenRequest API bound to it, on a fresh TLS connection. The status quo's pods do what
# argoexec v4 does with a WorkflowTaskResult (Argo's CRD, from Argo's Go module); our pods
# send one final report to argo-results-server, which checks their tokens with
# --kube-jwks against the same API server and stores them in Postgres. Each side's
# controller observes as it runs: Argo's task-result informer, or the Go Follower on the
# server's change feed. CPU and memory (PSS) are read from /proc: kube-apiserver plus
# etcd, against the server plus every process of Postgres.
#
# 1. status_quo_pods, argo_results_pods: STATUS_QUO_PODS (1000) pods, 64 in flight; the
#    metrics of kube-apiserver, etcd and the server are read before and after (the control).
# 2. status_quo_lone, argo_results_lone: STATUS_QUO_LONE_PODS (200) pods one at a time.
# 3. status_quo_loaded, argo_results_loaded: as 1, while the API server also takes
#    STATUS_QUO_BACKGROUND (300) Pod status updates a second, as kubelets send them.
# 4. status_quo_scale_10k, _100k and argo_results_scale_10k, _100k: 10,000 and then 100,000
#    results stored; a restarted controller's relist (the informer's LIST until synced,
#    against the Follower's resume of the 100 workflows), and at 100,000 one workflow's
#    1,000 results deleted (Argo's DeleteCollection, against DELETE .../results). The
#    status quo's are written into etcd as copies of one created through the API server
#    (`pods scale`), ours into Postgres by common.sh's prefill_results: seeding is not
#    measured, and 100,000 creates through the API server take minutes here.
# 5. status_quo_skipping, argo_results_skipping: the control's negative control, 100 pods
#    that leave out their last write (`pods run --skip-last-write`) and still count as
#    answered: the same count check must refuse each side.
set -euo pipefail
work=$(realpath -e "$1")
server_bin=$(realpath -e "$2")
source "$(dirname "$0")/common.sh"
# run.sh's seconds so far, so that the progress lines count on from its start.
SECONDS=${BENCH_SECONDS:-0}
export PATH=$PATH:/usr/local/go/bin

pods_count=${STATUS_QUO_PODS:-1000}
lone_count=${STATUS_QUO_LONE_PODS:-200}
background=${STATUS_QUO_BACKGROUND:-300}
db=argo_results_status_quo
port=18490
metrics_port=18491
# Argo's controller: its ServiceAccount follows the feed and deletes a workflow's results.
controller=system:serviceaccount:argo:argo
here=$work/status-quo
phases=$here
mkdir -p "$here"

pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  sql -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
}
trap cleanup EXIT

say "the status quo: kube-apiserver and etcd (tests/kube/build), the pods (tests/bench/pods)"
kube_bin=$(tests/kube/build)
go -C tests/bench/pods build -o "$here/pods" .
argo_root=$(go -C tests/bench/pods list -m -f '{{.Dir}}' github.com/argoproj/argo-workflows/v4)
argo_version=$(go -C tests/bench/pods list -m -f '{{.Version}}' github.com/argoproj/argo-workflows/v4)
"$kube_bin" up --dir "$here/kube" >"$here/up.log" 2>&1 &
up_pid=$!
pids+=("$up_pid")
for _ in $(seq 1 120); do grep -q '^kubeconfig: ' "$here/up.log" && break; sleep 0.5; done
grep -q '^kubeconfig: ' "$here/up.log" || { cat "$here/up.log" >&2; exit 1; }
export KUBECONFIG=$here/kube/admin.kubeconfig
sed -n 1p "$here/up.log" >&2
versions=$(sed -n '1s/^control plane: \(.*\), ready in.*/\1/p' "$here/up.log")
apiserver_pid=$(pgrep -P "$up_pid" -f 'kube-control-plane kube-apiserver')
etcd_pid=$(pgrep -P "$up_pid" -f 'kube-control-plane etcd')
etcd_url=$(tr '\0' '\n' <"/proc/$etcd_pid/cmdline" | sed -n 's/^--listen-client-urls=//p')
status_quo_pids=$apiserver_pid,$etcd_pid

say "Argo $argo_version's WorkflowTaskResult CRD, from its Go module"
kubectl apply --server-side -f "$argo_root/manifests/base/crds/full/argoproj.io_workflowtaskresults.yaml" >/dev/null
kubectl wait --for condition=established --timeout 60s crd/workflowtaskresults.argoproj.io >/dev/null
kubectl create namespace argo >/dev/null
kubectl create serviceaccount -n argo argo >/dev/null
kubectl create token -n argo argo --audience argo-results --duration 24h >"$here/controller.token"
target/release/loadgen outputs >"$here/outputs.json"

server_pid=
start_server() {
  "$server_bin" --database-url "postgres://$pguser@$pghost:$pgport/$db" \
    --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" \
    --tls-cert "$work/certs/ecdsa.crt" --tls-key "$work/certs/ecdsa.key" \
    --kube-jwks --controller "$controller" --require-expectation=false --log-format json \
    >"$here/server.out" 2>>"$here/server.log" &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 100); do grep -q listening "$here/server.out" 2>/dev/null && return; sleep 0.1; done
  tail -n 20 "$here/server.log" >&2
  exit 1
}
stop_server() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; }
fresh_db "$db"
start_server
url=https://127.0.0.1:$port

# The metrics each side's control counts: kube-apiserver's, etcd's and the server's.
metrics() {
  kubectl get --raw /metrics >"$here/$1.apiserver.prom"
  curl -sf "$etcd_url/metrics" >"$here/$1.etcd.prom"
  curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$here/$1.server.prom"
}
# `pods run` of side $1 into phase $2, with the rest of the arguments.
pods() {
  local side=$1 name=$2
  shift 2
  local measured=(--cpu-pids "$status_quo_pids")
  [[ $side == argo-results ]] && measured=(--cpu-pids "$server_pid" --cpu-postgres --url "$url" --ca "$work/certs/ca.pem")
  quiesce
  "$here/pods" run --kubeconfig "$KUBECONFIG" --side "$side" --namespace bench --run-id "${name//_/-}" \
    --outputs "$here/outputs.json" "${measured[@]}" "$@" >"$phases/$name.json"
}

for side in status-quo argo-results; do
  name=${side//-/_}
  # Its controller observing: Argo's task-result informer, or the Follower on the feed.
  observed=(--visible)
  [[ $side == argo-results ]] && observed=(--visible-via "$url" --follower "$work/follower"
    --controller-token "$here/controller.token")
  say "$side: $pods_count pods, $concurrency in flight, its controller observing"
  metrics "${name}_before"
  pods "$side" "${name}_pods" "${observed[@]}" --pods "$pods_count" --concurrency "$concurrency"
  metrics "${name}_after"
  say "$side: $lone_count pods one at a time"
  pods "$side" "${name}_lone" "${observed[@]}" --pods "$lone_count" --concurrency 1
  say "$side: $pods_count pods while the API server takes $background Pod status updates a second"
  pods "$side" "${name}_loaded" "${observed[@]}" --pods "$pods_count" --concurrency "$concurrency" \
    --background "$background"
  say "$side: the control's negative control, 100 pods that leave out their last write"
  metrics "${name}_skipping_before"
  pods "$side" "${name}_skipping" --pods 100 --concurrency "$concurrency" --skip-last-write
  metrics "${name}_skipping_after"
done

say "the status quo at scale: 10,000 task results, a controller's relist"
scale() { quiesce; "$here/pods" scale --outputs "$here/outputs.json" "$@"; }
scale --side status-quo --kubeconfig "$KUBECONFIG" --etcd "$etcd_url" --cpu-pids "$status_quo_pids" --results 10000 \
  >"$phases/status_quo_scale_10k.json"
say "the status quo at scale: 100,000 task results, a relist and one workflow's deletion"
scale --side status-quo --kubeconfig "$KUBECONFIG" --etcd "$etcd_url" --cpu-pids "$status_quo_pids" --results 100000 \
  --seeded 10000 --delete >"$phases/status_quo_scale_100k.json"

ours=(--side argo-results --url "$url" --ca "$work/certs/ca.pem" --controller-token "$here/controller.token")
for results in 10000 100000; do
  say "argo-results at scale: $results results, a controller's resume"
  stop_server
  stored=$(sql -d "$db" -tA -c "SELECT COUNT(*) FROM results WHERE namespace = 'argo'")
  prefill_results "$db" $((stored + 1)) "$results"
  start_server
  delete=()
  ((results == 100000)) && delete=(--delete)
  scale "${ours[@]}" --cpu-pids "$server_pid" --cpu-postgres --results "$results" "${delete[@]}" \
    >"$phases/argo_results_scale_$((results / 1000))k.json"
done

python3 tests/bench/status_quo_summary.py "$here" "$(getconf CLK_TCK)" "$versions" "$argo_version" "$background" >"$here/summary.json"
