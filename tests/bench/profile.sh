#!/usr/bin/env bash
# Where the server's CPU goes while it ingests reports: run.sh's first phase (loadgen,
# final reports, a new pod token each) against a release build that keeps its symbols,
# sampled by `perf record` (the cpu-clock event, which virtual machines without hardware
# counters also have).
#
#   bash tests/bench/profile.sh
#   FRESH=1 CONCURRENCY=1 bash tests/bench/profile.sh   # lone pods as deployed
#
# Prints the 40 hottest symbols of the server process, then the shares of a few families
# of them (RSA, TLS-free HTTP, JSON, Postgres protocol, allocation, kernel). The build goes
# to target/profiling, so it leaves the release build of run.sh alone. Needs perf (Debian's
# linux-perf, installed when missing) and what run.sh needs. Knobs: CONCURRENCY (64),
# DURATION (15 s), FRESH (1: each pod on a fresh TLS 1.3 connection to an ECDSA P-256
# certificate, as run.sh's per-pod phases; default: keep-alive plain HTTP), PGPORT, PGUSER.
set -euo pipefail
source "$(dirname "$0")/common.sh"

duration=${DURATION:-15}
service_db=argo_results_profile
port=18490
profiling=target/profiling

command -v perf >/dev/null || {
  say "installing Debian's linux-perf"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q linux-perf >/dev/null
}

work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null || true
  sql -d postgres -c "DROP DATABASE IF EXISTS $service_db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

say "release build with symbols ($profiling)"
CARGO_TARGET_DIR=$profiling CARGO_PROFILE_RELEASE_STRIP=false \
  CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
  cargo build --release --quiet -p argo-results-server --bin argo-results-server
build_loadgen
loadgen_bin=target/release/loadgen
"$loadgen_bin" keygen "$work/keys"
tls=()
url=http://127.0.0.1:$port
pods=()
if [[ ${FRESH:-} == 1 ]]; then
  "$loadgen_bin" certs "$work/certs"
  tls=(--tls-cert "$work/certs/ecdsa.crt" --tls-key "$work/certs/ecdsa.key")
  url=https://127.0.0.1:$port
  pods=(--fresh --ca "$work/certs/ca.pem")
fi

fresh_db "$service_db"
quiesce
"$profiling/release/argo-results-server" \
  --database-url "postgres://$pguser@$pghost:$pgport/$service_db" \
  --listen "127.0.0.1:$port" --jwks-file "$work/keys/jwks.json" \
  --issuer https://kubernetes.default.svc.cluster.local --require-expectation=false \
  "${tls[@]}" --log-format json >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/server.out" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$work/server.out" || { cat "$work/server.log" >&2; exit 1; }

# loadgen mints its tokens first; perf starts when the closed loop has begun, and stops
# before it ends.
say "loadgen: $concurrency in flight, $((duration + 6)) s; perf samples the server for ${duration} s"
"$loadgen_bin" run --url "$url" "${pods[@]}" --key "$work/keys/signing-key.pem" \
  --concurrency "$concurrency" --duration "$((duration + 6))" --warmup 3 --run-id profile \
  >"$work/loadgen.json" 2>"$work/loadgen.log" &
loadgen_pid=$!
until grep -q "minted" "$work/loadgen.log" 2>/dev/null; do
  kill -0 "$loadgen_pid" 2>/dev/null || { cat "$work/loadgen.log" >&2; exit 1; }
  sleep 0.5
done
sleep 4
perf record -q -e cpu-clock -F 1999 -p "$server_pid" -o "$work/perf.data" -- sleep "$duration" \
  2>/dev/null
wait "$loadgen_pid"

report() {
  perf report -i "$work/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
    grep -E '^ +[0-9.]+%'
}
say "the 40 hottest symbols of the server"
report | awk 'NR <= 40'
say "families of symbols (share of the server's samples)"
report | awk '
  { share = $1; sub(/%/, "", share); name = $0 }
  name ~ /\[k\]/ { fam["kernel (syscalls, network, scheduling)"] += share; next }
  name ~ /rsa|bn_|BN_|bignum|mont|sha256|SHA256|aws_lc|ecp_nistz/ { fam["RSA and SHA-256 (aws-lc)"] += share; next }
  name ~ /mi_|malloc|free|realloc|memcpy|memmove|memset/ { fam["allocation and copying"] += share; next }
  name ~ /serde_json|serde::|RawValue|format_escaped/ { fam["JSON"] += share; next }
  name ~ /sqlx|postgres|PgConnection|PgRow/ { fam["sqlx and the Postgres protocol"] += share; next }
  name ~ /hyper|h2::|httparse|axum|tower/ { fam["HTTP (hyper, axum, tower)"] += share; next }
  name ~ /tokio|mio|parking_lot/ { fam["tokio runtime"] += share; next }
  { fam["other"] += share }
  END { for (f in fam) printf "%6.1f%%  %s\n", fam[f], f }' | sort -rn
say "loadgen: $(cat "$work/loadgen.json")"
