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

python3 - "$here" "$(getconf CLK_TCK)" "$versions" "$argo_version" "$background" >"$here/summary.json" <<'PY'
import json, os, re, sys
here, clock_ticks, versions, argo_version, background = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
phase = {name[:-5]: json.load(open(os.path.join(here, name)))
         for name in os.listdir(here) if name.endswith(".json") and name != "summary.json"}

def cpu_us_per_pod(p):
    """The side's CPU per pod answered 2xx, in µs."""
    return p["cpu_ticks"] * 1e6 / clock_ticks / max(p["pods"] - p["errors"], 1)

def counter(snapshot, metric, **labels):
    """The sum of a Prometheus counter's samples in file `snapshot` whose labels match."""
    total = 0.0
    for line in open(os.path.join(here, snapshot)):
        match = re.match(r'^(\w+)(\{.*\})? (\S+)$', line.strip())
        if not match or match[1] != metric:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match[2] or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match[3])
    return round(total)

def delta(run, source, metric, **labels):
    """How much the phase `run` (its snapshots `run`_before and _after) moved a counter."""
    return (counter(f"{run}_after.{source}.prom", metric, **labels)
            - counter(f"{run}_before.{source}.prom", metric, **labels))

sq, ours = "status_quo", "argo_results"
keys = {}
for suffix, name in (("", "pods"), ("_lone_pod", "lone")):
    status_quo_cpu, cpu = cpu_us_per_pod(phase[f"{sq}_{name}"]), cpu_us_per_pod(phase[f"{ours}_{name}"])
    keys[f"status_quo_cpu_us_per{suffix or '_pod'}"] = round(status_quo_cpu, 1)
    keys[f"cpu_us_per{suffix or '_pod'}"] = round(cpu, 1)
    keys[f"status_quo_vs_argo_results_cpu_per{suffix or '_pod'}"] = round(status_quo_cpu / cpu, 2)
keys.update({
    "status_quo_pods_per_s": round(phase[f"{sq}_pods"]["pods_per_s"], 1),
    "pods_per_s": round(phase[f"{ours}_pods"]["pods_per_s"], 1),
    "status_quo_visible_p99_ms": phase[f"{sq}_pods"]["visible_p99_ms"],
    "visible_p99_ms_kube": phase[f"{ours}_pods"]["visible_p99_ms"],
    "status_quo_visible_p99_ms_loaded": phase[f"{sq}_loaded"]["visible_p99_ms"],
    "visible_p99_ms_loaded": phase[f"{ours}_loaded"]["visible_p99_ms"],
    "visible_since_write_p99_ms_loaded": phase[f"{ours}_loaded"]["visible_since_write_p99_ms"],
    "status_quo_visible_never_seen": sum(phase[f"{sq}_{n}"]["visible_never_seen"] for n in ("pods", "lone", "loaded")),
    "visible_never_seen_kube": sum(phase[f"{ours}_{n}"]["visible_never_seen"] for n in ("pods", "lone", "loaded")),
    "status_quo_relist_10k_s": round(phase[f"{sq}_scale_10k"]["relist_s"], 2),
    "resume_10k_s": round(phase[f"{ours}_scale_10k"]["relist_s"], 2),
    "status_quo_relist_100k_s": round(phase[f"{sq}_scale_100k"]["relist_s"], 2),
    "resume_100k_s": round(phase[f"{ours}_scale_100k"]["relist_s"], 2),
    "status_quo_relist_100k_cpu_s": round(phase[f"{sq}_scale_100k"]["relist_cpu_ticks"] / clock_ticks, 2),
    "resume_100k_cpu_s": round(phase[f"{ours}_scale_100k"]["relist_cpu_ticks"] / clock_ticks, 2),
    "status_quo_delete_1000_s": round(phase[f"{sq}_scale_100k"]["delete_s"], 3),
    "delete_1000_s": round(phase[f"{ours}_scale_100k"]["delete_s"], 3),
    "status_quo_rss_mib": round(phase[f"{sq}_loaded"]["pss_kib"] / 1024, 1),
    "rss_mib": round(phase[f"{ours}_loaded"]["pss_kib"] / 1024, 1),
    "status_quo_errors": sum(phase[f"{sq}_{n}"]["errors"] for n in ("pods", "lone", "loaded")),
    "errors_kube": sum(phase[f"{ours}_{n}"]["errors"] for n in ("pods", "lone", "loaded")),
    "status_quo_background_per_s": round(phase[f"{sq}_loaded"]["background_per_s"], 1),
    "background_per_s": round(phase[f"{ours}_loaded"]["background_per_s"], 1),
})

# The control: what the measured processes counted themselves, for the 64-in-flight phase.
wtr = dict(group="argoproj.io", resource="workflowtaskresults")
def control_of(run):
    """What phase `run` of each side (`pods`, or `skipping`, the negative control) made the
    processes count, and whether each side's counts match the pods the generator counted."""
    sq_phase, ours_phase = phase[f"{sq}_{run}"], phase[f"{ours}_{run}"]
    sq_run, ours_run = sq if run == "pods" else f"{sq}_{run}", ours if run == "pods" else f"{ours}_{run}"
    c = {"status_quo_pods_answered": sq_phase["pods"] - sq_phase["errors"]}
    c["apiserver_creates_201"] = delta(sq_run, "apiserver", "apiserver_request_total", verb="POST", code="201", **wtr)
    c["apiserver_patches_200"] = delta(sq_run, "apiserver", "apiserver_request_total", verb="PATCH", code="200", **wtr)
    c["apiserver_pod_creates_201"] = delta(sq_run, "apiserver", "apiserver_request_total", verb="POST", code="201",
                                           resource="pods", subresource="")
    c["etcd_puts"] = delta(sq_run, "etcd", "etcd_mvcc_put_total")
    c["argo_results_pods_answered"] = ours_phase["pods"] - ours_phase["errors"]
    c["server_reports"] = delta(ours_run, "server", "argo_results_reports_total")
    answered = c["status_quo_pods_answered"]
    # Each pod's Pod is created (1 put), then its result created and patched twice (3 puts);
    # the API server's own leases add a few puts every 10 s.
    c["status_quo_holds"] = (
        c["apiserver_creates_201"] == answered
        and c["apiserver_patches_200"] == 2 * answered
        and 0 <= c["etcd_puts"] - c["apiserver_pod_creates_201"] - 3 * answered <= 50)
    c["argo_results_holds"] = c["server_reports"] == c["argo_results_pods_answered"]
    return c

control = control_of("pods")
control["holds"] = control["status_quo_holds"] and control["argo_results_holds"]
skipping = control_of("skipping")
# The negative control: pods that leave out a write must make each side's check refuse.
control["negative_refused"] = not skipping["status_quo_holds"] and not skipping["argo_results_holds"]
control["negative"] = skipping

def visible(p):
    since_write = (f"; from updatedAt p50 {p['visible_since_write_p50_ms']:.1f} ms, "
                   f"p99 {p['visible_since_write_p99_ms']:.1f} ms" if p["visible_since_write_p99_ms"] else "")
    return (f"p50 {p['visible_p50_ms']:.1f} ms, p99 {p['visible_p99_ms']:.1f} ms, max {p['visible_max_ms']:.1f} ms, "
            f"never seen {p['visible_never_seen']}{since_write}")

rows = [(f"status quo: {versions}, Argo {argo_version}'s CRD", "", "")]
for side_key, label in ((sq, "status quo"), (ours, "argo-results")):
    p, lone, loaded = phase[f"{side_key}_pods"], phase[f"{side_key}_lone"], phase[f"{side_key}_loaded"]
    rows += [
        (f"{label}: 64 pods in flight", f"{p['pods_per_s']:,.0f} pods/s",
         f"CPU {cpu_us_per_pod(p):,.0f} µs per pod; p50 {p['p50_ms']:.1f} ms, p99 {p['p99_ms']:.1f} ms; errors {p['errors']}"),
        ("  one pod at a time", f"{cpu_us_per_pod(lone):,.0f} µs", f"CPU per pod; p50 {lone['p50_ms']:.1f} ms"),
        ("  the controller holds it", f"{p['visible_p99_ms']:.1f} ms", visible(p)),
        (f"  under {background} Pod updates/s asked", f"{loaded['visible_p99_ms']:.1f} ms",
         f"{visible(loaded)}; {loaded['background_per_s']:.0f} updates/s made, {loaded['background_errors']} failed"),
        ("  resident memory (PSS)", f"{loaded['pss_kib'] / 1024:,.0f} MiB", "at the end of the pods"),
    ]
    for results in ("10k", "100k"):
        s = phase[f"{side_key}_scale_{results}"]
        rows.append((f"  relist of {results} results", f"{s['relist_s']:.2f} s",
                     f"CPU {s['relist_cpu_ticks'] / clock_ticks:.2f} s, {s['relisted']:,} held"))
    s = phase[f"{side_key}_scale_100k"]
    rows.append(("  delete one workflow's 1,000", f"{s['delete_s'] * 1000:.0f} ms",
                 f"CPU {s['delete_cpu_ticks'] / clock_ticks * 1000:.0f} ms, {s['deleted']:,} deleted"))
def counts(c):
    return ", ".join(f"{k} {v}" for k, v in c.items() if not k.endswith("holds") and k not in ("negative", "negative_refused"))
rows.append(("control (the processes' own counters)", "holds" if control["holds"] else "MISMATCH", counts(control)))
rows.append(("  its negative control (pods leave out a write)",
             "refused" if control["negative_refused"] else "NOT REFUSED: the check cannot fail", counts(skipping)))
print(json.dumps({"keys": keys, "rows": rows, "control": control, "versions": versions, "argo": argo_version}))
PY
