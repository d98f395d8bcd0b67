"""The floors' table and JSON line, from what tests/bench/floors.sh measured.

    python3 tests/bench/floors_report.py HTTP_RPS RSA_VERIFIES WRITER_TPS WRITER_NOFEED_TPS ROWS

HTTP_RPS: wrk's requests/s on /healthz. RSA_VERIFIES: `openssl speed rsa2048`'s
verifications/s. WRITER_TPS and WRITER_NOFEED_TPS: pgbench's transactions/s doing the
writer's work with and without the feed items. ROWS: results per transaction. Prints a
table, then as its last line one JSON object.
"""
import json, sys
http_rps, rsa, writer, nofeed = (float(a) for a in sys.argv[1:5])
rows = int(sys.argv[5])
us = lambda per_s, cores=1: 1e6 * cores / per_s
table = [
    ("HTTP stack: wrk on /healthz", f"{http_rps:,.0f} req/s", f"{us(http_rps, 2):.0f} µs of the 2 cores per request, server and client"),
    ("one RS256 check", f"{rsa:,.0f} /s", f"{us(rsa):.0f} µs"),
    ("Postgres: writer's work with the feed", f"{writer * rows:,.0f} results/s", f"{us(writer * rows):.0f} µs per result, serial ({writer:.0f} tps of {rows})"),
    ("Postgres: without the feed items", f"{nofeed * rows:,.0f} results/s", f"{us(nofeed * rows):.0f} µs per result, serial"),
]
print()
for name, value, note in table:
    print(f"{name:40} {value:>18}   {note}")
print()
print(json.dumps({
    "http_healthz_rps": round(http_rps, 1),
    "rs256_verify_us": round(us(rsa), 1),
    "writer_results_per_s": round(writer * rows, 1),
    "writer_us_per_result": round(us(writer * rows), 1),
    "writer_without_feed_results_per_s": round(nofeed * rows, 1),
}))
