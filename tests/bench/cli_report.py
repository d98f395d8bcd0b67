#!/usr/bin/env python3
"""Times `argo-results report --final` from process start to exit (the answer comes only
after the commit), against a release server on loopback.

    cargo build --release -p argo-results-client -p argo-results-server
    python3 tests/bench/cli_report.py [sqlite|postgres] [runs]

Postgres is postgres://postgres@127.0.0.1:5432/test, in a schema of its own. Prints one
JSON line of percentiles in milliseconds, and the size of the client binary.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELEASE = os.path.join(ROOT, "target", "release")
CLIENT = os.path.join(RELEASE, "argo-results")
SERVER = os.path.join(RELEASE, "argo-results-server")
PORT = 18181


def start_server(backend, workdir):
    args = [SERVER]
    if backend == "postgres":
        schema = f"bench_{os.getpid()}"
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "test", "-qc",
                        f"CREATE SCHEMA {schema}"], check=True)
        args += ["--database-url",
                 f"postgres://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"]
    env = dict(os.environ, ARGO_RESULTS_LISTEN=f"127.0.0.1:{PORT}")
    server = subprocess.Popen(args, cwd=workdir, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    for line in server.stdout:
        if "listening on" in line:
            return server
    raise SystemExit("the server did not start")


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    workdir = tempfile.mkdtemp()
    server = start_server(backend, workdir)
    times = []
    try:
        for i in range(runs):
            pod = f"bench-main-{i}"
            token = subprocess.run([CLIENT, "token", "--namespace", "argo", "--pod-name", pod,
                                    "--pod-uid", f"uid-{i}"], cwd=workdir, check=True,
                                   capture_output=True, text=True).stdout.strip()
            token_file = os.path.join(workdir, "token")
            with open(token_file, "w") as f:
                f.write(token)
            env = {"ARGO_RESULTS_URL": f"http://127.0.0.1:{PORT}",
                   "ARGO_RESULTS_TOKEN_FILE": token_file, "ARGO_WORKFLOW_NAME": "bench",
                   "ARGO_WORKFLOW_UID": "uid", "ARGO_NODE_ID": f"bench-{i}",
                   "ARGO_POD_NAME": pod, "ARGO_POD_UID": f"uid-{i}"}
            start = time.perf_counter()
            done = subprocess.run([CLIENT, "report", "--final"], env=env, capture_output=True)
            times.append((time.perf_counter() - start) * 1000)
            if done.returncode != 0:
                raise SystemExit(done.stderr.decode())
    finally:
        server.terminate()
        server.wait()
    times.sort()
    print(json.dumps({
        "backend": backend,
        "runs": runs,
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(runs * 0.95)], 2),
        "max_ms": round(times[-1], 2),
        "client_binary_mib": round(os.path.getsize(CLIENT) / 2**20, 2),
    }))


if __name__ == "__main__":
    main()
