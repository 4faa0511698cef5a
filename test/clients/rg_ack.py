#!/usr/bin/env python3
"""When does a client hear of a commit?  Sends one statement and prints
every message the server sends back, each with the milliseconds since the
statement was sent, until the server is ready again; then sends SELECT 1
and prints the same for it.  Speaks the protocol itself, over
PostgreSQL's Unix socket, with trust authentication, so that the arrival
of each message is seen as it happens (libpq reports a statement's
messages together).

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
import socket
import struct
import sys
import time

sockdir, port, user, mode, sql = sys.argv[1:6]
conn = socket.socket(socket.AF_UNIX)
conn.connect(f"{sockdir}/.s.PGSQL.{port}")
pending = b""


def cstr(text):
    return text.encode() + b"\0"


def message(kind, body):
    return kind + struct.pack("!i", len(body) + 4) + body


def receive():
    """The next message from the server: (kind, body)."""
    global pending
    while True:
        if len(pending) >= 5:
            size = struct.unpack("!i", pending[1:5])[0]
            if len(pending) >= 1 + size:
                kind, body = pending[0:1], pending[5:1 + size]
                pending = pending[1 + size:]
                return kind, body
        data = conn.recv(65536)
        if not data:
            sys.exit("the server closed the connection")
        pending += data


def fields(body):
    return dict((f[0:1], f[1:].decode()) for f in body.split(b"\0") if f)


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


params = [("user", user), ("database", "postgres"), ("application_name", "rg_ack")]
if os.environ.get("RG_ACK_OPTIONS"):
    params.append(("options", os.environ["RG_ACK_OPTIONS"]))
startup = struct.pack("!i", 196608) + b"".join(cstr(k) + cstr(v) for k, v in params) + b"\0"
conn.sendall(struct.pack("!i", len(startup) + 4) + startup)
while True:
    kind, body = receive()
    if kind == b"E":
        sys.exit(text(kind, body))
    if kind == b"Z":
        break


def run(statement, how):
    """Send the statement; print what comes back until ReadyForQuery."""
    start = time.monotonic()
    if how == "simple":
        conn.sendall(message(b"Q", cstr(statement)))
    else:
        conn.sendall(message(b"P", cstr("") + cstr(statement) + struct.pack("!h", 0)) +
                     message(b"B", cstr("") + cstr("") + struct.pack("!hhh", 0, 0, 0)) +
                     message(b"E", cstr("") + struct.pack("!i", 0)) +
                     message(b"H", b""))
    while True:
        kind, body = receive()
        if kind in b"CENSZ":
            ms = (time.monotonic() - start) * 1000
            print(f"{ms:.1f} {kind.decode()} {text(kind, body)}", flush=True)
        if how == "flush" and kind in b"CE":
            conn.sendall(message(b"S", b""))
            how = "synced"
        if kind == b"Z":
            return


run(sql, mode)
print("-- next", flush=True)
run("SELECT 1", "simple")
conn.sendall(message(b"X", b""))
