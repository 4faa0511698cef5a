#!/usr/bin/env python3
"""Read-your-writes with replica_gate from Python (psycopg 3).

Write on the primary, take the token from the ParameterStatus the COMMIT
brought back (conn.info.parameter_status, no extra query), gate the read on
the standby in one round trip, fall back to the primary when it is behind.

Usage: rg_client.py PRIMARY_CONNINFO STANDBY_CONNINFO ROUNDS BUDGET_MS
"""
import sys

import psycopg


def gated_read(primary, standby, token, budget_ms):
    """Return (value, on_standby)."""
    # A client-side cursor sends both statements as one query string: the
    # read only runs if the gate passed.
    cur = psycopg.ClientCursor(standby)
    try:
        cur.execute("SELECT replica_gate.require_lsn(%s, %s); SELECT v FROM counter",
                    (token, budget_ms))
        cur.nextset()  # the second result is the read
        return cur.fetchone()[0], True
    except psycopg.Error as e:
        if e.sqlstate != "RG001":  # the standby is behind: use the primary
            raise
        return primary.execute("SELECT v FROM counter").fetchone()[0], False


def main():
    primary_dsn, standby_dsn, rounds, budget_ms = sys.argv[1:5]
    rounds, budget_ms = int(rounds), int(budget_ms)
    primary = psycopg.connect(primary_dsn, autocommit=True)
    standby = psycopg.connect(standby_dsn, autocommit=True)
    token, on_standby, stale = None, 0, 0
    for i in range(1, rounds + 1):
        primary.execute("UPDATE counter SET v = %s", (i,))
        reported = primary.info.parameter_status("replica_gate.last_commit_lsn")
        if not reported or reported == token:
            sys.exit(f"round {i}: no new token reported ({reported!r})")
        token = reported
        value, here = gated_read(primary, standby, token, budget_ms)
        stale += value != i
        on_standby += here
    print(f"psycopg: {rounds} reads, {on_standby} on standby, "
          f"{rounds - on_standby} on primary, {stale} stale")
    sys.exit(0 if stale == 0 else 1)


if __name__ == "__main__":
    main()
