"""Schema, reference, RBAC, monitoring and dashboard checks of the rendered manifests.

Run by .ci/validate-deploy, with its virtualenv's python (kubernetes-validate, PyYAML):

    python check_rendered_manifests.py K8S_VERSION METRICS_RS DASHBOARD RBAC_RULES DEPLOY_DIR
        OPERATIONS_MD WORK PROMTOOL SERVER_CMD_JSON LABEL=RENDERED...

K8S_VERSION: the Kubernetes version whose schemas validate the documents (e.g. 1.33).
METRICS_RS: server/src/metrics/mod.rs, the metrics and labels the server registers.
DASHBOARD: deploy/grafana/argo-results.json.
RBAC_RULES: a file holding what `argo-results-server --print-rbac-rules` printed.
DEPLOY_DIR: the deploy/ directory being validated.
OPERATIONS_MD: docs/operations.md, whose sections the alerts' runbook_url must name.
WORK: a scratch directory (promtool's rule files and tests are written under it).
PROMTOOL: the promtool to run.
SERVER_CMD_JSON: the command that runs argo-results-server, as a JSON list of strings.
LABEL=RENDERED: each render, its label (e.g. deploy/base) and the file `kubectl kustomize`
wrote it to.

Prints one summary line per check that passed; on any problem, lists them all on stderr
and exits 1.
"""
import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse

import yaml
import kubernetes_validate
from kubernetes_validate import utils as kvu

(k8s_version, metrics_rs, dashboard_path, rbac_rules_path, deploy_dir, operations_md, work, promtool,
 server_cmd_json, *rendered) = sys.argv[1:]
SERVER_CMD = json.loads(server_cmd_json)
errors = []


def error(where, message):
    errors.append(f"{where}: {message}")


def ident(doc):
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')}/{meta.get('name')}"


def schema_check(where, doc):
    """Strict validation against the bundled schema; False if the document failed."""
    try:
        kubernetes_validate.validate(doc, k8s_version, strict=True)
        return True
    except kvu.ValidationError as e:
        path = ".".join(str(p) for p in e.path) or "(root)"
        error(where, f"{path}: {e.message}")
    except kvu.SchemaNotFoundError:
        error(where, f"no schema for {doc.get('apiVersion')} {doc.get('kind')} in Kubernetes "
                     f"{k8s_version}, and no explicit check either: unknown kinds do not pass")
    except kvu.VersionNotSupportedError:
        error(where, f"kubernetes-validate has no schemas for Kubernetes {k8s_version}")
    except Exception as e:  # a document the validator cannot even walk
        error(where, f"could not be validated: {e!r}")
    return False


def guarded(where, check, *args):
    """Runs a check; a document shaped too oddly for it is a failure, not a traceback."""
    try:
        check(*args)
    except Exception as e:
        error(where, f"{check.__name__} could not read the documents: {e!r}")


# --- the metrics server/src/metrics/mod.rs registers (for the alerts and the dashboard) --------
def registered_metrics(source):
    """name -> (type, label names) of every metric metrics/mod.rs registers."""
    prefix = re.search(r'Registry::with_prefix\("([a-z_]+)"\)', source)
    prefix = prefix.group(1) + "_" if prefix else ""
    structs = {m.group(1): re.findall(r"^\s*(?:pub\s+)?([a-z_][a-z0-9_]*)\s*:", m.group(2), re.M)
               for m in re.finditer(r"struct\s+(\w+)\s*\{([^}]*)\}", source)}
    metrics = {}
    # A description may go on over lines with a backslash before the newline.
    for m in re.finditer(r'\.register\(\s*"([a-z_]+)"\s*,\s*"(?:[^"\\]|\\[\s\S])*"\s*,\s*([A-Za-z_]\w*)', source):
        name, var = m.group(1), m.group(2)
        decl = re.search(rf"let\s+{var}\s*=\s*([^;]+);", source)
        if not decl:
            raise SystemExit(f"metrics/mod.rs: cannot find the declaration of {var} (metric {name})")
        text = decl.group(1)
        kind = next((k for k in ("Histogram", "Counter", "Gauge") if k in text), None)
        if kind is None:
            raise SystemExit(f"metrics/mod.rs: cannot tell the type of metric {name} from `{text.strip()}`")
        family = re.search(r"Family::<\s*(\w+)\s*,", text)
        labels = set(structs.get(family.group(1), [])) if family else set()
        metrics[prefix + name] = (kind, labels)
    # Every registration must have been read: one missed is a metric the checks below
    # would call unregistered, or worse, not notice.
    calls = len(re.findall(r"\.register\(", source))
    if calls != len(metrics):
        raise SystemExit(f"metrics/mod.rs: read {len(metrics)} of its {calls} registrations ({', '.join(sorted(metrics))})")
    return metrics


TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "service", "endpoint"}


def resolve(name, metrics):
    """(base name, type, allows le) of a series name used in PromQL, or None."""
    if name in metrics and metrics[name][0] == "Gauge":
        return name, "Gauge", False
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and metrics.get(base, ("",))[0] == "Histogram":
            return base, "Histogram", suffix == "_bucket"
    base = name[: -len("_total")]
    if name.endswith("_total") and metrics.get(base, ("",))[0] == "Counter":
        return base, "Counter", False
    return None


def expr_labels(expr):
    """Label names a PromQL expression matches, groups or joins on."""
    labels = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        labels |= {x.strip() for x in group.split(",") if x.strip()}
    for group in re.findall(r"\{([^}]*)\}", expr):
        labels |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", group))
    return labels


def allowed_labels(expr, metrics):
    """The labels of the metrics in a PromQL expression, and Prometheus' target labels."""
    allowed = set(TARGET_LABELS)
    for name in re.findall(r"\bargo_results_[a-z_]+\b", expr):
        found = resolve(name, metrics)
        if found:
            allowed |= metrics[found[0]][1]
            if found[2]:
                allowed.add("le")
    return allowed


def expr_problems(expr, metrics):
    """What in a PromQL expression is not in metrics/mod.rs: series names, and labels that none
    of its metrics (nor Prometheus' target labels) carry."""
    problems = [f"{name} is no series of server/src/metrics/mod.rs"
                for name in re.findall(r"\bargo_results_[a-z_]+\b", expr) if resolve(name, metrics) is None]
    for bad in sorted(expr_labels(expr) - allowed_labels(expr, metrics)):
        problems.append(f"label {bad!r} is not a label of the metrics in `{expr.strip()}`")
    return problems


def series_names(metrics):
    return sorted(f"{n}_total" if k == "Counter" else f"{n}_bucket" if k == "Histogram" else n
                  for n, (k, _) in metrics.items())


METRICS = registered_metrics(open(metrics_rs).read())
if not METRICS:
    raise SystemExit(f"validate-deploy: no metrics found in {metrics_rs}")


# --- explicit checks of custom resources (no schema is bundled for them) ------------------
def unknown_fields(doc, fields, what):
    """Messages for fields not in `fields` (path -> allowed keys; `path[]` for each item of
    a list), and for a path that is not a mapping."""
    messages = []

    def walk(node, parts, path):
        if not parts:
            yield path, node
            return
        part, rest = parts[0], parts[1:]
        if part.endswith("[]"):
            items = node.get(part[:-2]) if isinstance(node, dict) else None
            for i, item in enumerate(items if isinstance(items, list) else []):
                yield from walk(item, rest, f"{path}.{part[:-2]}[{i}]".lstrip("."))
        else:
            child = node.get(part) if isinstance(node, dict) else None
            if child is not None:
                yield from walk(child, rest, f"{path}.{part}".lstrip("."))

    for spec, allowed in fields.items():
        for path, node in walk(doc, [p for p in spec.split(".") if p], ""):
            if not isinstance(node, dict):
                messages.append(f"{path or '(root)'}: expected a mapping")
                continue
            for key in sorted(set(node) - allowed):
                messages.append(f"{(path + '.') if path else ''}{key}: not a field this check knows for "
                                f"{what} (known: {', '.join(sorted(allowed))})")
    return messages


# --- CloudNativePG Cluster and ScheduledBackup: explicit checks of the fields we use --------
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
PG_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# Fields of postgresql.cnpg.io/v1 Cluster that this check knows (CloudNativePG
# api/v1/cluster_types.go; spec.backup is BackupConfiguration there, its barmanObjectStore
# barman-cloud's BarmanObjectStoreConfiguration, as config/crd/bases/
# postgresql.cnpg.io_clusters.yaml spells it out). Anything else is refused until added
# here after checking CloudNativePG's API reference, so that a misspelt field cannot pass
# unseen.
CNPG_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "metadata": {"name", "namespace", "labels", "annotations"},
    "spec": {"instances", "imageName", "resources", "postgresql", "primaryUpdateStrategy", "primaryUpdateMethod",
             "enableSuperuserAccess", "storage", "bootstrap", "backup"},
    "spec.resources": {"requests", "limits"},
    "spec.resources.requests": {"cpu", "memory"},
    "spec.resources.limits": {"cpu", "memory"},
    "spec.postgresql": {"parameters"},
    "spec.storage": {"size", "storageClass"},
    "spec.bootstrap": {"initdb"},
    "spec.bootstrap.initdb": {"database", "owner", "secret"},
    "spec.backup": {"barmanObjectStore", "retentionPolicy", "target"},
    "spec.backup.barmanObjectStore": {"destinationPath", "endpointURL", "s3Credentials", "wal", "data"},
    "spec.backup.barmanObjectStore.s3Credentials": {"accessKeyId", "secretAccessKey", "region",
                                                    "sessionToken", "inheritFromIAMRole"},
    "spec.backup.barmanObjectStore.s3Credentials.accessKeyId": {"name", "key"},
    "spec.backup.barmanObjectStore.s3Credentials.secretAccessKey": {"name", "key"},
    "spec.backup.barmanObjectStore.s3Credentials.region": {"name", "key"},
    "spec.backup.barmanObjectStore.s3Credentials.sessionToken": {"name", "key"},
    "spec.backup.barmanObjectStore.wal": {"compression", "maxParallel"},
    "spec.backup.barmanObjectStore.data": {"compression", "jobs"},
}
# The CRD's enumerations and patterns for those fields.
CNPG_WAL_COMPRESSION = {"bzip2", "gzip", "lz4", "snappy", "xz", "zstd"}
CNPG_DATA_COMPRESSION = {"bzip2", "gzip", "lz4", "snappy"}
CNPG_BACKUP_TARGETS = {"primary", "prefer-standby"}
CNPG_RETENTION = re.compile(r"^[1-9][0-9]*[dwm]$")
CNPG_UPDATE_STRATEGIES = {"unsupervised", "supervised"}
CNPG_UPDATE_METHODS = {"switchover", "restart"}
# imageName pinned to a minor: the tag starts with MAJOR.MINOR, which is how CloudNativePG
# reads the major from it (docs/src/container_images.md, "Image Tag Requirements"), then
# optionally a flavour, and optionally a digest. A bare major (`18`) or `latest` moves.
CNPG_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*?:(?P<major>[0-9]+)\.[0-9]+(?P<rest>[-._][A-Za-z0-9._-]*)?"
                        r"(@sha256:[0-9a-f]{64})?$")
# The flavours of cloudnative-pg/postgres-containers without barman-cloud, which the
# in-core spec.backup.barmanObjectStore runs inside the instances.
CNPG_IMAGE_WITHOUT_BARMAN = re.compile(r"[-._](minimal|standard)([-._]|$)")
CPU = re.compile(r"^([0-9]+(\.[0-9]+)?)(m?)$")
MEMORY_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# Postgres' memory units for shared_buffers (kB, MB, GB, TB; 1024-based).
PG_MEMORY = re.compile(r"^([0-9]+)\s*(kB|MB|GB|TB)$")
PG_MEMORY_UNITS = {"kB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}
S3_DESTINATION = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?$")
URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def secret_ref_problems(path, ref):
    if not isinstance(ref, dict):
        return [f"{path}: expected the name and key of a Secret"]
    problems = []
    name, key = ref.get("name"), ref.get("key")
    if not (isinstance(name, str) and DNS_SUBDOMAIN.match(name)):
        problems.append(f"{path}.name: {name!r} is not a Secret's name")
    if not (isinstance(key, str) and SECRET_KEY.match(key)):
        problems.append(f"{path}.key: {key!r} is not a key of a Secret")
    return problems


def cnpg_backup_problems(backup):
    """spec.backup: barman-cloud to an S3-compatible object store, with its credentials in a
    Secret (or the pods' IAM role)."""
    store = backup.get("barmanObjectStore")
    path = "spec.backup.barmanObjectStore"
    if not isinstance(store, dict):
        return [f"{path}: missing (the one backup method this check knows)"]
    problems = []
    destination = store.get("destinationPath")
    if not (isinstance(destination, str) and S3_DESTINATION.match(destination)):
        problems.append(f"{path}.destinationPath: {destination!r} is not s3://BUCKET/PATH")
    if "endpointURL" in store and not (isinstance(store["endpointURL"], str) and URL.match(store["endpointURL"])):
        problems.append(f"{path}.endpointURL: {store['endpointURL']!r} is not an http(s) URL")
    credentials = store.get("s3Credentials")
    if not isinstance(credentials, dict):
        problems.append(f"{path}.s3Credentials: missing: a Secret's accessKeyId and secretAccessKey, "
                        f"or inheritFromIAMRole")
    else:
        iam = credentials.get("inheritFromIAMRole")
        if iam is not None and not isinstance(iam, bool):
            problems.append(f"{path}.s3Credentials.inheritFromIAMRole: {iam!r} is not a boolean")
        if iam is not True:
            for key in ("accessKeyId", "secretAccessKey"):
                problems += secret_ref_problems(f"{path}.s3Credentials.{key}", credentials.get(key))
        for key in ("region", "sessionToken"):
            if key in credentials:
                problems += secret_ref_problems(f"{path}.s3Credentials.{key}", credentials[key])
    for part, compressions, count in (("wal", CNPG_WAL_COMPRESSION, "maxParallel"),
                                      ("data", CNPG_DATA_COMPRESSION, "jobs")):
        section = store.get(part) or {}
        if "compression" in section and section["compression"] not in compressions:
            problems.append(f"{path}.{part}.compression: {section['compression']!r} is not one of "
                            f"{', '.join(sorted(compressions))}")
        if count in section and not positive_int(section[count]):
            problems.append(f"{path}.{part}.{count}: {section[count]!r} is not an integer >= 1")
    retention = backup.get("retentionPolicy")
    if retention is not None and not (isinstance(retention, str) and CNPG_RETENTION.match(retention)):
        problems.append(f"spec.backup.retentionPolicy: {retention!r} is not like 30d, 4w or 6m")
    if "target" in backup and backup["target"] not in CNPG_BACKUP_TARGETS:
        problems.append(f"spec.backup.target: {backup['target']!r} is not one of "
                        f"{', '.join(sorted(CNPG_BACKUP_TARGETS))}")
    return problems


def cpu_cores(value):
    """A CPU quantity (1, 0.5, 500m) in cores, or None."""
    m = CPU.match(str(value)) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    return None if m is None else float(m.group(1)) / (1000 if m.group(3) else 1)


def memory_bytes(value):
    """A memory quantity (1Gi, 512Mi, 1G) in bytes, or None."""
    m = QUANTITY.match(value) if isinstance(value, str) else None
    return None if m is None else float(re.match(r"[0-9.]+", value).group()) * MEMORY_UNITS[m.group(2) or ""]


def cnpg_instance_problems(spec):
    """imageName pinned (and with barman-cloud for the in-core backup), the update strategy
    and method, the superuser switch, resources of the Guaranteed QoS class (CloudNativePG's
    docs/src/resource_management.md) and shared_buffers within the memory."""
    problems = []
    image = spec.get("imageName")
    m = CNPG_IMAGE.match(image) if isinstance(image, str) else None
    if m is None:
        problems.append(f"spec.imageName: {image!r} is not an image with a MAJOR.MINOR tag: without one the "
                        f"operator runs its own default image, whose Postgres major moves with the operator")
    elif (spec.get("backup") or {}).get("barmanObjectStore") and CNPG_IMAGE_WITHOUT_BARMAN.search(m.group("rest") or ""):
        problems.append(f"spec.imageName: {image!r} is a minimal or standard image, without the barman-cloud that "
                        f"spec.backup.barmanObjectStore runs in the instances: use a `system` image")
    for key, allowed in (("primaryUpdateStrategy", CNPG_UPDATE_STRATEGIES), ("primaryUpdateMethod", CNPG_UPDATE_METHODS)):
        if key in spec and spec[key] not in allowed:
            problems.append(f"spec.{key}: {spec[key]!r} is not one of {', '.join(sorted(allowed))}")
    if "enableSuperuserAccess" in spec and not isinstance(spec["enableSuperuserAccess"], bool):
        problems.append(f"spec.enableSuperuserAccess: {spec['enableSuperuserAccess']!r} is not a boolean")
    resources = spec.get("resources")
    memory = None
    if resources is not None:
        requests, limits = (resources or {}).get("requests") or {}, (resources or {}).get("limits") or {}
        for kind, parse in (("cpu", cpu_cores), ("memory", memory_bytes)):
            request, limit = requests.get(kind), limits.get(kind)
            for part, value in (("requests", request), ("limits", limit)):
                if parse(value) is None:
                    problems.append(f"spec.resources.{part}.{kind}: {value!r} is not a {kind} quantity")
            if parse(request) is not None and parse(limit) is not None and parse(request) != parse(limit):
                problems.append(f"spec.resources: {kind} requested {request} but limited to {limit}: the Guaranteed "
                                f"QoS class that CloudNativePG recommends for Postgres needs them equal")
        memory = memory_bytes(requests.get("memory"))
    parameters = (spec.get("postgresql") or {}).get("parameters") or {}
    if not (isinstance(parameters, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in parameters.items())):
        problems.append("spec.postgresql.parameters: expected a map of strings (the CRD's type)")
    elif "shared_buffers" in parameters:
        m = PG_MEMORY.match(parameters["shared_buffers"])
        if m is None:
            problems.append(f"spec.postgresql.parameters.shared_buffers: {parameters['shared_buffers']!r} is not a "
                            f"size with a unit (kB, MB, GB, TB), which CloudNativePG's webhook asks for")
        elif memory is not None and int(m.group(1)) * PG_MEMORY_UNITS[m.group(2)] >= memory:
            problems.append(f"spec.postgresql.parameters.shared_buffers: {parameters['shared_buffers']} is not below "
                            f"the memory of spec.resources")
    return problems


def name_problem(doc):
    meta = doc.get("metadata")
    name = meta.get("name", "") if isinstance(meta, dict) else ""
    if not (isinstance(name, str) and DNS_LABEL.match(name) and len(name) <= 63):
        return f"metadata.name: {name!r} is not a DNS label (at most 63 characters)"
    return None


def cnpg_cluster_check(where, doc):
    ok = True

    def bad(message):
        nonlocal ok
        ok = False
        error(where, message)

    for message in unknown_fields(doc, CNPG_FIELDS, "CloudNativePG Cluster"):
        bad(message)
    if name_problem(doc):
        bad(name_problem(doc))
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        bad("spec: missing")
        return ok
    instances = spec.get("instances")
    if not (isinstance(instances, int) and not isinstance(instances, bool) and instances >= 1):
        bad(f"spec.instances: {instances!r} is not an integer >= 1")
    size = (spec.get("storage") or {}).get("size")
    if not (isinstance(size, str) and QUANTITY.match(size) and float(re.match(r"[0-9.]+", size).group()) > 0):
        bad(f"spec.storage.size: {size!r} is not a positive quantity such as 10Gi")
    initdb = (spec.get("bootstrap") or {}).get("initdb")
    if not isinstance(initdb, dict):
        bad("spec.bootstrap.initdb: missing")
    else:
        for key in ("database", "owner"):
            value = initdb.get(key)
            if not (isinstance(value, str) and PG_IDENT.match(value)):
                bad(f"spec.bootstrap.initdb.{key}: {value!r} is not a Postgres identifier")
    if isinstance(spec.get("backup"), dict):
        for message in cnpg_backup_problems(spec["backup"]):
            bad(message)
    for message in cnpg_instance_problems(spec):
        bad(message)
    return ok


# Fields of postgresql.cnpg.io/v1 ScheduledBackup that this check knows (CloudNativePG
# api/v1/scheduledbackup_types.go, ScheduledBackupSpec).
CNPG_SCHEDULED_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "metadata": {"name", "namespace", "labels", "annotations"},
    "spec": {"schedule", "cluster", "backupOwnerReference", "method", "immediate", "suspend", "target"},
    "spec.cluster": {"name"},
}
CNPG_OWNER_REFERENCES = {"none", "self", "cluster"}
CNPG_METHODS = {"barmanObjectStore", "volumeSnapshot", "plugin"}
# ScheduledBackupSpec.Schedule is robfig/cron "with an additional seconds specifier": six
# fields, seconds first, or a descriptor. A CronJob's five fields would be read shifted.
CRON_FIELD = re.compile(r"^[0-9A-Za-z*?/,-]+$")
CRON_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}


def cnpg_scheduled_backup_check(where, doc):
    ok = True

    def bad(message):
        nonlocal ok
        ok = False
        error(where, message)

    for message in unknown_fields(doc, CNPG_SCHEDULED_FIELDS, "CloudNativePG ScheduledBackup"):
        bad(message)
    if name_problem(doc):
        bad(name_problem(doc))
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        bad("spec: missing")
        return ok
    schedule = spec.get("schedule")
    fields = schedule.split() if isinstance(schedule, str) else []
    if not (schedule in CRON_DESCRIPTORS or (isinstance(schedule, str) and schedule.startswith("@every "))
            or (len(fields) == 6 and all(CRON_FIELD.match(f) for f in fields))):
        bad(f"spec.schedule: {schedule!r} is not six cron fields, seconds first, nor a descriptor like @daily")
    cluster = (spec.get("cluster") or {}).get("name")
    if not (isinstance(cluster, str) and DNS_LABEL.match(cluster)):
        bad(f"spec.cluster.name: {cluster!r} is not a Cluster's name")
    for key, allowed in (("backupOwnerReference", CNPG_OWNER_REFERENCES), ("method", CNPG_METHODS),
                         ("target", CNPG_BACKUP_TARGETS)):
        if key in spec and spec[key] not in allowed:
            bad(f"spec.{key}: {spec[key]!r} is not one of {', '.join(sorted(allowed))}")
    for key in ("immediate", "suspend"):
        if key in spec and not isinstance(spec[key], bool):
            bad(f"spec.{key}: {spec[key]!r} is not a boolean")
    return ok


# --- Prometheus Operator ServiceMonitor and PrometheusRule: explicit checks ----------------
# Fields that these checks know (prometheus-operator pkg/apis/monitoring/v1/
# servicemonitor_types.go ServiceMonitorSpec and types.go Endpoint; prometheusrule_types.go
# RuleGroup and Rule); `[]` is each item of a list.
SERVICE_MONITOR_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "metadata": {"name", "namespace", "labels", "annotations"},
    "spec": {"selector", "endpoints", "jobLabel"},
    "spec.selector": {"matchLabels"},
    "spec.endpoints[]": {"port", "path", "scheme", "interval", "scrapeTimeout"},
}
# podmonitor_types.go PodMonitorSpec and PodMetricsEndpoint (v0.85.0, whose CRD
# tests/kube/manifests installs).
POD_MONITOR_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "metadata": {"name", "namespace", "labels", "annotations"},
    "spec": {"selector", "podMetricsEndpoints", "jobLabel"},
    "spec.selector": {"matchLabels"},
    "spec.podMetricsEndpoints[]": {"port", "path", "scheme", "interval", "scrapeTimeout"},
}
POD_MONITOR_SCHEMES = {"http", "https"}  # the PodMonitor CRD's enum for scheme
PROMETHEUS_RULE_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "metadata": {"name", "namespace", "labels", "annotations"},
    "spec": {"groups"},
    "spec.groups[]": {"name", "interval", "rules"},
    "spec.groups[].rules[]": {"alert", "expr", "for", "labels", "annotations"},
}
# types.go Duration: what Prometheus' model.ParseDuration reads.
PROM_DURATION = re.compile(r"^(0|([0-9]+y)?([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?)$")
PROM_UNITS = {"y": 31536000, "w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
SCHEMES = {"http", "https", "HTTP", "HTTPS"}  # types.go Scheme
SEVERITIES = {"critical", "warning", "info"}
ALERT_ANNOTATIONS = {"summary", "description", "runbook_url"}
RUNBOOKS = "https://github.com/argo-results/argo-results/blob/main/docs/operations.md#"


def prom_seconds(duration):
    return sum(int(n) * PROM_UNITS[u] for n, u in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", duration))


def github_anchor(heading):
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def alert_runbooks():
    """Anchors of the headings in the "Alerts" section of docs/operations.md."""
    text = re.sub(r"^```.*?^```", "", open(operations_md).read(), flags=re.M | re.S)
    section = re.search(r"^## Alerts[ \t]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not section:
        return set()
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#{3,6}\s+(.+?)\s*$", section.group(1), re.M)}


ALERT_RUNBOOKS = alert_runbooks()
PROMETHEUS_RULES = []  # (where, document) of each rendered PrometheusRule that passed, for promtool


def service_monitor_check(where, doc):
    ok = True

    def bad(message):
        nonlocal ok
        ok = False
        error(where, message)

    for message in unknown_fields(doc, SERVICE_MONITOR_FIELDS, "ServiceMonitor"):
        bad(message)
    if name_problem(doc):
        bad(name_problem(doc))
    spec = doc.get("spec") or {}
    labels = (spec.get("selector") or {}).get("matchLabels")
    if not (isinstance(labels, dict) and labels and all(isinstance(v, str) for v in labels.values())):
        bad(f"spec.selector.matchLabels: {labels!r} is not a non-empty map of labels")
    endpoints = spec.get("endpoints")
    if not (isinstance(endpoints, list) and endpoints):
        bad("spec.endpoints: missing")
        return ok
    for i, endpoint in enumerate(endpoints):
        path = f"spec.endpoints[{i}]"
        if not (isinstance(endpoint.get("port"), str) and endpoint["port"]):
            bad(f"{path}.port: expected the name of a port of the Service")
        if not (isinstance(endpoint.get("path", "/"), str) and endpoint.get("path", "/").startswith("/")):
            bad(f"{path}.path: {endpoint.get('path')!r} is not a path")
        if "scheme" in endpoint and endpoint["scheme"] not in SCHEMES:
            bad(f"{path}.scheme: {endpoint['scheme']!r} is not http or https")
        for key in ("interval", "scrapeTimeout"):
            if key in endpoint and not (isinstance(endpoint[key], str) and endpoint[key]
                                        and PROM_DURATION.match(endpoint[key])):
                bad(f"{path}.{key}: {endpoint[key]!r} is not a Prometheus duration such as 30s")
        interval, timeout = endpoint.get("interval"), endpoint.get("scrapeTimeout")
        if ok and interval and timeout and prom_seconds(timeout) > prom_seconds(interval):
            bad(f"{path}.scrapeTimeout: {timeout} is longer than the interval {interval}")
    return ok


def pod_monitor_check(where, doc):
    ok = True

    def bad(message):
        nonlocal ok
        ok = False
        error(where, message)

    for message in unknown_fields(doc, POD_MONITOR_FIELDS, "PodMonitor"):
        bad(message)
    if name_problem(doc):
        bad(name_problem(doc))
    spec = doc.get("spec") or {}
    labels = (spec.get("selector") or {}).get("matchLabels")
    if not (isinstance(labels, dict) and labels and all(isinstance(v, str) for v in labels.values())):
        bad(f"spec.selector.matchLabels: {labels!r} is not a non-empty map of labels")
    endpoints = spec.get("podMetricsEndpoints")
    if not (isinstance(endpoints, list) and endpoints):
        bad("spec.podMetricsEndpoints: missing")
        return ok
    for i, endpoint in enumerate(endpoints):
        path = f"spec.podMetricsEndpoints[{i}]"
        if not (isinstance(endpoint.get("port"), str) and endpoint["port"]):
            bad(f"{path}.port: expected the name of a container port")
        if not (isinstance(endpoint.get("path", "/"), str) and endpoint.get("path", "/").startswith("/")):
            bad(f"{path}.path: {endpoint.get('path')!r} is not a path")
        if "scheme" in endpoint and endpoint["scheme"] not in POD_MONITOR_SCHEMES:
            bad(f"{path}.scheme: {endpoint['scheme']!r} is not http or https")
        for key in ("interval", "scrapeTimeout"):
            if key in endpoint and not (isinstance(endpoint[key], str) and endpoint[key]
                                        and PROM_DURATION.match(endpoint[key])):
                bad(f"{path}.{key}: {endpoint[key]!r} is not a Prometheus duration such as 30s")
        interval, timeout = endpoint.get("interval"), endpoint.get("scrapeTimeout")
        if ok and interval and timeout and prom_seconds(timeout) > prom_seconds(interval):
            bad(f"{path}.scrapeTimeout: {timeout} is longer than the interval {interval}")
    return ok


def prometheus_rule_check(where, doc):
    ok = True

    def bad(message):
        nonlocal ok
        ok = False
        error(where, message)

    for message in unknown_fields(doc, PROMETHEUS_RULE_FIELDS, "PrometheusRule (alerting rules)"):
        bad(message)
    if name_problem(doc):
        bad(name_problem(doc))
    groups = (doc.get("spec") or {}).get("groups")
    if not (isinstance(groups, list) and groups):
        bad("spec.groups: missing")
        return ok
    group_names, alerts = set(), set()
    for group in groups:
        name = group.get("name")
        if not (isinstance(name, str) and name) or name in group_names:
            bad(f"group {name!r}: a group needs a name of its own")
        group_names.add(name)
        if "interval" in group and not PROM_DURATION.match(str(group["interval"])):
            bad(f"group {name}: interval {group['interval']!r} is not a Prometheus duration")
        rules = group.get("rules")
        if not (isinstance(rules, list) and rules):
            bad(f"group {name}: no rules")
            continue
        for rule in rules:
            alert = rule.get("alert")
            if not (isinstance(alert, str) and re.match(r"^[A-Z][A-Za-z0-9]*$", alert)) or alert in alerts:
                bad(f"group {name}: alert {alert!r} needs a CamelCase name of its own")
                continue
            alerts.add(alert)
            here = f"alert {alert}"
            expr = rule.get("expr")
            if not (isinstance(expr, str) and expr.strip()):
                bad(f"{here}: expr missing")
                continue
            for problem in expr_problems(expr, METRICS):
                bad(f"{here}: {problem} (it has: {', '.join(series_names(METRICS))})"
                    if "no series" in problem else f"{here}: {problem}")
            duration = rule.get("for")
            if not (isinstance(duration, str) and PROM_DURATION.match(duration)):
                bad(f"{here}: for {duration!r} is not a Prometheus duration (0m fires at once)")
            labels = rule.get("labels") or {}
            if labels.get("severity") not in SEVERITIES:
                bad(f"{here}: label severity {labels.get('severity')!r} is not one of {', '.join(sorted(SEVERITIES))}")
            annotations = rule.get("annotations") or {}
            if set(annotations) != ALERT_ANNOTATIONS or not all(isinstance(v, str) and v.strip()
                                                               for v in annotations.values()):
                bad(f"{here}: annotations must be exactly {', '.join(sorted(ALERT_ANNOTATIONS))}, "
                    f"not {', '.join(sorted(annotations))}")
            known = expr_labels(expr) | set(labels)
            for text in annotations.values():
                for used in sorted(set(re.findall(r"\$labels\.(\w+)", str(text))) - known):
                    bad(f"{here}: its annotations use $labels.{used}, which its expr does not keep")
            url = str(annotations.get("runbook_url", ""))
            anchor = url[len(RUNBOOKS):] if url.startswith(RUNBOOKS) else None
            if anchor != github_anchor(alert):
                bad(f"{here}: runbook_url {url!r} is not {RUNBOOKS}{github_anchor(alert)}")
            elif anchor not in ALERT_RUNBOOKS:
                bad(f"{here}: its runbook_url names #{anchor}, but the section Alerts of docs/operations.md "
                    f"has no heading ### {alert}")
    if ok:
        PROMETHEUS_RULES.append((where, doc))
    return ok


EXPLICIT = {
    ("postgresql.cnpg.io/v1", "Cluster"): cnpg_cluster_check,
    ("postgresql.cnpg.io/v1", "ScheduledBackup"): cnpg_scheduled_backup_check,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): service_monitor_check,
    ("monitoring.coreos.com/v1", "PodMonitor"): pod_monitor_check,
    ("monitoring.coreos.com/v1", "PrometheusRule"): prometheus_rule_check,
}


# --- references inside one render --------------------------------------------------------
CNPG_METRICS_PORT = "metrics"  # CloudNativePG pkg/specs/pods.go: the instances' exporter, 9187
CNPG_NOTES = {}  # label -> what the CloudNativePG checks of reference_checks found, for its summary
# DATABASE_URL as Kubernetes expands it: a variable of the container, then libpq's parameters.
DEPENDENT_URL = re.compile(r"^\$\(([A-Za-z_][A-Za-z0-9_]*)\)\?([^?#]*)$")


def cnpg_database_url_problems(container, pod, clusters, notes):
    """DATABASE_URL is $(VAR)?sslmode=verify-full&sslrootcert=FILE, VAR an earlier variable
    of the container holding the uri of CloudNativePG's Secret <cluster>-app (built without
    a query: pkg/specs/secrets.go, connectionStringBuilder.buildPostgres), and FILE the
    ca.crt of Secret <cluster>-ca, mounted read-only without the CA's private key and
    without subPath (a renewal must reach it)."""
    env = container.get("env") or []
    names = [e.get("name") for e in env]
    url = next(e for e in env if e.get("name") == "DATABASE_URL")
    wanted = {x["metadata"]["name"] for x in clusters}
    m = DEPENDENT_URL.match(url.get("value") or "") if "valueFrom" not in url else None
    if m is None:
        return [f"DATABASE_URL must be $(VAR)?sslmode=verify-full&sslrootcert=FILE, VAR holding the uri of "
                f"CloudNativePG's Secret {' or '.join(sorted(f'{n}-app' for n in wanted))}: the server's certificate "
                f"is otherwise not verified (docs/operations.md, \"Postgres over TLS\")"]
    var, query = m.group(1), urllib.parse.parse_qs(m.group(2), keep_blank_values=True)
    problems = []
    source = next((e for e in env if e.get("name") == var), None)
    ref = ((source or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    cluster = (ref.get("name") or "").removesuffix("-app")
    if source is None or names.index(var) > names.index("DATABASE_URL"):
        problems.append(f"DATABASE_URL uses $({var}), which is not a variable of the container before it "
                        f"(Kubernetes then leaves $({var}) as it is)")
    elif not (ref.get("name", "").endswith("-app") and cluster in wanted and ref.get("key") == "uri"):
        problems.append(f"{var} reads {ref.get('name')}/{ref.get('key')}; CloudNativePG's Secret is "
                        f"{' or '.join(sorted(f'{n}-app' for n in wanted))}, key uri")
    if query.get("sslmode") != ["verify-full"]:
        problems.append(f"DATABASE_URL has sslmode={','.join(query.get('sslmode') or ['(none)'])}, not verify-full: the server's certificate "
                        f"would not be checked against the CA and the host name")
    root = query.get("sslrootcert") or [""]
    if len(root) != 1 or not root[0].startswith("/"):
        problems.append(f"DATABASE_URL has sslrootcert={','.join(query.get('sslrootcert') or ['(none)'])}, not one absolute path")
        return problems
    if set(query) - {"sslmode", "sslrootcert"}:
        problems.append(f"DATABASE_URL has parameters {sorted(set(query) - {'sslmode', 'sslrootcert'})} besides "
                        f"sslmode and sslrootcert")
    directory, file = root[0].rsplit("/", 1)
    mount = next((v for v in container.get("volumeMounts") or [] if v.get("mountPath", "").rstrip("/") == directory), None)
    volume = next((v for v in pod.get("volumes") or [] if mount and v.get("name") == mount.get("name")), None)
    secret = (volume or {}).get("secret") or {}
    items = secret.get("items") or []
    if mount is None or volume is None:
        problems.append(f"sslrootcert {root[0]}: no volume of the container is mounted at {directory}")
    elif mount.get("subPath") or mount.get("readOnly") is not True:
        problems.append(f"sslrootcert {root[0]}: the mount at {directory} must be read-only and without subPath")
    elif secret.get("secretName") != f"{cluster}-ca":
        problems.append(f"sslrootcert {root[0]}: volume {volume.get('name')} is not Secret {cluster}-ca, the CA "
                        f"CloudNativePG signs Cluster/{cluster}'s server certificate with")
    elif [(i.get("key"), i.get("path")) for i in items] != [("ca.crt", file)]:
        problems.append(f"sslrootcert {root[0]}: volume {volume.get('name')} must list one item, key ca.crt as {file} "
                        f"(Secret {cluster}-ca also holds the CA's private key, ca.key)")
    if not problems:
        notes.append(f"DATABASE_URL is Secret {cluster}-app's uri with sslmode=verify-full and sslrootcert "
                     f"{root[0]} (Secret {cluster}-ca's ca.crt alone, read-only)")
    return problems
def selector_matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def reference_checks(label, docs):
    argo_accounts = set(argo_flavour(label)["accounts"].values())
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc.get("kind"), []).append(doc)
    configmaps = {(d["metadata"].get("namespace"), d["metadata"]["name"]): d
                  for d in by_kind.get("ConfigMap", [])}
    workloads = []  # (namespace, pod labels, pod spec, where)
    for d in by_kind.get("Deployment", []):
        ns = d["metadata"].get("namespace")
        template = d["spec"]["template"]
        labels = (template.get("metadata") or {}).get("labels") or {}
        where = f"{label} {ident(d)}"
        if not selector_matches(d["spec"]["selector"].get("matchLabels"), labels):
            error(where, "spec.selector.matchLabels does not match the pod template's labels")
        workloads.append((ns, labels, template["spec"], where))
        pod = template["spec"]
        volumes = {v["name"] for v in pod.get("volumes") or []}
        for c in pod["containers"]:
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
            for mount in c.get("volumeMounts") or []:
                if mount["name"] not in volumes:
                    error(where, f"container {c['name']} mounts undefined volume {mount['name']}")
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
                if isinstance(port, str) and port not in ports:
                    error(where, f"{probe} uses port {port!r}, not a port of container {c['name']}")
            env_values = {}
            for src in c.get("envFrom") or []:
                ref = (src.get("configMapRef") or {}).get("name")
                if ref is None:
                    continue
                cm = configmaps.get((ns, ref))
                if cm is None:
                    error(where, f"envFrom ConfigMap {ref!r} is not in this render")
                else:
                    env_values.update(cm.get("data") or {})
            for env in c.get("env") or []:
                if "value" in env:
                    env_values[env["name"]] = env["value"]
            # The listen addresses must be the container's named ports.
            for var, port_name in (("ARGO_RESULTS_LISTEN", "https"),
                                   ("ARGO_RESULTS_METRICS_LISTEN", "metrics")):
                if var in env_values and port_name in ports and port_of(env_values[var]) != ports[port_name]:
                    error(where, f"{var}={env_values[var]} but container port {port_name} is {ports[port_name]}")
            # With a CloudNativePG cluster in the render, DATABASE_URL must be its app Secret's
            # uri, verified against the cluster's CA.
            clusters = [x for x in by_kind.get("Cluster", []) if x.get("apiVersion", "").startswith("postgresql.cnpg.io/")
                        and x["metadata"].get("namespace") == ns]
            if clusters and any(env.get("name") == "DATABASE_URL" for env in c.get("env") or []):
                for problem in cnpg_database_url_problems(c, pod, clusters, CNPG_NOTES.setdefault(label, [])):
                    error(where, problem)

    def pods_for(ns, selector):
        return [w for w in workloads if w[0] == ns and selector_matches(selector, w[1])]

    # A PodMonitor scrapes the instances of a CloudNativePG Cluster of this render (the pods
    # are the operator's, so their port is known by its name in CloudNativePG's pods.go).
    for d in by_kind.get("PodMonitor", []):
        where = f"{label} {ident(d)}"
        ns, labels = d["metadata"].get("namespace"), d["spec"]["selector"]["matchLabels"]
        name = labels.get("cnpg.io/cluster")
        cluster = next((x for x in by_kind.get("Cluster", []) if x.get("apiVersion", "").startswith("postgresql.cnpg.io/")
                        and x["metadata"].get("namespace") == ns and x["metadata"]["name"] == name), None)
        if cluster is None:
            error(where, f"selects cnpg.io/cluster={name!r}, no CloudNativePG Cluster of this render in namespace {ns}")
            continue
        if set(labels) - {"cnpg.io/cluster", "cnpg.io/podRole"} or labels.get("cnpg.io/podRole", "instance") != "instance":
            error(where, f"selects {labels}: the instances of a cluster carry cnpg.io/cluster and cnpg.io/podRole=instance "
                         f"(CloudNativePG pkg/specs/podmonitor.go), nothing else of ours")
        for endpoint in d["spec"]["podMetricsEndpoints"]:
            if endpoint.get("port") != CNPG_METRICS_PORT:
                error(where, f"port {endpoint.get('port')!r}: the instances' exporter is on port {CNPG_METRICS_PORT!r}")
            if endpoint.get("scheme", "http") != "http":
                error(where, f"scheme {endpoint.get('scheme')!r}: the exporter speaks plain HTTP unless "
                             f"spec.monitoring.tls is enabled, which Cluster/{name} does not")
        CNPG_NOTES.setdefault(label, []).append(
            f"PodMonitor/{d['metadata']['name']} scrapes port {CNPG_METRICS_PORT} of Cluster/{name}'s instances")

    for d in by_kind.get("Service", []):
        where = f"{label} {ident(d)}"
        matched = pods_for(d["metadata"].get("namespace"), (d.get("spec") or {}).get("selector"))
        if not matched:
            error(where, "selector matches no pod template in this render")
        for p in (d.get("spec") or {}).get("ports") or []:
            target = p.get("targetPort")
            if isinstance(target, str):
                for _, _, pod, _ in matched:
                    names = {q.get("name") for c in pod["containers"] for q in c.get("ports") or []}
                    if target not in names:
                        error(where, f"targetPort {target!r} is no container port name")
    accounts = {(d["metadata"].get("namespace"), d["metadata"]["name"]) for d in by_kind.get("ServiceAccount", [])}
    roles = {d["metadata"]["name"] for d in by_kind.get("ClusterRole", [])}
    for d in by_kind.get("ClusterRoleBinding", []) + by_kind.get("RoleBinding", []):
        ref = d.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole" and not ref.get("name", "").startswith("system:") \
                and ref.get("name") not in roles:
            error(f"{label} {ident(d)}", f"roleRef ClusterRole {ref.get('name')} is not in this render")
        for subject in d.get("subjects") or []:
            if subject.get("kind") != "ServiceAccount":
                continue
            key = (subject.get("namespace"), subject.get("name"))
            if not key[0]:
                error(f"{label} {ident(d)}", f"ServiceAccount subject {key[1]} has no namespace")
            elif accounts and key not in accounts | argo_accounts:
                error(f"{label} {ident(d)}", f"ServiceAccount {key[0]}/{key[1]} is not in this render, "
                                             f"nor one of Argo's ({', '.join('/'.join(a) for a in sorted(argo_accounts))})")
    classes = {d["metadata"]["name"]: d for d in by_kind.get("PriorityClass", [])}
    for d in by_kind.get("Deployment", []):
        sa = d["spec"]["template"]["spec"].get("serviceAccountName")
        if sa and (d["metadata"].get("namespace"), sa) not in accounts:
            error(f"{label} {ident(d)}", f"serviceAccountName {sa} is not in this render")
        # A pod naming a PriorityClass that does not exist is refused at admission.
        priority = d["spec"]["template"]["spec"].get("priorityClassName")
        if priority and priority not in classes and priority not in SYSTEM_PRIORITY_CLASSES:
            error(f"{label} {ident(d)}", f"priorityClassName {priority} is not in this render")
    for name, d in classes.items():
        # scheduling/types.go: HighestUserDefinablePriority; above it is the system classes'.
        if not 0 < d.get("value", 0) <= 1_000_000_000:
            error(f"{label} {ident(d)}", f"value {d.get('value')}: a class of ours goes from 1 to 1000000000")
        if d.get("globalDefault"):
            error(f"{label} {ident(d)}", "globalDefault would give this priority to every pod without a class")
    for x in by_kind.get("Cluster", []):
        if x.get("apiVersion", "").startswith("postgresql.cnpg.io/"):
            spec = x["spec"]
            resources = (spec.get("resources") or {}).get("limits") or {}
            CNPG_NOTES.setdefault(label, []).insert(0, (
                f"Cluster/{x['metadata']['name']} runs {spec['imageName']}"
                + (f" with {resources['cpu']} CPU and {resources['memory']} requested and limited (Guaranteed)"
                   if resources else "")))
    # A ScheduledBackup backs up a Cluster of this render, with the method that Cluster has.
    clusters = {(x["metadata"].get("namespace"), x["metadata"]["name"]): x for x in by_kind.get("Cluster", [])
                if x.get("apiVersion", "").startswith("postgresql.cnpg.io/")}
    for d in by_kind.get("ScheduledBackup", []):
        name = d["spec"]["cluster"]["name"]
        cluster = clusters.get((d["metadata"].get("namespace"), name))
        if cluster is None:
            error(f"{label} {ident(d)}", f"backs up Cluster {name}, which is not in this render")
        elif d["spec"].get("method", "barmanObjectStore") == "barmanObjectStore" \
                and not ((cluster["spec"].get("backup") or {}).get("barmanObjectStore")):
            error(f"{label} {ident(d)}", f"method barmanObjectStore, but Cluster {name} has no "
                                         f"spec.backup.barmanObjectStore")
    for d in by_kind.get("PodDisruptionBudget", []):
        if not pods_for(d["metadata"].get("namespace"), d["spec"]["selector"].get("matchLabels")):
            error(f"{label} {ident(d)}", "selector matches no pod template in this render")
    for d in by_kind.get("NetworkPolicy", []):
        where = f"{label} {ident(d)}"
        matched = pods_for(d["metadata"].get("namespace"), d["spec"]["podSelector"].get("matchLabels"))
        if not matched:
            error(where, "podSelector matches no pod template in this render")
        names = {q.get("name") for _, _, pod, _ in matched for c in pod["containers"] for q in c.get("ports") or []}
        for rule in d["spec"].get("ingress") or []:
            for p in rule.get("ports") or []:
                if isinstance(p.get("port"), str) and p["port"] not in names:
                    error(where, f"ingress port {p['port']!r} is no container port name")


# --- RBAC: what --rbac asks for, and nothing that touches other pods ----------------------
TASK_RESULTS = ("argoproj.io", "workflowtaskresults")
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical", "system-node-critical"}
ARGO_HELM_RENDER = "deploy/overlays/argo-helm"
NAMESPACE_ONLY_RENDER = "deploy/overlays/namespace-only"
MONITORING_RENDER = "deploy/monitoring"


def argo_helm_fullname():
    """The one value of deploy/overlays/argo-helm/release.yaml."""
    path = os.path.join(deploy_dir, "overlays", "argo-helm", "release.yaml")
    try:
        doc = yaml.safe_load(open(path)) or {}
    except (OSError, yaml.YAMLError):
        return None
    return (doc.get("data") or {}).get("fullname") if isinstance(doc, dict) else None


def argo_flavour(label):
    """Argo's controller account (bound or listed here, installed by Argo) and the labels of
    its pods (which the NetworkPolicy admits), by how Argo was installed; and argo-server's,
    which must be granted and admitted nothing: argo-server reads nodes from the Workflow
    object and never calls argo-results. Written out here, not read from the manifests, so
    that a wrong name there cannot check itself; namespace argo.

    Argo's install manifests (argo-workflows manifests/base/workflow-controller/
    workflow-controller-sa.yaml and -deployment.yaml, manifests/base/argo-server/
    argo-server-sa.yaml and -deployment.yaml; namespace argo in
    manifests/cluster-install-no-crds/kustomization.yaml): accounts argo and argo-server,
    pods labelled app: workflow-controller and app: argo-server.

    argo-helm's charts/argo-workflows (chart 1.0.18), for deploy/overlays/argo-helm: the
    accounts are "argo-workflows.controllerServiceAccountName" and
    "argo-workflows.serverServiceAccountName" (templates/_helpers.tpl), by default
    "argo-workflows.controller.fullname" and "argo-workflows.server.fullname":
    <fullname>-<controller.name> and <fullname>-<server.name>, cut at 63 characters
    (values.yaml: controller.name workflow-controller, server.name server). Their pods
    (templates/controller/workflow-controller-deployment.yaml, templates/server/
    server-deployment.yaml) carry "argo-workflows.labels": "argo-workflows.selectorLabels"
    (app.kubernetes.io/name: argo-workflows-<name>, app.kubernetes.io/instance: <release>,
    app.kubernetes.io/component: <name>, app: <name>), app.kubernetes.io/part-of:
    argo-workflows, app.kubernetes.io/managed-by: Helm and helm.sh/chart; the release's name
    is not known here, so a selector may not use app.kubernetes.io/instance."""
    if label != ARGO_HELM_RENDER:
        return {"name": "the accounts of Argo's install manifests",
                "accounts": {"controller": ("argo", "argo")},
                "pods": {"controller": {"app": "workflow-controller"}},
                "argo-server": {"account": ("argo", "argo-server"), "pods": {"app": "argo-server"}}}
    fullname = argo_helm_fullname() or ""

    def pod_labels(name):
        return {"app.kubernetes.io/name": f"argo-workflows-{name}", "app.kubernetes.io/component": name,
                "app": name, "app.kubernetes.io/part-of": "argo-workflows", "app.kubernetes.io/managed-by": "Helm"}

    return {"name": f"argo-helm's accounts for fullname {fullname}",
            "accounts": {"controller": ("argo", f"{fullname}-workflow-controller")},
            "pods": {"controller": pod_labels("workflow-controller")},
            "argo-server": {"account": ("argo", f"{fullname}-server"), "pods": pod_labels("server")}}


def server_flags(docs):
    """The environment the argo-results container gets from its ConfigMap and env values
    (DATABASE_URL comes from a Secret and is not here); None without that container."""
    configmaps = {(d["metadata"].get("namespace"), d["metadata"]["name"]): d
                  for d in docs if d.get("kind") == "ConfigMap"}
    for d in docs:
        if d.get("kind") != "Deployment" or d["metadata"].get("name") != "argo-results":
            continue
        for c in d["spec"]["template"]["spec"].get("containers") or []:
            if c.get("name") != "argo-results":
                continue
            env = {}
            for src in c.get("envFrom") or []:
                ref = (src.get("configMapRef") or {}).get("name")
                env.update((configmaps.get((d["metadata"].get("namespace"), ref)) or {}).get("data") or {})
            for e in c.get("env") or []:
                if "value" in e:
                    env[e["name"]] = e["value"]
            return env
    return None


def flag_on(flags, name):
    """As the server reads a boolean flag from its variable (clap's falsey values)."""
    value = flags.get(name)
    return value is not None and value.strip().lower() not in ("", "n", "no", "f", "false", "off", "0")


def server_env_names():
    """ARGO_RESULTS_* variables the server reads, from its --help."""
    run = subprocess.run(SERVER_CMD + ["--help"], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"validate-deploy: {' '.join(SERVER_CMD)} --help failed: {run.stderr.strip()}")
    return set(re.findall(r"\[env: ((?:ARGO_RESULTS_[A-Z0-9_]+)|DATABASE_URL)=", run.stdout))


SERVER_ENV = server_env_names()


def flags_check(label, flags):
    """The server's own parser takes these flags: --print-rbac-rules parses every flag from
    the environment, then prints and exits without starting."""
    for name in sorted(flags):
        if name.startswith("ARGO_RESULTS_") and name not in SERVER_ENV:
            error(label, f"{name} is no variable of argo-results-server (its --help names: "
                         f"{', '.join(sorted(SERVER_ENV))})")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARGO_RESULTS_") and k != "DATABASE_URL"}
    env.update(flags)
    run = subprocess.run(SERVER_CMD + ["--print-rbac-rules"], env=env, capture_output=True, text=True)
    if run.returncode != 0:
        said = " ".join(run.stderr.split("Usage:")[0].split())
        error(label, f"argo-results-server refuses the rendered flags: {said}")


def bound_accounts(docs, role):
    """The service accounts the ClusterRoleBindings of this render bind to ClusterRole `role`."""
    return sorted((s.get("namespace"), s.get("name"))
                  for d in docs if d.get("kind") == "ClusterRoleBinding"
                  and (d.get("roleRef") or {}).get("kind") == "ClusterRole" and d["roleRef"].get("name") == role
                  for s in d.get("subjects") or [] if s.get("kind") == "ServiceAccount")


def server_account(docs):
    for d in docs:
        if d.get("kind") == "Deployment" and d["metadata"].get("name") == "argo-results":
            return d["metadata"].get("namespace"), d["spec"]["template"]["spec"].get("serviceAccountName", "default")
    return None


def server_rbac_check(label, docs):
    """The RBAC the render's flags need, for the Argo accounts of its flavour."""
    flags = server_flags(docs)
    if flags is None:
        error(label, "no Deployment argo-results with a container argo-results")
        return
    flags_check(label, flags)
    flavour, me = argo_flavour(label), server_account(docs)
    rbac = flag_on(flags, "ARGO_RESULTS_RBAC")
    # TokenReview and SubjectAccessReview are cluster-scoped APIs: only a ClusterRoleBinding
    # grants their create (system:auth-delegator); issuer discovery's URLs are non-resource
    # URLs, granted by a ClusterRole only (Kubernetes binds it to every service account by
    # default, which the namespace-only variant relies on).
    reviews = [f for f in ("ARGO_RESULTS_RBAC", "ARGO_RESULTS_TOKEN_REVIEW",
                           "ARGO_RESULTS_ALLOW_UNBOUND_EXECUTOR_TOKENS") if flag_on(flags, f)]
    if reviews and me not in bound_accounts(docs, "system:auth-delegator"):
        error(label, f"the reviews of {', '.join(reviews)} need system:auth-delegator, and no "
                     f"ClusterRoleBinding binds it to {'/'.join(me)}")
    if flag_on(flags, "ARGO_RESULTS_KUBE_JWKS") and label != NAMESPACE_ONLY_RENDER \
            and me not in bound_accounts(docs, "system:service-account-issuer-discovery"):
        error(label, f"ARGO_RESULTS_KUBE_JWKS reads the issuer's keys, and no ClusterRoleBinding binds "
                     f"system:service-account-issuer-discovery to {'/'.join(me)}")
    argo_server = flavour["argo-server"]["account"]
    if rbac:
        rbac_check(label, docs)
        # The controller's ClusterRole to its account; the reader's and the executor's to
        # nobody (an operator binds them to admins or executors themselves).
        for role in sorted(RBAC_RULES):
            have = bound_accounts(docs, role)
            want = [flavour["accounts"]["controller"]] if role == "argo-results-controller" else []
            if have != want:
                whom = f"the controller's account {'/'.join(want[0])} ({flavour['name']})" if want else "nobody"
                error(f"{label} ClusterRole/{role}", f"bound to {['/'.join(a) for a in have]}; "
                                                     f"deploy/ binds it to {whom}")
    else:
        for d in docs:
            if d.get("kind") in ("Role", "ClusterRole") and rule_grants(d.get("rules")):
                error(f"{label} {ident(d)}", "grants verbs on workflowtaskresults, which nothing asks for "
                                             "without --rbac")
        listed = {var: [s.strip() for s in flags.get(var, "").split(",") if s.strip()]
                  for var in ("ARGO_RESULTS_CONTROLLER", "ARGO_RESULTS_READER")}
        want = "system:serviceaccount:{}:{}".format(*flavour["accounts"]["controller"])
        if want not in listed["ARGO_RESULTS_CONTROLLER"]:
            error(label, f"without --rbac, ARGO_RESULTS_CONTROLLER must name the controller's account {want} "
                         f"({flavour['name']}), not {listed['ARGO_RESULTS_CONTROLLER']}")
        unused = "system:serviceaccount:{}:{}".format(*argo_server)
        for var, subjects in listed.items():
            if unused in subjects:
                error(label, f"{var} names argo-server's account {unused}, which never calls argo-results")
    # Whatever the flags: no binding in the render names argo-server's account.
    for d in docs:
        if d.get("kind") in ("RoleBinding", "ClusterRoleBinding") and any(
                s.get("kind") == "ServiceAccount" and (s.get("namespace"), s.get("name")) == argo_server
                for s in d.get("subjects") or []):
            error(f"{label} {ident(d)}", f"binds argo-server's account {'/'.join(argo_server)}, "
                                         "which never calls argo-results")
    argo_peers_check(label, docs, flavour)


def argo_peers_check(label, docs, flavour):
    """The NetworkPolicy admits Argo's controller to the API: a peer in Argo's namespace
    whose pod selector the controller's pods match. No peer selects argo-server's pods by
    their labels."""
    policies = [d for d in docs if d.get("kind") == "NetworkPolicy" and d["metadata"].get("name") == "argo-results"]
    for policy in policies:
        peers = [peer for rule in policy["spec"].get("ingress") or []
                 if any(p.get("port") == "https" for p in rule.get("ports") or [])
                 for peer in rule.get("from") or []]
        for who, pod in flavour["pods"].items():
            namespace = flavour["accounts"][who][0]
            if not any(((peer.get("namespaceSelector") or {}).get("matchLabels") or {})
                       == {"kubernetes.io/metadata.name": namespace}
                       and (peer.get("podSelector") or {}).get("matchLabels")
                       and not (peer["podSelector"].get("matchExpressions"))
                       and selector_matches(peer["podSelector"]["matchLabels"], pod) for peer in peers):
                error(f"{label} {ident(policy)}", f"no https peer admits the {who}'s pods ({flavour['name']}: "
                                                  f"namespace {namespace}, labels {pod})")
        unused = flavour["argo-server"]["pods"]
        for peer in peers:
            selector = peer.get("podSelector") or {}
            if selector.get("matchLabels") and not selector.get("matchExpressions") \
                    and selector_matches(selector["matchLabels"], unused):
                error(f"{label} {ident(policy)}", f"an https peer admits argo-server's pods (labels {unused}), "
                                                  "which never call argo-results")


def namespace_only_check(label, docs):
    """Objects in the namespace only: kustomize leaves the namespace off the kinds it knows
    to be cluster-scoped."""
    for d in docs:
        if d.get("kind") in CLUSTER_SCOPED or not d["metadata"].get("namespace"):
            error(f"{label} {ident(d)}", "is cluster-scoped (or has no namespace); this variant may create "
                                         "objects in its namespace only")


def monitoring_kinds_check(label, docs):
    kinds = sorted((d.get("apiVersion"), d.get("kind")) for d in docs)
    want = [("monitoring.coreos.com/v1", "PrometheusRule"), ("monitoring.coreos.com/v1", "ServiceMonitor")]
    if kinds != want:
        error(label, f"holds {kinds}, not one ServiceMonitor and one PrometheusRule")


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "PriorityClass", "Namespace", "CustomResourceDefinition",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding", "APIService", "StorageClass", "PersistentVolume",
                  "IngressClass", "RuntimeClass"}
# The flags in which deploy/overlays/namespace-only may differ from deploy/base.
NAMESPACE_ONLY_FLAGS = {"ARGO_RESULTS_RBAC", "ARGO_RESULTS_READER", "ARGO_RESULTS_CONTROLLER"}


def rule_grants(rules):
    """{(group, resource): set of verbs} of a role's rules that reach task results."""
    grants = {}
    for rule in rules or []:
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                if (group in (TASK_RESULTS[0], "*")) and (resource in (TASK_RESULTS[1], "*")):
                    grants.setdefault((group, resource), set()).update(rule.get("verbs") or [])
    return grants


def load_rbac_rules():
    try:
        printed = json.load(open(rbac_rules_path))
        wanted = {item["metadata"]["name"]: item for item in printed["items"]
                  if item.get("kind") == "ClusterRole"}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"validate-deploy: cannot read the --print-rbac-rules output: {e!r}")
    if not wanted:
        raise SystemExit("validate-deploy: --print-rbac-rules printed no ClusterRole")
    return wanted


RBAC_RULES = load_rbac_rules()


def rbac_check(label, docs):
    """The printed ClusterRoles, each exactly, and no other grant on task results."""
    rendered_roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    for name, want in sorted(RBAC_RULES.items()):
        where = f"{label} ClusterRole/{name}"
        have = rendered_roles.get(name)
        if have is None:
            error(where, "missing: argo-results-server --print-rbac-rules prints it")
            continue
        want_rules, have_rules = rule_grants(want.get("rules")), rule_grants(have.get("rules"))
        for key in sorted(set(want_rules) | set(have_rules)):
            missing = sorted(want_rules.get(key, set()) - have_rules.get(key, set()))
            extra = sorted(have_rules.get(key, set()) - want_rules.get(key, set()))
            if missing:
                error(where, f"{'/'.join(key)}: lacks {', '.join(missing)}, which --rbac asks for")
            if extra:
                error(where, f"{'/'.join(key)}: grants {', '.join(extra)}, which --rbac never asks for")
        others = [r for r in have.get("rules") or [] if not rule_grants([r])]
        if others:
            error(where, f"rules beyond {'/'.join(TASK_RESULTS)}: {others}")
    for d in docs:
        if d.get("kind") in ("Role", "ClusterRole") and d["metadata"]["name"] not in RBAC_RULES \
                and rule_grants(d.get("rules")):
            error(f"{label} {ident(d)}", "grants verbs on workflowtaskresults outside the printed table")


def leaves_other_pods_alone(label, docs):
    """Nothing here may change pods that are not ours. A default podSpecPatch naming `wait`
    added a container without an image to every pod that has none (agent pods, data and
    resource templates, v4's init-less supervisor layout), which the API server refuses."""
    def patches(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "podSpecPatch" or (isinstance(value, str) and "podSpecPatch" in value):
                    yield f"{path}.{key}".lstrip(".")
                yield from patches(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from patches(value, f"{path}[{i}]")

    for d in docs:
        where = f"{label} {ident(d)}"
        if d.get("kind") == "ConfigMap" and d["metadata"].get("name") == "workflow-controller-configmap":
            error(where, "Argo's controller ConfigMap is Argo's: deploy/ must not ship it")
        if d.get("kind") in ("MutatingWebhookConfiguration", "MutatingAdmissionPolicy",
                             "MutatingAdmissionPolicyBinding"):
            error(where, "deploy/ must not mutate other workloads' pods")
        for path in patches(d, ""):
            error(where, f"{path}: a pod spec patch can add containers to Argo's pods")


# --- deploy/argo: the components over stand-ins of Argo's install ---------------------------
# Argo's roles and the printed ClusterRole whose rules each gains (argo-workflows v4.1.2:
# manifests/cluster-install-no-crds/workflow-controller-rbac/workflow-controller-clusterrole.yaml
# and manifests/namespace-install/workflow-controller-rbac/workflow-controller-role.yaml,
# :2-4 each). Written out here, not read from deploy/argo, so that a wrong role in the
# generator or the components cannot check itself. argo-server's roles are not here: they
# gain nothing (argo-server never calls argo-results), so they must come out of the
# components as they went in, as every other object of the stand-ins.
ARGO_TESTDATA = "deploy/argo/testdata/"
ARGO_ROLES = {
    "cluster-install": {("ClusterRole", "argo-cluster-role"): "argo-results-controller"},
    "namespace-install": {("Role", "argo-role"): "argo-results-controller"},
}
# manifests/base/workflow-controller/workflow-controller-deployment.yaml :4 and :17.
ARGO_CONTROLLER = ("Deployment", "workflow-controller", "workflow-controller")
ARGO_RESULTS_MOUNT = "/var/run/secrets/argo-results"  # docs/argo-upstream.md, "One setting"
ARGO_RESULTS_AUDIENCE = "argo-results"
MIN_TOKEN_SECONDS = 600  # ServiceAccountTokenProjection.expirationSeconds: "at least 10 minutes"


def argo_install(label):
    return label.rstrip("/").rsplit("/", 1)[-1]


def argo_grants_check(label, docs):
    """In the Argo renders only Argo's roles may grant on workflowtaskresults (they do, on
    purpose); the printed ClusterRoles belong to deploy/base and are not here."""
    allowed = ARGO_ROLES[argo_install(label)]
    for d in docs:
        if d.get("kind") in ("Role", "ClusterRole") and (d["kind"], d["metadata"]["name"]) not in allowed \
                and rule_grants(d.get("rules")):
            error(f"{label} {ident(d)}", "grants verbs on workflowtaskresults; only Argo's "
                                         f"{', '.join('/'.join(k) for k in allowed)} may here")


def canonical_rules(rules):
    return sorted(json.dumps({k: sorted(v) if isinstance(v, list) else v for k, v in r.items()},
                             sort_keys=True) for r in rules or [])


def argo_role_check(where, plain, patched, printed):
    """Argo's rules unchanged and first; after them exactly the printed ClusterRole's."""
    base, have = plain.get("rules") or [], patched.get("rules") or []
    if have[:len(base)] != base:
        error(where, "Argo's own rules changed; the component may only append")
        return
    gained, want = have[len(base):], RBAC_RULES[printed].get("rules") or []
    want_grants, have_grants = rule_grants(want), rule_grants(gained)
    before = len(errors)
    for key in sorted(set(want_grants) | set(have_grants)):
        missing = sorted(want_grants.get(key, set()) - have_grants.get(key, set()))
        extra = sorted(have_grants.get(key, set()) - want_grants.get(key, set()))
        if missing:
            error(where, f"gains no {', '.join(missing)} on {'/'.join(key)}, which --print-rbac-rules "
                         f"gives {printed}")
        if extra:
            error(where, f"gains {', '.join(extra)} on {'/'.join(key)}, which --print-rbac-rules "
                         f"does not give {printed}")
    if len(errors) == before and canonical_rules(gained) != canonical_rules(want):
        error(where, f"gains the rules {gained}, not exactly {printed}'s {want} of --print-rbac-rules")


def argo_controller_check(where, plain, patched):
    """The token (audience argo-results) and the CA, read-only at the path the docs name, in
    Argo's controller container; the Deployment otherwise as Argo ships it."""
    _, _, container_name = ARGO_CONTROLLER
    pod = patched["spec"]["template"]["spec"]
    container = next((c for c in pod.get("containers") or [] if c.get("name") == container_name), None)
    if container is None:
        error(where, f"no container {container_name}")
        return
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("mountPath") == ARGO_RESULTS_MOUNT]
    if len(mounts) != 1:
        error(where, f"container {container_name} mounts nothing at {ARGO_RESULTS_MOUNT}")
        return
    mount = mounts[0]
    if mount.get("readOnly") is not True:
        error(where, f"{ARGO_RESULTS_MOUNT} is not mounted read-only")
    if mount.get("subPath") or mount.get("subPathExpr"):
        error(where, f"{ARGO_RESULTS_MOUNT} uses a subPath, which the kubelet never updates: the token would expire")
    volume = next((v for v in pod.get("volumes") or [] if v.get("name") == mount.get("name")), None)
    sources = ((volume or {}).get("projected") or {}).get("sources") or []
    tokens = [x["serviceAccountToken"] for x in sources if "serviceAccountToken" in x]
    if len(tokens) != 1 or tokens[0].get("audience") != ARGO_RESULTS_AUDIENCE or tokens[0].get("path") != "token":
        error(where, f"volume {mount.get('name')!r} is not one projected token for audience "
                     f"{ARGO_RESULTS_AUDIENCE} at path token: {tokens}")
    else:
        seconds = tokens[0].get("expirationSeconds", 3600)
        if not isinstance(seconds, int) or seconds < MIN_TOKEN_SECONDS:
            error(where, f"expirationSeconds {seconds!r}: Kubernetes' minimum is {MIN_TOKEN_SECONDS}")
    cas = [x["configMap"] for x in sources if "configMap" in x]
    if cas != [{"name": "argo-results-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}], "optional": True}]:
        error(where, f"volume {mount.get('name')!r} does not project ConfigMap argo-results-ca "
                     f"(ca.crt, optional) besides the token: {cas}")
    # Without that volume and mount, the Deployment must be the stand-in's.
    stripped = copy.deepcopy(patched)
    spec = stripped["spec"]["template"]["spec"]
    spec["volumes"] = [v for v in spec.get("volumes") or [] if v.get("name") != mount.get("name")]
    for c in spec.get("containers") or []:
        if c.get("name") == container_name:
            c["volumeMounts"] = [m for m in c.get("volumeMounts") or [] if m.get("mountPath") != ARGO_RESULTS_MOUNT]
    for node in [spec] + list(spec.get("containers") or []):
        for key in ("volumes", "volumeMounts"):
            if key in node and not node[key]:
                del node[key]
    if stripped != plain:
        error(where, "changed beyond the argo-results volume and its mount")


def argo_components_check(install, plain_docs, patched_docs):
    """What the components change over the stand-ins: Argo's controller role and the
    controller's Deployment, each as checked above; every other object (argo-server's role
    too) comes out as it went in."""
    label = f"{ARGO_TESTDATA}{install}"

    def by_id(docs):
        return {(d.get("apiVersion"), d.get("kind"), d["metadata"].get("namespace"), d["metadata"].get("name")): d
                for d in docs}

    plain, patched = by_id(plain_docs), by_id(patched_docs)
    for key in sorted(set(plain) ^ set(patched), key=str):
        error(label, f"{key[1]}/{key[3]} is {'added' if key in patched else 'removed'} by the components")
    found_roles, found_controller = set(), False
    for key in sorted(set(plain) & set(patched), key=str):
        kind, name = key[1], key[3]
        where = f"{label} {kind}/{name}"
        if (kind, name) in ARGO_ROLES[install]:
            found_roles.add((kind, name))
            argo_role_check(where, plain[key], patched[key], ARGO_ROLES[install][(kind, name)])
        elif (kind, name) == ARGO_CONTROLLER[:2]:
            found_controller = True
            argo_controller_check(where, plain[key], patched[key])
        elif plain[key] != patched[key]:
            error(where, "changed by the components, which may change only Argo's "
                         f"{', '.join('/'.join(k) for k in ARGO_ROLES[install])} and "
                         f"{'/'.join(ARGO_CONTROLLER[:2])}")
    for kind, name in sorted(set(ARGO_ROLES[install]) - found_roles):
        error(label, f"{kind}/{name} is not in the stand-in of Argo's {install}")
    if not found_controller:
        error(label, f"{'/'.join(ARGO_CONTROLLER[:2])} is not in the stand-in of Argo's {install}")


# --- the rendered manifests ---------------------------------------------------------------
summaries = []
all_docs = {}  # label -> documents, for the deploy/argo comparison
for item in rendered:
    label, path = item.split("=", 1)
    before = len(errors)
    try:
        docs = [d for d in yaml.safe_load_all(open(path)) if d]
    except yaml.YAMLError as e:
        error(label, f"rendered YAML does not parse: {e}")
        continue
    by_schema, explicit = 0, []
    for doc in docs:
        if not isinstance(doc, dict) or not {"apiVersion", "kind"} <= set(doc) \
                or not isinstance(doc.get("metadata"), dict):
            error(label, "a document without apiVersion, kind and metadata")
            continue
        where = f"{label} {ident(doc)}"
        check = EXPLICIT.get((doc["apiVersion"], doc["kind"]))
        if check is not None:
            try:
                if check(where, doc):
                    explicit.append(ident(doc))
            except Exception as e:
                error(where, f"explicit check could not read it: {e!r}")
            continue
        if schema_check(where, doc):
            by_schema += 1
    argo_render = label.startswith(ARGO_TESTDATA)
    guarded(label, leaves_other_pods_alone, label, docs)
    how_rbac = None
    if argo_render:
        guarded(label, argo_grants_check, label, docs)
        how_rbac = "only Argo's roles grant on workflowtaskresults"
    elif label == MONITORING_RENDER:
        guarded(label, monitoring_kinds_check, label, docs)
    else:
        if label == NAMESPACE_ONLY_RENDER:
            guarded(label, namespace_only_check, label, docs)
        guarded(label, server_rbac_check, label, docs)
        flavour = argo_flavour(label)["name"]
        if flag_on(server_flags(docs) or {}, "ARGO_RESULTS_RBAC"):
            how_rbac = (f"RBAC equal to --print-rbac-rules ({', '.join(sorted(RBAC_RULES))}), the controller's "
                        f"bound to {flavour}, the others to nobody")
        else:
            how_rbac = f"no --rbac, and no role grants on workflowtaskresults; --controller names {flavour}"
        how_rbac += "; argo-server granted and admitted nothing"
        if label == NAMESPACE_ONLY_RENDER:
            how_rbac += "; nothing cluster-scoped"
    if len(errors) == before:
        guarded(label, reference_checks, label, docs)
    if len(errors) == before:
        how = [f"{by_schema} against the Kubernetes {k8s_version} schemas (strict)"]
        if explicit:
            how.append(f"{len(explicit)} by explicit checks ({', '.join(explicit)})")
        if how_rbac:
            how.append(how_rbac)
        summaries.append(f"{label}: {len(docs)} documents valid: {'; '.join(how)}")
        if CNPG_NOTES.get(label):
            summaries.append(f"{label}: {'; '.join(CNPG_NOTES[label])}")
    all_docs[label] = docs

# Each install's render with the components against its stand-in alone.
before = len(errors)
for install in sorted(ARGO_ROLES):
    plain_label, patched_label = f"{ARGO_TESTDATA}argo/{install}", f"{ARGO_TESTDATA}{install}"
    if plain_label not in all_docs or patched_label not in all_docs:
        error(patched_label, "not rendered (or did not parse), so the components were not checked")
        continue
    guarded(patched_label, argo_components_check, install, all_docs[plain_label], all_docs[patched_label])
if len(errors) == before:
    summaries.append(f"deploy/argo: Argo's {sum(len(r) for r in ARGO_ROLES.values())} controller roles gain "
                     f"exactly the rules of --print-rbac-rules, argo-server's nothing; the controller mounts "
                     f"a token for audience {ARGO_RESULTS_AUDIENCE} at {ARGO_RESULTS_MOUNT}")


# --- across renders: the namespace-only flags, argo-helm's files, the ServiceMonitor -------
SERVER_RENDERS = [label for label in all_docs if not label.startswith(ARGO_TESTDATA) and label != MONITORING_RENDER]


def namespace_only_flags_check(base_docs, docs):
    base, mine = server_flags(base_docs) or {}, server_flags(docs) or {}
    for key in sorted((set(base) | set(mine)) - NAMESPACE_ONLY_FLAGS):
        if base.get(key) != mine.get(key):
            error(NAMESPACE_ONLY_RENDER, f"{key} is {mine.get(key)!r} here but {base.get(key)!r} in deploy/base; "
                                         f"only {', '.join(sorted(NAMESPACE_ONLY_FLAGS))} may differ")


def argo_helm_files_check():
    """release.yaml's fullname makes names argo-helm makes; argo-workflows-values.yaml mounts
    what deploy/argo/controller mounts."""
    where = f"{ARGO_HELM_RENDER}/release.yaml"
    fullname = argo_helm_fullname()
    if not (isinstance(fullname, str) and DNS_LABEL.match(fullname)):
        error(where, f"data.fullname {fullname!r} is not a DNS label")
    elif len(f"{fullname}-workflow-controller") > 63:
        error(where, f"argo-helm cuts {fullname}-workflow-controller at 63 characters "
                     f"(_helpers.tpl, argo-workflows.controller.fullname); write the names it made instead")
    where = f"{ARGO_HELM_RENDER}/argo-workflows-values.yaml"
    values = yaml.safe_load(open(os.path.join(deploy_dir, "overlays", "argo-helm", "argo-workflows-values.yaml")))
    patch = yaml.safe_load(open(os.path.join(deploy_dir, "argo", "controller", "workflow-controller.yaml")))
    pod = patch["spec"]["template"]["spec"]
    controller = (values or {}).get("controller") or {}
    if set(values or {}) != {"controller"} or set(controller) != {"volumes", "volumeMounts"}:
        error(where, "sets more than controller.volumes and controller.volumeMounts")
    if controller.get("volumes") != pod.get("volumes"):
        error(where, "controller.volumes are not the volumes of deploy/argo/controller/workflow-controller.yaml")
    if controller.get("volumeMounts") != pod["containers"][0].get("volumeMounts"):
        error(where, "controller.volumeMounts are not the mounts of deploy/argo/controller/workflow-controller.yaml")


def service_monitor_targets_check(where, monitor, label, docs):
    """In the render `label`, the ServiceMonitor selects one Service, whose port it scrapes
    reaches the container port of the server's metrics listener, which the NetworkPolicy
    admits."""
    namespace = monitor["metadata"].get("namespace")
    wanted = monitor["spec"]["selector"]["matchLabels"]
    services = [d for d in docs if d.get("kind") == "Service" and d["metadata"].get("namespace") == namespace
                and selector_matches(wanted, d["metadata"].get("labels") or {})]
    if len(services) != 1:
        error(where, f"selects {len(services)} Services of {label} in namespace {namespace}, not one")
        return
    service = services[0]
    # ArgoResultsDown reads up{job="argo-results"}: the Service's jobLabel label is the job.
    job_label = monitor["spec"].get("jobLabel")
    job = (service["metadata"].get("labels") or {}).get(job_label)
    if job != "argo-results":
        error(where, f"jobLabel {job_label!r} gives Service {service['metadata']['name']} of {label} the job "
                     f"{job!r}, not argo-results (ArgoResultsDown's up{{job=\"argo-results\"}})")
    listen = (server_flags(docs) or {}).get("ARGO_RESULTS_METRICS_LISTEN")
    templates = [d["spec"]["template"] for d in docs if d.get("kind") == "Deployment"
                 and d["metadata"].get("namespace") == namespace
                 and selector_matches(service["spec"].get("selector"),
                                      (d["spec"]["template"].get("metadata") or {}).get("labels") or {})]
    policies = [d for d in docs if d.get("kind") == "NetworkPolicy" and d["metadata"].get("namespace") == namespace]
    for endpoint in monitor["spec"]["endpoints"]:
        port = next((p for p in service["spec"].get("ports") or [] if p.get("name") == endpoint["port"]), None)
        if port is None:
            error(where, f"scrapes port {endpoint['port']!r}, which Service {service['metadata']['name']} of "
                         f"{label} does not name")
            continue
        target = port.get("targetPort", port.get("port"))
        reached = {(cp.get("name"), cp.get("containerPort")) for t in templates for c in t["spec"]["containers"]
                   for cp in c.get("ports") or [] if target in (cp.get("name"), cp.get("containerPort"))}
        numbers = {number for _, number in reached}
        if not listen or numbers != {port_of(listen)}:
            error(where, f"port {endpoint['port']} of {label} reaches container port(s) {sorted(numbers)}, not "
                         f"the metrics listener ARGO_RESULTS_METRICS_LISTEN={listen}")
        if endpoint.get("path", "/metrics") != "/metrics":
            error(where, f"scrapes {endpoint.get('path')}, not /metrics")
        admitted = {p.get("port") for policy in policies for rule in policy["spec"].get("ingress") or []
                    for p in rule.get("ports") or []}
        if policies and not admitted & ({name for name, _ in reached} | numbers):
            error(where, f"port {endpoint['port']} of {label}: no NetworkPolicy rule admits the scrape")


def promtool_check():
    """promtool check rules on the rendered rule groups, then the unit tests of
    deploy/monitoring/tests against them; every alert must fire in a test and stay silent in
    another."""
    if len(PROMETHEUS_RULES) != 1:
        error(MONITORING_RENDER, f"{len(PROMETHEUS_RULES)} PrometheusRules passed their explicit check, not one")
        return None
    where, doc = PROMETHEUS_RULES[0]
    out = os.path.join(work, "promtool")
    os.makedirs(out, exist_ok=True)
    groups = doc["spec"]["groups"]
    with open(os.path.join(out, "rules.yaml"), "w") as f:
        yaml.safe_dump({"groups": groups}, f, sort_keys=False)
    check = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=out, capture_output=True, text=True)
    if check.returncode != 0:
        error(where, f"promtool check rules failed:\n{check.stdout}{check.stderr}")
        return None
    alerts = {rule["alert"] for group in groups for rule in group["rules"]}
    tests = sorted(glob.glob(os.path.join(deploy_dir, "monitoring", "tests", "*.yaml")))
    if not tests:
        error(f"{MONITORING_RENDER}/tests", "no unit tests of the alerts (*.yaml)")
        return None
    fired, silent, cases = set(), set(), 0
    for test in tests:
        rel = f"{MONITORING_RENDER}/tests/{os.path.basename(test)}"
        spec = yaml.safe_load(open(test)) or {}
        if spec.get("rule_files") != ["rules.yaml"]:
            error(rel, "rule_files must be [rules.yaml]: the groups this script extracts from the PrometheusRule")
        for case in spec.get("tests") or []:
            cases += 1
            for expected in case.get("alert_rule_test") or []:
                name = expected.get("alertname")
                if name not in alerts:
                    error(rel, f"tests alert {name!r}, which the PrometheusRule does not have")
                (fired if expected.get("exp_alerts") else silent).add(name)
        shutil.copyfile(test, os.path.join(out, os.path.basename(test)))
    for name in sorted(alerts - fired):
        error(f"{MONITORING_RENDER}/tests", f"no test in which {name} fires")
    for name in sorted(alerts - silent):
        error(f"{MONITORING_RENDER}/tests", f"no test in which {name} stays silent")
    run = subprocess.run([promtool, "test", "rules", *[os.path.basename(t) for t in tests]], cwd=out,
                         capture_output=True, text=True)
    if run.returncode != 0:
        error(where, f"promtool test rules failed:\n{run.stdout}{run.stderr}")
        return None
    said = lambda run: " ".join(line.strip() for line in run.stdout.splitlines() if "SUCCESS" in line)
    files = f"{len(tests)} file{'s' if len(tests) != 1 else ''}"
    return (f"{MONITORING_RENDER}: promtool check rules: {said(check)}; promtool test rules: {said(run)} "
            f"({cases} tests in {files}); each of the {len(alerts)} alerts fires in a test and stays silent "
            f"in another")


before = len(errors)
if NAMESPACE_ONLY_RENDER in all_docs and "deploy/base" in all_docs:
    guarded(NAMESPACE_ONLY_RENDER, namespace_only_flags_check, all_docs["deploy/base"], all_docs[NAMESPACE_ONLY_RENDER])
    if len(errors) == before:
        summaries.append(f"{NAMESPACE_ONLY_RENDER}: its flags are deploy/base's but for "
                         f"{', '.join(sorted(NAMESPACE_ONLY_FLAGS))}")
before = len(errors)
if ARGO_HELM_RENDER in all_docs:
    guarded(ARGO_HELM_RENDER, argo_helm_files_check)
    if len(errors) == before:
        summaries.append(f"{ARGO_HELM_RENDER}: fullname {argo_helm_fullname()}; argo-workflows-values.yaml mounts "
                         f"what deploy/argo/controller mounts")
before = len(errors)
monitors = [(f"{MONITORING_RENDER} {ident(d)}", d) for d in all_docs.get(MONITORING_RENDER, [])
            if d.get("kind") == "ServiceMonitor"]
for monitor_where, monitor in monitors:
    for server_label in SERVER_RENDERS:
        guarded(monitor_where, service_monitor_targets_check, monitor_where, monitor, server_label,
                all_docs[server_label])
if monitors and len(errors) == before:
    summaries.append(f"{MONITORING_RENDER}: the ServiceMonitor scrapes the metrics listener through the Service "
                     f"of each of the {len(SERVER_RENDERS)} server renders, as job argo-results, and their "
                     f"NetworkPolicy admits it")
try:
    promtool_summary = promtool_check()
except Exception as e:
    promtool_summary = None
    error(MONITORING_RENDER, f"promtool could not be run: {e!r}")
if promtool_summary:
    summaries.append(promtool_summary)


# --- the Grafana dashboard ----------------------------------------------------------------
# The ServiceMonitor's target labels that the dashboard's variables select, and the filter
# every selector of a metric must carry.
DASHBOARD_FILTERS = {"namespace": 'namespace=~"$namespace"', "pod": 'pod=~"$pod"'}


def dashboard_check():
    where = os.path.relpath(dashboard_path)
    try:
        text = open(dashboard_path).read()
        dashboard = json.loads(text)
    except (OSError, json.JSONDecodeError) as e:
        error(where, f"not valid JSON: {e}")
        return None
    metrics = METRICS
    variables = (dashboard.get("templating") or {}).get("list") or []
    if not any(v.get("name") == "datasource" and v.get("type") == "datasource" and v.get("query") == "prometheus"
               for v in variables):
        error(where, "no `datasource` variable of type datasource for prometheus")
    for name in DASHBOARD_FILTERS:
        variable = next((v for v in variables if v.get("name") == name), {})
        query = variable.get("query")
        query = query.get("query", "") if isinstance(query, dict) else str(query or "")
        if variable.get("type") != "query" or (variable.get("datasource") or {}).get("uid") != "${datasource}" \
                or not re.search(rf"^label_values\(\s*argo_results_\w+[^,]*,\s*{name}\s*\)$", query):
            error(where, f"no `{name}` variable of type query on ${{datasource}} with label_values(argo_results_..., "
                         f"{name}) (the ServiceMonitor's {name} label)")
    # Queries must name series (a counter's _total, a histogram's _bucket/_sum/_count, a
    # gauge as is); descriptions may also name a metric family.
    exprs = "\n".join(t.get("expr") or "" for p in dashboard.get("panels") or [] for t in p.get("targets") or [])
    used = set()
    for name in sorted(set(re.findall(r"\bargo_results_[a-z_]+\b", text))):
        found = resolve(name, metrics)
        if found is not None:
            used.add(found[0])
        elif name in metrics and not re.search(rf"\b{name}\b", exprs):
            pass
        else:
            error(where, f"{name} is no series of server/src/metrics/mod.rs (it has: {', '.join(series_names(metrics))})")
    expressions = 0
    for panel in dashboard.get("panels") or []:
        if panel.get("type") == "row":
            continue
        title = panel.get("title")
        if (panel.get("datasource") or {}).get("uid") != "${datasource}":
            error(where, f"panel {title!r} does not use the ${{datasource}} variable")
        for target in panel.get("targets") or []:
            expr = target.get("expr") or ""
            if not expr:
                error(where, f"panel {title!r} has a target without expr")
                continue
            expressions += 1
            for problem in expr_problems(expr, metrics):
                if "no series" not in problem:  # reported above, once
                    error(where, f"panel {title!r}: {problem}")
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat") or ""))
            for bad in sorted(legend - allowed_labels(expr, metrics)):
                error(where, f"panel {title!r}: label {bad!r} is not a label of the metrics in `{expr}`")
            for m in re.finditer(r"\b(argo_results_[a-z_]+)\b(\{[^}]*\})?", expr):
                missing = [f for f in DASHBOARD_FILTERS.values() if f not in (m.group(2) or "")]
                if missing:
                    error(where, f"panel {title!r}: {m.group(1)} is not filtered by {', '.join(missing)}")
    used &= {n for n in metrics if re.search(rf"\b{n}(_total|_bucket|_sum|_count)?\b", exprs)}
    return (f"{where}: valid JSON, {expressions} queries over {len(used)} metrics, all registered in "
            f"server/src/metrics/mod.rs and filtered by the $namespace and $pod variables")


try:
    dashboard_summary = dashboard_check()
except SystemExit:
    raise
except Exception as e:
    dashboard_summary = None
    error(os.path.relpath(dashboard_path), f"could not be checked: {e!r}")

for line in summaries:
    print(line)
if dashboard_summary and not any(e.startswith(os.path.relpath(dashboard_path)) for e in errors):
    print(dashboard_summary)
if errors:
    print(f"\n{len(errors)} problem(s):", file=sys.stderr)
    for e in errors:
        print(f"  {e}", file=sys.stderr)
    sys.exit(1)
