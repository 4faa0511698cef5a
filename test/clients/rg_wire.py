"""The frontend/backend protocol, spoken directly over PostgreSQL's Unix
socket with trust authentication, for the test clients that need what
libpq does not do (rg_portals.py: two portals bound at once; rg_ack.py:
each message timed as it arrives)."""
import socket
import struct
import sys


def cstr(text):
    return text.encode() + b"\0"


def message(kind, body):
    return kind + struct.pack("!i", len(body) + 4) + body


def parse(name, sql):
    return message(b"P", cstr(name) + cstr(sql) + struct.pack("!h", 0))


def bind(portal, statement):
    return message(b"B", cstr(portal) + cstr(statement) + struct.pack("!hhh", 0, 0, 0))


def execute(portal):
    return message(b"E", cstr(portal) + struct.pack("!i", 0))


def fields(body):
    """An error's or a notice's fields, by their one-byte codes."""
    return dict((f[0:1], f[1:].decode()) for f in body.split(b"\0") if f)


def error_text(body):
    f = fields(body)
    return f"ERROR {f.get(b'C', '')} {f.get(b'M', '')}"


class Connection:
    """A session, started and ready for queries; exits with the server's
    error if it cannot start."""

    def __init__(self, sockdir, port, user, app, options=None):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(f"{sockdir}/.s.PGSQL.{port}")
        self.pending = b""
        params = [("user", user), ("database", "postgres"), ("application_name", app)]
        if options:
            params.append(("options", options))
        startup = struct.pack("!i", 196608) + b"".join(
            cstr(k) + cstr(v) for k, v in params) + b"\0"
        self.sock.sendall(struct.pack("!i", len(startup) + 4) + startup)
        while True:
            kind, body = self.receive()
            if kind == b"E":
                sys.exit(error_text(body))
            if kind == b"Z":
                break

    def send(self, data):
        self.sock.sendall(data)

    def receive(self):
        """The next message from the server: (kind, body)."""
        while True:
            if len(self.pending) >= 5:
                size = struct.unpack("!i", self.pending[1:5])[0]
                if len(self.pending) >= 1 + size:
                    kind, body = self.pending[0:1], self.pending[5:1 + size]
                    self.pending = self.pending[1 + size:]
                    return kind, body
            data = self.sock.recv(65536)
            if not data:
                sys.exit("the server closed the connection")
            self.pending += data

    def close(self):
        self.sock.sendall(message(b"X", b""))
