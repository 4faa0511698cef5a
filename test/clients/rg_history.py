#!/usr/bin/env python3
"""A history checker for strong reads (psycopg 3).

A writer increments a counter on the primary and records, after each COMMIT
returned, the value and the time.  Readers on a standby record the time
before each read's statement was sent, then the value it saw.  A violation
is a read that saw less than a value whose COMMIT returned before the read
began (the times come from one clock: same machine).  Reads that failed
(RG001) are counted, not checked.

Usage: rg_history.py PRIMARY STANDBY SECONDS READER...
  READER  PROTOCOL:CONSISTENCY, one session each, CONSISTENCY its
          replica_gate.consistency (given as a connection option) or
          "role" (the role's own setting), PROTOCOL one of
          prepared: extended protocol, one prepared statement, executed
                    again and again
          pipeline: extended protocol in pipeline mode, five reads a batch
          simple:   simple protocol
  Statements are prepared only by the "prepared" reader (pgbouncer 1.18 in
  transaction pooling mode keeps no prepared statement).
  Prints one JSON line per reader:
  {"reader", "reads", "violations", "failed", "examples"}.
"""
import json
import sys
import threading
import time

import psycopg

primary_dsn, standby_dsn, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
readers = sys.argv[4:]
acks = []               # (time after COMMIT returned, value)
stop = threading.Event()


def writer():
    with psycopg.connect(primary_dsn, autocommit=True) as conn:
        v = conn.execute("SELECT v FROM counter").fetchone()[0]
        while not stop.is_set():
            v += 1
            conn.execute("UPDATE counter SET v = %s", (v,))
            acks.append((time.time(), v))
            time.sleep(0.005)


def acked_before(t):
    """The highest value whose COMMIT returned before time t."""
    best = 0
    for at, v in acks:
        if at < t and v > best:
            best = v
    return best


def reader(spec, results):
    kind, consistency = spec.split(":")
    options = {} if consistency == "role" else \
        {"options": f"-c replica_gate.consistency={consistency}"}
    seen, failed = [], 0
    with psycopg.connect(standby_dsn, autocommit=True, **options) as conn:
        conn.prepare_threshold = None
        end = time.time() + seconds
        while time.time() < end:
            try:
                if kind == "pipeline":
                    with conn.pipeline():
                        batch = []
                        for _ in range(5):
                            cur = conn.cursor()
                            batch.append((time.time(), cur))
                            cur.execute("SELECT v FROM counter")
                    for t0, cur in batch:
                        seen.append((t0, cur.fetchone()[0]))
                else:
                    t0 = time.time()
                    if kind == "prepared":
                        row = conn.execute("SELECT v FROM counter", prepare=True).fetchone()
                    else:
                        cur = psycopg.ClientCursor(conn)   # the simple protocol
                        row = cur.execute("SELECT v FROM counter").fetchone()
                    seen.append((t0, row[0]))
            except psycopg.Error as e:
                if e.sqlstate != "RG001":
                    raise
                failed += 1
    results[spec] = (seen, failed)


results = {}
w = threading.Thread(target=writer)
w.start()
time.sleep(0.2)
ts = [threading.Thread(target=reader, args=(k, results)) for k in readers]
for t in ts:
    t.start()
for t in ts:
    t.join()
stop.set()
w.join()
for kind in readers:
    seen, failed = results[kind]
    bad = [(t0, v, acked_before(t0)) for t0, v in seen if v < acked_before(t0)]
    print(json.dumps({"reader": kind, "reads": len(seen), "violations": len(bad),
                      "failed": failed,
                      "examples": [f"read began {t0:.6f} saw {v}, {a} acknowledged before"
                                   for t0, v, a in bad[:3]]}))
