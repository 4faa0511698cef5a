#!/usr/bin/env python3
"""replica_gate under random faults: a workload, a nemesis and a checker.

A primary, two standbys that stream from it and a cascading standby behind
the first, on local sockets.  Two writers on the primary insert rows
(writer, seq) and keep each write's token, the second with
synchronous_commit = off; a third changes the schema every SCHEMA_EVERY s,
by turns adding a child table to "parent" and replacing the SQL function
version_fn(), each change with its row in the same transaction.  Readers on
every standby gate reads in every form: on a token (SET
replica_gate.require_lsn, require_lsn(), wait_for_lsn(), caught_up()),
strong (the session mode), and on a staleness bound (require_fresh).  A
token read on a schema change, and every strong read, also reads across the
changes: the highest child's row through "parent" and version_fn() (which
psycopg prepares after five runs: a plan made before the change).  And
PRIMARY_READERS sessions of the mode 'strong' on whichever server is the
primary (connecting again after a failover or a switchover) read what the
strong readers of the standbys read: such a read may see a paying commit
not yet acknowledged, and must return only once it is released, as its
acknowledgement would be.  Each read records when it began and ended, the
gate's outcome and what it saw.  Every server has replica_gate.commit_wait
= COMMIT_WAIT_MS (any may become the primary): a paying commit waits, at
most that long, for the standbys that hold a lease, and a standby whose
newest answer of the primary granted it a lease and is younger serves
strong reads without asking it ("locally").

A nemesis, driven by the seed, injects at random moments: a lossy failover
(the primary's standbys cut off from it, the writers committing for 1 to
3.5 s more, acknowledged and never sent, then kill -9 of the primary, the
promotion of the standby that received most, the other nodes pointed at it
and the old primary rewound (pg_rewind) to follow it; a standby that does
not stream from the primary keeps fresh answers of it until the kill); the
primary frozen (SIGSTOP/SIGCONT of all its processes); a standby frozen so
("stall"), its answers fresh when it thaws; a standby's WAL receiver and
question worker frozen ("partition", as a network partition stops them):
its answers age while it serves reads and receives nothing; a standby
restarted with its clock at half speed (libfaketime, "clock"), cut off so
after CLOCK_SETTLE s, then restarted with the real clock: its clock check
must keep it from serving strong reads locally; a WAL receiver terminated;
replay paused and resumed; a standby restarted; the replay watcher
terminated (13 to 18).  And faults that change the WAL sender a lease was
granted to, while its standby (the holder) keeps the answer that granted
it (its question worker frozen right after the answer came in: it serves
strong reads without asking until the answer's window ends), every other
free WAL sender slot of the primary taken so that the freed one is the one
taken next: "receivewal" (the holder partitioned, its WAL sender terminated
on the primary, pg_receivewal takes the slot, and a session of the same
role from the same address calls grant_lease() for pg_receivewal's WAL
sender, again and again, as an archive's helper might); "takeover" (the
same, but another standby, whose WAL receiver is terminated, reconnects
into the slot and is granted); "reconnect" (the holder's own WAL receiver
terminated: it reconnects into its slot with a new WAL sender, which is
granted, and its replay is paused); each then makes a paying commit and
reads strong on the holder right after it; and a "switchover" (the
primary's writers held by a lock once two standbys have everything, a
fresh answer frozen on one, kill -9 of every process of the primary, the
other promoted, its first paying commit as soon as it takes writes, strong
reads on the holder right after it, then the others follow the new primary
and the old one is rewound).  A build that forgets the holder's lease, or
whose new primary does not wait W for the leases of the old one,
acknowledges that commit at once, and the holder serves the read without
it.  Between the commit and those reads, once the commit is visible on the
primary and while it waits, a strong read there (a primary reader's, kept
with the nemesis's "by"): a build whose strong read on the primary does
not wait returns it before the commit is released, and the reads on the
holder after it miss what it saw.  The first fault from each moment of
DUE on is of its kind, unless one came before: a receivewal, a partition,
a takeover, a clock, a reconnect, a failover (from FIRST_FAILOVER s), a
switchover.  Readers keep gating on the writes around the latest
failover's cut, the lost ones among them.

The checker reads the whole history; a violation is
  missed     a gate on a token passed and the read lacked that write, which
             was not lost;
  lost       a gate on a token passed after the failover that lost its write
             (acknowledged, absent from the final primary);
  survived   a gate refused with RG002 (lost in a failover) a write that
             survived;
  strong     a strong read missed a write acknowledged before it began,
             unless that write was lost;
  primary-seen  a strong read (on any server) missed a write that a strong
             read on the primary had seen and returned before it began
             (rows or schema change; for one not also acknowledged before
             it began: else "strong" or "schema"), unless that write was
             lost (what such a read saw on a primary that was then lost is
             not owed: the highest write of its writer, or schema change of
             its kind, at or below what it saw that is in the final primary
             is);
  schema     a strong read missed a schema change acknowledged before it
             began, or a gate on a schema change's token passed and the
             read missed that change; unless the change was lost;
  fresh      require_fresh('1s') passed, and the read lacked a write
             acknowledged more than 1 s (plus FRESH_SLACK) before it began,
             which was not lost (the bound covers what was visible on the
             primary 1 s before the check, and a COMMIT returns after its
             write became visible; not on a standby at half speed: the
             bound assumes the clocks agree, the summary counts those);
  overrun    a gate took longer than its timeout plus SLACK (unless the
             nemesis froze the node it ran on, or slowed its clock: after a
             failover a reader's node may be the primary);
  clock      a standby at half speed served strong reads locally (its
             counters, read before its clock is restored);
  crash      a server log says "terminated by signal" (the nemesis kills
             only postmasters, alone or first, which log nothing);
  waiters    replica_gate.waiters() not back to 0 on a node at the end.
It prints a one-screen summary (with the strong reads on the primary: how
many saw a write acknowledged only after they began, which they had to
wait for, and how long they took, and how many saw one not yet
acknowledged when they returned, the case "primary-seen" exists for; the
strong-read gates each server served locally, from replica_gate.stats
over its lives; each holder change and switchover: when its commit began
in the holder's lease, how long it waited, how long the strong read on the
primary after it took and whether it returned before the commit's
acknowledgement, what the strong reads on the holder after it returned;
the violations by the fault during which they began), writes history.jsonl
(the reads, the nemesis's among them), writes.jsonl (the acknowledged
writes, lost or not), faults.jsonl (with the moments of each holder change
and switchover: the grant, the freeze, the slot freed and taken, the
commit and its acknowledgement, the end of the holder's window), the
servers' logs and timeline.svg to --out, and exits 1 on any violation, and
also when the run tested no loss: no failover lost a write, or no gate on a
lost write began after its failover; or tested not the local path: no
strong read served locally, a standby that streamed from the first primary
served none, no standby at half speed; or no strong read on the primary saw
a write (that survived) not yet acknowledged when it returned; or no holder
change of each kind, or no switchover, was effective (its commit began
EFFECTIVE_MARGIN or more before the holder's answer expired, its slot
taken by the new WAL sender).

Usage (as the postgres user, with replica_gate installed in the server
whose pg_config is PG_CONFIG or on PATH): test/chaos.py --seconds N --seed S
--out DIR.  bash test/chaos does that from root.
"""
import argparse
import bisect
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict

import psycopg

TIMEOUT_MS = 1000       # every gate's timeout
SLACK_MS = 1000         # what a gate may take beyond it on a loaded machine
FRESH = 1.0             # require_fresh's limit, s
FRESH_SLACK = 0.1       # clock readings around a fresh read, s
FORMS = ["set", "require", "wait", "caught_up", "strong", "fresh"]
FAULTS = ["failover", "freeze", "receiver", "pause", "restart", "watcher", "stall",
          "partition", "clock", "receivewal", "takeover", "reconnect", "switchover"]
WEIGHTS = [1, 2, 2, 2, 2, 2, 1, 2, 1, 1, 1, 1, 1]
HOLDERS = ("receivewal", "takeover", "reconnect")   # faults that change a slot's holder
LONG = ("failover", "clock", "switchover")          # faults that take seconds
FIRST_FAILOVER = 15.0   # the first fault from then on is a failover, s
# the first fault from each moment (s) on is of that kind, unless one came before
# (the earliest in this list first)
DUE = [("receivewal", 3.0), ("partition", 5.0), ("takeover", 6.0), ("clock", 8.0),
       ("reconnect", 9.0), ("failover", FIRST_FAILOVER), ("switchover", 20.0)]
COMMIT_WAIT_MS = 500    # replica_gate.commit_wait of every server
# the share of W an answer serves on the standby's clock (proof.c: rates 1 % apart)
WINDOW = 0.99 / 1.01
MAX_WAL_SENDERS = 6     # three standbys and pg_receivewal at most stream from one server
NEMESIS_WRITER = 4      # the writer of the nemesis's own paying commits
NEMESIS_TIMEOUT_MS = 100    # the timeout of the nemesis's own strong reads
HOLDER_TRIES = 3        # attempts of a holder fault to hit the holder's window
# a holder change is effective when its commit began this long (s) before the
# holder's answer expired: time for a commit not held back, and a read, to end
# and begin in it
EFFECTIVE_MARGIN = 0.05
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SLOW = {"LD_PRELOAD": FAKETIME, "FAKETIME": "+0 x0.5", "FAKETIME_NO_CACHE": "1"}
CLOCK_SETTLE = 3.0      # a slowed standby runs this long before its partition, s
BEFORE_CUT = 1.0        # a failover's writes: from this long before its cut, s
SCHEMA_EVERY = 0.5      # the schema writer's pace, s
SCHEMA_WRITER = 3
SCHEMA_READ = "SELECT (SELECT coalesce(max(n), 0) FROM parent), version_fn()"
ROWS = "SELECT writer, max(seq) FROM h GROUP BY writer"     # what strong reads read
PRIMARY_READERS = 2     # sessions reading strong on the primary


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Node:
    """One server: its data folder, port, role and upstream."""

    def __init__(self, cluster, name, port):
        self.cluster, self.name, self.port = cluster, name, port
        self.data = os.path.join(cluster.base, name)
        self.logfile = os.path.join(cluster.base, name + ".log")
        self.upstream = None        # None: the primary
        self.served = (0, 0)        # strong-read gates, served locally: of past lives

    def dsn(self, **opts):
        extra = "".join(f" {k}={v}" for k, v in opts.items())
        return f"host={self.cluster.sockets} port={self.port} dbname=postgres{extra}"

    def ctl(self, *args, check=True, env=None):
        return subprocess.run([self.cluster.bin("pg_ctl"), "-D", self.data, "-l",
                               self.logfile, "-w", *args], check=check, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self, action="start", env=None):
        """Start (or restart) the server on its port, under its name (with
        "env": in that environment)."""
        extra = ("-m", "fast") if action == "restart" else ()
        self.ctl(action, *extra, "-o", f"-p {self.port} --cluster-name={self.name}", env=env)

    def sql(self, query, timeout=10):
        with psycopg.connect(self.dsn(connect_timeout=timeout), autocommit=True) as c:
            cur = c.execute(query)
            return cur.fetchall() if cur.description else None

    def bank(self):
        """Add the server's counts of strong-read gates and of those served
        locally to its past lives', before its shared memory goes (a
        restart, a kill); returns them ((0, 0) if it does not answer)."""
        try:
            got = tuple(self.sql("SELECT strong_reads, strong_reads_local"
                                 " FROM replica_gate.stats")[0])
        except psycopg.Error:
            return (0, 0)
        self.served = tuple(a + b for a, b in zip(self.served, got))
        return got

    def postmaster(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def processes(self):
        """The postmaster and its children."""
        pm = self.postmaster()
        if pm is None:
            return []
        pids = [pm]
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == pm:
                            pids.append(int(entry))
                except (OSError, IndexError, ValueError):
                    pass
        return pids

    def processes_titled(self, *titles):
        """Those of its processes whose title holds one of "titles" (a
        worker without a database is absent from pg_stat_activity), each
        with the first that it holds."""
        found = []
        for p in self.processes()[1:]:
            try:
                with open(f"/proc/{p}/cmdline") as f:
                    title = f.read()
            except OSError:
                continue
            found += [(p, t) for t in titles if t in title][:1]
        return found

    def configure(self, primary_conninfo, standby=True):
        """Point this node at its upstream (postgresql.auto.conf is ours)."""
        with open(os.path.join(self.data, "postgresql.auto.conf"), "w") as f:
            if primary_conninfo:
                f.write(f"primary_conninfo = '{primary_conninfo}'\n")
            cascade = self.upstream is not None and self.upstream is not self.cluster.primary
            if cascade:
                f.write(f"replica_gate.primary_conninfo = 'port={self.cluster.primary.port}'\n")
        if standby:
            open(os.path.join(self.data, "standby.signal"), "w").close()

    def stream(self, on=True):
        """Reload, pointed at the upstream, or at nothing (on=False): then the
        WAL receiver stops and the node receives nothing more."""
        self.configure(self.cluster.conninfo(self.upstream, self.name) if on else None)
        self.sql("SELECT pg_reload_conf()")


class Cluster:
    """The servers and the topology, which the nemesis changes."""

    def __init__(self, pg_config, base):
        self.bindir = subprocess.check_output([pg_config, "--bindir"], text=True).strip()
        self.base = base
        self.sockets = base
        self.lock = threading.Lock()
        self.nodes = {}
        self.primary = None

    def bin(self, name):
        return os.path.join(self.bindir, name)

    def conninfo(self, upstream, name):
        return f"host={self.sockets} port={upstream.port} application_name={name}"

    def start(self, ports):
        a = Node(self, "a", ports[0])
        subprocess.run([self.bin("initdb"), "-A", "trust", "-N", "-D", a.data],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(a.data, "postgresql.conf"), "a") as f:
            f.write(f"""
listen_addresses = ''
unix_socket_directories = '{self.sockets}'
shared_preload_libraries = 'replica_gate'
wal_level = replica
max_wal_senders = {MAX_WAL_SENDERS}
wal_log_hints = on
wal_keep_size = '1GB'
hot_standby = on
max_connections = 60
wal_receiver_timeout = '1s'
wal_receiver_status_interval = '1s'
wal_retrieve_retry_interval = '100ms'
log_line_prefix = '%m [%p] '
fsync = off
# copied by pg_basebackup: every server that may become the primary has it
replica_gate.commit_wait = '{COMMIT_WAIT_MS}ms'
""")
        self.add(a, None)
        a.start()
        self.primary = a
        a.sql("CREATE EXTENSION replica_gate")
        a.sql("CREATE TABLE h (writer int, seq int, PRIMARY KEY (writer, seq))")
        a.sql("CREATE TABLE parent (n int)")
        a.sql("CREATE FUNCTION version_fn() RETURNS int LANGUAGE sql AS 'SELECT 0'")
        b = self.clone("b", ports[1], a)
        self.clone("c", ports[2], a)
        self.clone("d", ports[3], b)
        for n in self.nodes.values():
            if n is not a:
                wait_until(lambda n=n: n.sql("SELECT count(*) FROM h")[0][0] == 0, 30,
                           f"{n.name} does not serve reads")

    def add(self, node, upstream):
        node.upstream = upstream
        self.nodes[node.name] = node

    def clone(self, name, port, upstream):
        n = Node(self, name, port)
        subprocess.run([self.bin("pg_basebackup"), "-D", n.data, "-X", "stream", "-c", "fast",
                        "-d", upstream.dsn()], check=True, stdout=subprocess.DEVNULL)
        self.add(n, upstream)
        n.configure(self.conninfo(upstream, name))
        n.start()
        return n

    def standbys(self):
        return [n for n in self.nodes.values() if n is not self.primary]


def wait_until(check, seconds, what):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if check():
                return
        except psycopg.Error:
            pass
        time.sleep(0.1)
    raise RuntimeError(what)


class Nemesis(threading.Thread):
    """Injects the seed's schedule of faults."""

    def __init__(self, cluster, seed, seconds, faults, acks, history):
        super().__init__(daemon=True)
        self.cluster, self.faults, self.stop = cluster, faults, threading.Event()
        self.acks, self.history = acks, history
        self.seq = 0        # of the nemesis's own writes (NEMESIS_WRITER)
        rng = random.Random(seed)
        t, self.schedule = 3.0, []
        while t < seconds - 5:
            # failovers and clocks are rarer: each takes seconds (a failover
            # ends a timeline); but every run long enough has one of each,
            # and a partition, and so loses writes and attacks the strong
            # reads served locally
            kind = rng.choices(FAULTS, weights=WEIGHTS)[0]
            kind = next((k for k, due in DUE if t >= due and
                         all(k != s for _, s, _, _ in self.schedule)), kind)
            self.schedule.append((t, kind, rng.random(), rng.uniform(1.0, 3.5)))
            t += rng.uniform(2.0, 6.0) + (6.0 if kind in LONG else 0)
        self.cut = self.killed = None
        self.node = self.served = None
        self.extra = {}

    def run(self):
        start = time.time()
        for at, kind, pick, length in self.schedule:
            while time.time() - start < at:
                if self.stop.wait(0.05):
                    return
            t0 = self.cut = self.killed = time.time()   # a failover that fails early
            self.node = self.served = None
            self.extra = {}
            try:
                what = getattr(self, "do_" + kind)(pick, length)
                outcome = "done"
            except Exception as e:      # noqa: BLE001 - a fault that failed is recorded
                what, outcome = "", f"failed: {e}"
            # a failover's "cut": when its standbys stopped receiving (writes
            # acknowledged since are lost); "killed": when the last process
            # of the primary exited (its backends outlive the postmaster:
            # writes acknowledged before may be lost, and reads before may
            # see them); "node": the server it hit; a clock's "served": the
            # strong-read gates of the slowed server and how many of them it
            # served locally; the moments of the faults that change lease
            # holders and of a switchover ("extra": see holder_try())
            fault = {"t0": t0, "t1": time.time(), "kind": kind, "what": what,
                     "outcome": outcome, "node": self.node}
            if kind in ("failover", "switchover"):
                fault.update(cut=self.cut, killed=self.killed)
            fault.update(self.extra)
            if kind == "clock":
                fault.update(served=self.served)
            self.faults.append(fault)
            log(f"fault {kind} {what} {outcome} ({time.time() - t0:.1f} s)")

    def standby(self, pick):
        s = sorted(self.cluster.standbys(), key=lambda n: n.name)
        n = s[int(pick * len(s))]
        self.node = n.name
        return n

    def do_failover(self, pick, length):
        """Lossy by design: the primary's standbys cut off, "length" s of
        writes acknowledged that none receives, then the kill."""
        c = self.cluster
        old = c.primary
        self.node = old.name
        direct = [n for n in c.nodes.values() if n.upstream is old]
        for n in direct:
            n.stream(on=False)
        for n in direct:
            wait_until(lambda n=n: n.sql("SELECT count(*) FROM pg_stat_wal_receiver")[0][0] == 0,
                       10, f"{n.name} still streams")
        self.cut = time.time()
        time.sleep(length)
        children = old.processes()
        old.bank()      # it may have served strong reads as a standby
        os.kill(children[0], signal.SIGKILL)
        wait_until(lambda: not any(os.path.exists(f"/proc/{p}") for p in children), 30,
                   "the killed primary's processes do not exit")
        self.killed = time.time()
        received = {n.name: n.sql("SELECT pg_last_wal_receive_lsn() - '0/0'")[0][0] or 0
                    for n in direct}
        new = max(direct, key=lambda n: (received[n.name], n.name))
        with c.lock:
            new.ctl("promote")
            wait_until(lambda: not new.sql("SELECT pg_is_in_recovery()")[0][0], 30,
                       "no promotion")
            c.primary, new.upstream = new, None
            for n in c.nodes.values():
                if n is old or n is new:
                    continue
                if n.upstream is old:
                    n.upstream = new
                n.stream()
        self.rejoin(old, new)
        return f"{old.name} killed {length:.1f} s after the cut, {new.name} promoted"

    def rejoin(self, old, new):
        """The old primary follows the new one, rewound (after its crash
        recovery); the new primary's control file names its timeline after
        a checkpoint."""
        c = self.cluster
        new.sql("CHECKPOINT")
        rewind = subprocess.run([c.bin("pg_rewind"), "-D", old.data, "--source-server",
                                 new.dsn()], capture_output=True, text=True)
        if rewind.returncode != 0:
            raise RuntimeError("pg_rewind: " + rewind.stderr.strip().splitlines()[-1])
        old.upstream = new
        old.configure(c.conninfo(new, old.name))
        old.start()

    @staticmethod
    def signal_all(pids, sig):
        """Send sig to each pid; a process that has exited is skipped."""
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass

    def do_freeze(self, pick, length):
        self.node = self.cluster.primary.name
        pids = self.cluster.primary.processes()
        try:
            self.signal_all(pids, signal.SIGSTOP)
            time.sleep(length)
        finally:
            self.signal_all(pids, signal.SIGCONT)
        return f"{self.cluster.primary.name} for {length:.1f} s"

    def do_stall(self, pick, length):
        """A standby frozen whole while its answers are fresh: when it thaws,
        an answer asked before must not serve a read."""
        n = self.standby(pick)
        pids = n.processes()
        try:
            self.signal_all(pids, signal.SIGSTOP)
            time.sleep(length)
        finally:
            self.signal_all(pids, signal.SIGCONT)
        return f"{n.name} for {length:.1f} s"

    def cut_off(self, n, length):
        """Freeze the WAL receiver and the question worker of standby n for
        "length" s, as a network partition would stop them: it receives
        nothing and its answers age while it serves reads."""
        rows = sorted(n.processes_titled("walreceiver", "replica_gate question"),
                      key=lambda r: r[1])
        pids = [p for p, _ in rows]
        try:
            self.signal_all(pids, signal.SIGSTOP)
            time.sleep(length)
        finally:
            self.signal_all(pids, signal.SIGCONT)
        return f"{' and '.join(b for _, b in rows) or 'nothing'} frozen for {length:.1f} s"

    def do_partition(self, pick, length):
        """A standby cut off from the primary while its answers are fresh."""
        n = self.standby(pick)
        return f"{n.name}: {self.cut_off(n, length)}"

    def do_clock(self, pick, length):
        """A standby restarted with its clock at half speed (libfaketime):
        its answers' window measured on it would last twice as long as the
        primary's commit wait, so the clock check must keep it from serving
        strong reads locally.  After CLOCK_SETTLE s (the check compares
        answers a second of its clock apart) it is cut off for "length" s
        (its answers age, its replay stands still), then restarted with the
        real clock.  (No recovery_min_apply_delay here: it compares the
        primary's commit times with the slowed clock.)"""
        n = self.standby(pick)
        if not os.path.exists(FAKETIME):
            raise RuntimeError(f"no {FAKETIME} (Debian's package faketime)")
        n.bank()
        try:
            n.start("restart", env=dict(os.environ, **SLOW))
            time.sleep(CLOCK_SETTLE)
            cut = self.cut_off(n, length)
            time.sleep(1.0)
            self.served = n.bank()
        finally:
            n.start("restart")
        return (f"{n.name} at half speed, {cut}: {self.served[0]} strong-read gates, "
                f"{self.served[1]} served locally")

    def terminate(self, node, backend_type):
        return node.sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        f" WHERE backend_type = '{backend_type}'")[0][0]

    @staticmethod
    def receivers(node):
        """The pids of node's WAL receiver (none while it restarts)."""
        return [x for x, _ in node.processes_titled("walreceiver")]

    def do_receiver(self, pick, length):
        # SIGTERM: pg_terminate_backend() refuses a WAL receiver, which is
        # no backend ("PID ... is not a PostgreSQL backend process")
        n = self.standby(pick)
        pids = self.receivers(n)
        self.signal_all(pids, signal.SIGTERM)
        return f"{n.name}: {len(pids)}"

    def do_pause(self, pick, length):
        n = self.standby(pick)
        n.sql("SELECT pg_wal_replay_pause()")
        time.sleep(length)
        n.sql("SELECT pg_wal_replay_resume()")
        return f"{n.name} for {length:.1f} s"

    def do_restart(self, pick, length):
        n = self.standby(pick)
        n.bank()
        n.start("restart")
        return n.name

    def do_watcher(self, pick, length):
        n = self.standby(pick)
        return f"{n.name}: {self.terminate(n, 'replica_gate replay watcher')}"

    # -- faults that change a lease holder, and the switchover --------------
    #
    # A standby whose answer granted it a lease serves strong reads without
    # asking for W' after it asked (WINDOW of W, on its clock); a paying
    # commit must wait for that lease whatever happens to the WAL sender it
    # was granted to, and a new primary for the leases of the old one.
    # Each fault below makes such an answer last (the holder's question
    # worker frozen right after the answer came in, as a question worker
    # held up or cut off would keep it: it then serves reads without
    # asking, checked, until the answer's window ends), takes the lease's
    # WAL sender away and lets another client or standby into its slot (or
    # kills the primary and promotes another server), makes a paying commit
    # and reads strong on the holder right after it.  A build that forgets
    # the lease acknowledges the commit at once, and the holder, which
    # lacks it, serves the read: a "strong" violation, every time the fault
    # is "effective" (its commit began EFFECTIVE_MARGIN or more before the
    # answer's window ended).  A build that keeps it makes the commit wait
    # until the window ended: the read then asks, and times out.  Between
    # the commit and those reads, a strong read on the primary while the
    # commit waits (commit_seen): one that does not wait for the commit to
    # be released returns it at once, and the holder's reads after it miss
    # what it saw ("primary-seen").

    @staticmethod
    def connect(node, strong=False, **opts):
        conn = psycopg.connect(node.dsn(connect_timeout=5, **opts), autocommit=True)
        if strong:
            conn.execute(f"SET replica_gate.default_timeout = {NEMESIS_TIMEOUT_MS}")
            conn.execute("SET replica_gate.consistency = 'strong'")
        return conn

    @staticmethod
    def senders(pc):
        """The primary's WAL senders' pids in slot order (the function lists
        the slots in order, skipping the free ones)."""
        return [r[0] for r in pc.execute("SELECT pid FROM pg_stat_get_wal_senders()")]

    @staticmethod
    def streaming(pc, name):
        """The pid of the primary's WAL sender streaming to "name" (None: none,
        or not one alone)."""
        rows = pc.execute("SELECT pid FROM pg_stat_replication WHERE application_name = %s"
                          " AND state = 'streaming'", (name,)).fetchall()
        return rows[0][0] if len(rows) == 1 else None

    def fill(self, p, pc):
        """Take every free WAL sender slot of primary p with an idle
        replication connection: the slot a fault frees next is then the only
        free one, and the next replication client to connect takes it."""
        free = int(pc.execute("SHOW max_wal_senders").fetchone()[0]) - len(self.senders(pc))
        return [psycopg.connect(p.dsn(connect_timeout=5, replication="true",
                                      application_name="filler"), autocommit=True)
                for _ in range(free)]

    @staticmethod
    def poll(check, seconds, what, step=0.001):
        """Wait until check() returns something true, looking every "step"
        s; returns it, or raises RuntimeError(what)."""
        end = time.time() + seconds
        while True:
            got = check()
            if got:
                return got
            if time.time() > end:
                raise RuntimeError(what)
            time.sleep(step)

    def fresh_lease(self, pc, sender, reader, ctl, rec):
        """Wait until the primary grants WAL sender "sender" a new lease
        (reading strong on its standby, through "reader", so that its
        question worker asks) and the standby took the answer in (its
        questions counted, through "ctl"); note in rec when the lease was
        granted (on this clock, from the expiry the primary shows) and when
        the answer's window ends."""
        w = COMMIT_WAIT_MS
        end, last, asked, read_at = time.time() + 5.0, None, None, 0.0
        while time.time() < end:
            if time.time() - read_at > 0.1:
                read_at = time.time()
                try:
                    reader.execute("SELECT 1")
                except psycopg.Error:
                    pass
            # the questions it took answers of, counted before the lease is
            # looked at: a grant seen at the next look is counted after
            questions = ctl.execute("SELECT questions FROM replica_gate.stats").fetchone()[0]
            before = time.time()
            left = pc.execute("SELECT max(expires_in_ms) FROM replica_gate.leases()"
                              " WHERE sender_pid = %s", (sender,)).fetchone()[0]
            seen = (before + time.time()) / 2
            if left is not None and last is not None and left > last + 1 and left > 0.8 * w:
                self.poll(lambda: ctl.execute("SELECT questions FROM replica_gate.stats")
                          .fetchone()[0] > asked, 0.2, "the answer was not taken in")
                rec["granted"] = seen - (w - left) / 1000
                rec["window_end"] = rec["granted"] + w * WINDOW / 1000
                return
            last, asked = left, questions
            time.sleep(0.002)
        raise RuntimeError(f"no new lease for WAL sender {sender}")

    def grant(self, pc, pid):
        """grant_lease(pid, its start), as the standby's question, an
        archive's helper or anyone with the WAL sender's credentials may ask:
        granted, or the SQLSTATE of its refusal."""
        try:
            row = pc.execute(
                "SELECT granted FROM pg_stat_activity a, replica_gate.grant_lease(a.pid, a.backend_start)"
                " WHERE a.pid = %s", (pid,)).fetchone()
            return row[0] if row else False
        except psycopg.Error as e:
            return e.sqlstate or "connection"

    def commit(self, conn):
        """A paying commit of the nemesis's writer, kept as acknowledged;
        returns when it began and when it was acknowledged."""
        seq = self.seq + 1
        began = time.time()
        conn.execute(f"INSERT INTO h VALUES ({NEMESIS_WRITER}, {seq})")
        acked = time.time()
        self.seq = seq
        token = conn.execute("SELECT replica_gate.last_commit_token()").fetchone()[0]
        self.acks.append({"t": acked, "writer": NEMESIS_WRITER, "seq": seq, "token": token})
        return began, acked

    @staticmethod
    def warm(conn):
        """Read what a strong read reads through conn, once, untimed and not
        kept: a new session plans its first read through "parent" slowly
        (every child's relation to load), which would delay the strong read
        on the primary of commit_seen() by 100 ms or more."""
        try:
            Reader.read_schema(conn)
            conn.execute(ROWS).fetchall()
        except psycopg.Error:
            pass

    def commit_seen(self, commit, vc, ps, primary, by, rec):
        """Begin commit(), a paying commit of the nemesis's writer (of seq
        self.seq + 1; it returns when it began and when it was
        acknowledged), in a thread; as soon as vc, a plain session on the
        primary, sees its row, read strong on the primary through ps (a
        session of the mode 'strong' there), as a strong reader of the
        primary might while the commit waits for the holder: a build whose
        strong read on the primary does not wait returns it before it is
        released, and the reads on the holder after it miss what it saw
        ("primary-seen").  Returns a function that waits for the commit
        (for at most "timeout" s) and notes its moments in rec, or raises
        what it raised."""
        seq, box = self.seq + 1, {}

        def run():
            try:
                box["times"] = commit()
            except Exception as e:      # noqa: BLE001 - raised by done()
                box["error"] = e
        th = threading.Thread(target=run, daemon=True)
        th.start()
        self.poll(lambda: box or vc.execute(
            "SELECT count(*) FROM h WHERE writer = %s AND seq = %s",
            (NEMESIS_WRITER, seq)).fetchone()[0], 30, "the commit is not visible")
        e = self.strong_read(ps, primary, by, primary=True)
        rec["primary_read"] = {k: e[k] for k in ("node", "t0", "t1", "outcome")}
        rec["primary_saw"] = e.get("saw", {}).get(str(NEMESIS_WRITER), 0) >= seq

        def done(timeout=60):
            th.join(timeout)
            if th.is_alive():
                raise RuntimeError("the commit does not return")
            if "error" in box:
                raise box["error"]
            rec["commit"], rec["acked"] = box["times"]
        return done

    def strong_read(self, conn, node, by, **extra):
        """A strong read on node, as a reader's, kept in the history."""
        return strong_read(conn, node, self.history, by=by, **extra)

    def read_after(self, reader, node, by, rec, grant=None):
        """Strong reads on node right after the commit, until its answer's
        window ended (at least one; the holder's question worker is frozen,
        so a read its answer does not serve times out); with "grant" (a
        pc and a pid), the grant asked again between them."""
        reads = []
        while not reads or time.time() < rec["window_end"] + 0.02 and len(reads) < 20:
            reads.append(self.strong_read(reader, node, by))
            if grant is not None:
                rec["grants"].append(self.grant(*grant))
        rec["reads"] = counts(Counter(e["outcome"] for e in reads))
        rec["reads_in_window"] = sum(e["t0"] < rec["window_end"] for e in reads)

    @staticmethod
    def serving(ctl, reader, node):
        """Wait until node serves strong reads locally (its count of them
        moves around a strong read): after a new question connection its
        answers serve none until the clock check has held."""
        def local():
            return ctl.execute("SELECT strong_reads_local FROM replica_gate.stats").fetchone()[0]
        end = time.time() + 10
        while True:
            before = local()
            try:
                reader.execute("SELECT 1")
            except psycopg.Error:
                pass
            if local() > before:
                return
            if time.time() > end:
                raise RuntimeError(f"{node.name} serves no strong read locally")
            time.sleep(0.05)

    def holds(self, reader, node, by):
        """Does node serve strong reads locally with the answer its frozen
        question worker left?  (A read that had to ask would time out; an
        answer can fail the clock check, and serve none.)"""
        if self.strong_read(reader, node, by)["outcome"] != "pass":
            raise RuntimeError(f"{node.name} serves no strong read locally")

    @staticmethod
    def effective(rec):
        """Did the commit begin early enough in the holder's window?"""
        return rec["commit"] < rec["window_end"] - EFFECTIVE_MARGIN

    def do_receivewal(self, pick, length):
        return self.holder("receivewal", pick)

    def do_takeover(self, pick, length):
        return self.holder("takeover", pick)

    def do_reconnect(self, pick, length):
        return self.holder("reconnect", pick)

    def holder(self, kind, pick):
        """Up to HOLDER_TRIES attempts at a holder change (holder_try) until
        one is effective: its slot taken by the new client and its commit
        early enough in the holder's window."""
        tries = []
        for _ in range(HOLDER_TRIES):
            rec = {}
            tries.append(rec)
            try:
                self.holder_try(kind, pick, rec)
            except Exception as e:      # noqa: BLE001 - recorded, tried again
                rec["error"] = str(e)
            if rec.get("effective"):
                break
        last = tries[-1]
        self.extra = dict(last, tries=len(tries), effective=bool(last.get("effective")),
                          earlier=tries[:-1])
        if "error" in last:
            raise RuntimeError(last["error"])
        return (f"{last['holder']}'s slot {last['slot']} to {last['new']}"
                f"{'' if last['same_slot'] else ' (another slot)'}, commit at "
                f"{(last['commit'] - last['granted']) * 1000:.0f} ms of the lease, took "
                f"{(last['acked'] - last['commit']) * 1000:.0f} ms; reads on "
                f"{last['holder']}: {last['reads']}")

    def holder_try(self, kind, pick, rec):
        """One attempt.  The holder: a standby streaming from the primary that
        holds a lease.  Its question worker frozen on a new answer; then
          receivewal: it is partitioned (its WAL receiver frozen too), its
            WAL sender terminated on the primary, pg_receivewal (an archive)
            takes the slot;
          takeover: as receivewal, but another standby, whose WAL receiver
            is terminated, reconnects into the slot (the holder is the one in
            the lower slot);
          reconnect: its own WAL receiver terminated: it reconnects into its
            slot with a new WAL sender, and its replay is paused;
        the new WAL sender granted leases (grant_lease(), as its question,
        an archive's helper or anyone with its credentials may ask), a
        paying commit, strong reads on the holder.  Every other free slot is
        taken first (fill), so the freed one is the only one free."""
        c = self.cluster
        p = c.primary
        conns, fillers, stopped, paused, rw, pending = [], [], [], None, None, None
        rwdir = os.path.join(c.base, "receivewal")
        try:
            pc = self.connect(p)
            conns.append(pc)
            wc = self.connect(p)
            conns.append(wc)
            ps = self.connect(p, strong=True)
            conns.append(ps)
            self.warm(ps)
            direct = sorted((n for n in c.standbys() if n.upstream is p), key=lambda n: n.name)
            pids = {n.name: self.streaming(pc, n.name) for n in direct}
            direct = [n for n in direct if pids[n.name]]
            live = {r[0] for r in pc.execute("SELECT sender_pid FROM replica_gate.leases()"
                                             " WHERE expires_in_ms > 0")}
            holders = [n for n in direct if pids[n.name] in live] or direct
            if not holders:
                raise RuntimeError("no standby streams from the primary")
            fillers = self.fill(p, pc)
            slots = self.senders(pc)
            if kind == "takeover":
                holders.sort(key=lambda n: slots.index(pids[n.name]))
                s1 = holders[0]
                others = [n for n in direct
                          if slots.index(pids[n.name]) > slots.index(pids[s1.name])]
                if not others:
                    raise RuntimeError("no other standby streams from the primary")
                s2 = others[int(pick * len(others))]
                wr2 = self.receivers(s2)
                # its own lease, which its WAL sender would leave behind, lapses
                # first: its question worker frozen until the end
                qw2 = [x for x, _ in s2.processes_titled("replica_gate question")]
                self.signal_all(qw2, signal.SIGSTOP)
                stopped += qw2
                rec["other"] = s2.name
                self.poll(lambda: not pc.execute(
                    "SELECT count(*) FROM replica_gate.leases() WHERE sender_pid = %s"
                    " AND expires_in_ms > 0", (pids[s2.name],)).fetchone()[0],
                    2 * COMMIT_WAIT_MS / 1000, f"{s2.name}'s lease does not expire", step=0.01)
            else:
                s1 = holders[int(pick * len(holders))]
            self.node = s1.name
            old = pids[s1.name]
            rec.update(holder=s1.name, sender=old, slot=slots.index(old))
            ctl = self.connect(s1)
            conns.append(ctl)
            reader = self.connect(s1, strong=True)
            conns.append(reader)
            qw = [x for x, _ in s1.processes_titled("replica_gate question")]
            wr = self.receivers(s1)
            self.serving(ctl, reader, s1)
            self.fresh_lease(pc, old, reader, ctl, rec)
            lsn = pc.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
            self.signal_all(qw, signal.SIGSTOP)
            stopped += qw
            rec["frozen"] = time.time()
            # its replay past the answer's position, then nothing more
            self.poll(lambda: ctl.execute("SELECT pg_last_wal_replay_lsn() >= %s",
                                          (lsn,)).fetchone()[0], 1.0, "no replay")
            self.holds(reader, s1, kind)
            if kind == "reconnect":
                # (replay paused once it streams again: a paused startup
                # process would not start a WAL receiver)
                self.signal_all(wr, signal.SIGTERM)
                name = s1.name
            else:
                self.signal_all(wr, signal.SIGSTOP)
                stopped += wr
                pc.execute("SELECT pg_terminate_backend(%s)", (old,))
                if kind == "takeover":
                    self.signal_all(wr2, signal.SIGTERM)
                    name = s2.name
                else:
                    shutil.rmtree(rwdir, ignore_errors=True)
                    os.makedirs(rwdir)
                    rw = subprocess.Popen([c.bin("pg_receivewal"), "-D", rwdir, "-d", p.dsn(),
                                           "-n"], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                    name = "pg_receivewal"
            rec["freed"] = time.time()
            before = pids.get(name)
            new = self.poll(lambda: (lambda x: x if x not in (None, old, before) else None)(
                self.streaming(pc, name)), 10, f"{name} does not stream")
            rec["taken"] = time.time()
            rec.update(new=name, new_sender=new,
                       same_slot=self.senders(pc).index(new) == rec["slot"])
            if kind == "reconnect":
                ctl.execute("SELECT pg_wal_replay_pause()")
                paused = ctl
            rec["grants"] = [self.grant(pc, new)]
            pending = self.commit_seen(lambda: self.commit(wc), pc, ps, p, kind, rec)
            self.read_after(reader, s1, kind, rec, grant=(pc, new))
            pending, done = None, pending
            done()
            rec["effective"] = rec["same_slot"] and self.effective(rec)
        finally:
            if pending is not None:
                try:
                    pending(timeout=5)
                except Exception:       # noqa: BLE001 - the fault failed already
                    pass
            if rw is not None:
                rw.terminate()
                rw.wait()
            for f in fillers:
                f.close()
            if paused is not None:
                paused.execute("SELECT pg_wal_replay_resume()")
            self.signal_all(stopped, signal.SIGCONT)
            for x in conns:
                x.close()
            shutil.rmtree(rwdir, ignore_errors=True)
        # back to normal: the holder streams again
        wait_until(lambda: s1.upstream is not c.primary or c.primary.sql(
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
            f" AND application_name = '{s1.name}'")[0][0] == 1, 30,
            f"{s1.name} does not stream again")

    def follow(self, old, new, children):
        """After a switchover's kill and promotion: the others follow the new
        primary, the old one rewound."""
        c = self.cluster

        def left():
            """Its processes: those killed, and any that began after they
            were listed, by their title (they exit once they see the
            postmaster gone)."""
            if any(os.path.exists(f"/proc/{x}") for x in children):
                return True
            for entry in os.listdir("/proc"):
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        if f.read().startswith(f"postgres: {old.name}: ".encode()):
                            return True
                except OSError:
                    pass
            return False
        wait_until(lambda: not left(), 30, "the killed primary's processes do not exit")
        self.killed = time.time()
        with c.lock:
            for n in c.nodes.values():
                if n is old or n is new:
                    continue
                if n.upstream is old:
                    n.upstream = new
                n.stream()
        self.rejoin(old, new)

    def do_switchover(self, pick, length):
        """The primary goes at once (kill -9 of all its processes, its writers
        held by a lock once its standbys had everything), a standby is
        promoted, and its first paying commit comes while another standby,
        its question worker frozen on an answer of the old primary, may
        still serve strong reads with it: the new primary cannot know the
        leases of the old one, and must wait W.  Then the others follow the
        new primary, the old one rewound."""
        c = self.cluster
        old = c.primary
        self.node = old.name
        rec = self.extra = {}
        conns, qw, children, new, pending = [], [], [], None, None
        try:
            pc = self.connect(old)
            conns.append(pc)
            direct = sorted((n for n in c.standbys() if n.upstream is old), key=lambda n: n.name)
            pids = {n.name: self.streaming(pc, n.name) for n in direct}
            direct = [n for n in direct if pids[n.name]]
            if len(direct) < 2:
                raise RuntimeError("fewer than two standbys stream from the primary")
            new = direct[int(pick * len(direct))]
            live = {r[0] for r in pc.execute("SELECT sender_pid FROM replica_gate.leases()"
                                             " WHERE expires_in_ms > 0")}
            others = [n for n in direct if n is not new]
            s = ([n for n in others if pids[n.name] in live] or others)[0]
            rec.update(holder=s.name, new=new.name)
            nc = self.connect(new)
            conns.append(nc)
            # a plain session and a strong one on it, for once it is promoted
            vc = self.connect(new)
            conns.append(vc)
            ps = self.connect(new, strong=True)
            conns.append(ps)
            self.warm(ps)
            ctl = self.connect(s)
            conns.append(ctl)
            reader = self.connect(s, strong=True)
            conns.append(reader)
            qw = [x for x, _ in s.processes_titled("replica_gate question")]
            self.serving(ctl, reader, s)
            children = old.processes()
            old.bank()
            lock = self.connect(old)
            conns.append(lock)
            lock.execute("BEGIN")
            lock.execute("LOCK TABLE h IN EXCLUSIVE MODE")
            rec["locked"] = time.time()
            lsn = pc.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
            for n, x in ((new, nc), (s, ctl)):
                self.poll(lambda x=x: x.execute("SELECT pg_last_wal_replay_lsn() >= %s",
                                                (lsn,)).fetchone()[0], 10,
                          f"{n.name} does not catch up", step=0.005)
            for attempt in range(HOLDER_TRIES):
                self.fresh_lease(pc, pids[s.name], reader, ctl, rec)
                self.signal_all(qw, signal.SIGSTOP)
                rec["frozen"] = time.time()
                try:
                    self.holds(reader, s, "switchover")
                    break
                except RuntimeError:
                    self.signal_all(qw, signal.SIGCONT)
                    if attempt == HOLDER_TRIES - 1:
                        raise
            self.signal_all(children, signal.SIGKILL)
            self.cut = rec["killed_at"] = time.time()
            nc.execute("SELECT pg_promote(false)")
            with c.lock:
                c.primary, new.upstream = new, None

            def first_commit():
                try:
                    return self.commit(nc)
                except psycopg.errors.ReadOnlySqlTransaction:
                    return None
            pending = self.commit_seen(lambda: self.poll(first_commit, 30, "no promotion"),
                                       vc, ps, new, "switchover", rec)
            self.read_after(reader, s, "switchover", rec)
            pending, done = None, pending
            done()
            rec["effective"] = self.effective(rec)
        finally:
            if pending is not None:
                try:
                    pending(timeout=5)
                except Exception:       # noqa: BLE001 - the fault failed already
                    pass
            self.signal_all(qw, signal.SIGCONT)
            for x in conns:
                x.close()
            if c.primary is new:
                self.follow(old, new, children)
        return (f"{old.name} killed, {new.name} promoted, commit at "
                f"{(rec['commit'] - rec['granted']) * 1000:.0f} ms of {s.name}'s lease, took "
                f"{(rec['acked'] - rec['commit']) * 1000:.0f} ms; reads on {s.name}: "
                f"{rec['reads']}")


class Writer(threading.Thread):
    """Inserts (writer, seq) on the primary and keeps each write's token."""

    pause = 0.01

    def __init__(self, cluster, wid, acks, stop):
        super().__init__(daemon=True)
        self.cluster, self.wid, self.acks, self.stop = cluster, wid, acks, stop

    def write(self, conn, seq):
        """Commit write seq; what to note with its acknowledgement."""
        conn.execute(f"INSERT INTO h VALUES ({self.wid}, {seq})")
        return {}

    def record(self, ack):
        """Keep an acknowledged write."""
        self.acks.append(ack)

    def run(self):
        seq, conn = 0, None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(self.cluster.primary.dsn(connect_timeout=2),
                                           autocommit=True)
                    if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                        raise psycopg.OperationalError("not the primary")
                    if self.wid == 2:
                        # its COMMIT returns before the WAL is flushed, and
                        # so before it is sent: kill -9 loses the last ones
                        conn.execute("SET synchronous_commit = off")
                seq += 1
                noted = self.write(conn, seq)
                acked = time.time()
                token = conn.execute("SELECT replica_gate.last_commit_token()").fetchone()[0]
                self.record({"t": acked, "writer": self.wid, "seq": seq, "token": token,
                             **noted})
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
            time.sleep(self.pause)


class SchemaWriter(Writer):
    """Changes the schema, by turns: adds table child_<seq>, a child of
    "parent" holding the row n = seq, or makes version_fn() return seq.  The
    row (writer, seq) of h, in the same transaction, tells whether the change
    survived the failovers.  Keeps its changes for the readers too."""

    pause = SCHEMA_EVERY

    def __init__(self, cluster, acks, changes, stop):
        super().__init__(cluster, SCHEMA_WRITER, acks, stop)
        self.changes = changes

    def write(self, conn, seq):
        change = "child" if seq % 2 else "function"
        with conn.transaction():
            if change == "child":
                conn.execute(f"CREATE TABLE child_{seq} () INHERITS (parent)")
                conn.execute(f"INSERT INTO child_{seq} VALUES ({seq})")
            else:
                conn.execute("CREATE OR REPLACE FUNCTION version_fn() RETURNS int"
                             f" LANGUAGE sql AS 'SELECT {seq}'")
            conn.execute(f"INSERT INTO h VALUES ({self.wid}, {seq})")
        return {"change": change}

    def record(self, ack):
        super().record(ack)
        self.changes.append(ack)


class Reader(threading.Thread):
    """Gates reads on one node, in every form, and records each."""

    def __init__(self, node, rng, acks, changes, history, faults, stop):
        super().__init__(daemon=True)
        self.node, self.rng, self.acks, self.changes = node, rng, acks, changes
        self.faults = faults
        self.around = (None, [])    # the latest failover, the writes around its cut
        self.history, self.stop = history, stop

    def pick(self):
        """A write to gate on: mostly a recent one, sometimes an older one,
        the latest schema change, or one of the latest failover's writes:
        acknowledged from BEFORE_CUT s before its cut to its kill, the last
        that survived, then the lost ones."""
        r = self.rng.random()
        failovers = [f for f in self.faults if f["kind"] == "failover"]
        if r < 0.2 and failovers:
            if self.around[0] is not failovers[-1]:
                # appended nearly in time order: enough to pick targets
                f, times = failovers[-1], [a["t"] for a in self.acks]
                self.around = (f, self.acks[bisect.bisect_left(times, f["cut"] - BEFORE_CUT):
                                            bisect.bisect_left(times, f["killed"])])
            if self.around[1]:
                return self.rng.choice(self.around[1])
        if r < 0.3 and self.changes:
            return self.changes[-1]
        if r < 0.5:
            return self.rng.choice(self.acks[-2000:])
        return self.rng.choice(self.acks[-50:])

    @staticmethod
    def read_schema(conn):
        """The highest child's row and version_fn(), read across the changes."""
        return dict(zip(("child", "function"), conn.execute(SCHEMA_READ).fetchone()))

    def read(self, conn, form, target):
        """Gate a read in "form" (on write "target" for the token forms);
        returns (outcome, what the read saw)."""
        q = conn.execute
        if target is not None:
            tok = target["token"]
            if form == "set":
                q(f"SET replica_gate.require_lsn = '{tok}'")
            elif form == "require":
                q(f"SELECT replica_gate.require_lsn('{tok}', {TIMEOUT_MS})")
            else:
                call = (f"wait_for_lsn('{tok}', {TIMEOUT_MS})" if form == "wait"
                        else f"caught_up('{tok}')")
                if not q(f"SELECT replica_gate.{call}").fetchone()[0]:
                    return "false", None
            if "change" in target:
                return "pass", self.read_schema(conn)
            return "pass", q(f"SELECT count(*) FROM h WHERE writer = {target['writer']}"
                             f" AND seq = {target['seq']}").fetchone()[0]
        if form == "strong":
            q("SET replica_gate.consistency = 'strong'")
            try:
                # the schema first: the gate of the rows would catch up
                # replay before the schema's statement is planned
                saw = self.read_schema(conn)
                saw.update(q(ROWS).fetchall())
                return "pass", saw
            finally:
                q("SET replica_gate.consistency = 'eventual'")
        q(f"SELECT replica_gate.require_fresh('{FRESH}s', {TIMEOUT_MS})")
        return "pass", dict(q(ROWS).fetchall())

    def run(self):
        conn = None
        while not self.stop.is_set():
            form = self.rng.choice(FORMS)
            entry = {"node": self.node.name, "form": form}
            target = None
            if form in ("set", "require", "wait", "caught_up"):
                if not self.acks:
                    time.sleep(0.01)
                    continue
                target = entry["target"] = self.pick()
            try:
                if conn is None:
                    conn = psycopg.connect(self.node.dsn(connect_timeout=2), autocommit=True)
                    conn.execute(f"SET replica_gate.default_timeout = {TIMEOUT_MS}")
                entry["t0"] = time.time()
                entry["outcome"], saw = self.read(conn, form, target)
                entry["saw"] = {str(k): v for k, v in saw.items()} if isinstance(saw, dict) else saw
            except psycopg.Error as e:
                entry["outcome"] = e.sqlstate or "connection"
                entry["error"] = str(e).split("\n")[0][:160]
                if entry["outcome"] == "connection" or e.sqlstate.startswith("57") \
                        or e.sqlstate.startswith("08"):
                    conn = None
                elif conn is not None and conn.info.transaction_status != 0:
                    conn.execute("ROLLBACK")
            entry["t1"] = time.time()
            if "t0" in entry:
                self.history.append(entry)
            time.sleep(0.005)


def strong_read(conn, node, history, **extra):
    """A strong read on node through conn (a session of the mode 'strong'),
    as a reader's: the schema, then the rows; kept in the history, with
    "extra" (the nemesis's "by", "primary" for a read on the primary)."""
    entry = {"node": node.name, "form": "strong", **extra, "t0": time.time()}
    try:
        saw = Reader.read_schema(conn)
        saw.update(conn.execute(ROWS).fetchall())
        entry.update(outcome="pass", saw={str(k): v for k, v in saw.items()})
    except psycopg.Error as e:
        entry.update(outcome=e.sqlstate or "connection", error=str(e).split("\n")[0][:160])
    entry["t1"] = time.time()
    history.append(entry)
    return entry


class PrimaryReader(threading.Thread):
    """Reads strong on whichever server is the primary (a session of the
    mode 'strong' there, which connects again after a failover or a
    switchover, as the writers do), what the strong readers of the
    standbys read; each read is kept with "primary" set.  Such a read may
    see a paying commit not yet acknowledged, and returns only once it is
    released: every strong read that begins after it must see what it saw
    (the checker's "primary-seen")."""

    def __init__(self, cluster, history, stop):
        super().__init__(daemon=True)
        self.cluster, self.history, self.stop = cluster, history, stop

    def run(self):
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    node = self.cluster.primary
                    conn = psycopg.connect(node.dsn(connect_timeout=2), autocommit=True)
                    if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                        raise psycopg.OperationalError("not the primary")
                    conn.execute("SET replica_gate.consistency = 'strong'")
                if strong_read(conn, node, self.history, primary=True)["outcome"] != "pass":
                    conn.close()
                    conn = None
                    time.sleep(0.1)
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
            time.sleep(0.005)


def losses(acks, final, faults):
    """The acknowledged writes absent from the final primary, each with when
    the failover that lost it killed its primary (None if none followed)."""
    failovers = sorted(f["killed"] for f in faults if f["kind"] in ("failover", "switchover"))
    return {(a["writer"], a["seq"]): next((t for t in failovers if t > a["t"]), None)
            for a in acks if (a["writer"], a["seq"]) not in final}


def on_lost(h, lost):
    """Whether read h gated on a write lost in a failover, and began after it."""
    tgt = h.get("target")
    killed = lost.get((tgt["writer"], tgt["seq"])) if tgt else None
    return killed is not None and h["t0"] > killed


def owed_seen(history, final):
    """What the strong reads on the primary saw, as owed to the strong reads
    that begin after them: per key of what a strong read sees (a writer, or
    "child" and "function"), the ends of those reads in order, the highest
    write seen by then that survived (the highest of that writer's, or of
    that kind of schema change's, in the final primary at or below what the
    read saw: a write seen on a primary that was then lost is not owed),
    and the read that saw it."""
    kept = defaultdict(list)
    for w, seq in final:
        kept[str(w)].append(seq)
        if w == SCHEMA_WRITER:
            kept["child" if seq % 2 else "function"].append(seq)
    for v in kept.values():
        v.sort()
    seen = defaultdict(lambda: ([], [], []))
    for h in sorted(history, key=lambda h: h["t1"]):
        if h.get("primary") and h["outcome"] == "pass":
            for k, v in h["saw"].items():
                i = bisect.bisect_right(kept[k], v)
                owed = kept[k][i - 1] if i > 0 else 0
                ends, highest, by = seen[k]
                if not highest or owed > highest[-1]:
                    ends.append(h["t1"])
                    highest.append(owed)
                    by.append(h)
    return seen


def check(history, acks, lost, faults, logs, waiters, final):
    """The violations in a history, each with the lines that show it, and
    the fresh reads on a slowed standby, not checked: (passes, how many of
    them lacked a write)."""
    violations = []
    unchecked = [0, 0]
    writers = sorted({a["writer"] for a in acks})
    seen = owed_seen(history, final)

    def seen_before(t, k):
        """The highest surviving write of key k seen by a strong read on the
        primary that ended before t, and that read (None if none)."""
        ends, highest, by = seen[k] if k in seen else ([], [], [])
        i = bisect.bisect_left(ends, t)
        return (highest[i - 1], by[i - 1]) if i > 0 else (0, None)

    # per writer and per kind of schema change: the times of its surviving
    # acknowledgements, in order, and the highest seq acknowledged up to each
    survived = defaultdict(lambda: ([], []))
    for a in sorted(acks, key=lambda a: a["t"]):
        if (a["writer"], a["seq"]) not in lost:
            for k in (a["writer"], a["change"]) if "change" in a else (a["writer"],):
                times, highest = survived[k]
                times.append(a["t"])
                highest.append(max(a["seq"], highest[-1] if highest else 0))

    def acked_before(t, k):
        """The highest surviving seq of writer (or schema change) k
        acknowledged before t."""
        times, highest = survived[k]
        i = bisect.bisect_left(times, t)
        return highest[i - 1] if i > 0 else 0

    # a frozen server answers nothing: an operation on it is not the gate's;
    # a slowed one's timeouts last twice as long, and its staleness bounds
    # assume that its clock agrees with the primary's
    frozen = [(f["node"], f["t0"], f["t1"]) for f in faults
              if f["kind"] in ("freeze", "stall") and f["outcome"] == "done"]
    slowed = [(f["node"], f["t0"], f["t1"]) for f in faults
              if f["kind"] == "clock" and f["node"] is not None]

    def during(h, spans):
        return any(node == h["node"] and t0 < h["t1"] and t1 > h["t0"]
                   for node, t0, t1 in spans)

    for h in history:
        out, tgt = h["outcome"], h.get("target")
        if out in ("RG001", "false", "pass") and \
                (h["t1"] - h["t0"]) * 1000 > TIMEOUT_MS + SLACK_MS and \
                not during(h, frozen) and not during(h, slowed):
            violations.append(("overrun", h))
        if tgt is not None:
            key = (tgt["writer"], tgt["seq"])
            if out == "pass" and key not in lost:
                if "change" in tgt and h["saw"][tgt["change"]] < tgt["seq"]:
                    violations.append(("schema", h))
                elif "change" not in tgt and h["saw"] != 1:
                    violations.append(("missed", h))
            if out == "pass" and on_lost(h, lost):
                violations.append(("lost", h))
            if out == "RG002" and key not in lost:
                violations.append(("survived", h))
        elif out == "pass":
            kind = "strong" if h["form"] == "strong" else "fresh"
            limit = 0 if kind == "strong" else FRESH + FRESH_SLACK
            needs = [(w, kind) for w in writers]
            if kind == "strong":
                needs += [("child", "schema"), ("function", "schema")]
            exempt = kind == "fresh" and during(h, slowed)
            unchecked[0] += exempt
            missed = False
            for k, what in needs:
                need = acked_before(h["t0"] - limit, k)
                if h["saw"].get(str(k), 0) < need:
                    if exempt:
                        unchecked[1] += 1
                    else:
                        violations.append((what, dict(h, expected={str(k): need})))
                    missed = True
                    break
            # what a strong read on the primary saw before it began
            for k in sorted(seen) if kind == "strong" and not missed else ():
                need, by = seen_before(h["t0"], k)
                if h["saw"].get(k, 0) < need:
                    violations.append(("primary-seen", dict(
                        h, expected={k: need},
                        seen_by={x: by[x] for x in ("node", "t0", "t1", "by") if x in by})))
                    break
    for f in faults:
        if f["kind"] == "clock" and f.get("served") and f["served"][1] > 0:
            violations.append(("clock", {k: f[k] for k in ("node", "t0", "t1", "what")}))
    for line in logs:
        violations.append(("crash", {"log": line}))
    for name, n in waiters.items():
        if n != 0:
            violations.append(("waiters", {"node": name, "waiters": n}))
    return violations, unchecked


def primary_reads(history, acks, final):
    """The strong reads on the primary: how many, how many saw a surviving
    write acknowledged only after they began (they had to wait for it),
    and how many saw one not yet acknowledged when they returned (the case
    "primary-seen" exists for: a strong read that begins between the two
    owes that write to the read on the primary alone); with a line to
    print."""
    acked = {(a["writer"], a["seq"]): a["t"] for a in acks}
    reads = [e for e in history if e.get("primary")]
    passed = [e for e in reads if e["outcome"] == "pass"]
    began, unacked, lead = [], [], []
    for e in passed:
        # the newest write of each writer it saw (a writer's commits are
        # visible in order), if acknowledged and not lost
        times = [acked[(int(k), v)] for k, v in e["saw"].items()
                 if k.isdigit() and (int(k), v) in final and (int(k), v) in acked]
        if any(t > e["t0"] for t in times):
            began.append(e)
        if any(t > e["t1"] for t in times):
            unacked.append(e)
            lead.append(max(times) - e["t1"])

    def ms(es):
        d = sorted((e["t1"] - e["t0"]) * 1000 for e in es)
        return f"median {d[len(d) // 2]:.1f} ms, max {d[-1]:.0f} ms" if d else "none"
    waited = {id(e) for e in began}
    others = [e for e in passed if id(e) not in waited]
    line = (f"strong reads on the primary: {len(reads)}, {len(passed)} passed "
            f"({sum('by' in e for e in passed)} of them the nemesis's, after its commits);"
            f" {len(began)} saw a write acknowledged only after they began ({ms(began)};"
            f" the others {ms(others)}); {len(unacked)} saw one not yet acknowledged when"
            f" they returned ({sum('by' in e for e in unacked)} of them the nemesis's"
            + (f"; returned up to {max(lead) * 1000:.1f} ms, median "
               f"{sorted(lead)[len(lead) // 2] * 1000:.2f} ms, before it" if lead else "")
            + ")")
    return {"reads": reads, "began": began, "unacked": unacked, "line": line}


def counts(tally):
    """A tally as "outcome count, ...", in the order of the outcomes."""
    return ", ".join(f"{k} {c}" for k, c in sorted(tally.items()))


def svg(path, start, history, faults, seconds):
    """Faults against gate outcomes and latency, as an SVG timeline."""
    w, h, top = 1000, 360, 40
    colour = {"pass": "#2a2", "false": "#e90", "RG001": "#e90", "RG002": "#c0c",
              "RG003": "#c0c"}
    x = lambda t: 50 + (t - start) / seconds * (w - 60)          # noqa: E731
    y = lambda ms: h - 20 - min(ms, 3000) / 3000 * (h - top - 20)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="10">',
           f'<text x="50" y="12">faults (top), gate latency in ms (0-3000, up) over '
           f'{seconds:.0f} s; green pass, orange refused or timed out, violet RG002/RG003, '
           'grey other</text>']
    for f in faults:
        out.append(f'<rect x="{x(f["t0"]):.1f}" y="18" width="{max(x(f["t1"]) - x(f["t0"]), 2):.1f}" '
                   f'height="12" fill="#888"><title>{f["kind"]} {f["what"]}</title></rect>'
                   f'<text x="{x(f["t0"]):.1f}" y="40">{f["kind"]}</text>')
    for e in history:
        ms = (e["t1"] - e["t0"]) * 1000
        out.append(f'<circle cx="{x(e["t0"]):.1f}" cy="{y(ms):.1f}" r="1.5" '
                   f'fill="{colour.get(e["outcome"], "#999")}"/>')
    for ms in (0, 1000, 2000, 3000):
        out.append(f'<text x="5" y="{y(ms):.1f}">{ms}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--ports", default="54311")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    out = args.out or tempfile.mkdtemp(prefix="replica_gate_chaos.")
    os.makedirs(out, exist_ok=True)
    base = tempfile.mkdtemp(prefix="rg_chaos.")
    first = int(args.ports)
    cluster = Cluster(os.environ.get("PG_CONFIG", "pg_config"), base)
    log(f"seed {seed}, {args.seconds:.0f} s, servers in {base}, results in {out}")
    acks, changes, history, faults = [], [], [], []
    try:
        cluster.start([first + i for i in range(4)])
        direct = sorted(n.name for n in cluster.standbys() if n.upstream is cluster.primary)
        stop = threading.Event()
        nemesis = Nemesis(cluster, seed, args.seconds, faults, acks, history)
        rng = random.Random(seed + 1)
        threads = [Writer(cluster, w, acks, stop) for w in (1, 2)]
        threads.append(SchemaWriter(cluster, acks, changes, stop))
        threads += [Reader(n, random.Random(rng.random()), acks, changes, history, faults, stop)
                    for n in cluster.standbys() for _ in range(2)]
        threads += [PrimaryReader(cluster, history, stop) for _ in range(PRIMARY_READERS)]
        start = time.time()
        for t in threads:
            t.start()
        nemesis.start()
        time.sleep(args.seconds)
        nemesis.stop.set()
        nemesis.join()
        stop.set()
        for t in threads:
            t.join(timeout=30)

        # the end: every node up and caught up, then the final history
        for n in cluster.nodes.values():
            if n.postmaster() is None or n.ctl("status", check=False).returncode != 0:
                n.start()
        end_lsn = cluster.primary.sql("SELECT pg_current_wal_insert_lsn()")[0][0]
        for n in cluster.standbys():
            wait_until(lambda n=n: n.sql(f"SELECT pg_last_wal_replay_lsn() >= '{end_lsn}'")[0][0],
                       60, f"{n.name} does not catch up")
        final = {tuple(r) for r in cluster.primary.sql("SELECT writer, seq FROM h")}
        waiters = {n.name: n.sql("SELECT replica_gate.waiters()")[0][0]
                   for n in cluster.nodes.values()}
        for n in cluster.nodes.values():
            n.bank()
    finally:
        crash = []
        for n in cluster.nodes.values():
            n.ctl("stop", "-m", "fast", check=False)
            with open(n.logfile, errors="replace") as f:
                crash += [f"{n.name}: {line.strip()}" for line in f
                          if "terminated by signal" in line]
            shutil.copy(n.logfile, out)

    lost = losses(acks, final, faults)
    violations, unchecked = check(history, acks, lost, faults, crash, waiters, final)
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        for e in sorted(history, key=lambda e: e["t0"]):
            f.write(json.dumps(e) + "\n")
    with open(os.path.join(out, "writes.jsonl"), "w") as f:
        for a in acks:
            f.write(json.dumps(dict(a, lost=(a["writer"], a["seq"]) in lost)) + "\n")
    with open(os.path.join(out, "faults.jsonl"), "w") as f:
        for e in faults:
            f.write(json.dumps(e) + "\n")
    svg(os.path.join(out, "timeline.svg"), start, history, faults, args.seconds)

    ops = Counter(("primary" if e.get("primary") else e["form"], e["outcome"]) for e in history)
    failovers = sum(f["kind"] == "failover" for f in faults)
    lossy = {t for t in lost.values() if t in {f["killed"] for f in faults
                                                  if f["kind"] == "failover"}}
    on_schema = Counter(e["outcome"] for e in history if "change" in e.get("target", {}))
    after = [e for e in history if on_lost(e, lost)]
    print(f"\n== replica_gate chaos: seed {seed}, {args.seconds:.0f} s, "
          f"{len(acks)} writes acknowledged ({len(changes)} schema changes), "
          f"{len(lost)} lost in {len(lossy)} of {failovers} failovers")
    print("operations (form: outcome count):")
    for form in FORMS + ["primary"]:
        print(f"  {form:10s} " + counts({o: c for (fm, o), c in ops.items() if fm == form}))
    print("token gates on a schema change: " + counts(on_schema))
    seen_early = primary_reads(history, acks, final)
    print(seen_early["line"])
    print(f"gates on a lost write after its failover: {len(after)}, on "
          f"{len({(e['target']['writer'], e['target']['seq']) for e in after})} writes: "
          + counts(Counter(e["outcome"] for e in after)))
    print("faults: " + ", ".join(f"{k} {c}" for k, c in Counter(
        f["kind"] + ("" if f["outcome"] == "done" else " (failed)") for f in faults).items()))
    gates, local = (sum(n.served[i] for n in cluster.nodes.values()) for i in (0, 1))
    clocks = [f["served"] for f in faults if f["kind"] == "clock" and f.get("served")]
    print(f"strong-read gates (replica_gate.stats): {gates}, {local} served locally ("
          + ", ".join(f"{n.name} {n.served[1]} of {n.served[0]}"
                      for n in sorted(cluster.nodes.values(), key=lambda n: n.name))
          + f"); at half speed, in {len(clocks)} clock faults: {sum(s[0] for s in clocks)}, "
          f"{sum(s[1] for s in clocks)} served locally")
    # the faults that change lease holders, and the switchovers: when the
    # commit began in the holder's lease (ms since the grant), how long it
    # waited, and the nemesis's strong reads on the holder right after it
    holder_faults = [f for f in faults if f["kind"] in HOLDERS + ("switchover",)]
    if holder_faults:
        print(f"holder changes and switchovers (W = {COMMIT_WAIT_MS} ms; effective: the commit"
              f" began {EFFECTIVE_MARGIN * 1000:.0f} ms or more before the holder's answer"
              " expired):")
    for f in holder_faults:
        if "commit" not in f:
            print(f"  {f['kind']:10s} {f['outcome']}")
            continue
        slot = (f"slot {f['slot']} to {f['new']}" + ("" if f["same_slot"] else " (another slot)")
                if f["kind"] in HOLDERS else f"{f['new']} promoted")
        print(f"  {f['kind']:10s} {f['holder']} holds, {slot}: commit at "
              f"{(f['commit'] - f['granted']) * 1000:.0f} ms, acknowledged after "
              f"{(f['acked'] - f['commit']) * 1000:.0f} ms; reads on {f['holder']} after it: "
              f"{f['reads']} ({f['reads_in_window']} in the window)"
              + (f"; strong read on the primary before them: {pr['outcome']} in "
                 f"{(pr['t1'] - pr['t0']) * 1000:.0f} ms, "
                 + ("saw the commit" if f.get("primary_saw") else "did not see the commit")
                 + ", returned " + (lambda d: f"{d:.1f} ms before" if d > 0 else
                                    f"{-d:.1f} ms after")((f["acked"] - pr["t1"]) * 1000)
                 + " its acknowledgement"
                 if (pr := f.get("primary_read")) else "")
              + ("" if f.get("effective") else " [not effective]")
              + (f" [{f['tries']} tries]" if f.get("tries", 1) > 1 else ""))
    switched = sum(t is not None and t not in {f["killed"] for f in faults
                                               if f["kind"] == "failover"}
                   for t in lost.values())
    if switched:
        print(f"lost in switchovers: {switched} writes (none should be)")
    if unchecked[0]:
        print(f"not checked: {unchecked[0]} require_fresh passes at half speed (the bound "
              f"assumes the clocks agree), {unchecked[1]} of them lacked a write")
    kinds = Counter(k for k, _ in violations)
    print(f"violations: {len(violations)}" +
          ("" if not violations else " (" + ", ".join(f"{k} {c}" for k, c in kinds.items()) + ")"))
    if violations:
        # the fault during which each began (the nemesis's own reads say
        # "by"), else none
        def fault_of(line):
            t = line.get("t0")
            return next((f["kind"] for f in faults if t is not None and f["t0"] <= t <= f["t1"]),
                        "no fault")
        print("  during: " + counts(Counter(f"{k} in {fault_of(line)}" for k, line in violations)))
    for kind, line in violations[:10]:
        print(f"  {kind}: {json.dumps(line)}")
    # what a run must have tested: a timeline-blind gate fails only then,
    # and strong reads served locally are attacked only when they happen
    untested = [what for what, tested in [("no failover lost a write", lossy),
                                          ("no gate on a lost write after its failover", after),
                                          ("no strong read served locally", local),
                                          ("no strong read on the primary saw a write not yet"
                                           " acknowledged when it returned",
                                           seen_early["unacked"]),
                                          ("no standby ran at half speed", clocks)]
                if not tested]
    # every standby that streamed from the first primary served some locally,
    # and every kind of holder change hit a holder's window at least once
    untested += [f"{n} served no strong read locally" for n in direct
                 if cluster.nodes[n].served[1] == 0]
    untested += [f"no {k} fault was effective" for k in HOLDERS + ("switchover",)
                 if not any(f["kind"] == k and f.get("effective") for f in faults)]
    if untested:
        print("not tested: " + "; ".join(untested))
    print(f"history, writes, faults, server logs and timeline.svg in {out}; "
          f"reproduce with --seed {seed}")
    shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if violations or untested else 0)


if __name__ == "__main__":
    main()
