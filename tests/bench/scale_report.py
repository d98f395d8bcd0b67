"""The scale benchmark's table and JSON line, from what tests/bench/scale.sh measured.

    python3 tests/bench/scale_report.py RESULTS EMPTY FULL LIST CATCH_UP SIZE PREFILL_S

RESULTS: results stored by the pre-fill. EMPTY and FULL: loadgen's JSON summaries of the
ingest on the empty database and with the results stored. LIST: `loadgen list`'s JSON.
CATCH_UP: `loadgen catch-up`'s JSON. SIZE: the database's size in bytes. PREFILL_S: the
pre-fill's seconds. Prints a table, then as its last line one JSON object.
"""
import json, sys
results = int(sys.argv[1])
empty, full, listing, catch_up = (json.loads(a) for a in sys.argv[2:6])
size, prefill_s = int(sys.argv[6]), sys.argv[7]
ratio = full["rps"] / empty["rps"]
mib_per_million = size / 2**20 / (results / 1e6)
print()
print(f"{'stored results':44} {results:>14,}   database {size / 2**30:.1f} GiB, pre-filled in {prefill_s} s")
print(f"{'  on disk per million results':44} {mib_per_million:>10,.0f} MiB   results, changes and their indexes")
print(f"{'ingest, empty database':44} {empty['rps']:>10,.0f} /s   p99 {empty['p99_ms']:.2f} ms, errors {empty['errors']}")
print(f"{'ingest, with the results stored':44} {full['rps']:>10,.0f} /s   p99 {full['p99_ms']:.2f} ms, errors {full['errors']}")
print(f"{'  ratio (target >= 0.90)':44} {ratio:>14.2f}")
print(f"{'list a 1,000-node workflow, p50':44} {listing['p50_ms']:>11.2f} ms   p99 {listing['p99_ms']:.2f} ms, {listing['items']} items")
print(f"{'feed catch-up':44} {catch_up['changes_per_s']:>10,.0f} /s   {catch_up['changes']:,} changes in {catch_up['seconds']:.1f} s")
print()
print(json.dumps({
    "stored_results": results,
    "ingest_empty_rps": round(empty["rps"], 1),
    "ingest_full_rps": round(full["rps"], 1),
    "ingest_ratio": round(ratio, 2),
    "database_bytes": size,
    "database_mib_per_million_results": round(mib_per_million),
    "list_1000_p50_ms": listing["p50_ms"],
    "list_1000_p99_ms": listing["p99_ms"],
    "catch_up_changes_per_s": round(catch_up["changes_per_s"], 1),
    "errors": empty["errors"] + full["errors"],
}))
