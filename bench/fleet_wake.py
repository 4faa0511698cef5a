"""bench/fleet's helper client (python3-psycopg): the strong readers that
keep each standby holding a lease, the primary's CPU from /proc, and the two
parts that need a session held open while pgbench's clients wait (items 5
and 6 of issue 51).  One command per use:

  reader HOST PORT RATE OUT
      strong reads (role "strong") on a standby, RATE a second at most,
      until SIGTERM; writes "served failed" to OUT at the end.
  cpu DIR
      nanoseconds of CPU the primary whose data directory is DIR/primary has
      used so far: /proc/PID/schedstat of the postmaster and each live child
      (exact), plus the children it has reaped (cutime + cstime of the
      postmaster, in clock ticks: a backend that exits between two readings
      is counted at its exit).
  waiting DIR PORT_P STANDBY W_MS K MODE LOG
      item 5: K pgbench clients on the primary, each blocked on an advisory
      lock this session holds; MODE "commit": once the standby's lease was
      just renewed, every process of the standby (data directory
      DIR/STANDBY) is stopped (SIGSTOP) and
      the lock released, so that K paying one-row UPDATEs wait for the
      frozen holder's lease; MODE "sleep": K sessions in pg_sleep(W).  Once
      all K wait, the primary's CPU (all its processes, schedstat) over the
      middle of the wait, 0.1 s in from either end.  Prints key=value.
  wake DIR PORT_P PORT_S APP W_MS K ROUNDS LOG [MODE]
      item 6: per round, K clients blocked on the advisory lock,
      replay paused on the standby (application_name APP) once its lease
      was just renewed, the lock released, and once the K paying commits
      wait, replay resumed; each commit's completion time (taken by this
      client, which holds K connections of its own: class Committers)
      minus the standby's reply time (pg_stat_replication.reply_time, read
      right after), in ms, one a line, to LOG.delays, and minus the moment
      the resume was sent.  MODE "ra": the same commits under
      synchronous_commit = remote_apply, not paying, timed from the resume
      only (the standby replies at each commit record: no reply time to
      count from).  Prints key=value.

The /proc helpers (children, schedstat, reaped_ns) and the percentile (pct)
are bench/replica_bench.py's.
"""
import glob
import os
import select
import signal
import subprocess
import sys
import time

import psycopg
from psycopg import pq

from replica_bench import children, pct, reaped_ns, schedstat


def connect(host, port, user=None):
    return psycopg.connect(host=host, port=int(port), dbname="postgres", user=user, autocommit=True)


def postmaster(datadir):
    with open(os.path.join(datadir, "postmaster.pid")) as f:
        return int(f.readline())


def cpu_ns(pid):
    """ns on a core so far, None once the process has exited."""
    try:
        return schedstat(pid)[0]
    except OSError:
        return None


def primary_cpu_ns(datadir):
    pm = postmaster(datadir)
    # a child that exited since the listing is counted in the postmaster's
    # cutime next time
    return schedstat(pm)[0] + reaped_ns(pm) + sum(filter(None, map(cpu_ns, children(pm))))


def freeze(datadir, sig):
    """Send sig to the postmaster of datadir and its children (a process
    that has exited is skipped)."""
    pm = postmaster(datadir)
    for pid in [pm] + children(pm):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def pgbench_log(prefix):
    """The completion times (epoch seconds) of each client's first
    transaction logged."""
    ends = []
    for path in glob.glob(prefix + "*"):
        with open(path) as f:
            for line in f:
                x = line.split()
                if x[1] == "1":
                    ends.append(int(x[4]) + int(x[5]) / 1e6)
    return ends


class Launch:
    """K pgbench clients on the primary, each blocked on advisory lock 42,
    which a session of ours holds, before the rest of its script.  Each
    client runs its script twice: the second time it blocks on the lock
    again, taken back as soon as the first run got past it, so that no
    client disconnects (a backend's exit costs this machine's cores about a
    millisecond, and 100 at once would delay the commits still waiting)
    before finish() releases it.  Only the first run is measured."""

    def __init__(self, ctl, host, port, k, script, log, paying):
        self.ctl = ctl
        self.lk = connect(host, port)
        self.lk.execute("SELECT pg_advisory_lock(42)")
        for path in glob.glob(log + "*"):
            os.remove(path)
        with open(log + ".sql", "w") as f:
            f.write("SELECT pg_advisory_xact_lock_shared(42);\n" + script)
        env = dict(os.environ, PGOPTIONS="-c replica_gate.pay_commit_wait=" + ("on" if paying else "off"))
        self.out = open(log + ".out", "w")
        self.proc = subprocess.Popen(
            ["pgbench", "-h", host, "-p", str(port), "-n", "-c", str(k), "-j", str(min(k, 2)), "-t", "2",
             "-l", "--log-prefix=" + log + ".lat", "-f", log + ".sql", "postgres"],
            env=env, stdout=self.out, stderr=subprocess.STDOUT)
        self.log = log
        self.k = k
        self.wait_for("wait_event = 'advisory'", 60)

    def release(self):
        """Let the K clients' first run through; take the lock back."""
        self.lk.execute("SELECT pg_advisory_unlock(42)")
        self.lk.execute("SELECT pg_advisory_lock(42)")

    def finish(self):
        self.lk.execute("SELECT pg_advisory_unlock(42)")
        self.proc.wait(timeout=120)
        self.out.close()
        self.lk.close()
        return pgbench_log(self.log + ".lat")

    def count(self, where):
        return self.ctl.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench' AND " + where
        ).fetchone()[0]

    def wait_for(self, where, timeout, pause=0.005):
        deadline = time.monotonic() + timeout
        while self.count(where) < self.k:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"fleet_wake: {self.k} sessions never had {where}; see {self.log}.out")
            time.sleep(pause)


def lease_left_ms(ctl):
    """The longest time left of a lease (not behind), in ms; None if none."""
    return ctl.execute("SELECT max(expires_in_ms) FROM replica_gate.leases() WHERE behind IS NULL").fetchone()[0]


def fresh_lease(ctl, w_ms, share, timeout=10.0):
    """Wait until a lease (not behind) was just renewed: at least share x W
    left; returns the time left, in seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = lease_left_ms(ctl)
        if left is not None and left >= share * w_ms:
            return left / 1000
        if time.monotonic() > deadline:
            raise SystemExit(f"fleet_wake: no lease with {share} x W left within {timeout} s (last: {left} ms)")
        time.sleep(0.002)


def waker_pid(pm):
    for kid in children(pm):
        try:
            with open(f"/proc/{kid}/cmdline", "rb") as f:
                if b"lease waker" in f.read():
                    return kid
        except OSError:
            pass
    return None


def cmd_reader(host, port, rate, out):
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    ok = failed = 0
    conn = None
    pause = 1 / float(rate)
    while not stop:
        try:
            if conn is None or conn.closed:
                conn = connect(host, port, user="strong")
            conn.execute("SELECT v FROM fleet WHERE id = 1").fetchone()
            ok += 1
        except psycopg.Error:
            failed += 1
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.05)
        time.sleep(pause)
    with open(out, "w") as f:
        f.write(f"{ok} {failed}\n")


# a paying commit's wait in pg_stat_activity: 17 and later name it, 13 to 16
# show every extension's wait as "Extension"
COMMIT_WAIT = ("(wait_event = 'ReplicaGateCommitWait'"
               " OR (wait_event_type = 'Extension' AND wait_event = 'Extension'))")


def cmd_waiting(d, port_p, standby, w_ms, k, mode, log):
    w_ms, k = float(w_ms), int(k)
    ctl = connect(d, port_p)
    pm = postmaster(os.path.join(d, "primary"))
    sby = os.path.join(d, standby)
    if mode == "commit":
        script = "\\set id :client_id + 1\nUPDATE fleet SET v = v + 1 WHERE id = :id;\n"
        event = COMMIT_WAIT
    else:
        script = f"SELECT pg_sleep({w_ms / 1000});\n"
        event = "wait_event = 'PgSleep'"
    launch = Launch(ctl, d, port_p, k, script, log, paying=(mode == "commit"))
    frozen = False
    try:
        if mode == "commit":
            fresh_lease(ctl, w_ms, 0.9)
            freeze(sby, signal.SIGSTOP)
            frozen = True
        released = time.time()
        launch.release()
        launch.wait_for(event, 5, pause=0.001)
        waiting = time.time()
        if mode == "commit":
            left = lease_left_ms(ctl)
            if left is None:
                raise SystemExit("fleet_wake: no lease left once all the commits waited")
            end_of_wait = time.time() + left / 1000
        else:
            end_of_wait = released + w_ms / 1000
        pids = [pm] + children(pm)
        waker = waker_pid(pm)
        start, end = waiting + 0.1, end_of_wait - 0.1
        if end - start < 0.2:
            raise SystemExit(f"fleet_wake: the wait's middle is {end - start:.3f} s, too short to measure")
        time.sleep(max(0.0, start - time.time()))
        t0 = time.time()
        before = {p: cpu_ns(p) for p in pids}
        time.sleep(max(0.0, end - time.time()))
        after = {p: cpu_ns(p) for p in pids}
        t1 = time.time()
    finally:
        if frozen:
            freeze(sby, signal.SIGCONT)
    ends = launch.finish()
    # (a process that exited during the window is left out)
    used_by = {p: after[p] - before[p] for p in pids if before[p] is not None and after[p] is not None}
    gone = len(pids) - len(used_by)
    used = sum(used_by.values()) / 1e9
    waker_used = used_by.get(waker, 0) / 1e9
    busiest = max((ns, p) for p, ns in used_by.items())
    waits = [(c - released) * 1000 for c in ends]
    print(f"mode={mode} k={k} done={len(ends)} window_s={t1 - t0:.3f} window_from_ms={(t0 - waiting) * 1000:.0f}"
          f" processes={len(pids)} gone={gone} cores={used / (t1 - t0):.4f}"
          f" waker_cores={waker_used / (t1 - t0):.4f}"
          f" busiest_cores={busiest[0] / 1e9 / (t1 - t0):.4f} busiest_pid={busiest[1]}"
          f" wait_min_ms={min(waits):.1f} wait_max_ms={max(waits):.1f}")


class Committers:
    """K connections of our own for item 6: each sends, in one query
    string, a wait on advisory lock 42 and its one-row UPDATE; the moment
    each result is complete is taken here, on this machine's wall clock,
    when select() says its last bytes came (pgbench's log gives epoch times
    through a shift it computes once a run, which on a loaded machine was
    off by 0.2 to 2 ms against the server's clock)."""

    def __init__(self, host, port, k, options):
        conninfo = (f"host={host} port={port} dbname=postgres application_name=fleet_wake"
                    f" options='{options}'").encode()
        self.conns = []
        for _ in range(k):
            c = pq.PGconn.connect(conninfo)
            if c.status != pq.ConnStatus.OK:
                raise SystemExit("fleet_wake: " + c.error_message.decode())
            self.conns.append(c)

    def send(self):
        self.done = [None] * len(self.conns)
        for i, c in enumerate(self.conns):
            c.send_query(f"SELECT pg_advisory_xact_lock_shared(42); UPDATE fleet SET v = v + 1 WHERE id = {i + 1}"
                         .encode())
        self.by_fd = {c.socket: i for i, c in enumerate(self.conns)}

    def take(self, i, now):
        """Read what connection i has; note it done at "now" once its
        results are all in."""
        c = self.conns[i]
        c.consume_input()
        while not c.is_busy():
            res = c.get_result()
            if res is None:
                self.done[i] = now
                return
            if res.status == pq.ExecStatus.FATAL_ERROR:
                raise SystemExit("fleet_wake: " + res.error_message.decode())

    def poll(self, timeout, extra=None):
        """One select(): whatever came is taken at the moment it returned.
        Returns the ready sockets that are not ours (extra)."""
        fds = [c.socket for i, c in enumerate(self.conns) if self.done[i] is None] + (extra or [])
        ready, _, _ = select.select(fds, [], [], timeout)
        now = time.time()
        others = []
        for fd in ready:
            if fd in self.by_fd:
                self.take(self.by_fd[fd], now)
            else:
                others.append(fd)
        return others

    def pending(self):
        return sum(1 for t in self.done if t is None)


def cmd_wake(d, port_p, port_s, app, w_ms, k, rounds, log, mode="pay"):
    """mode "pay": paying commits, released by the lease waker; "ra":
    commits with synchronous_commit = remote_apply (the caller sets
    synchronous_standby_names), not paying, released by core's WAL sender."""
    w_ms, k, rounds = float(w_ms), int(k), int(rounds)
    pay = mode == "pay"
    event = COMMIT_WAIT if pay else "wait_event = 'SyncRep'"
    ctl = connect(d, port_p)
    lk = connect(d, port_p)
    sby = pq.PGconn.connect(f"host={d} port={port_s} dbname=postgres".encode())
    committers = Committers(d, port_p, k, "-c replica_gate.pay_commit_wait=on" if pay else
                            "-c replica_gate.pay_commit_wait=off -c synchronous_commit=remote_apply")

    def count(where):
        return ctl.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fleet_wake' AND "
                           + where).fetchone()[0]

    def wait_for(where, timeout, pause):
        deadline = time.monotonic() + timeout
        while count(where) < k:
            if time.monotonic() > deadline:
                return False
            committers.poll(pause)
        return True

    def sby_exec(sql):
        res = sby.exec_(sql.encode())
        if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            raise SystemExit("fleet_wake: " + res.error_message.decode())
        return [res.get_value(0, j).decode() for j in range(res.nfields)]

    delays, from_resume, bad = [], [], []
    for r in range(1, rounds + 1):
        lk.execute("SELECT pg_advisory_lock(42)")
        committers.send()
        if not wait_for("wait_event = 'advisory'", 30, 0.005):
            raise SystemExit(f"fleet_wake: {k} sessions never waited on the advisory lock")
        resumed = None
        try:
            sby_exec("SELECT pg_wal_replay_pause()")
            left = fresh_lease(ctl, w_ms, 0.85)
            released = time.time()
            lk.execute("SELECT pg_advisory_unlock(42)")
            all_wait = wait_for(event, 0.5 * w_ms / 1000, 0.001)
            # (two queries before the resume: the delays count from it, and from the reply)
            state = sby_exec("SELECT pg_get_wal_replay_pause_state(), pg_last_wal_replay_lsn()::text")
            dbg = ctl.execute("SELECT pg_current_wal_lsn()::text, (SELECT string_agg(format('%%s %%s %%s %%s', sender_pid,"
                              " round(expires_in_ms::numeric, 1), applied, behind), '; ') FROM replica_gate.leases()),"
                              " (SELECT count(*) FROM pg_stat_activity WHERE " + event + ")", ()).fetchone()
            committers.poll(0)      # any done before the resume?
            early = k - committers.pending()
            resumed = time.time()
            sby.send_query(b"SELECT pg_wal_replay_resume()")
        finally:
            if resumed is None:
                sby_exec("SELECT pg_wal_replay_resume()")
        sby_busy = True
        deadline = time.monotonic() + 10
        while (committers.pending() or sby_busy) and time.monotonic() < deadline:
            if committers.poll(1.0, [sby.socket] if sby_busy else []):
                sby.consume_input()
                while sby_busy and not sby.is_busy():
                    sby_busy = sby.get_result() is not None
        reply = ctl.execute("SELECT extract(epoch FROM reply_time)::float8 FROM pg_stat_replication "
                            "WHERE application_name = %s", (app,)).fetchone()[0]
        ends = [t for t in committers.done if t is not None]
        # a paying commit that ended before the reply read was released by
        # an earlier one: a later reply (new WAL: a running-xacts record)
        # overwrote reply_time (remote_apply: a reply for each commit)
        before_reply = [c for c in ends if c < reply] if pay else []
        if (os.environ.get("FLEET_DEBUG") or early) and ends:
            ends.sort()
            print(f"round {r}: lease left {left * 1000:.0f} ms at the release; from it, the commits ended"
                  f" {(ends[0] - released) * 1000:.2f} to {(ends[-1] - released) * 1000:.2f} ms, replay resumed"
                  f" {(resumed - released) * 1000:.2f} ms (standby {state[0]} at {state[1]}; then primary at {dbg[0]},"
                  f" {dbg[2]} commits waiting, leases: {dbg[1]}), reply {(reply - released) * 1000:.2f} ms",
                  file=sys.stderr)
        if not all_wait or len(ends) != k or early or before_reply or reply < resumed:
            bad.append(f"round {r}: {'all' if all_wait else 'not all'} waited, {len(ends)} of {k} done,"
                       f" {early} before the resume, {len(before_reply)} before the reply read,"
                       f" reply {(reply - resumed) * 1000:.2f} ms after the resume")
            continue
        if pay:
            delays += [(c - reply) * 1000 for c in ends]
        from_resume += [(c - resumed) * 1000 for c in ends]
    out = f"k={k} rounds={rounds} valid_rounds={rounds - len(bad)} n={len(from_resume)}"
    if pay:
        with open(log + ".delays", "w") as f:
            f.write("".join(f"{x:.4f}\n" for x in delays))
        out += (f" p50_ms={pct(delays, 0.5):.3f} p99_ms={pct(delays, 0.99):.3f}"
                f" max_ms={max(delays, default=float('nan')):.3f} min_ms={min(delays, default=float('nan')):.3f}")
    print(out + f" resume_p50_ms={pct(from_resume, 0.5):.3f} resume_p99_ms={pct(from_resume, 0.99):.3f}")
    for b in bad:
        print("invalid " + b, file=sys.stderr)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "reader":
        cmd_reader(*args)
    elif cmd == "cpu":
        print(primary_cpu_ns(os.path.join(args[0], "primary")))
    elif cmd == "waiting":
        cmd_waiting(*args)
    elif cmd == "wake":
        cmd_wake(*args)
    else:
        raise SystemExit("fleet_wake.py: unknown command " + cmd)
