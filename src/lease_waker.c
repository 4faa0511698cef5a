/*-------------------------------------------------------------------------
 *
 * lease_waker.c
 *		On a primary: the registry of paying commits and strong reads that
 *		wait for the lease holders (commit_wait.c), and the lease waker, a
 *		background worker that watches the holders' reported apply
 *		positions while any of them waits and wakes each one that a report,
 *		or an expiry, releases.  src/README.md ("Waking the commits that
 *		wait") has the design and what it costs.
 *
 * PostgreSQL lets no extension run code when a WAL sender takes in a
 * standby's reply: core's synchronous replication wakes its waiters from
 * the WAL sender itself (SyncRepReleaseWaiters), which we cannot.  So one
 * process looks for all of them.  While nobody waits it sleeps on its
 * latch.  While someone waits it takes one look at the lease table
 * (rg_lease_look) every RG_WAKER_POLL_US, every RG_WAKER_SLOW_US once the
 * table stayed the same for RG_WAKER_FAST_US (asking the kernel to end
 * each sleep on time: rg_waker_timer_slack), and not before the moment
 * a waiter's release is due or an expiry (rg_waker_learn), evaluates every
 * waiter against it and sets the latch of each one released; when no waiter
 * depends on a WAL sender that could still report (each waits only for
 * leases whose WAL sender left, or for its own "until"), it sleeps until
 * the nearest expiry instead.
 *
 * Each backend owns the slot indexed by its PGPROC number.  A waiter
 * fills it, then marks it linked, under a number of its own that each
 * link raises; the waker, having read the slot and found its state
 * unchanged after, marks it released (compare and exchange of the number
 * and the mark together, so that a slot filled anew meanwhile is left
 * alone) and sets its latch.  The waker's verdict stands for the waiter's
 * own: both evaluate one look at the table against the same three values.
 * A look that finds the table as the last one did (no report, no grant)
 * while no waiter came and no expiry passed evaluates nobody.  The waker
 * notices a new waiter by a second count, of marks (it only grows), which
 * a waiter raises after it marks its slot linked.  It reads that count
 * before the count of links, so each mark it counts belongs to a link
 * under the count it judges by, and its scan sees that slot marked; a
 * waiter numbered before a look but marked after its scan raises the
 * count after the look read it, and the next look evaluates it.  (Counted
 * by links alone, that waiter was judged only at the next change of the
 * table, expiry or link, or at its own "until".)  Where no waker runs (not
 * preloaded, not started yet, or gone) rg_waker_link() says so and the
 * waiter looks on its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "lease.h"
#include "lease_waker.h"
#include "settings.h"

/*
 * How often the waker looks while a waiter depends on a report: every
 * RG_WAKER_POLL_US while the table changed in the last RG_WAKER_FAST_US (a
 * healthy standby reports within a millisecond or so), then every
 * RG_WAKER_SLOW_US (a holder that stopped applying: its WAL sender may
 * still report, until its lease expires, and the report that ends the
 * stall must reach its commits within half a millisecond).  Each look
 * costs a wake-up of this process (about 15 us of CPU on a virtual
 * machine, src/README.md), however many commits wait: while a holder
 * stalls, the slow interval costs about 0.06 cores.
 */
#define RG_WAKER_POLL_US	50
#define RG_WAKER_FAST_US	2000
#define RG_WAKER_SLOW_US	250

/*
 * The timer slack the waker asks for, in nanoseconds: how late Linux may
 * end its sleeps (50 us by default, as long as RG_WAKER_POLL_US).
 */
#define RG_WAKER_SLACK_NS	1000

/* A slot's state: its link's number, shifted, and one of these marks. */
#define RG_WAITER_FREE		0
#define RG_WAITER_LINKED	1
#define RG_WAITER_RELEASED	2
#define RG_WAITER_MARK		3
#define RG_WAITER_STATE(number, mark) (((uint64) (number) << 2) | (mark))

/* One slot per PGPROC that can run SQL. */
typedef struct RgWaiter
{
	XLogRecPtr	lsn;			/* what must be applied... */
	int64		visible;		/* ...by the leases live then... */
	int64		until;			/* ...at most until then */
	uint64		number;			/* its last link's (written by its backend) */
	uint64		link;			/* the count of links before it */
	int64		linked_at;		/* rg_clock_us when it linked */
	pg_atomic_uint64 state;
} RgWaiter;

typedef struct RgWakerShared
{
	slock_t		mutex;
	Latch	   *waker_latch;	/* NULL while no waker runs */
	pg_atomic_uint32 nwaiters;	/* linked slots */
	pg_atomic_uint64 links;		/* links made so far */
	pg_atomic_uint64 marked;	/* marks made so far (file header) */
	int			nslots;
	RgWaiter	slots[FLEXIBLE_ARRAY_MEMBER];
} RgWakerShared;

static RgWakerShared *rg_waker = NULL;

static uint32 rg_waker_idle_event = 0;
static uint32 rg_waker_event = 0;

PGDLLEXPORT void rg_waker_main(Datum arg);

Size
rg_waker_shmem_size(void)
{
	return add_size(offsetof(RgWakerShared, slots),
					mul_size(RG_MAX_BACKENDS(), sizeof(RgWaiter)));
}

/*
 * rg_waker_shmem_init
 *		Create or attach to the registry; called with AddinShmemInitLock
 *		held.
 */
void
rg_waker_shmem_init(void)
{
	bool		found;

	rg_waker = ShmemInitStruct("replica_gate lease waiters",
							   rg_waker_shmem_size(), &found);
	if (found)
		return;
	SpinLockInit(&rg_waker->mutex);
	rg_waker->waker_latch = NULL;
	pg_atomic_init_u32(&rg_waker->nwaiters, 0);
	pg_atomic_init_u64(&rg_waker->links, 0);
	pg_atomic_init_u64(&rg_waker->marked, 0);
	rg_waker->nslots = RG_MAX_BACKENDS();
	for (int i = 0; i < rg_waker->nslots; i++)
	{
		rg_waker->slots[i].number = 0;
		pg_atomic_init_u64(&rg_waker->slots[i].state, RG_WAITER_FREE);
	}
}

/* This backend's slot, or NULL when there is no registry or no slot. */
static RgWaiter *
rg_waker_my_slot(void)
{
	if (rg_waker == NULL || MyProc == NULL ||
		RG_MY_PROCNO < 0 || RG_MY_PROCNO >= rg_waker->nslots)
		return NULL;
	return &rg_waker->slots[RG_MY_PROCNO];
}

/*
 * rg_waker_mark
 *		Move a slot from "state" to "mark", keeping its number, unless its
 *		state changed meanwhile.  A slot that leaves the linked state
 *		leaves the count of waiters.
 */
static bool
rg_waker_mark(RgWaiter *slot, uint64 state, uint64 mark)
{
	uint64		expected = state;

	if (!pg_atomic_compare_exchange_u64(&slot->state, &expected,
										(state & ~(uint64) RG_WAITER_MARK) | mark))
		return false;
	if ((state & RG_WAITER_MARK) == RG_WAITER_LINKED)
		(void) pg_atomic_fetch_sub_u32(&rg_waker->nwaiters, 1);
	return true;
}

/*
 * rg_waker_unlink
 *		Leave the registry, whatever the waker did.  Safe at any time; must
 *		not throw.
 */
void
rg_waker_unlink(void)
{
	RgWaiter   *slot = rg_waker_my_slot();
	uint64		state;

	if (slot == NULL)
		return;
	state = pg_atomic_read_u64(&slot->state);
	if ((state & RG_WAITER_MARK) == RG_WAITER_LINKED &&
		!rg_waker_mark(slot, state, RG_WAITER_FREE))
		state = pg_atomic_read_u64(&slot->state);	/* released meanwhile */
	if ((state & RG_WAITER_MARK) == RG_WAITER_RELEASED)
		pg_atomic_write_u64(&slot->state, RG_WAITER_FREE);
}

/*
 * rg_waker_link
 *		Wait to be woken when what a commit ending at "lsn", visible at
 *		"visible", waits for is released (at the latest at "until", which
 *		the caller's own timeout covers).  False when no waker runs: the
 *		caller must look on its own.  A link for the same three values is
 *		kept.  A release between the caller's last look and this link is
 *		found by the waker's next look, which comes after the link.
 */
bool
rg_waker_link(XLogRecPtr lsn, int64 visible, int64 until)
{
	RgWaiter   *slot = rg_waker_my_slot();
	Latch	   *waker;
	uint64		state;

	if (slot == NULL)
		return false;
	SpinLockAcquire(&rg_waker->mutex);
	waker = rg_waker->waker_latch;
	SpinLockRelease(&rg_waker->mutex);
	if (waker == NULL)
		return false;
	state = pg_atomic_read_u64(&slot->state);
	if ((state & RG_WAITER_MARK) != RG_WAITER_LINKED || slot->lsn != lsn ||
		slot->visible != visible || slot->until != until)
	{
		rg_waker_unlink();
		slot->lsn = lsn;
		slot->visible = visible;
		slot->until = until;
		slot->linked_at = rg_clock_us();
		slot->number++;
		slot->link = pg_atomic_fetch_add_u64(&rg_waker->links, 1);
		(void) pg_atomic_fetch_add_u32(&rg_waker->nwaiters, 1);
		/* the values before the state: the adds above are full barriers */
		pg_atomic_write_u64(&slot->state,
							RG_WAITER_STATE(slot->number, RG_WAITER_LINKED));
		/* the state before the count (file header) */
		(void) pg_atomic_fetch_add_u64(&rg_waker->marked, 1);
	}
	/* it may be asleep until an expiry: this waiter may need a report */
	SetLatch(waker);
	return true;
}

/*
 * rg_waker_released
 *		Has the waker found this backend's link released?  Then the slot is
 *		free again.
 */
bool
rg_waker_released(void)
{
	RgWaiter   *slot = rg_waker_my_slot();

	if (slot == NULL ||
		pg_atomic_read_u64(&slot->state) !=
		RG_WAITER_STATE(slot->number, RG_WAITER_RELEASED))
		return false;
	pg_atomic_write_u64(&slot->state, RG_WAITER_FREE);
	return true;
}

/*
 * rg_waker_learn
 *		The usual time from a link to its release, "*usual" (microseconds),
 *		learns from one release that took "took": a moving average, each
 *		release a quarter of it.  A release that took RG_WAKER_FAST_US or
 *		longer is left out: it waited out a stall or an expiry, which says
 *		nothing of the next report (a shorter one that an expiry made is
 *		learned too).  A release found at the first look, three quarters of
 *		the average after its link, took at least that: the average leans
 *		high by about half a look's interval, and when reports come sooner
 *		it falls by 6 % a release (about 30 releases from 1.9 to 0.3 ms).
 */
static void
rg_waker_learn(int64 *usual, int64 took)
{
	if (took >= 0 && took < RG_WAKER_FAST_US)
		*usual += (took - *usual) / 4;
}

/*
 * rg_waker_wake
 *		Evaluate every waiter linked before the first "links" links against
 *		the look "view" taken at "now", after those links, and wake each
 *		one released.  A waiter linked later may have become visible after
 *		the look, and a lease recorded in between, which that look does not
 *		show, would then be one it waits for: it is evaluated at the next
 *		look.  Returns whether one still waits, with *next (when an expiry
 *		may release one), *reporting (whether one waits for a WAL sender
 *		that could report) and *due (when the release of the first of
 *		those is due: three quarters of *usual after its link; each release
 *		here teaches *usual).
 */
static bool
rg_waker_wake(const RgLeaseView *view, uint64 links, int64 wait_us, int64 now,
			  int64 *usual, int64 *next, bool *reporting, int64 *due)
{
	bool		waiting = false;
	int64		due_after = *usual * 3 / 4;

	*next = PG_INT64_MAX;
	*reporting = false;
	*due = PG_INT64_MAX;
	for (int i = 0; i < rg_waker->nslots; i++)
	{
		RgWaiter   *slot = &rg_waker->slots[i];
		uint64		state = pg_atomic_read_u64(&slot->state);
		XLogRecPtr	lsn;
		int64		visible;
		int64		until;
		uint64		link;
		int64		linked_at;
		int64		its_next;
		bool		its_reporting;

		if ((state & RG_WAITER_MARK) != RG_WAITER_LINKED)
			continue;
		pg_read_barrier();
		lsn = slot->lsn;
		visible = slot->visible;
		until = slot->until;
		link = slot->link;
		linked_at = slot->linked_at;
		/* read in one piece: the same link before and after */
		pg_read_barrier();
		if (pg_atomic_read_u64(&slot->state) != state)
			continue;
		if (link >= links)
			its_reporting = true;	/* the next look judges it */
		else if (rg_lease_view_released(view, lsn, visible, until, wait_us,
										now, &its_next, &its_reporting))
		{
			if (rg_waker_mark(slot, state, RG_WAITER_RELEASED))
			{
				SetLatch(&GetPGProcByNumber(i)->procLatch);
				rg_waker_learn(usual, now - linked_at);
			}
			continue;
		}
		else
			*next = Min(*next, its_next);
		waiting = true;
		if (its_reporting)
		{
			*reporting = true;
			*due = Min(*due, linked_at + due_after);
		}
	}
	return waiting;
}

/* Did two looks at the lease table find the same? */
static bool
rg_waker_same_look(const RgLeaseView *a, const RgLeaseView *b)
{
	return a->primary_since == b->primary_since &&
		a->last_expiry == b->last_expiry && a->n == b->n &&
		memcmp(a->holders, b->holders, a->n * sizeof(RgLeaseHolder)) == 0;
}

/*
 * rg_waker_exit
 *		before_shmem_exit callback: no waker any more; every waiter is woken
 *		to look on its own.
 */
static void
rg_waker_exit(int code, Datum arg)
{
	SpinLockAcquire(&rg_waker->mutex);
	rg_waker->waker_latch = NULL;
	SpinLockRelease(&rg_waker->mutex);
	for (int i = 0; i < rg_waker->nslots; i++)
		if (pg_atomic_read_u64(&rg_waker->slots[i].state) & RG_WAITER_LINKED)
			SetLatch(&GetPGProcByNumber(i)->procLatch);
}

/*
 * rg_waker_timer_slack
 *		Ask the kernel to end this process's sleeps within
 *		RG_WAKER_SLACK_NS of their time, where it can be asked.
 */
static void
rg_waker_timer_slack(void)
{
#ifdef PR_SET_TIMERSLACK
	if (prctl(PR_SET_TIMERSLACK, (unsigned long) RG_WAKER_SLACK_NS,
			  0, 0, 0) != 0)
		ereport(LOG,
				(errmsg("replica_gate lease waker could not set its timer slack: %m")));
#endif
}

/*
 * rg_waker_main
 *		The lease waker (file header).  It starts once the server is a
 *		primary, and runs only where the commit wait is on.
 */
void
rg_waker_main(Datum arg)
{
	int64		wait_us = rg_commit_wait_ms * (int64) 1000;
	RgLeaseView *view;
	RgLeaseView *last;
	uint64		marked = 0;
	int64		usual = 0;
	int64		due = 0;
	int64		next = 0;
	int64		changed = 0;
	bool		reporting = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	/* No database: connecting only makes us visible in pg_stat_activity. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	view = rg_lease_view_create();
	last = rg_lease_view_create();
	rg_waker_timer_slack();

	SpinLockAcquire(&rg_waker->mutex);
	if (rg_waker->waker_latch != NULL)
	{
		SpinLockRelease(&rg_waker->mutex);
		/* exit code 0: not restarted */
		ereport(LOG, (errmsg("replica_gate lease waker is already running")));
		proc_exit(0);
	}
	rg_waker->waker_latch = MyLatch;
	SpinLockRelease(&rg_waker->mutex);
	before_shmem_exit(rg_waker_exit, (Datum) 0);

	for (;;)
	{
		int64		now;
		uint64		marked_now;
		uint64		links_now;
		RgLeaseView *swap;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			proc_exit(1);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (pg_atomic_read_u32(&rg_waker->nwaiters) == 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
							 RG_WAIT_EVENT(rg_waker_idle_event,
										   "ReplicaGateLeaseWakerIdle"));
			last->n = -1;		/* the next look evaluates */
			continue;
		}

		/* the marks, then the links, then the look (file header) */
		marked_now = pg_atomic_read_u64(&rg_waker->marked);
		pg_memory_barrier();
		links_now = pg_atomic_read_u64(&rg_waker->links);
		pg_memory_barrier();
		now = rg_clock_us();
		rg_lease_look(view, wait_us, now);
		if (marked_now != marked || now >= next || !rg_waker_same_look(view, last))
		{
			changed = now;
			if (!rg_waker_wake(view, links_now, wait_us, now, &usual, &next,
							   &reporting, &due))
				continue;
			marked = marked_now;
			swap = last;
			last = view;
			view = swap;
		}
		if (reporting)
		{
			int64		interval = now - changed < RG_WAKER_FAST_US ?
				RG_WAKER_POLL_US : RG_WAKER_SLOW_US;

			/* a report may come at any moment from when one is due */
			pgstat_report_wait_start(RG_WAIT_EVENT(rg_waker_event,
												   "ReplicaGateLeaseWaker"));
			pg_usleep(Max(interval, Min(due, next) - now));
			pgstat_report_wait_end();
		}
		else
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Max((next - rg_clock_us() + 999) / 1000, 1),
							 RG_WAIT_EVENT(rg_waker_event, "ReplicaGateLeaseWaker"));
	}
}

