/*-------------------------------------------------------------------------
 *
 * lease.c
 *		The primary's leases: which standbys may serve strong reads without
 *		asking, so that a paying commit waits for them, and for no one
 *		else.  src/README.md ("Leases") has the argument, and
 *		test/model/leases.pml the protocol, checked by SPIN; the step names
 *		in the comments here (g1, c5, x1...) are the model's.
 *
 * A lease is granted with an answer to a standby's question (commit_wait.c,
 * grant_lease()), to the WAL sender that streams to it, until W from the
 * grant on rg_clock_us(); it is recorded before the answer's position is
 * read.  A paying commit is released once, for every lease in the table,
 * the lease has expired or its WAL sender has reported an apply position
 * at or past the commit's end; the caller never waits longer than W.  The
 * table has one entry per WAL sender slot, naming the WAL sender's pid.
 *
 * No action shortens or erases a live lease.  A WAL sender that exits
 * (x1: a before_shmem_exit callback, registered when it authenticated,
 * which runs before it leaves its slot) hands its live lease to the slot's
 * "gone" lease, which commits wait out to its end, unless its standby had
 * already reported applying them; so does a grant that finds the slot's
 * lease naming another pid (which cannot happen while every WAL sender
 * runs that callback).  A new WAL sender in the slot, even one given the
 * same pid by the kernel, inherits nothing: the pid is named again only
 * once its predecessor's callback ran.  A crash of any process makes the
 * postmaster reinitialize shared memory: the table is lost, as below.
 *
 * Locks: the table's mutex may be held while a WAL sender slot's mutex is
 * taken (to read its pid and apply position with the lease), never the
 * other way round.
 *
 * Who may have one (g1).  Only the standby a WAL sender streams to: the
 * caller must be connected as the role the WAL sender authenticated as,
 * from the same client address (any Unix socket counts as this host), as
 * the standby's question worker is, with primary_conninfo's user.  A
 * physical WAL sender notes both when it authenticates (before it takes a
 * slot: at most max_wal_senders of them exist, each holding one of the
 * PGPROCs kept for WAL senders), and its start time (pg_stat_activity's
 * backend_start): the standby's question names its WAL sender by both, as
 * it identified it (upstream.c), and a process that the kernel gave the
 * pid of an exited one is not the one named.  Anyone else may call
 * grant_lease(), which gives the position as primary_token() does, and
 * gets no lease.
 *
 * Standbys that would make commits wait for nothing get no lease.  A
 * standby must first show that it keeps up: at its questions, at least
 * W / 2 apart, the primary notes its insert position, and grants leases
 * only while the standby had applied the position noted at the last such
 * question by the next one, at most 3 W / 2 later (its question worker
 * asks about every W / 2 while strong reads happen): its replay lags less
 * than that.  One whose WAL sender is not streaming gets none, and neither
 * does one that let a paying commit wait out its lease or W without
 * applying it, until it has applied that commit and kept up again.  So a
 * standby that is cut off, frozen, paused, held back by a recovery
 * conflict or set to apply more than 3 W / 2 late costs the commits of one
 * lease at most W, then nothing.
 *
 * Strong reads on the primary.  A paying commit is visible on the primary
 * before it is released: a statement of the session mode 'strong' there
 * waits, after its snapshot, until what that snapshot can see is released
 * too (commit_wait.c).  The table counts the paying commits between their
 * commit record and their release, so that such a statement waits only
 * while one is pending.
 *
 * The table lives in shared memory, and a server knows nothing of the
 * leases its predecessor granted (before a crash, or before this server
 * was promoted): every paying commit, and every strong read, within W of
 * the first one since the table was created waits the full W.  Without
 * shared_preload_libraries there is no table: no lease is granted, and
 * there is no commit wait either.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "libpq/auth.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"

#include "lease.h"

/* A WAL sender slot's lease; pid 0: none. */
typedef struct RgLease
{
	pid_t		pid;			/* the WAL sender it was granted to */
	int64		expires;		/* rg_clock_us */
	int64		since;			/* rg_clock_us when the primary was at... */
	XLogRecPtr	since_lsn;		/* ...this insert position */
	bool		keeps_up;		/* it had applied since_lsn W / 2 later */
	XLogRecPtr	behind;			/* refused until this is applied (0: none) */
	bool		active;			/* listed in the active slots */
	/* the last lease here whose WAL sender left while it was live */
	pid_t		gone_pid;
	int64		gone_expires;	/* waited out until then... */
	XLogRecPtr	gone_applied;	/* ...by commits ending after this */
} RgLease;

/* A physical WAL sender, as it authenticated; pid 0: a free entry. */
typedef struct RgLeaseSender
{
	pid_t		pid;
	TimestampTz started;		/* which process of that pid: its start */
	char		user[NAMEDATALEN];
	SockAddr	addr;
} RgLeaseSender;

typedef struct RgLeaseShared
{
	slock_t		mutex;
	pg_atomic_uint64 primary_since; /* the first paying commit or strong
									 * read, 0: none yet */
	pg_atomic_uint64 last_expiry;	/* the latest expiry granted (written with
									 * mutex held) */
	pg_atomic_uint32 paying;	/* paying commits not yet released */
	pg_atomic_uint64 abandoned;	/* until then a commit never acknowledged
								 * may be pending (its session ended) */
	int			nactive;		/* slots listed in rg_lease_active */
	RgLease		leases[FLEXIBLE_ARRAY_MEMBER];	/* one per WAL sender slot,
												 * then max_wal_senders
												 * RgLeaseSender, then as many
												 * active slot numbers */
} RgLeaseShared;

static RgLeaseShared *rg_lease = NULL;
static RgLeaseSender *rg_lease_senders = NULL;

/*
 * The slots whose lease or gone lease a commit may still wait for (granted
 * less than 2 W ago): what a commit looks at, however many WAL sender
 * slots there are.
 */
static int *rg_lease_active = NULL;

static ClientAuthentication_hook_type rg_lease_prev_auth = NULL;

/* Where the table's arrays of senders and of active slots begin. */
static Size
rg_lease_senders_offset(void)
{
	return MAXALIGN(add_size(offsetof(RgLeaseShared, leases),
							 mul_size(max_wal_senders, sizeof(RgLease))));
}

static Size
rg_lease_active_offset(void)
{
	return MAXALIGN(add_size(rg_lease_senders_offset(),
							 mul_size(max_wal_senders, sizeof(RgLeaseSender))));
}

Size
rg_lease_shmem_size(void)
{
	return add_size(rg_lease_active_offset(),
					mul_size(max_wal_senders, sizeof(int)));
}

/*
 * rg_lease_shmem_init
 *		Create or attach to the lease table; called with AddinShmemInitLock
 *		held.
 */
void
rg_lease_shmem_init(void)
{
	bool		found;

	rg_lease = ShmemInitStruct("replica_gate leases", rg_lease_shmem_size(),
							   &found);
	rg_lease_senders = (RgLeaseSender *)
		((char *) rg_lease + rg_lease_senders_offset());
	rg_lease_active = (int *) ((char *) rg_lease + rg_lease_active_offset());
	if (found)
		return;
	memset(rg_lease, 0, rg_lease_shmem_size());
	SpinLockInit(&rg_lease->mutex);
	pg_atomic_init_u64(&rg_lease->primary_since, 0);
	pg_atomic_init_u64(&rg_lease->last_expiry, 0);
	pg_atomic_init_u32(&rg_lease->paying, 0);
	pg_atomic_init_u64(&rg_lease->abandoned, 0);
}

/*
 * rg_lease_same_host
 *		Do two client addresses name the same host, whatever their ports?
 *		Every Unix socket is this host.
 */
static bool
rg_lease_same_host(const SockAddr *a, const SockAddr *b)
{
	const struct sockaddr *sa = (const struct sockaddr *) &a->addr;
	const struct sockaddr *sb = (const struct sockaddr *) &b->addr;

	if (sa->sa_family != sb->sa_family)
		return false;
	switch (sa->sa_family)
	{
		case AF_INET:
			return ((const struct sockaddr_in *) sa)->sin_addr.s_addr ==
				((const struct sockaddr_in *) sb)->sin_addr.s_addr;
		case AF_INET6:
			return memcmp(&((const struct sockaddr_in6 *) sa)->sin6_addr,
						  &((const struct sockaddr_in6 *) sb)->sin6_addr,
						  sizeof(struct in6_addr)) == 0;
		case AF_UNIX:
			return true;
	}
	return false;
}

/*
 * rg_lease_asked_by_standby
 *		g1: may this session obtain a lease for the WAL sender process of
 *		pid "pid" started at "started", in "slot"?  Mutex held, in the
 *		critical section that records the lease.  That process must be
 *		live (noted, its exit callback not run) and still in that slot, and
 *		this session authenticated as its role, from its host.  The start
 *		tells the process the standby identified from another given that
 *		pid since (the standby names its WAL sender as it identified it,
 *		and may not have noticed yet that it exited).
 */
static bool
rg_lease_asked_by_standby(pid_t pid, TimestampTz started, int slot)
{
	WalSnd	   *walsnd = &WalSndCtl->walsnds[slot];
	RgLeaseSender *sender = NULL;
	bool		streams;

	for (int i = 0; i < max_wal_senders && sender == NULL; i++)
		if (rg_lease_senders[i].pid == pid)
			sender = &rg_lease_senders[i];
	if (sender == NULL || sender->started != started ||
		strcmp(sender->user, MyProcPort->user_name) != 0 ||
		!rg_lease_same_host(&sender->addr, &MyProcPort->raddr))
		return false;
	SpinLockAcquire(&walsnd->mutex);
	streams = (walsnd->pid == pid);
	SpinLockRelease(&walsnd->mutex);
	return streams;
}

/*
 * rg_lease_retire
 *		"lease" loses its WAL sender, which last reported "applied": a live
 *		lease becomes the slot's gone lease, waited out to its end (folded
 *		into one still live: the later expiry, the lower position); the slot
 *		then holds none.  Mutex held.
 */
static void
rg_lease_retire(RgLease *lease, XLogRecPtr applied, int64 now)
{
	if (lease->expires > now)
	{
		if (lease->gone_expires > now)
		{
			lease->gone_expires = Max(lease->gone_expires, lease->expires);
			lease->gone_applied = Min(lease->gone_applied, applied);
		}
		else
		{
			lease->gone_expires = lease->expires;
			lease->gone_applied = applied;
		}
		lease->gone_pid = lease->pid;
	}
	lease->pid = 0;
	lease->expires = 0;
	lease->keeps_up = false;
	lease->behind = InvalidXLogRecPtr;
}

/*
 * rg_lease_sender_exit
 *		x1, in a physical WAL sender that exits, before it leaves its slot:
 *		no lease is granted to it from now on, then its live lease, if any,
 *		is retired with the apply position it last reported, in one
 *		critical section (a grant in between would record a lease for a
 *		WAL sender that retires nothing).
 */
static void
rg_lease_sender_exit(int code, Datum arg)
{
	SpinLockAcquire(&rg_lease->mutex);
	for (int i = 0; i < max_wal_senders; i++)
	{
		if (rg_lease_senders[i].pid == MyProcPid)
			rg_lease_senders[i].pid = 0;
	}
	for (int i = 0; i < max_wal_senders; i++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[i];
		XLogRecPtr	applied = InvalidXLogRecPtr;

		if (rg_lease->leases[i].pid != MyProcPid)
			continue;
		SpinLockAcquire(&walsnd->mutex);
		if (walsnd->pid == MyProcPid)
			applied = walsnd->apply;
		SpinLockRelease(&walsnd->mutex);
		rg_lease_retire(&rg_lease->leases[i], applied, rg_clock_us());
	}
	SpinLockRelease(&rg_lease->mutex);
}

/*
 * rg_lease_authenticated
 *		ClientAuthentication_hook: a physical WAL sender notes the role and
 *		address it authenticated with, and that it must retire its lease
 *		when it exits.  The callback comes first: nothing it finds undone
 *		is harm.
 */
static void
rg_lease_authenticated(Port *port, int status)
{
	if (rg_lease_prev_auth)
		rg_lease_prev_auth(port, status);
	if (status != STATUS_OK || !am_walsender || am_db_walsender ||
		rg_lease == NULL)
		return;
	before_shmem_exit(rg_lease_sender_exit, (Datum) 0);
	SpinLockAcquire(&rg_lease->mutex);
	for (int i = 0; i < max_wal_senders; i++)
	{
		RgLeaseSender *sender = &rg_lease_senders[i];

		if (sender->pid == 0)
		{
			sender->pid = MyProcPid;
			sender->started = MyStartTimestamp;
			strlcpy(sender->user, port->user_name, NAMEDATALEN);
			sender->addr = port->raddr;
			break;
		}
	}
	SpinLockRelease(&rg_lease->mutex);
}

/*
 * rg_lease_init
 *		Where the library is preloaded: install the hook; called from
 *		_PG_init.
 */
void
rg_lease_init(void)
{
	rg_lease_prev_auth = ClientAuthentication_hook;
	ClientAuthentication_hook = rg_lease_authenticated;
}

/*
 * rg_lease_sender
 *		The WAL sender slot of a streaming WAL sender "pid" (-1: none), with
 *		the apply position it last reported.
 */
static int
rg_lease_sender(pid_t pid, XLogRecPtr *apply)
{
	for (int i = 0; i < max_wal_senders; i++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[i];
		bool		mine;

		SpinLockAcquire(&walsnd->mutex);
		mine = walsnd->pid == pid && walsnd->state == WALSNDSTATE_STREAMING;
		*apply = walsnd->apply;
		SpinLockRelease(&walsnd->mutex);
		if (mine)
			return i;
	}
	return -1;
}

/*
 * rg_lease_grant
 *		g1 and g2: grant the WAL sender process of pid "pid" started at
 *		"started" a lease of "wait_us" from now, if this session is its
 *		standby's and the standby may have one (file header).  g3: the caller reads the answer's position after this
 *		returns, and the barrier keeps that read after the record, as the
 *		commit's (rg_lease_look) keeps its read of the table after the
 *		commit became visible: else each could miss the other.
 */
bool
rg_lease_grant(pid_t pid, TimestampTz started, int64 wait_us)
{
	XLogRecPtr	insert = GetXLogInsertRecPtr();
	XLogRecPtr	apply;
	int			slot;
	RgLease    *lease;
	bool		granted = false;
	int64		now;

	if (rg_lease == NULL || wait_us <= 0 || pid <= 0 || MyProcPort == NULL ||
		(slot = rg_lease_sender(pid, &apply)) < 0)
		return false;
	SpinLockAcquire(&rg_lease->mutex);
	if (rg_lease_asked_by_standby(pid, started, slot))
	{
		now = rg_clock_us();
		lease = &rg_lease->leases[slot];
		if (lease->pid != pid)
		{
			rg_lease_retire(lease, InvalidXLogRecPtr, now);
			lease->pid = pid;
			lease->since = now;
			lease->since_lsn = insert;
		}
		if (lease->behind != InvalidXLogRecPtr && apply >= lease->behind)
			lease->behind = InvalidXLogRecPtr;
		if (now - lease->since >= wait_us / 2)
		{
			lease->keeps_up = (now - lease->since <= wait_us * 3 / 2 &&
							   apply >= lease->since_lsn);
			lease->since = now;
			lease->since_lsn = insert;
		}
		granted = lease->keeps_up && lease->behind == InvalidXLogRecPtr;
		if (granted)
		{
			lease->expires = Max(lease->expires, now + wait_us);
			if ((uint64) lease->expires > pg_atomic_read_u64(&rg_lease->last_expiry))
				pg_atomic_write_u64(&rg_lease->last_expiry, (uint64) lease->expires);
			if (!lease->active)
			{
				lease->active = true;
				rg_lease_active[rg_lease->nactive++] = slot;
			}
		}
	}
	SpinLockRelease(&rg_lease->mutex);
	pg_memory_barrier();
	return granted;
}

/*
 * rg_lease_note_primary
 *		c4 and p2: this server acts as a primary at "now" (a paying commit
 *		became visible, or a strong read took its snapshot); the first time
 *		since the table was created starts the time in which no lease is
 *		known.  Returns that time.
 */
static int64
rg_lease_note_primary(int64 now)
{
	uint64		since = pg_atomic_read_u64(&rg_lease->primary_since);

	if (since == 0 &&
		pg_atomic_compare_exchange_u64(&rg_lease->primary_since, &since,
									   (uint64) now))
		since = (uint64) now;
	return (int64) since;
}

/*
 * rg_lease_note_commit
 *		c4: a paying commit became visible at "visible".
 */
void
rg_lease_note_commit(int64 visible)
{
	if (rg_lease != NULL)
		(void) rg_lease_note_primary(visible);
}

/*
 * rg_lease_paying
 *		c1: a paying commit is about to write its commit record (or, "n"
 *		negative, -n of them are released (c7), or never will be, or never
 *		became visible).  "abandoned": such commits, visible and never to
 *		be acknowledged, may be pending until then (0: none).
 */
void
rg_lease_paying(int n, int64 abandoned)
{
	if (rg_lease == NULL || n == 0)
		return;
	if (abandoned != 0)
	{
		uint64		was = pg_atomic_read_u64(&rg_lease->abandoned);

		while (was < (uint64) abandoned &&
			   !pg_atomic_compare_exchange_u64(&rg_lease->abandoned, &was,
											   (uint64) abandoned))
			;
	}
	/* full barriers: the count moves before the record, after the release */
	if (n > 0)
		(void) pg_atomic_fetch_add_u32(&rg_lease->paying, (uint32) n);
	else
		(void) pg_atomic_fetch_sub_u32(&rg_lease->paying, (uint32) -n);
}

/*
 * rg_lease_read_owed
 *		p2 and p3: a statement on this primary has taken its snapshot.  May
 *		it see a paying commit not yet released?  Not when none is counted
 *		(each is counted before its commit record, and until it is
 *		released), none was abandoned, and the table has known every lease
 *		for W; else true, with *now: the statement then waits until
 *		rg_lease_view_released() holds for a position read after this, visible
 *		at *now.
 */
bool
rg_lease_read_owed(int64 wait_us, int64 *now)
{
	if (rg_lease == NULL)
		return false;
	/* after the snapshot: see every count its commits made before it */
	pg_memory_barrier();
	*now = rg_clock_us();
	return pg_atomic_read_u32(&rg_lease->paying) != 0 ||
		(int64) pg_atomic_read_u64(&rg_lease->abandoned) > *now ||
		*now < rg_lease_note_primary(*now) + wait_us;
}

/*
 * rg_lease_view_create
 *		Room for a look at the table (rg_lease_look), in TopMemoryContext:
 *		made where an error may be thrown, before the look that must not.
 */
RgLeaseView *
rg_lease_view_create(void)
{
	RgLeaseView *view = MemoryContextAllocZero(TopMemoryContext,
											   sizeof(RgLeaseView));

	view->holders = MemoryContextAllocZero(TopMemoryContext,
										   Max(max_wal_senders, 1) *
										   sizeof(RgLeaseHolder));
	return view;
}

/*
 * rg_lease_look
 *		Copy into "view" what a commit's release depends on: the table's
 *		times, and each active slot's lease and gone lease with the apply
 *		position its WAL sender reported, read in one critical section of
 *		the table: a WAL sender that exits retires its lease in one (x1)
 *		before it leaves its slot, so a slot's WAL sender that has the
 *		lease's pid is the process the lease was granted to, not a later
 *		one that the kernel gave that pid.  Slots whose leases all expired
 *		over W ago ("wait_us") leave the active list: every commit that
 *		became visible while they were live has been released since.
 *
 * The barrier orders what follows after the commit became visible (or
 * the snapshot was taken), as the grant records its lease before it reads
 * the position (rg_lease_grant).
 */
void
rg_lease_look(RgLeaseView *view, int64 wait_us, int64 now)
{
	view->n = 0;
	if (rg_lease == NULL)
		return;
	pg_memory_barrier();
	view->primary_since = (int64) pg_atomic_read_u64(&rg_lease->primary_since);
	view->last_expiry = (int64) pg_atomic_read_u64(&rg_lease->last_expiry);
	SpinLockAcquire(&rg_lease->mutex);
	for (int i = 0; i < rg_lease->nactive;)
	{
		int			slot = rg_lease_active[i];
		RgLease    *lease = &rg_lease->leases[slot];
		RgLeaseHolder *holder = &view->holders[view->n];

		if (Max(lease->expires, lease->gone_expires) + wait_us <= now)
		{
			lease->active = false;
			rg_lease_active[i] = rg_lease_active[--rg_lease->nactive];
			continue;
		}
		holder->slot = slot;
		holder->pid = lease->pid;
		holder->expires = lease->expires;
		holder->gone_expires = lease->gone_expires;
		holder->gone_applied = lease->gone_applied;
		SpinLockAcquire(&WalSndCtl->walsnds[slot].mutex);
		holder->reporting = holder->pid != 0 &&
			WalSndCtl->walsnds[slot].pid == holder->pid;
		holder->applied = holder->reporting ?
			WalSndCtl->walsnds[slot].apply : InvalidXLogRecPtr;
		SpinLockRelease(&WalSndCtl->walsnds[slot].mutex);
		view->n++;
		i++;
	}
	SpinLockRelease(&rg_lease->mutex);
}

/*
 * rg_lease_mark_behind
 *		The standby of WAL sender "pid" in "slot" held a lease over a commit
 *		ending at "lsn" and did not apply it in time: no lease for it until
 *		it has.
 */
static void
rg_lease_mark_behind(int slot, pid_t pid, XLogRecPtr lsn)
{
	SpinLockAcquire(&rg_lease->mutex);
	if (rg_lease->leases[slot].pid == pid)
	{
		rg_lease->leases[slot].behind = Max(rg_lease->leases[slot].behind, lsn);
		rg_lease->leases[slot].keeps_up = false;
	}
	SpinLockRelease(&rg_lease->mutex);
}

/*
 * rg_lease_view_released
 *		c5 and p4, on a look at the table: may a paying commit that ends at
 *		"lsn" and became visible at "visible" be acknowledged at "now"?  Yes
 *		at "until" (W after it), and before that once every lease has
 *		expired or its WAL sender has applied "lsn", and every gone lease
 *		has expired or its WAL sender had applied "lsn" before it left;
 *		never within wait_us (W) of the first paying commit or strong read
 *		(file header).  A lease live at "visible" whose WAL sender has not
 *		applied "lsn" at "until", or when it expires if it had W / 2 to do
 *		it, marks its standby behind: a commit that became visible just
 *		before a lease expired does not (a healthy standby reports a
 *		moment later; marked, it would ask for every strong read until it
 *		had shown again that it keeps up).  If not released, *next is when
 *		an expiry may release it without a report, and *reporting whether a
 *		WAL sender that could report is waited for.
 */
bool
rg_lease_view_released(const RgLeaseView *view, XLogRecPtr lsn,
					   int64 visible, int64 until, int64 wait_us, int64 now,
					   int64 *next, bool *reporting)
{
	bool		released = true;

	*next = until;
	*reporting = false;
	if (rg_lease == NULL)
		return now >= until;
	if (visible < view->primary_since + wait_us)
		released = (now >= until);
	else if (view->last_expiry <= visible)
		return true;			/* no lease live then: most commits where no
								 * standby serves strong reads locally */

	for (int i = 0; i < view->n; i++)
	{
		const RgLeaseHolder *holder = &view->holders[i];

		if (holder->gone_expires > visible && holder->gone_applied < lsn &&
			now < holder->gone_expires && now < until)
		{
			released = false;
			*next = Min(*next, holder->gone_expires);
		}
		if (holder->pid == 0 || holder->expires <= visible ||
			holder->applied >= lsn)
			continue;
		if (now < holder->expires && now < until)
		{
			released = false;
			*next = Min(*next, holder->expires);
			*reporting |= holder->reporting;
		}
		else if (now >= until || holder->expires - visible >= wait_us / 2)
			rg_lease_mark_behind(holder->slot, holder->pid, lsn);
	}
	return released;
}

PG_FUNCTION_INFO_V1(rg_leases);

/*
 * leases() returns setof (sender_pid integer, expires_in_ms float8, applied
 * pg_lsn, behind pg_lsn): the lease table, one row per WAL sender that was
 * granted one (expires_in_ms <= 0 once it expired), with the apply position
 * that WAL sender last reported and, for a standby refused for letting a
 * commit wait out its lease, the position it must apply first; and one row
 * per live lease whose WAL sender left, with what it had reported then.
 */
Datum
rg_leases(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	int			row;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;
		TupleDesc	desc;

		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		funcctx->tuple_desc = BlessTupleDesc(desc);
		MemoryContextSwitchTo(old);
	}
	funcctx = SRF_PERCALL_SETUP();
	/* two rows a slot: its lease, then its gone lease */
	for (row = (int) funcctx->call_cntr;
		 rg_lease != NULL && row < 2 * max_wal_senders; row++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[row / 2];
		RgLease		lease;
		XLogRecPtr	apply;
		int64		now = rg_clock_us();
		Datum		values[4];
		bool		nulls[4] = {false, false, false, true};

		SpinLockAcquire(&rg_lease->mutex);
		lease = rg_lease->leases[row / 2];
		SpinLockRelease(&rg_lease->mutex);
		if (row % 2 == 1)
		{
			if (lease.gone_expires <= now)
				continue;
			values[0] = Int32GetDatum(lease.gone_pid);
			values[1] = Float8GetDatum((lease.gone_expires - now) / 1000.0);
			apply = lease.gone_applied;
		}
		else
		{
			if (lease.pid == 0)
				continue;
			SpinLockAcquire(&walsnd->mutex);
			apply = walsnd->pid == lease.pid ? walsnd->apply : InvalidXLogRecPtr;
			SpinLockRelease(&walsnd->mutex);
			values[0] = Int32GetDatum(lease.pid);
			values[1] = Float8GetDatum((lease.expires - now) / 1000.0);
			values[3] = LSNGetDatum(lease.behind);
			nulls[3] = (lease.behind == InvalidXLogRecPtr);
		}
		values[2] = LSNGetDatum(apply);
		nulls[2] = (apply == InvalidXLogRecPtr);
		/* the next call goes on after this row */
		funcctx->call_cntr = row;
		SRF_RETURN_NEXT(funcctx,
						HeapTupleGetDatum(heap_form_tuple(funcctx->tuple_desc,
														  values, nulls)));
	}
	SRF_RETURN_DONE(funcctx);
}
