#!/usr/bin/env python3
"""replica_gate benchmarks against a live primary and streaming standby.

bench/run starts the throwaway servers and calls this; it prints tables and
writes CSV files to the output directory.  Parts:

  ryw    read-your-writes workload through several routers
  wake   wake-up latency of N waiters after replay resumes
  idle   standby CPU while N waiters sit on an unreachable target
  check  caught_up() against the bare SQL comparison (pgbench; then in
         instructions, bench/check_instructions)
  replay replay speed and standby CPU with and without N waiting sessions
  strong strong reads (gate on 'primary'): latency next to plain reads and
         to asking the primary from the application; questions per read;
         the primary's CPU per read next to serving the read there; then
         with a commit wait on the primary, served without a question, and
         the commit latency that costs
"""
import argparse
import csv
import os
import random
import statistics
import subprocess
import tempfile
import threading
import time

import psycopg

UNREACHABLE = "FFFFFFFF/0"


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")


def connect(dsn):
    return psycopg.connect(dsn, autocommit=True)


def one(conn, sql, params=None):
    return conn.execute(sql, params).fetchone()[0]


def wait_replayed(primary, standby):
    """Wait until the standby has replayed everything the primary wrote."""
    lsn = one(primary, "SELECT pg_current_wal_lsn()")
    while not one(standby, "SELECT pg_last_wal_replay_lsn() >= %s", (lsn,)):
        time.sleep(0.05)


def set_delay(args, delay):
    """Set recovery_min_apply_delay on the standby (it is reloadable)."""
    with connect(args.standby) as c:
        c.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{delay}'")
        c.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)


def write_csv(args, name, rows):
    path = os.path.join(args.out, name)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print(f"(written to {path})")


def print_table(rows):
    cols = list(rows[0].keys())
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.rjust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).rjust(width[c]) for c in cols))


# --- 1. read-your-writes -----------------------------------------------------

def make_ops(seed, users, nops, p_write, p_read_after_write):
    """A seeded op stream: (user, 'w'|'r'); some reads follow a write at once."""
    rng = random.Random(seed)
    ops = []
    while len(ops) < nops:
        user = rng.randrange(users)
        if rng.random() < p_write:
            ops.append((user, "w"))
            if rng.random() < p_read_after_write:
                ops.append((user, "r"))
        else:
            ops.append((user, "r"))
    return ops


class Session:
    """One application thread: its own primary and standby connections."""

    def __init__(self, args):
        self.primary = connect(args.primary)
        self.standby = connect(args.standby)
        self.gate = psycopg.ClientCursor(self.standby)
        self.canceled = 0                        # gates canceled by recovery

    def close(self):
        self.primary.close()
        self.standby.close()

    def read_primary(self, user):
        return one(self.primary, "SELECT v FROM profile WHERE id = %s", (user,)), False

    def read_standby(self, user):
        return one(self.standby, "SELECT v FROM profile WHERE id = %s", (user,)), True


def route(policy, s, user, state):
    """Serve one read under a routing policy; returns (value, on_standby)."""
    token, written_at = state.get("token"), state.get("at", 0.0)
    if policy == "primary":
        return s.read_primary(user)
    if policy == "naive":
        return s.read_standby(user)
    if policy == "pin_2s":
        if time.monotonic() - written_at < 2.0:
            return s.read_primary(user)
        return s.read_standby(user)
    if policy == "check":
        if one(s.standby, "SELECT replica_gate.caught_up(%s)", (token,)):
            return s.read_standby(user)
        return s.read_primary(user)
    # wait_<budget ms>: the function form and the read in one query string
    # (one round trip).  fn_<budget ms>: the function form as a statement of
    # its own, then the read (two round trips).  set_<budget ms>: the SET
    # form and the read in one query string.
    form, budget = policy.split("_")
    if form == "set" and token is None:
        return s.read_standby(user)              # nothing written yet
    try:
        if form == "wait":
            s.gate.execute("SELECT replica_gate.require_lsn(%s, %s); "
                           "SELECT v FROM profile WHERE id = %s", (token, int(budget), user))
        elif form == "fn":
            s.gate.execute("SELECT replica_gate.require_lsn(%s, %s)", (token, int(budget)))
            s.gate.execute("SELECT v FROM profile WHERE id = %s", (user,))
        else:
            s.gate.execute(f"SET replica_gate.default_timeout = {int(budget)}; "
                           "SET replica_gate.require_lsn = %s; "
                           "SELECT v FROM profile WHERE id = %s", (token, user))
        while s.gate.nextset():
            pass
        return s.gate.fetchone()[0], True
    except psycopg.Error as e:
        # RG001: not replayed within the budget.  40001: the wait's snapshot
        # held up replay until recovery canceled it.  Both: use the primary.
        if e.sqlstate == "40001":
            s.canceled += 1
        elif e.sqlstate != "RG001":
            raise
        return s.read_primary(user)


def run_policy(args, policy, ops):
    threads = args.threads
    results = [[] for _ in range(threads)]      # (latency_ms, on_standby, stale)
    canceled = [0] * threads
    errors = []

    def worker(k):
        s = Session(args)
        state = {}                               # user -> {value, token, at}
        think = random.Random(args.seed + k)
        try:
            for user, kind in ops:
                if user % threads != k:
                    continue
                time.sleep(think.expovariate(1000.0 / args.think_ms))
                st = state.setdefault(user, {"value": 0})
                if kind == "w":
                    st["value"] += 1
                    s.primary.execute("UPDATE profile SET v = %s WHERE id = %s",
                                      (st["value"], user))
                    st["token"] = s.primary.info.parameter_status(
                        "replica_gate.last_commit_token")
                    st["at"] = time.monotonic()
                else:
                    t0 = time.perf_counter()
                    value, here = route(policy, s, user, st)
                    ms = (time.perf_counter() - t0) * 1000
                    results[k].append((ms, here, value != st["value"]))
        except Exception as e:                   # report, do not hide
            errors.append(f"{policy}: {e}")
        finally:
            canceled[k] = s.canceled
            s.close()

    with connect(args.primary) as p:
        p.execute("UPDATE profile SET v = 0")
        with connect(args.standby) as sb:
            wait_replayed(p, sb)
            gave_way0 = gave_way(sb)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    sampler = ReplaySampler(args.standby)
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    held_pct = sampler.stop()
    if errors:
        raise SystemExit("\n".join(errors))
    with connect(args.standby) as sb:
        gave = gave_way(sb) - gave_way0 if gave_way0 is not None else ""
    flat = [r for part in results for r in part]
    lat = [r[0] for r in flat]
    return {
        "router": policy,
        "reads": len(flat),
        "stale": sum(r[2] for r in flat),
        "stale_pct": round(100.0 * sum(r[2] for r in flat) / len(flat), 1),
        "on_standby_pct": round(100.0 * sum(r[1] for r in flat) / len(flat), 1),
        "p50_ms": round(pct(lat, 0.50), 2),
        "p99_ms": round(pct(lat, 0.99), 2),
        "canceled": sum(canceled),
        "gave_way": gave,
        "replay_held_pct": held_pct,
    }


def gave_way(standby):
    """The standby's count of gates that gave way to replay (None before
    0.3.0, which did not count them)."""
    if not one(standby, "SELECT count(*) FROM pg_attribute WHERE attrelid = "
                        "'replica_gate.stats'::regclass AND attname = 'gave_way'"):
        return None
    return one(standby, "SELECT gave_way FROM replica_gate.stats")


class ReplaySampler:
    """Samples the standby's startup process every 10 ms: the share of
    samples in which replay waited on a recovery conflict (snapshot,
    tablespace, lock or buffer pin), i.e. was held back by a reader."""

    SQL = ("SELECT coalesce(wait_event LIKE 'RecoveryConflict%' OR wait_event_type = 'Lock' "
           "OR wait_event IN ('BufferPin', 'BufferCleanup'), false) "
           "FROM pg_stat_activity WHERE backend_type = 'startup'")

    def __init__(self, dsn):
        self.conn = connect(dsn)
        self.samples = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.done.is_set():
            # each sample is its own statement: no snapshot stays held
            self.samples.append(one(self.conn, self.SQL))
            time.sleep(0.01)

    def stop(self):
        self.done.set()
        self.thread.join()
        self.conn.close()
        return round(100.0 * sum(self.samples) / max(1, len(self.samples)), 1)


def part_ryw(args):
    print(f"\n== 1. read-your-writes: {args.users} users, {args.ops} ops, apply delay "
          f"{args.delay}, {args.threads} threads, think {args.think_ms} ms, seed {args.seed}")
    set_delay(args, args.delay)
    ops = make_ops(args.seed, args.users, args.ops, args.p_write, 0.6)
    policies = args.policies or (["naive", "pin_2s", "check"] +
                                 [f"wait_{b}" for b in args.budgets] +
                                 [f"fn_{b}" for b in args.budgets if b > 0] +
                                 [f"set_{b}" for b in args.budgets if b > 0] + ["primary"])
    rows = [run_policy(args, p, ops) for p in policies]
    print_table(rows)
    write_csv(args, "ryw.csv", rows)
    set_delay(args, "0")


# --- 2. wake latency -----------------------------------------------------------

# Waiting queries: $1 is the token; the last column is the server's clock
# when the wait returned.  The gate is a statement of its own: it waits
# without a snapshot, on its latch (doc/reference.md).
WAITERS = {
    "gate": "SELECT replica_gate.wait_for_lsn($1, 60000); SELECT extract(epoch FROM clock_timestamp())",
    "loop_1ms": "SELECT bench_poll(regexp_replace($1, '^.*:', '')::pg_lsn, 0.001, 60), extract(epoch FROM clock_timestamp())",
    "loop_10ms": "SELECT bench_poll(regexp_replace($1, '^.*:', '')::pg_lsn, 0.01, 60), extract(epoch FROM clock_timestamp())",
}

# For the replay part only: the SET form, which holds no snapshot while it
# waits, a token (whose wait re-checks the timeline every 100 ms), the
# session mode (a strong read: it asks the primary, whose position is the
# end of the block's tail, past the last segment, and waits for that) and the token floor
# (replica_gate.read_after), and core's own command (PostgreSQL 19+).
REPLAY_ONLY_WAITERS = {
    "set_gate": "SET replica_gate.default_timeout = 60000; SET replica_gate.require_lsn = $1",
    "core_wait": "WAIT FOR LSN $1 WITH (TIMEOUT 60000)",
    "token": "SELECT replica_gate.wait_for_lsn('1:' || $1, 60000)",
    "session": "SET replica_gate.default_timeout = 60000; "
               "SET replica_gate.consistency = strong; SELECT 1",
    "floor": "SET replica_gate.default_timeout = 60000; "
             "SET replica_gate.read_after = $1; SELECT 1",
}


def wake_row(args, asleep, n, method):
    """Run bench/wake.c for one configuration and summarize it."""
    # at N = 1 a spinning probe session marks when replay passed the
    # target; it takes a core, so only there
    probe = 1 if n == 1 else 0
    # at least 100 samples per row
    rounds = max(args.wake_rounds, -(-100 // n))
    out = subprocess.run([args.wake_bin, args.primary, args.standby, str(n), str(rounds),
                          str(asleep), str(probe), WAITERS[method]],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    got = {"wake": {}, "cpu": {}, "probe": {}}
    for line in out.split():
        kind, rnd, ms = line.split(",")
        got[kind].setdefault(rnd, []).append(float(ms))
    lat = [v for r in got["wake"].values() for v in r]
    cpu = [v for r in got["cpu"].values() for v in r]
    above = [v - got["probe"][r][0] for r in got["probe"] for v in got["wake"][r]]
    return {"asleep_ms": asleep, "waiters": n, "method": method, "samples": len(lat),
            "p50_ms": round(pct(lat, 0.5), 2),
            "p99_ms": round(pct(lat, 0.99), 2),
            "max_ms": round(max(lat), 2),
            "above_replay_p50_ms": round(pct(above, 0.5), 2) if above else "",
            "above_replay_p99_ms": round(pct(above, 0.99), 2) if above else "",
            "cpu_per_waiter_ms": round(statistics.mean(cpu), 3)}


def part_wake(args):
    print("\n== 2. wake latency: N waiters asleep for 200 ms (some also for 5 ms), replay "
          "paused, then resumed (ms from resume to each waiter's return, server clock; "
          "bench/wake.c)")
    rows = [wake_row(args, 200, n, m) for n in args.wake_n for m in args.wake_methods]
    rows += [wake_row(args, 5, n, m) for n in args.wake_short_n for m in args.wake_methods]
    print_table(rows)
    write_csv(args, "wake.csv", rows)

    print("\nThe machine, without PostgreSQL (bench/wake_cost.c): CPU per process to "
          "handle one wake-up, 50 processes woken at once, after sleeping S ms")
    out = subprocess.run([args.wake_cost_bin, "50", "5", "5", "200", "1000"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    got = {}
    for line in out.split():
        asleep, us = line.split(",")
        got.setdefault(int(asleep), []).append(float(us))
    rows = [{"asleep_ms": a, "median_us": round(statistics.median(v), 1),
             "min_us": round(min(v), 1), "max_us": round(max(v), 1)} for a, v in got.items()]
    print_table(rows)
    write_csv(args, "wake_cost.csv", rows)


# --- 3. idle cost ------------------------------------------------------------------

def start_waiters(args, method, n):
    """Open n standby sessions that each wait for an LSN that never comes;
    return their threads and how many had started within a minute."""
    sql = {**WAITERS, **REPLAY_ONLY_WAITERS}[method].replace("$1", f"'{UNREACHABLE}'")
    conns = [psycopg.connect(args.standby + " application_name=bench_waiter",
                             autocommit=True) for _ in range(n)]

    def waiter(c):
        try:
            c.execute(sql)
        except psycopg.errors.QueryCanceled:
            pass                                 # the part cancels them at its end
        finally:
            c.close()

    ts = [threading.Thread(target=waiter, args=(c,)) for c in conns]
    for t in ts:
        t.start()
    deadline = time.monotonic() + 60
    with connect(args.standby) as mon:
        while True:
            started = one(mon, "SELECT count(*) FROM pg_stat_activity WHERE "
                               "application_name = 'bench_waiter' AND state = 'active'")
            if started == n or time.monotonic() > deadline:
                break
            time.sleep(0.02)
    return ts, started


def tree_cpu_ns(pid):
    """CPU time used so far by a postmaster and each child, from
    /proc/PID/schedstat: exact, where utime and stime are sampled on timer
    ticks and miss or overcharge processes that run in short bursts.
    Returns {pid: (ns, kind)}, kind from the process title (cpu_by_kind)."""
    ns = {}
    for p in [pid] + children(pid):
        try:
            used = schedstat(p)[0]
            with open(f"/proc/{p}/cmdline") as f:
                title = f.read().replace("\0", " ")
        except OSError:
            continue
        ns[p] = (used, process_kind(title))
    return ns


def children(pid):
    """The pids whose parent is pid (pgrep -P)."""
    return [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                           text=True).stdout.split()]


def reaped_ns(pid):
    """CPU time of the children a process has reaped (cutime + cstime of
    /proc/PID/stat, in clock ticks: a child is counted at its exit)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is field 3 (state): cutime and cstime are fields 16 and 17
    return (int(fields[13]) + int(fields[14])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def schedstat(pid):
    """(ns on a core, ns ready to run but waiting for one) of a process so
    far, from /proc/PID/schedstat."""
    with open(f"/proc/{pid}/schedstat") as f:
        on, waiting = f.read().split()[:2]
    return int(on), int(waiting)


def process_kind(title):
    """startup, walreceiver, watcher (replica_gate's), backend or other."""
    for kind, key in (("startup", "startup"), ("walreceiver", "walreceiver"),
                      ("watcher", "replica_gate replay watcher")):
        if title.startswith("postgres: " + key):
            return kind
    return "backend" if "[local]" in title or "(" in title else "other"


def cpu_by_kind(a, b):
    """CPU ms between two tree_cpu_ns samples, by process kind, and "all"."""
    out = {"all": 0.0}
    for p in a:
        if p in b:
            ms = (b[p][0] - a[p][0]) / 1e6
            out[a[p][1]] = out.get(a[p][1], 0.0) + ms
            out["all"] += ms
    return out


def cpu_ms(pid, seconds):
    a = tree_cpu_ns(pid)
    time.sleep(seconds)
    return cpu_by_kind(a, tree_cpu_ns(pid))["all"]


def part_idle(args):
    print(f"\n== 3. idle cost: standby CPU over {args.idle_seconds} s while N waiters "
          "sit on an unreachable target")
    ms = cpu_ms(args.standby_pid, args.idle_seconds)
    rows = [{"waiters": 0, "method": "none", "started": 0, "cpu_ms": round(ms),
             "pct_of_core": round(ms / (10 * args.idle_seconds), 2)}]
    for n in args.idle_n:
        for method in WAITERS:
            # a polling loop can load the machine so that not all of them start
            ts, started = start_waiters(args, method, n)
            ms = cpu_ms(args.standby_pid, args.idle_seconds)
            # if not all started within a minute, the first ones may have
            # ended already: nothing meaningful was measured
            rows.append({"waiters": n, "method": method, "started": started,
                         "cpu_ms": round(ms) if started == n else "n/a",
                         "pct_of_core": round(ms / (10 * args.idle_seconds), 2)
                         if started == n else "n/a"})
            with connect(args.standby) as sb:
                sb.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                           "WHERE application_name = 'bench_waiter'")
            for t in ts:
                t.join()
    print_table(rows)
    write_csv(args, "idle.csv", rows)


# --- 4. check cost -------------------------------------------------------------------

def pgbench_tps(args, sql, seconds):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql + "\n")
    out = subprocess.run(["pgbench", "-n", "-c", "2", "-j", "2", "-T", str(seconds),
                          "-f", f.name, args.standby],
                         capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)
    return float(next(l.split()[2] for l in out.splitlines() if l.startswith("tps")))


def part_check(args):
    print("\n== 4. check cost on the standby: caught_up(token text) against the bare "
          "comparison (pgbench, 2 clients; rounds interleaved, order alternating)")
    a_sql = "SELECT replica_gate.caught_up('1:0/1');"
    b_sql = "SELECT pg_last_wal_replay_lsn() >= '0/1';"
    rows, ratios = [], []
    for r in range(args.check_rounds):
        if r % 2 == 0:
            a = pgbench_tps(args, a_sql, args.check_seconds)
            b = pgbench_tps(args, b_sql, args.check_seconds)
        else:
            b = pgbench_tps(args, b_sql, args.check_seconds)
            a = pgbench_tps(args, a_sql, args.check_seconds)
        ratios.append(a / b)
        rows.append({"round": r + 1, "caught_up_tps": round(a), "bare_sql_tps": round(b),
                     "ratio": round(a / b, 3)})
    print_table(rows)
    print(f"median ratio caught_up / bare SQL: {statistics.median(ratios):.3f} (goal >= 0.97)")
    write_csv(args, "check.csv", rows)
    # the same pair in the standby backend's instructions, which do not scatter
    print("\n== 4b. check cost on a standby, in the backend's instructions", flush=True)
    subprocess.run(["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "check_instructions")], check=True)


# --- 5. replay cost ---------------------------------------------------------------------

REPLAY_TAIL_COMMITS = 50000


def replay_pause(sb):
    """Pause replay and return the position it stopped at.  A pause is a
    request, which pg_is_wal_replay_paused() reports as soon as it is made,
    before the startup process has stopped, so wait until the replayed
    position stands still."""
    sb.execute("SELECT pg_wal_replay_pause()")
    lsn = one(sb, "SELECT pg_last_wal_replay_lsn()")
    while True:
        time.sleep(0.02)
        now = one(sb, "SELECT pg_last_wal_replay_lsn()")
        if now == lsn:
            return lsn
        lsn = now


def standby_at_rest(args):
    """Return once the standby's processes used less than 5 ms of CPU in a
    50 ms span (100 waiters just started are still busy for a while:
    their first statements read the catalogs), so that each segment of
    replay starts alike.  Gives up after 10 s, and says so."""
    deadline = time.monotonic() + 10
    a = tree_cpu_ns(args.standby_pid)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        b = tree_cpu_ns(args.standby_pid)
        if cpu_by_kind(a, b)["all"] < 5:
            return
        a = b
    print("  (the standby was still busy after 10 s: this segment starts anyway)")


def replay_block(args, pr, sb, order):
    """Write one block of WAL while replay is paused (args.replay_commits
    single-row commits for each configuration in `order`, then a tail), then
    replay it in segments, one per configuration, each with that
    configuration's waiters (none for "alone" and "none") waiting on an LSN
    past the end: resume, sleep args.replay_window_ms, pause, and count the
    WAL replayed.  Nothing polls while replay runs, so that only the
    startup process and the waiters compete for the cores.  The block starts
    like every other: an empty table (new pages take no full-page images),
    checkpoints on both servers just done (none due during the block).
    Returns a row per segment."""
    pr.execute("TRUNCATE replay_log")
    pr.execute("CHECKPOINT")
    wait_replayed(pr, sb)
    sb.execute("CHECKPOINT")
    at = replay_pause(sb)
    pr.execute("CALL replay_commits(%s)", (args.replay_commits * len(order),))
    end = one(pr, "SELECT pg_current_wal_insert_lsn()")
    # A tail past the end: a strong read's question is answered with the
    # primary's position, the tail's end, so the session mode's waiters,
    # like the others, are still waiting when the last segment ends
    pr.execute("CALL replay_commits(%s)", (REPLAY_TAIL_COMMITS,))
    tail = one(pr, "SELECT pg_current_wal_insert_lsn()")
    while not one(sb, "SELECT pg_last_wal_receive_lsn() >= %s", (tail,)):
        time.sleep(0.01)
    rows = []
    startup = next(p for p, (_, kind) in tree_cpu_ns(args.standby_pid).items()
                   if kind == "startup")
    for config in order:
        w = args.replay_waiters if config not in ("alone", "none") else 0
        ts, started = start_waiters(args, config, w) if w else ([], 0)
        if started != w:
            raise SystemExit(f"only {started} of {w} waiters started")
        standby_at_rest(args)
        c0 = time.monotonic()
        cpu0 = tree_cpu_ns(args.standby_pid)
        delay0 = schedstat(startup)[1]
        t0 = time.monotonic()
        sb.execute("SELECT pg_wal_replay_resume()")
        time.sleep(args.replay_window_ms / 1000)
        sb.execute("SELECT pg_wal_replay_pause()")
        seconds = time.monotonic() - t0
        stop = replay_pause(sb)
        cpu = cpu_by_kind(cpu0, tree_cpu_ns(args.standby_pid))
        cpu_s = time.monotonic() - c0
        delay = schedstat(startup)[1] - delay0
        wal, short = sb.execute("SELECT pg_wal_lsn_diff(%s, %s)::bigint, "
                                "%s::pg_lsn >= %s::pg_lsn",
                                (stop, at, stop, end)).fetchone()
        if short:
            raise SystemExit("replay reached the end of the block's WAL within a "
                             "segment: raise --replay-commits")
        at = stop
        if w:
            pids = [r[0] for r in sb.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'bench_waiter'")]
            sb.execute("SELECT pg_cancel_backend(pid) FROM unnest(%s::int[]) pid", (pids,))
            for t in ts:
                t.join()
            # until their processes are gone, not only their sessions: the
            # next segment must not pay for their exit
            while any(os.path.exists(f"/proc/{p}") for p in pids):
                time.sleep(0.01)
        rows.append({"waiters": config, "replay_s": round(seconds, 6),
                     "wal_mb": round(wal / 1e6, 6),
                     "mb_per_s": round(wal / 1e6 / seconds, 1),
                     "cpu_s": round(cpu_s, 4),    # the span of the CPU samples
                     # time the startup process was ready to run but waited
                     # for a core: what other processes of this machine took
                     # from it (the VM's own noise does not show here)
                     "startup_runq_ms": round(delay / 1e6, 2),
                     **{f"{k}_ms": round(cpu.get(k, 0.0), 1) for k in
                        ("startup", "watcher", "backend", "walreceiver", "other")}})
    sb.execute("SELECT pg_wal_replay_resume()")
    return rows


def part_replay(args):
    n = args.replay_waiters
    # "none" is measured exactly like a kind of waiter, with no waiters: the
    # benchmark's own reading of a change that changes nothing
    methods = args.replay_methods + ["none"]
    print(f"\n== 5. replay cost: replay speed with {n} sessions waiting "
          f"({', '.join(methods[:-1])}) against replay alone.  Each of "
          f"{args.replay_rounds} blocks of WAL ({len(methods) * 2 + 1} x "
          f"{args.replay_commits} single-row commits) is replayed in segments of "
          f"{args.replay_window_ms} ms, alone and with each kind of waiter in turn "
          f"(alone, kind, alone, kind, ..., alone; the kinds' order rotates from "
          f"block to block); a kind's ratio is its segment's speed over the mean "
          f"of the two alone segments beside it; 'none' is a kind with no "
          f"waiters: the benchmark's own noise")
    with connect(args.primary) as pr, connect(args.standby) as sb:
        # (no autovacuum there: its cleanup records would conflict with the
        # waiters' snapshots and measure recovery conflicts, not replay)
        pr.execute("CREATE TABLE IF NOT EXISTS replay_log (v int) "
                   "WITH (autovacuum_enabled = off)")
        # one commit per row, written without a round trip each: fast
        # enough for many rounds (pgbench would take a minute a round)
        pr.execute("CREATE OR REPLACE PROCEDURE replay_commits(n int) LANGUAGE plpgsql "
                   "AS $$ BEGIN FOR i IN 1..n LOOP INSERT INTO replay_log VALUES (1); "
                   "COMMIT; END LOOP; END $$")
        wait_replayed(pr, sb)
        rows, ratios = [], {m: [] for m in methods}
        for b in range(args.replay_rounds):
            k = b % len(methods)
            kinds = methods[k:] + methods[:k]
            order = ["alone"] + [x for m in kinds for x in (m, "alone")]
            seg = replay_block(args, pr, sb, order)
            speed = [x["wal_mb"] / x["replay_s"] for x in seg]
            for i in range(1, len(seg), 2):
                ratios[seg[i]["waiters"]].append(speed[i] / ((speed[i - 1] + speed[i + 1]) / 2))
            rows += [{"block": b + 1, "segment": i + 1, **x} for i, x in enumerate(seg)]
            print(f"  block {b + 1}: " + ", ".join(
                f"{x['waiters']} {x['mb_per_s']:.0f}" for x in seg) + " MB/s", flush=True)
    print_table(rows)
    by_kind = {}
    for x in rows:
        by_kind.setdefault(x["waiters"], []).append(x)
    def cpu(kind):
        """Medians over a kind's segments: the startup process's CPU ms per
        MB replayed, the watcher's and the backends' CPU ms per second."""
        x = by_kind[kind]
        return (f"startup {statistics.median(r['startup_ms'] / r['wal_mb'] for r in x):.2f} "
                f"ms per MB, watcher "
                f"{statistics.median(r['watcher_ms'] / r['cpu_s'] for r in x):.1f} ms per s, "
                f"backends {statistics.median(r['backend_ms'] / r['cpu_s'] for r in x):.0f} "
                f"ms per s; the startup process waited for a core "
                f"{statistics.median(r['startup_runq_ms'] / r['replay_s'] for r in x):.1f} "
                f"ms per s of replay")
    for m in methods:
        r = sorted(ratios[m])
        print(f"{m}: replay speed with {0 if m == 'none' else n} waiters / alone beside "
              f"it: median {statistics.median(r):.3f} of {len(r)} (from {r[0]:.3f} to "
              f"{r[-1]:.3f}; goal >= 0.95); CPU: {cpu(m)}")
    print(f"alone: CPU: {cpu('alone')}")
    write_csv(args, "replay.csv", rows)


# --- 7. strong reads -------------------------------------------------------------------

def run_strong(args, mode, n):
    """Run bench/strong.c; returns (reads, errors, p50 ms, p99 ms, primary CPU s,
    strong reads and questions counted on the standby).  The primary's CPU is
    taken over the reads alone: strong.c has connected its readers before the
    first sample and closes them after the second, so that every process
    serving them (the readers' backends, the question's) is alive at both."""
    with connect(args.standby) as sb, \
            subprocess.Popen([args.strong_bin, mode, str(n), str(args.strong_seconds),
                              args.primary, args.standby],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as run:
        if run.stdout.readline().strip() != "connected":
            raise RuntimeError(f"bench/strong {mode} {n} failed to connect")
        q0 = sb.execute("SELECT strong_reads, questions FROM replica_gate.stats").fetchone()
        c0 = tree_cpu_ns(args.primary_pid)
        run.stdin.write("go\n")
        run.stdin.flush()
        out = run.stdout.readline()
        c1 = tree_cpu_ns(args.primary_pid)
        q1 = sb.execute("SELECT strong_reads, questions FROM replica_gate.stats").fetchone()
        run.stdin.write("close\n")
        run.stdin.flush()
    if run.returncode != 0 or "reads=" not in out:
        raise RuntimeError(f"bench/strong {mode} {n} failed")
    v = dict(kv.split("=") for kv in out.split())
    return (int(v["reads"]), int(v["errors"]), float(v["p50_us"]) / 1000,
            float(v["p99_us"]) / 1000, cpu_by_kind(c0, c1)["all"] / 1000,
            q1[0] - q0[0], q1[1] - q0[1])


def restart_primary(args, commit_wait_ms):
    """Restart the primary with replica_gate.commit_wait (a server setting);
    return when the standby's question connection has learned it."""
    subprocess.run(["pg_ctl", "-D", args.primary_data, "-w", "-m", "fast", "restart",
                    "-o", f"-c replica_gate.commit_wait={commit_wait_ms}"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(args.primary_data, "postmaster.pid")) as f:
        args.primary_pid = int(f.readline())
    want = f"{commit_wait_ms / 1000:.3f}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with connect(args.standby) as sb:
                if one(sb, "SELECT replica_gate.wait_for_lsn('primary', 1000) AND "
                           "extract(epoch FROM commit_wait)::numeric(10, 3)::text = %s "
                           "FROM replica_gate.status()", (want,)):
                    return
        except psycopg.Error:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the standby did not learn commit_wait = {commit_wait_ms} ms")


def commit_latency(args, clients, pay):
    """pgbench on the primary: single-row UPDATE transactions by `clients`
    clients for args.strong_seconds, paying the commit wait or not; returns
    (p50 ms, p99 ms, transactions)."""
    with tempfile.TemporaryDirectory(dir=args.out) as d:
        script = os.path.join(d, "update.sql")
        with open(script, "w") as f:
            f.write("\\set id random(0, 299)\nUPDATE profile SET v = v + 1 WHERE id = :id;\n")
        env = dict(os.environ, PGOPTIONS=f"-c replica_gate.pay_commit_wait={'on' if pay else 'off'}")
        subprocess.run(["pgbench", "-n", "-c", str(clients), "-j", str(clients),
                        "-T", str(int(args.strong_seconds)), "-f", script, "--log",
                        "--log-prefix", os.path.join(d, "log"), args.primary],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        us = []
        for name in os.listdir(d):
            if name.startswith("log"):
                with open(os.path.join(d, name)) as f:
                    us += [int(line.split()[2]) for line in f]
    return pct(us, 0.5) / 1000, pct(us, 0.99) / 1000, len(us)


def part_strong(args):
    w = args.commit_wait_ms
    print(f"\n== 7. strong reads: N readers on the standby for {args.strong_seconds} s "
          "each way (the primary idle but for the questions): a plain read, a strong "
          "read that asks the primary (no commit wait there), the application asking "
          "the primary pg_current_wal_insert_lsn() and gating on it, and the plain read "
          f"served by the primary; then, the primary restarted with a commit wait of {w} ms, "
          "a plain read and a strong read served without a question, side by side; and "
          "the commit latency on the primary with and without paying the wait")
    rows = []
    with connect(args.primary) as pr:
        pr.execute("CREATE EXTENSION IF NOT EXISTS replica_gate")
    for n in args.strong_n:
        r = {"readers": n}
        for mode in ("plain", "strong", "app", "primary", "rtt"):
            if mode == "rtt":
                # one round trip to the primary: a plain read there, alone
                r["rtt_p50_ms"] = run_strong(args, "primary", 1)[2]
                continue
            reads, errors, p50, p99, cpu, strong, questions = run_strong(args, mode, n)
            r[f"{mode}_reads"] = reads
            r[f"{mode}_p50_ms"] = round(p50, 3)
            r[f"{mode}_p99_ms"] = round(p99, 3)
            if errors:
                r[f"{mode}_errors"] = errors
            if mode == "strong":
                r["questions_per_read"] = round(questions / max(strong, 1), 3)
            if mode in ("strong", "primary"):
                r[f"{mode}_primary_cpu_ms_per_1000"] = round(1e6 * cpu / max(reads, 1), 1)
        r["cpu_ratio"] = round(r["strong_primary_cpu_ms_per_1000"] /
                               r["primary_primary_cpu_ms_per_1000"], 3)
        rows.append(r)
        print(f"  {n} readers, asking: strong p50 {r['strong_p50_ms']} ms, plain "
              f"{r['plain_p50_ms']} ms, questions per strong read {r['questions_per_read']}, "
              f"primary CPU per strong read / per read served there {r['cpu_ratio']}",
              flush=True)

    restart_primary(args, w)
    for r in rows:
        n = r["readers"]
        # side by side: a plain read, then the strong read served locally
        r["plain2_p50_ms"] = round(run_strong(args, "plain", n)[2], 3)
        reads, errors, p50, p99, cpu, strong, questions = run_strong(args, "strong", n)
        r["local_p50_ms"] = round(p50, 3)
        r["local_p99_ms"] = round(p99, 3)
        if errors:
            r["local_errors"] = errors
        r["local_questions_per_read"] = round(questions / max(strong, 1), 4)
        r["local_primary_cpu_ms_per_1000"] = round(1e6 * cpu / max(reads, 1), 2)
        r["local_p50_ratio"] = round(r["local_p50_ms"] / r["plain2_p50_ms"], 3)
        r["local_cpu_ratio"] = round(r["local_primary_cpu_ms_per_1000"] /
                                     r["primary_primary_cpu_ms_per_1000"], 4)
        print(f"  {n} readers, local: strong p50 {r['local_p50_ms']} ms, plain "
              f"{r['plain2_p50_ms']} ms: ratio {r['local_p50_ratio']} (goal <= 1.1); "
              f"questions per strong read {r['local_questions_per_read']}; primary CPU per "
              f"strong read / per read served there {r['local_cpu_ratio']} (goal <= 0.02)",
              flush=True)
    print_table(rows)
    write_csv(args, "strong.csv", rows)

    writes = []
    for clients in (1, 8):
        for pay in (False, True):
            p50, p99, n = commit_latency(args, clients, pay)
            writes.append({"clients": clients, "pays_commit_wait": pay, "commits": n,
                           "p50_ms": round(p50, 3), "p99_ms": round(p99, 3)})
    for clients in (1, 8):
        free, paid = [x for x in writes if x["clients"] == clients]
        print(f"  commit latency, {clients} clients: p50 {free['p50_ms']} -> {paid['p50_ms']} "
              f"ms, p99 {free['p99_ms']} -> {paid['p99_ms']} ms paying the wait (goal: p50 "
              f"within the wait, {w} ms, of not paying it: "
              f"{round(paid['p50_ms'] - free['p50_ms'], 3)} ms)")
    print_table(writes)
    write_csv(args, "commit_wait.csv", writes)
    restart_primary(args, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primary", required=True)
    ap.add_argument("--standby", required=True)
    ap.add_argument("--standby-pid", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", default="ryw,wake,idle,check,replay,strong")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--ops", type=int, default=4400)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--think-ms", type=float, default=20.0,
                    help="mean pause of a thread between two operations")
    ap.add_argument("--delay", default="250ms")
    ap.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")],
                    default=[0, 100, 250, 500])
    ap.add_argument("--policies", type=lambda s: s.split(","), default=None,
                    help="read-your-writes routers to run, e.g. wait_600,fn_600,set_600 "
                         "(default: all, with --budgets)")
    ap.add_argument("--p-write", type=float, default=0.35,
                    help="share of operations that are writes")
    ap.add_argument("--wake-n", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 50, 200])
    ap.add_argument("--wake-rounds", type=int, default=5)
    ap.add_argument("--wake-short-n", type=lambda s: [int(x) for x in s.split(",") if x],
                    default=[50], help="N also run with waiters asleep only 5 ms")
    ap.add_argument("--wake-bin", required=True, help="the compiled bench/wake.c")
    ap.add_argument("--wake-cost-bin", required=True, help="the compiled bench/wake_cost.c")
    ap.add_argument("--wake-methods", type=lambda s: s.split(","),
                    default=list(WAITERS), help="gate,loop_1ms,loop_10ms")
    ap.add_argument("--idle-n", type=lambda s: [int(x) for x in s.split(",")],
                    default=[50, 200])
    ap.add_argument("--idle-seconds", type=int, default=10)
    ap.add_argument("--check-rounds", type=int, default=8)
    ap.add_argument("--check-seconds", type=int, default=5)
    ap.add_argument("--replay-commits", type=int, default=100000,
                    help="single-row commits written for each segment of replay")
    ap.add_argument("--replay-window-ms", type=int, default=50,
                    help="how long each segment of replay runs")
    ap.add_argument("--replay-waiters", type=int, default=100)
    ap.add_argument("--replay-rounds", type=int, default=10, help="blocks of segments")
    ap.add_argument("--replay-methods", type=lambda s: s.split(","),
                    default=["gate", "set_gate", "session", "floor"],
                    help="how the waiters wait, one configuration each: gate, token (a "
                         "token of timeline 1), set_gate, session (the session mode), "
                         "floor (read_after), core_wait (WAIT FOR LSN, 19+)")
    ap.add_argument("--primary-pid", type=int, required=True)
    ap.add_argument("--primary-data", required=True, help="the primary's data folder")
    ap.add_argument("--commit-wait-ms", type=int, default=20,
                    help="the primary's commit wait for the strong part's local path")
    ap.add_argument("--strong-bin", required=True, help="the compiled bench/strong.c")
    ap.add_argument("--strong-n", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 8, 32, 128])
    ap.add_argument("--strong-seconds", type=float, default=5)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    parts = {"ryw": part_ryw, "wake": part_wake, "idle": part_idle, "check": part_check,
             "replay": part_replay, "strong": part_strong}
    for name in args.parts.split(","):
        parts[name](args)


if __name__ == "__main__":
    main()
