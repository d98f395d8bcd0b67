# What tests/bench/run.sh, scale.sh and floors.sh share: sourced, not run. From the repository's root:
# Postgres' address (PGPORT, PGUSER), the load's concurrency (CONCURRENCY), and helpers.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

concurrency=${CONCURRENCY:-64}
pghost=127.0.0.1
pgport=${PGPORT:-5432}
pguser=${PGUSER:-postgres}

say() { printf '==> [%3ds] %s\n' "$SECONDS" "$*" >&2; }
# psql on the benchmark's Postgres, stopping at the first error; give -d.
sql() { psql -X -q -h "$pghost" -p "$pgport" -U "$pguser" -v ON_ERROR_STOP=1 "$@"; }
# An empty database named $1, dropped first if it exists.
fresh_db() { sql -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null; }
# Each measurement starts with Postgres' dirty pages written out, so that none pays for
# the writes of the one before.
quiesce() { sql -d postgres -c CHECKPOINT >/dev/null; sync; sleep 2; }
build() {
  say "release build"
  cargo build --release --quiet -p argo-results-server -p argo-results-tests \
    --bin argo-results-server --bin loadgen --bin floor
}
build_loadgen() {
  say "release build of loadgen and floor"
  cargo build --release --quiet -p argo-results-tests --bin loadgen --bin floor
}
# One RS256 check (a 2048-bit RSA verification) as `openssl speed` measures it, in
# verifications per second: the verify/s column, wherever this OpenSSL puts it (3.2 added
# encrypt and decrypt). About 6 s, 12 with OpenSSL 3.2 and later.
rsa2048_verifies_per_s() {
  local rate
  rate=$(openssl speed -seconds 3 rsa2048 2>/dev/null | awk '
    !column { for (i = 1; i <= NF; i++) if ($i == "verify/s") column = i + 3 }
    /^rsa 2048 bits/ && column { print $column }')
  [[ -n $rate ]] || { echo "openssl speed printed no rate" >&2; return 1; }
  echo "$rate"
}
