"""The Helm chart deploy/helm/argo-results against deploy/'s Kustomize manifests.

    python3 .ci/check_helm_chart.py --helm HELM [--kubectl KUBECTL]

Run from anywhere (paths are the repository's); Python 3 with PyYAML. Renders the chart with
`helm template argo-results deploy/helm/argo-results --namespace argo` and the Kustomize
directories with `kubectl kustomize`, and compares them object by object (kind, namespace
and name; then every field: apiVersion, metadata, spec, data, rules, roleRef, subjects, ...):

    chart, default values                                  deploy/base
    chart, serviceMonitor and prometheusRule enabled       deploy/base + deploy/monitoring
    chart, -f values-argo-helm.yaml                        deploy/overlays/argo-helm
    chart, -f values-argo-helm.yaml, both monitors enabled deploy/overlays/argo-helm + deploy/monitoring

Normalized before the comparison, and nothing else:
- Labels (metadata.labels, and spec.template.metadata.labels of a pod template): the chart
  adds the recommended ones, app.kubernetes.io/{instance,component,part-of,managed-by,version}
  and helm.sh/chart, on purpose (Kustomize's base has app.kubernetes.io/name alone). Each
  must be on every chart object and pod template with its expected value (the release's
  name, `server`, `argo-results`, `Helm`, the chart's appVersion, argo-results-<version>);
  then they are removed and the rest of the labels must be equal.
- The ConfigMap's name: Kustomize's configMapGenerator appends a hash of the data
  (argo-results-config-<hash>), and the chart names it argo-results-config. Every string
  equal to a generated name in Kustomize's render (the ConfigMap's name, the Deployment's
  configMapRef) loses the suffix.
- The pod template's annotation checksum/config: the chart's way of rolling the Deployment
  when a flag changes, as the hash in the generated name does for Kustomize. It must be the
  sha256 of the ConfigMap's data (as JSON, keys sorted); then it is removed.

Also checked: files/prometheusrule.yaml is a byte-for-byte copy of
deploy/monitoring/prometheusrule.yaml; a change of a flag changes the checksum; the chart's
conventions on a few non-default values (image digest, fullnameOverride, nameOverride,
serviceAccount.create and rbac.create false, extraArgs and extraEnv, the monitors'
namespace); the README documents every value and no other.

Prints one line per check that passed; on a difference, every difference (object and field,
with both values) on stderr, and exits 1.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    sys.exit("check_helm_chart.py: needs PyYAML (python3 -c 'import yaml' fails)")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHART = os.path.join("deploy", "helm", "argo-results")
RELEASE = "argo-results"
NAMESPACE = "argo"
# Kustomize's generated-name suffix: 10 characters of a hex hash with 0, 1, 3, a and e
# replaced by g, h, k, m and t (sigs.k8s.io/kustomize/api/hasher).
GENERATED_SUFFIX = re.compile(r"-[2456789bcdfghkmt]{10}$")

failures = []


def fail(message):
    failures.append(message)


def run(cmd):
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        sys.exit(f"check_helm_chart.py: {' '.join(cmd)} failed (exit {result.returncode})")
    return result.stdout


def documents(text):
    return [d for d in yaml.safe_load_all(text) if d]


def key(doc):
    meta = doc.get("metadata") or {}
    return (doc.get("kind"), meta.get("namespace"), meta.get("name"))


def show_key(k):
    kind, namespace, name = k
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def by_key(docs, where):
    objects = {}
    for doc in docs:
        k = key(doc)
        if k in objects:
            fail(f"{where}: {show_key(k)} appears twice")
        objects[k] = doc
    return objects


class Chart:
    def __init__(self, helm):
        self.helm = helm
        with open(os.path.join(REPO, CHART, "Chart.yaml")) as f:
            meta = yaml.safe_load(f)
        self.name = meta["name"]
        self.version = str(meta["version"])
        self.app_version = str(meta["appVersion"])

    def render(self, *args, release=RELEASE, namespace=NAMESPACE):
        return documents(run([self.helm, "template", release, CHART, "--namespace", namespace, *args]))

    def recommended_labels(self, release=RELEASE):
        return {
            "app.kubernetes.io/instance": release,
            "app.kubernetes.io/component": "server",
            "app.kubernetes.io/part-of": "argo-results",
            "app.kubernetes.io/managed-by": "Helm",
            "app.kubernetes.io/version": self.app_version,
            "helm.sh/chart": f"{self.name}-{self.version}",
        }


def go_json(value):
    """The JSON that Go's encoding/json (Helm's toJson) writes: keys sorted, no spaces, and
    <, >, & escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def pod_template_meta(doc):
    template = (doc.get("spec") or {}).get("template")
    if isinstance(template, dict):
        return template.setdefault("metadata", {})
    return None


def normalize_chart(docs, chart, where):
    """Checks, then removes, what the chart adds by design (see the module's docstring)."""
    expected = chart.recommended_labels()
    config_data = {key(d)[1:]: d.get("data") or {} for d in docs if d.get("kind") == "ConfigMap"}
    for doc in docs:
        k = show_key(key(doc))
        metas = [("metadata.labels", doc.setdefault("metadata", {}))]
        template_meta = pod_template_meta(doc)
        if template_meta is not None:
            metas.append(("spec.template.metadata.labels", template_meta))
        for path, meta in metas:
            labels = meta.get("labels") or {}
            for label, value in expected.items():
                if label not in labels:
                    fail(f"{where}: {k}: {path} lacks the recommended label {label}")
                elif str(labels[label]) != value:
                    fail(f"{where}: {k}: {path}.{label} is {labels[label]!r}, expected {value!r}")
                labels.pop(label, None)
            if "labels" in meta:
                meta["labels"] = labels
        if template_meta is not None:
            annotations = template_meta.get("annotations") or {}
            checksum = annotations.pop("checksum/config", None)
            if checksum is None:
                fail(f"{where}: {k}: the pod template has no checksum/config annotation")
            else:
                refs = [
                    ref["configMapRef"]["name"]
                    for c in doc["spec"]["template"]["spec"].get("containers", [])
                    for ref in c.get("envFrom", [])
                    if "configMapRef" in ref
                ]
                data = config_data.get((doc["metadata"].get("namespace"), refs[0] if refs else None))
                want = hashlib.sha256(go_json(data).encode()).hexdigest() if data is not None else None
                if checksum != want:
                    fail(f"{where}: {k}: checksum/config is {checksum}, but the sha256 of its ConfigMap's "
                         f"data is {want}")
            if annotations:
                template_meta["annotations"] = annotations
            else:
                template_meta.pop("annotations", None)
    return docs


def normalize_kustomize(docs):
    renames = {}
    for doc in docs:
        if doc.get("kind") == "ConfigMap":
            name = doc["metadata"]["name"]
            if GENERATED_SUFFIX.search(name):
                renames[name] = GENERATED_SUFFIX.sub("", name)

    def walk(node):
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str):
            return renames.get(node, node)
        return node

    return [walk(d) for d in docs], renames


def show(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return repr(value)


def diff(kustomize, helm, path, out):
    """Appends to `out` each field where the two differ: (path, Kustomize's, Helm's)."""
    if isinstance(kustomize, dict) and isinstance(helm, dict):
        for k in sorted(set(kustomize) | set(helm), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in helm:
                out.append((sub, kustomize[k], "(absent)"))
            elif k not in kustomize:
                out.append((sub, "(absent)", helm[k]))
            else:
                diff(kustomize[k], helm[k], sub, out)
    elif isinstance(kustomize, list) and isinstance(helm, list) and len(kustomize) == len(helm):
        for i, (a, b) in enumerate(zip(kustomize, helm)):
            diff(a, b, f"{path}[{i}]", out)
    elif kustomize != helm or type(kustomize) is not type(helm):
        out.append((path or "(the object)", kustomize, helm))


def compare(label, kustomize_label, helm_docs, kustomize_docs, chart):
    helm_docs = normalize_chart(helm_docs, chart, label)
    kustomize_docs, renames = normalize_kustomize(kustomize_docs)
    helm_objects = by_key(helm_docs, label)
    kustomize_objects = by_key(kustomize_docs, kustomize_label)
    problems = 0
    for k in sorted(set(helm_objects) | set(kustomize_objects), key=lambda k: tuple(map(str, k))):
        if k not in helm_objects:
            fail(f"{label}: {show_key(k)} is in {kustomize_label} but not rendered by the chart")
            problems += 1
            continue
        if k not in kustomize_objects:
            fail(f"{label}: {show_key(k)} is rendered by the chart but not in {kustomize_label}")
            problems += 1
            continue
        out = []
        diff(kustomize_objects[k], helm_objects[k], "", out)
        for path, a, b in out:
            fail(f"{label}: {show_key(k)}: {path}:\n    {kustomize_label}: {show(a)}\n    chart: {show(b)}")
        problems += len(out)
    if not problems:
        suffix = f"; ConfigMap name suffix dropped: {', '.join(sorted(renames))}" if renames else ""
        print(f"ok: {label} = {kustomize_label}: {len(helm_objects)} objects equal after normalizing"
              f" labels and checksum/config{suffix}")


def find(docs, kind, name=None):
    found = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    return found[0] if found else None


def container(docs):
    return find(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def check_variants(chart):
    """The conventions on non-default values: a render each, and what must hold of it."""
    ok = []

    def expect(what, condition):
        if condition:
            ok.append(what)
        else:
            fail(f"variant: {what}: does not hold")

    base = chart.render()
    flag = chart.render("--set", "config.ARGO_RESULTS_LOG_FORMAT=text")
    checksum = lambda docs: pod_template_meta(find(docs, "Deployment"))["annotations"]["checksum/config"]
    expect("a change of a flag changes the ConfigMap and checksum/config",
           find(flag, "ConfigMap")["data"]["ARGO_RESULTS_LOG_FORMAT"] == "text" and checksum(flag) != checksum(base))
    unset = chart.render("--set", "config.ARGO_RESULTS_RBAC=null")
    expect("config.X=null removes the flag", "ARGO_RESULTS_RBAC" not in find(unset, "ConfigMap")["data"])
    digest = "sha256:" + "0" * 64
    docs = chart.render("--set", f"image.digest={digest}", "--set", "image.tag=9.9.9")
    expect("image.digest pins registry/repository@digest",
           container(docs)["image"] == f"ghcr.io/argo-results/argo-results@{digest}")
    docs = chart.render("--set", "image.registry=", "--set", "image.tag=1.2.3+build")
    expect("image without registry, tag given; the version label sanitized",
           container(docs)["image"] == "argo-results/argo-results:1.2.3+build"
           and find(docs, "Deployment")["metadata"]["labels"]["app.kubernetes.io/version"] == "1.2.3_build")
    docs = chart.render("--set", "fullnameOverride=results", "--set", "serviceMonitor.enabled=true",
                        "--set", "prometheusRule.enabled=true")
    names = sorted(d["metadata"]["name"] for d in docs)
    expect("fullnameOverride prefixes every object's name",
           all(n == "results" or n.startswith("results-") for n in names)
           and container(docs)["envFrom"][0]["configMapRef"]["name"] == "results-config"
           and find(docs, "ClusterRoleBinding", "results-auth-delegator")["subjects"][0]["name"] == "results")
    docs = chart.render(release="other")
    expect("release `other` names its objects other-argo-results",
           find(docs, "Deployment")["metadata"]["name"] == "other-argo-results"
           and find(docs, "Deployment")["metadata"]["labels"]["app.kubernetes.io/instance"] == "other")
    docs = chart.render("--set", "nameOverride=results")
    expect("nameOverride renames app.kubernetes.io/name and the selectors",
           find(docs, "Deployment")["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "results"}
           and find(docs, "Service")["spec"]["selector"] == {"app.kubernetes.io/name": "results"})
    docs = chart.render("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=mine",
                        "--set", "rbac.create=false", "--set", "priorityClass.create=false")
    kinds = {d["kind"] for d in docs}
    expect("serviceAccount.create, rbac.create and priorityClass.create false leave them out",
           not kinds & {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
           and find(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
           and "priorityClassName" not in find(docs, "Deployment")["spec"]["template"]["spec"])
    docs = chart.render("--set", "extraArgs[0]=--log-format=text", "--set", "extraEnv[0].name=A",
                        "--set", "extraEnv[0].value=b", "--set", "priorityClassName=high")
    c = container(docs)
    expect("extraArgs, extraEnv and priorityClassName",
           c.get("args") == ["--log-format=text"] and c["env"][1:] == [{"name": "A", "value": "b"}]
           and find(docs, "Deployment")["spec"]["template"]["spec"]["priorityClassName"] == "high")
    docs = chart.render("--set", "config.ARGO_RESULTS_LISTEN=0.0.0.0:443")
    expect("the container's https port is ARGO_RESULTS_LISTEN's",
           c["ports"][0]["containerPort"] == 8443 and container(docs)["ports"][0]["containerPort"] == 443)
    docs = chart.render("--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.namespace=monitoring",
                        "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.namespace=monitoring")
    monitor = find(docs, "ServiceMonitor")
    expect("the monitors in another namespace select the release's",
           monitor["metadata"]["namespace"] == "monitoring"
           and monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
           and find(docs, "PrometheusRule")["metadata"]["namespace"] == "monitoring")
    if not any(f.startswith("variant: ") for f in failures):
        print(f"ok: {len(ok)} renders of non-default values: " + "; ".join(ok))


def value_paths(node, prefix=""):
    """The paths of values.yaml's leaves (a list, a scalar or an empty map)."""
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from value_paths(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix


def check_readme():
    with open(os.path.join(REPO, CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    with open(os.path.join(REPO, CHART, "README.md")) as f:
        text = f.read()
    _, found, table = text.partition("\n## Values\n")
    if not found:
        fail("README.md: no section `## Values`")
    documented = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    documented_set = set(documented)
    paths = list(value_paths(values))
    missing = [p for p in paths if not any(p == d or p.startswith(d + ".") for d in documented_set)]
    for p in missing:
        fail(f"README.md: the value {p} is not documented (a row | `{p}` | of its table, or of a parent)")
    stale = [d for d in documented if not any(p == d or p.startswith(d + ".") for p in paths)]
    for d in stale:
        fail(f"README.md: documents `{d}`, which values.yaml does not have")
    if not missing and not stale:
        print(f"ok: README.md documents the {len(paths)} values of values.yaml in {len(documented)} rows")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--helm", required=True)
    parser.add_argument("--kubectl", default="kubectl")
    args = parser.parse_args()
    chart = Chart(args.helm)

    copy = os.path.join(CHART, "files", "prometheusrule.yaml")
    with open(os.path.join(REPO, copy), "rb") as a, \
            open(os.path.join(REPO, "deploy", "monitoring", "prometheusrule.yaml"), "rb") as b:
        if a.read() != b.read():
            fail(f"{copy} is not a copy of deploy/monitoring/prometheusrule.yaml: "
                 f"cp deploy/monitoring/prometheusrule.yaml {copy}")
        else:
            print(f"ok: {copy} is deploy/monitoring/prometheusrule.yaml, byte for byte")

    kustomized = {}

    def kustomize(*dirs):
        docs = []
        for d in dirs:
            if d not in kustomized:
                kustomized[d] = run([args.kubectl, "kustomize", d])
            docs += documents(kustomized[d])
        return docs

    monitors = ["--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"]
    argo_helm = ["--values", os.path.join(CHART, "values-argo-helm.yaml")]
    cases = [
        ("chart (defaults)", [], ["deploy/base"]),
        ("chart (serviceMonitor, prometheusRule enabled)", monitors, ["deploy/base", "deploy/monitoring"]),
        ("chart (values-argo-helm.yaml)", argo_helm, ["deploy/overlays/argo-helm"]),
        ("chart (values-argo-helm.yaml, serviceMonitor, prometheusRule enabled)", argo_helm + monitors,
         ["deploy/overlays/argo-helm", "deploy/monitoring"]),
    ]
    for label, helm_args, dirs in cases:
        compare(label, " + ".join(dirs), chart.render(*helm_args), kustomize(*dirs), chart)

    check_variants(chart)
    check_readme()

    if failures:
        sys.stderr.write(f"check_helm_chart.py: {len(failures)} differences:\n")
        for f in failures:
            sys.stderr.write(f"  {f}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
