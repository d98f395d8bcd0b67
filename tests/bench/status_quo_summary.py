"""The status quo's phases beside argo-results', summed up for tests/bench/run.sh.

    python3 tests/bench/status_quo_summary.py DIR CLOCK_TICKS VERSIONS ARGO_VERSION BACKGROUND

DIR: the directory tests/bench/status_quo.sh wrote its phases' NAME.json files and the
metrics snapshots (NAME_before.SOURCE.prom, NAME_after.SOURCE.prom) into; summary.json
there is skipped. CLOCK_TICKS: getconf CLK_TCK. VERSIONS: kube-apiserver's and etcd's
versions. ARGO_VERSION: Argo's module version. BACKGROUND: the Pod updates/s asked of the
loaded phase. Prints one JSON object (keys, table rows, the control, versions), which
status_quo.sh writes to DIR/summary.json.
"""
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
