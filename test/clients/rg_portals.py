#!/usr/bin/env python3
"""Bind two portals before executing them, in one pipeline of the extended
protocol, as libpq cannot (it has one unnamed portal): Parse and Bind the
first statement, Parse and Bind the second, Execute the second, Execute
the first, Sync.  Speaks the protocol itself, over PostgreSQL's Unix
socket, with trust authentication.

Usage: rg_portals.py SOCKET_DIR PORT USER APPLICATION_NAME SQL1 SQL2
Prints each row as its columns joined by "|", each command's end as
"-- TAG", and each error as "ERROR SQLSTATE message" (on stdout, in the
order the server sent them); exits 0 once the server is ready again.
"""
import socket
import struct
import sys

sockdir, port, user, app, first, second = sys.argv[1:7]
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


def error_text(body):
    fields = dict((f[0:1], f[1:].decode()) for f in body.split(b"\0") if f)
    return f"ERROR {fields.get(b'C', '')} {fields.get(b'M', '')}"


startup = struct.pack("!i", 196608) + b"".join(
    cstr(k) + cstr(v) for k, v in
    (("user", user), ("database", "postgres"), ("application_name", app))) + b"\0"
conn.sendall(struct.pack("!i", len(startup) + 4) + startup)
while True:
    kind, body = receive()
    if kind == b"E":
        sys.exit(error_text(body))
    if kind == b"Z":
        break


def parse(name, sql):
    return message(b"P", cstr(name) + cstr(sql) + struct.pack("!h", 0))


def bind(portal, statement):
    return message(b"B", cstr(portal) + cstr(statement) + struct.pack("!hhh", 0, 0, 0))


def execute(portal):
    return message(b"E", cstr(portal) + struct.pack("!i", 0))


conn.sendall(parse("s1", first) + bind("p1", "s1") + parse("s2", second) +
             bind("p2", "s2") + execute("p2") + execute("p1") + message(b"S", b""))
while True:
    kind, body = receive()
    if kind == b"D":
        count, offset, columns = struct.unpack("!h", body[:2])[0], 2, []
        for _ in range(count):
            size = struct.unpack("!i", body[offset:offset + 4])[0]
            offset += 4
            columns.append("" if size < 0 else body[offset:offset + size].decode())
            offset += max(size, 0)
        print("|".join(columns), flush=True)
    elif kind == b"C":
        print("--", body.rstrip(b"\0").decode(), flush=True)
    elif kind == b"E":
        print(error_text(body), flush=True)
    elif kind == b"Z":
        break
conn.sendall(message(b"X", b""))
