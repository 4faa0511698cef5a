#!/usr/bin/env python3
"""A proxy between clients and a PostgreSQL server, on Unix sockets, that
holds the server's replies while a file exists: replica_gate's question
worker reaches the primary through it (replica_gate.primary_conninfo), so
that a test decides when the answer to a question arrives, after the
primary computed it.

Usage: rg_proxy.py LISTEN_SOCKET SERVER_SOCKET HOLD_FILE
Prints "listening" once it accepts connections.
"""
import asyncio
import os
import sys

listen, server, hold = sys.argv[1:4]


async def pipe(reader, writer, held):
    """Copy one direction until it closes; hold what it copies while the
    hold file exists, if "held"."""
    while data := await reader.read(65536):
        while held and os.path.exists(hold):
            await asyncio.sleep(0.005)
        writer.write(data)
        await writer.drain()
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
