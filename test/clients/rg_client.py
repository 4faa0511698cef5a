#!/usr/bin/env python3
"""Read-your-writes with replica_gate from Python (psycopg 3).

Write on the primary, take the token from the ParameterStatus the COMMIT
brought back (conn.info.parameter_status, no extra query), gate the read on
the standby in one round trip, fall back to the primary when it is behind.

Usage: rg_client.py PRIMARY STANDBY ROUNDS BUDGETS FORM
  BUDGETS  gate budgets in ms, comma-separated, used round after round
  FORM     "function" (require_lsn) or "set" (SET replica_gate.require_lsn)
A first read, before any write, has no token.
"""
import sys

import psycopg
from psycopg import sql


def gated_read(primary, standby, token, budget_ms, form):
    """Return (value, on_standby).  token is None before the first write."""
    # A client-side cursor sends the statements as one query string: the
    # read only runs if the gate passed.  SET takes no bind parameters, so
    # the token goes in as a literal quoted on the client; no token is NULL
    # for the function and '' for the SET form.
    if form == "set":
        query = sql.SQL("SET replica_gate.default_timeout = {}; "
                        "SET replica_gate.require_lsn = {}; "
                        "SELECT v FROM counter").format(
                            sql.Literal(budget_ms), sql.Literal(token or ""))
    else:
        query = sql.SQL("SELECT replica_gate.require_lsn({}, {}); "
                        "SELECT v FROM counter").format(
                            sql.Literal(token), sql.Literal(budget_ms))
    cur = psycopg.ClientCursor(standby)
    try:
        cur.execute(query)
        while cur.nextset():  # the last result is the read
            pass
        return cur.fetchone()[0], True
    except psycopg.Error as e:
        if e.sqlstate != "RG001":  # the standby is behind: use the primary
            raise
        return primary.execute("SELECT v FROM counter").fetchone()[0], False


def main():
    primary_dsn, standby_dsn, rounds, budgets, form = sys.argv[1:6]
    rounds = int(rounds)
    budgets = [int(b) for b in budgets.split(",")]
    primary = psycopg.connect(primary_dsn, autocommit=True)
    standby = psycopg.connect(standby_dsn, autocommit=True)

    # The SET form waits only where the library is active in the session: a
    # preloaded library reports replica_gate.version at connection start.
    if form == "set" and standby.info.parameter_status("replica_gate.version") is None:
        sys.exit("the standby session has no replica_gate: the SET form would not wait")

    value, on_standby = gated_read(primary, standby, None, budgets[0], form)
    stale = int(value != 0)
    token = None
    for i in range(1, rounds + 1):
        primary.execute("UPDATE counter SET v = %s", (i,))
        # No token after a write is not "nothing to wait for": the primary
        # is not preloaded.
        reported = primary.info.parameter_status("replica_gate.last_commit_token")
        if not reported or reported == token:
            sys.exit(f"round {i}: no new token reported ({reported!r})")
        token = reported
        value, here = gated_read(primary, standby, token, budgets[(i - 1) % len(budgets)], form)
        stale += value != i
        on_standby += here
    print(f"psycopg ({form}): {rounds + 1} reads, {on_standby} on standby, "
          f"{rounds + 1 - on_standby} on primary, {stale} stale")
    sys.exit(0 if stale == 0 else 1)


if __name__ == "__main__":
    main()
