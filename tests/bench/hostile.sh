#!/usr/bin/env bash
# The hostile cases (tests/tests/e2e/hostile.rs) run against a server binary of your
# choice, one case at a time, printing each case's figures: status codes, resident
# memory, the time an admin call took, requests that reached the fake Kubernetes API.
#
#   bash tests/bench/hostile.sh                                  # this tree, release build
#   bash tests/bench/hostile.sh /path/to/argo-results-server     # any other build
#
# To measure "before", build an older commit in a scratch clone and pass its binary: the
# cases assert on the new behaviour, so an older build fails them, but each prints its
# figures before it asserts. An older build that lacks --kube-api-qps or
# --max-connections-per-peer is run through a wrapper that leaves the flag out (it has no
# such limit at all).
# Postgres as for the tests.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

server=${1:-}
if [ -z "$server" ]; then
  say "release build"
  cargo build --release --quiet -p argo-results-server --bin argo-results-server || exit 1
  server=target/release/argo-results-server
fi
server=$(realpath "$server")
help=$("$server" --help)
if ! grep -q -- --kube-api-qps <<<"$help" || ! grep -q -- --max-connections-per-peer <<<"$help"; then
  wrapper=$(mktemp)
  trap 'rm -f "$wrapper"' EXIT
  cat >"$wrapper" <<WRAPPER
#!/usr/bin/env bash
args=()
while [ \$# -gt 0 ]; do
  case "\$1" in
    --kube-api-qps|--max-connections-per-peer) shift 2; continue ;;
  esac
  args+=("\$1"); shift
done
exec "$server" "\${args[@]}"
WRAPPER
  chmod +x "$wrapper"
  server=$wrapper
fi
say "test build"
cargo test --quiet -p argo-results-tests --test e2e --no-run 2>/dev/null || exit 1
say "hostile cases against $server"
ARGO_RESULTS_TEST_SERVER=$server cargo test --quiet -p argo-results-tests --test e2e \
  -- hostile:: --test-threads=1 --nocapture 2>&1 |
  grep -oE 'FIGURE.*|test result.*|^    hostile::.*'
