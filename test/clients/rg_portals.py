#!/usr/bin/env python3
"""Bind two portals before executing them, in one pipeline of the extended
protocol, as libpq cannot (it has one unnamed portal): Parse and Bind the
first statement, Parse and Bind the second, Execute the second, Execute
the first, Sync.  Speaks the protocol itself (rg_wire.py).

Usage: rg_portals.py SOCKET_DIR PORT USER APPLICATION_NAME SQL1 SQL2
Prints each row as its columns joined by "|", each command's end as
"-- TAG", and each error as "ERROR SQLSTATE message" (on stdout, in the
order the server sent them); exits 0 once the server is ready again.
"""
import struct
import sys

from rg_wire import Connection, bind, error_text, execute, message, parse

sockdir, port, user, app, first, second = sys.argv[1:7]
conn = Connection(sockdir, port, user, app)
conn.send(parse("s1", first) + bind("p1", "s1") + parse("s2", second) +
          bind("p2", "s2") + execute("p2") + execute("p1") + message(b"S", b""))
while True:
    kind, body = conn.receive()
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
conn.close()
