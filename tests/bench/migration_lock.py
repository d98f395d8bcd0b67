#!/usr/bin/env python3
"""The sessions of tests/bench/migration_lock.sh: a migration's statement in one psql
session, single-row writes in another, timed from here; prints one line per measurement.

    migration_lock.py measure LABEL WHAT ROWS (--sql SQL | --file F [--transaction])
                              [--writes results|claims] [--hold SECONDS] [--table T]
    migration_lock.py race LABEL TABLE INDEX COLUMNS (--waiter blocking|polling)

`measure`: a writer session writes one row (results: an INSERT of a new node and an
UPDATE of an existing one, in turn; claims: an INSERT as a release before leases writes
it) every 50 ms from 1 s before the statement starts until 1 s after it ends; the line
gives the statement's duration and the longest time one of these writes took: how long
writers were held up (`writes`: how many, `overlapping`: how many ran while it did). --hold opens a third session before the statement, whose
transaction has read the table, and commits it SECONDS after the statement started (a
long transaction the statement's lock queues behind).

`race`: two replicas starting together, as sqlx 0.8.6 runs migrations on Postgres: replica
A holds sqlx's advisory lock (`SELECT pg_advisory_lock(id)`, id from the database's name)
and runs a `-- no-transaction` migration, `CREATE INDEX CONCURRENTLY IF NOT EXISTS`;
replica B waits for the lock, blocking in `pg_advisory_lock` as sqlx does (`blocking`) or
polling `pg_try_advisory_lock` while idle (`polling`), then runs the same migration.

Standard library only; psql reads the connection from PGHOST, PGPORT, PGUSER, PGDATABASE.
"""

import argparse
import os
import subprocess
import sys
import threading
import time
import zlib

MARK = "__migration_lock_done__"


class Session:
    """One psql session kept open: statements in, their output (errors and notices
    included, in order) back. psql sends each statement of a script on its own."""

    def __init__(self, name):
        env = dict(os.environ, PGAPPNAME=f"migration_lock {name}")
        self.proc = subprocess.Popen(
            ["psql", "-X", "-q", "-At"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.sent = 0.0
        self.run("SELECT 1")

    def send(self, sql):
        self.sent = time.monotonic()
        self.proc.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + MARK + "\n")
        self.proc.stdin.flush()

    def wait(self):
        """Seconds since `send`, and the lines printed meanwhile."""
        lines = []
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if line == MARK:
                return time.monotonic() - self.sent, lines
            lines.append(line)
        raise RuntimeError("psql ended: " + " / ".join(lines[-5:]))

    def run(self, sql):
        self.send(sql)
        return self.wait()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def messages(lines, level):
    """The messages of `level` (ERROR, NOTICE) with their DETAIL, without psql's prefix."""
    found = []
    for i, line in enumerate(lines):
        at = line.find(level + ":")
        if at < 0:
            continue
        text = [" ".join(line[at:].split())]
        for more in lines[i + 1 : i + 3]:
            if more.startswith(("DETAIL:", "Process ")):
                text.append(" ".join(more.split()))
        found.append(" ".join(text))
    return found


def outcome(lines):
    errors = messages(lines, "ERROR")
    if errors:
        return "failed: " + errors[0]
    notices = messages(lines, "NOTICE")
    return "ok" + (" (" + notices[0] + ")" if notices else "")


def fmt(seconds):
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def quote(text):
    return "'" + text.replace("'", "''") + "'"


class Writer(threading.Thread):
    """Single-row writes, one every `interval` seconds, each timed from send to answer."""

    def __init__(self, table, interval=0.05):
        super().__init__(daemon=True)
        self.session = Session("writer")
        self.table = table
        self.interval = interval
        self.keys = []
        if table == "results":
            _, lines = self.session.run(
                "SELECT namespace, workflow_uid, node_id FROM results "
                "TABLESAMPLE SYSTEM (1) LIMIT 100"
            )
            self.keys = [line.split("|") for line in lines if line.count("|") == 2]
        self.count = 0
        self.writes = []
        self.error = None
        self.stopping = threading.Event()
        self.session.run(self.statement())  # warm: the first write plans its statement

    def statement(self):
        self.count += 1
        now = int(time.time() * 1000)
        tag = time.time_ns()
        if self.table == "claims":
            # As a release from before leases claims a tick (its six columns).
            return (
                "INSERT INTO cron_claims (cron_workflow_uid, scheduled_time, namespace, "
                "cron_workflow, workflow_name, claimed_at) VALUES "
                f"('migration-lock-writer', {tag // 1000}, 'team-00', 'writer', "
                f"'writer-{tag}', {now}) "
                "ON CONFLICT (cron_workflow_uid, scheduled_time) DO NOTHING"
            )
        if self.keys and self.count % 2 == 0:
            namespace, uid, node = self.keys[self.count % len(self.keys)]
            return (
                f"UPDATE results SET updated_at = {now} WHERE namespace = {quote(namespace)} "
                f"AND workflow_uid = {quote(uid)} AND node_id = {quote(node)}"
            )
        return (
            "INSERT INTO results (namespace, workflow_uid, node_id, workflow, state, "
            "revision, created_revision, created_at, updated_at) VALUES "
            f"('team-00', 'migration-lock-writer', 'writer-{tag}', 'migration-lock-writer', "
            f"'reporting', {tag}, {tag}, {now}, {now})"
        )

    def run(self):
        try:
            while not self.stopping.is_set():
                elapsed, lines = self.session.run(self.statement())
                self.writes.append((self.session.sent, self.session.sent + elapsed))
                errors = messages(lines, "ERROR")
                if errors:
                    self.error = errors[0]
                    return
                time.sleep(self.interval)
        except RuntimeError as error:
            self.error = str(error)

    def finish(self):
        self.stopping.set()
        self.join()
        self.session.close()

    def during(self, start, end):
        """(all writes, those overlapping [start, end], the longest of all)."""
        spans = [e - s for s, e in self.writes]
        overlapping = sum(1 for s, e in self.writes if s < end and e > start)
        return len(spans), overlapping, max(spans, default=0.0)


def measure(args):
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            sql = f.read()
    else:
        sql = args.sql
    if args.transaction:
        # As sqlx applies a migration without `-- no-transaction`: all of it in one
        # transaction, every lock it takes held until the commit.
        sql = "BEGIN;\n" + sql + "\nCOMMIT"
    writer = Writer(args.writes)
    ddl = Session("ddl")
    holder = Session("holder") if args.hold else None
    writer.start()
    time.sleep(1)
    if holder:
        holder.run(f"BEGIN; SELECT 1 FROM {args.table} LIMIT 1")
    ddl.send(sql)
    start = ddl.sent
    timer = None
    if holder:
        timer = threading.Timer(args.hold, lambda: holder.run("COMMIT"))
        timer.start()
    elapsed, lines = ddl.wait()
    end = start + elapsed
    time.sleep(1)
    writer.finish()
    if timer:
        timer.join()
        holder.close()
    ddl.close()
    count, overlapping, longest = writer.during(start, end)
    result = outcome(lines)
    if writer.error:
        result += f"; a write failed: {writer.error}"
    print(
        f"{args.label:<3} {args.what}: rows={args.rows} duration={fmt(elapsed)} "
        f"longest_write_wait={fmt(longest)} writes={count} overlapping={overlapping} "
        f"result={result}",
        flush=True,
    )


def index_valid(session, index):
    _, lines = session.run(
        f"SELECT coalesce((SELECT indisvalid::text FROM pg_index "
        f"WHERE indexrelid = to_regclass({quote(index)})), 'absent')"
    )
    return lines[-1] if lines else "?"


def race(args):
    database = os.environ.get("PGDATABASE", "")
    # sqlx-postgres 0.8.6 migrate.rs generate_lock_id: 0x3d32ad9e * CRC-32 of the name.
    lock_id = 0x3D32AD9E * zlib.crc32(database.encode())
    cic = f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {args.index} ON {args.table} {args.columns}"
    a = Session("replica-a")
    b = Session("replica-b")
    a.run(f"SELECT pg_advisory_lock({lock_id})")
    polled = []
    if args.waiter == "blocking":
        b.send(f"SELECT pg_advisory_lock({lock_id})")
        # B's own deadlock check (deadlock_timeout, 1 s) runs and finds nothing first.
        time.sleep(1.5)
        a_time, a_lines = a.run(cic)
        # A's migration failed: the server exits, its session ends, and the lock with it.
        if messages(a_lines, "ERROR"):
            a.close()
        else:
            a.run(f"SELECT pg_advisory_unlock({lock_id})")
        b_wait, b_lines = b.wait()
    else:

        def poll():
            while True:
                _, lines = b.run(f"SELECT pg_try_advisory_lock({lock_id})")
                polled.append(1)
                if lines and lines[-1] == "t":
                    return
                time.sleep(0.25)  # idle between tries: no snapshot held

        poller = threading.Thread(target=poll, daemon=True)
        started = time.monotonic()
        poller.start()
        time.sleep(1.5)
        a_time, a_lines = a.run(cic)
        a.run(f"SELECT pg_advisory_unlock({lock_id})")
        a.close()
        poller.join()
        b_wait, b_lines = time.monotonic() - started, []
    b_time, b_cic = b.run(cic)
    valid = index_valid(b, args.index)
    b.run(f"SELECT pg_advisory_unlock({lock_id})")
    b.close()
    waiter = (
        "B blocks in pg_advisory_lock (sqlx 0.8.6)"
        if args.waiter == "blocking"
        else f"B polls pg_try_advisory_lock ({len(polled)} tries)"
    )
    print(
        f"{args.label:<3} two replicas migrate at once, {waiter}, rows={args.rows}: "
        f"A's CREATE INDEX CONCURRENTLY {outcome(a_lines)} after {fmt(a_time)}; "
        f"B's wait for the lock {outcome(b_lines)} after {fmt(b_wait)}; "
        f"B's rerun {outcome(b_cic)} after {fmt(b_time)}; "
        f"{args.index} indisvalid={valid}",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("label")
    m.add_argument("what")
    m.add_argument("rows")
    source = m.add_mutually_exclusive_group(required=True)
    source.add_argument("--sql")
    source.add_argument("--file")
    m.add_argument("--transaction", action="store_true")
    m.add_argument("--writes", choices=["results", "claims"], default="results")
    m.add_argument("--hold", type=float, default=0.0)
    m.add_argument("--table", default="results")
    r = sub.add_parser("race")
    r.add_argument("label")
    r.add_argument("table")
    r.add_argument("index")
    r.add_argument("columns")
    r.add_argument("--waiter", choices=["blocking", "polling"], required=True)
    r.add_argument("--rows", default="?")
    args = parser.parse_args()
    if args.command == "measure":
        measure(args)
    else:
        race(args)


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, OSError) as error:
        print(f"migration_lock.py: {error}", file=sys.stderr)
        sys.exit(1)
