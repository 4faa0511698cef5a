#!/usr/bin/env python3
"""When does a client hear of a commit?  Sends one statement and prints
every message the server sends back, each with the milliseconds since the
statement was sent, until the server is ready again; then sends SELECT 1
and prints the same for it.  Speaks the protocol itself (rg_wire.py), so
that the arrival of each message is seen as it happens (libpq reports a
statement's messages together).

Usage: rg_ack.py SOCKET_DIR PORT USER simple|flush SQL
(with the environment's RG_ACK_OPTIONS as the connection's options)
  simple: a Query message;
  flush:  Parse, Bind, Execute, Flush; Sync only once the CommandComplete
          (or an error) has arrived, as a pipeline's reader may.
Prints lines "MS KIND TEXT": C the command's tag, E an error's SQLSTATE
and message, N a notice's message, S a parameter's name=value, Z ready;
"-- next" before those of SELECT 1.
"""
import os
import sys
import time

from rg_wire import Connection, bind, cstr, execute, fields, message, parse

sockdir, port, user, mode, sql = sys.argv[1:6]
conn = Connection(sockdir, port, user, "rg_ack", os.environ.get("RG_ACK_OPTIONS"))


def text(kind, body):
    if kind == b"C":
        return body.rstrip(b"\0").decode()
    if kind == b"E":
        f = fields(body)
        return f"{f.get(b'C', '')} {f.get(b'M', '')}"
    if kind == b"N":
        return fields(body).get(b"M", "")
    if kind == b"S":
        name, value = body.split(b"\0")[0:2]
        return f"{name.decode()}={value.decode()}"
    return ""


def run(statement, how):
    """Send the statement; print what comes back until ReadyForQuery."""
    start = time.monotonic()
    if how == "simple":
        conn.send(message(b"Q", cstr(statement)))
    else:
        conn.send(parse("", statement) + bind("", "") + execute("") + message(b"H", b""))
    while True:
        kind, body = conn.receive()
        if kind in b"CENSZ":
            ms = (time.monotonic() - start) * 1000
            print(f"{ms:.1f} {kind.decode()} {text(kind, body)}", flush=True)
        if how == "flush" and kind in b"CE":
            conn.send(message(b"S", b""))
            how = "synced"
        if kind == b"Z":
            return


run(sql, mode)
print("-- next", flush=True)
run("SELECT 1", "simple")
conn.close()
