#!/usr/bin/env python3
"""A proxy between clients and a PostgreSQL server, on Unix sockets:
replica_gate's question worker reaches the primary through it
(replica_gate.primary_conninfo), so that a test decides when the answer
to a question arrives, after the primary computed it, or what the
primary's clock looks like to the standby.

Usage: rg_proxy.py LISTEN_SOCKET SERVER_SOCKET HOLD_FILE [CLOCK_RATE [JUMP_FILE]]
  HOLD_FILE:  the server's replies are held while this file exists;
  CLOCK_RATE: the primary's commit clock in each answer of the
              question (a row of five columns whose first is a token)
              is made to advance at this rate (2: twice as fast), from
              the first answer on;
  JUMP_FILE:  while this file exists, the number of microseconds it
              holds is added to that clock (a jump of the primary's
              clock, which is what a stop of the standby's clock looks
              like to the standby).
Prints "listening" once it accepts connections, and "jumped N" when an
answer that first carries a new jump N has been passed on.
"""
import asyncio
import os
import re
import struct
import sys

listen, server, hold = sys.argv[1:4]
rate = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
jump_file = sys.argv[5] if len(sys.argv) > 5 else None
origin = None
jumped = 0
announce = None
TOKEN = re.compile(rb"^[0-9]+:[0-9A-F]+/[0-9A-F]+$")


def jump():
    """The jump the jump file asks for now, in microseconds (0: none)."""
    try:
        with open(jump_file) as f:
            return int(f.read().strip() or 0)
    except (TypeError, FileNotFoundError):
        return 0


def scaled(message):
    """A DataRow of the question with its clock scaled and jumped; others
    as they are."""
    global origin, jumped, announce
    if message[0:1] != b"D" or struct.unpack("!h", message[5:7])[0] != 5:
        return message
    columns, offset = [], 7
    for _ in range(5):
        size = struct.unpack("!i", message[offset:offset + 4])[0]
        offset += 4
        columns.append(None if size < 0 else message[offset:offset + size])
        offset += max(size, 0)
    if columns[0] is None or not TOKEN.match(columns[0]) or columns[1] is None:
        return message
    clock = int(columns[1])
    if origin is None:
        origin = clock
    now = jump()
    columns[1] = str(int(origin + (clock - origin) * rate) + now).encode()
    if now != jumped:
        jumped = announce = now
    body = struct.pack("!h", len(columns)) + b"".join(
        struct.pack("!i", -1) if c is None else struct.pack("!i", len(c)) + c
        for c in columns)
    return b"D" + struct.pack("!i", len(body) + 4) + body


async def pipe(reader, writer, held):
    """Copy one direction until it closes; hold what it copies while the
    hold file exists, and scale the question's clock, if "held" (the
    server's direction: messages from the first byte on, since a Unix
    socket carries no SSL or GSS negotiation).  A new jump is announced
    once the answer that carries it has been passed on."""
    global announce
    pending = b""
    while data := await reader.read(65536):
        while held and os.path.exists(hold):
            await asyncio.sleep(0.005)
        if held and (rate != 1.0 or jump_file is not None):
            pending += data
            data = b""
            while len(pending) >= 5:
                size = struct.unpack("!i", pending[1:5])[0]
                if len(pending) < 1 + size:
                    break
                data += scaled(pending[:1 + size])
                pending = pending[1 + size:]
        writer.write(data)
        await writer.drain()
        if announce is not None:
            print("jumped", announce, flush=True)
            announce = None
    writer.close()


async def connect(client_reader, client_writer):
    server_reader, server_writer = await asyncio.open_unix_connection(server)
    await asyncio.gather(pipe(client_reader, server_writer, False),
                         pipe(server_reader, client_writer, True),
                         return_exceptions=True)


async def main():
    proxy = await asyncio.start_unix_server(connect, listen)
    print("listening", flush=True)
    async with proxy:
        await proxy.serve_forever()


asyncio.run(main())
