/*-------------------------------------------------------------------------
 *
 * lease.c
 *		The primary's leases: which standbys may serve strong reads without
 *		asking, so that a paying commit waits for them, and for no one
 *		else.  src/README.md ("Leases") has the argument.
 *
 * A lease is granted with an answer to a standby's question (commit_wait.c,
 * grant_lease()), to the WAL sender that streams to it, until W from the
 * grant on rg_clock_us(); it is recorded before the answer's position is
 * read.  A paying commit is released once, for every lease in the table,
 * the lease has expired or its WAL sender has reported an apply position
 * at or past the commit's end; the caller never waits longer than W.  The
 * table has one entry per WAL sender slot, naming the WAL sender's pid: a
 * WAL sender that exits or restarts leaves its lease without a reporter,
 * to expire.
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
 * The table lives in shared memory, and a server knows nothing of the
 * leases its predecessor granted (before a crash, or before this server
 * was promoted): every paying commit within W of the first paying commit
 * since the table was created waits the full W.  Without
 * shared_preload_libraries there is no table: no lease is granted, and
 * there is no commit wait either.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "port/atomics.h"
#include "replication/walsender_private.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"

#include "lease.h"

/* A WAL sender's lease; pid 0: none. */
typedef struct RgLease
{
	pid_t		pid;			/* the WAL sender it was granted to */
	int64		expires;		/* rg_clock_us */
	int64		since;			/* rg_clock_us when the primary was at... */
	XLogRecPtr	since_lsn;		/* ...this insert position */
	bool		keeps_up;		/* it had applied since_lsn W / 2 later */
	XLogRecPtr	behind;			/* refused until this is applied (0: none) */
} RgLease;

typedef struct RgLeaseShared
{
	slock_t		mutex;
	pg_atomic_uint64 primary_since; /* the first paying commit, 0: none yet */
	pg_atomic_uint64 last_expiry;	/* the latest expiry granted (written with
									 * mutex held) */
	RgLease		leases[FLEXIBLE_ARRAY_MEMBER];	/* one per WAL sender slot */
} RgLeaseShared;

static RgLeaseShared *rg_lease = NULL;

/* What a commit saw of one live lease's WAL sender. */
typedef struct RgLeaseSeen
{
	int			slot;
	RgLease		lease;
} RgLeaseSeen;

Size
rg_lease_shmem_size(void)
{
	return add_size(offsetof(RgLeaseShared, leases),
					mul_size(max_wal_senders, sizeof(RgLease)));
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
	if (found)
		return;
	memset(rg_lease, 0, rg_lease_shmem_size());
	SpinLockInit(&rg_lease->mutex);
	pg_atomic_init_u64(&rg_lease->primary_since, 0);
	pg_atomic_init_u64(&rg_lease->last_expiry, 0);
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
 *		Grant WAL sender "pid" a lease of "wait_us" from now, if it may have
 *		one (file header).  The caller reads the answer's position after
 *		this returns.
 */
bool
rg_lease_grant(pid_t pid, int64 wait_us)
{
	XLogRecPtr	insert = GetXLogInsertRecPtr();
	XLogRecPtr	apply;
	int			slot;
	RgLease    *lease;
	bool		granted;
	int64		now;

	if (rg_lease == NULL || wait_us <= 0 || pid <= 0 ||
		(slot = rg_lease_sender(pid, &apply)) < 0)
		return false;
	SpinLockAcquire(&rg_lease->mutex);
	now = rg_clock_us();
	lease = &rg_lease->leases[slot];
	if (lease->pid != pid)
	{
		lease->pid = pid;
		lease->expires = 0;
		lease->since = now;
		lease->since_lsn = insert;
		lease->keeps_up = false;
		lease->behind = InvalidXLogRecPtr;
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
	}
	SpinLockRelease(&rg_lease->mutex);
	return granted;
}

/*
 * rg_lease_note_commit
 *		A paying commit became visible at "visible": the first one since the
 *		table was created starts the time in which no lease is known.
 */
void
rg_lease_note_commit(int64 visible)
{
	uint64		none = 0;

	if (rg_lease != NULL &&
		pg_atomic_read_u64(&rg_lease->primary_since) == 0)
		(void) pg_atomic_compare_exchange_u64(&rg_lease->primary_since,
											  &none, (uint64) visible);
}

/*
 * rg_lease_released
 *		May a paying commit that ends at "lsn" and became visible at
 *		"visible" be acknowledged at "now"?  Yes at "until" (W after it),
 *		and before that once every lease has expired or its WAL sender has
 *		applied "lsn"; never within wait_us (W) of the first paying commit
 *		(file header).  A lease live at "visible" whose WAL sender has not
 *		applied "lsn" when it expires, or at "until", marks its standby
 *		behind.
 */
bool
rg_lease_released(XLogRecPtr lsn, int64 visible, int64 until, int64 wait_us,
				  int64 now)
{
	bool		released = true;

	if (rg_lease == NULL)
		return now >= until;
	if (visible < (int64) pg_atomic_read_u64(&rg_lease->primary_since) + wait_us)
		released = (now >= until);
	else
	{
		/*
		 * No lease live at "visible": nothing to look at (most commits where
		 * no standby serves strong reads locally).  The barrier orders the
		 * read after the commit became visible, as the grant records its
		 * expiry before it reads the position.
		 */
		pg_memory_barrier();
		if ((int64) pg_atomic_read_u64(&rg_lease->last_expiry) <= visible)
			return true;
	}

	for (int i = 0; i < max_wal_senders; i++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[i];
		RgLease		lease;
		bool		applied;

		SpinLockAcquire(&rg_lease->mutex);
		lease = rg_lease->leases[i];
		SpinLockRelease(&rg_lease->mutex);
		if (lease.pid == 0 || lease.expires <= visible)
			continue;

		SpinLockAcquire(&walsnd->mutex);
		applied = walsnd->pid == lease.pid && walsnd->apply >= lsn;
		SpinLockRelease(&walsnd->mutex);
		if (applied)
			continue;
		if (now < lease.expires && now < until)
			released = false;
		else
		{
			/* it held a lease over this commit and did not apply it in time */
			SpinLockAcquire(&rg_lease->mutex);
			if (rg_lease->leases[i].pid == lease.pid)
			{
				rg_lease->leases[i].behind = Max(rg_lease->leases[i].behind, lsn);
				rg_lease->leases[i].keeps_up = false;
			}
			SpinLockRelease(&rg_lease->mutex);
		}
	}
	return released;
}

PG_FUNCTION_INFO_V1(rg_leases);

/*
 * leases() returns setof (sender_pid integer, expires_in_ms float8, applied
 * pg_lsn, behind pg_lsn): the lease table, one row per WAL sender that was
 * granted one (expires_in_ms <= 0 once it expired), with the apply position
 * that WAL sender last reported and, for a standby refused for letting a
 * commit wait out its lease, the position it must apply first.
 */
Datum
rg_leases(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	int			slot;

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
	for (slot = (int) funcctx->call_cntr; rg_lease != NULL && slot < max_wal_senders; slot++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[slot];
		RgLease		lease;
		XLogRecPtr	apply;
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		SpinLockAcquire(&rg_lease->mutex);
		lease = rg_lease->leases[slot];
		SpinLockRelease(&rg_lease->mutex);
		if (lease.pid == 0)
			continue;
		SpinLockAcquire(&walsnd->mutex);
		apply = walsnd->pid == lease.pid ? walsnd->apply : InvalidXLogRecPtr;
		SpinLockRelease(&walsnd->mutex);
		values[0] = Int32GetDatum(lease.pid);
		values[1] = Float8GetDatum((lease.expires - rg_clock_us()) / 1000.0);
		values[2] = LSNGetDatum(apply);
		nulls[2] = (apply == InvalidXLogRecPtr);
		values[3] = LSNGetDatum(lease.behind);
		nulls[3] = (lease.behind == InvalidXLogRecPtr);
		/* the next call goes on after this slot */
		funcctx->call_cntr = slot;
		SRF_RETURN_NEXT(funcctx,
						HeapTupleGetDatum(heap_form_tuple(funcctx->tuple_desc,
														  values, nulls)));
	}
	SRF_RETURN_DONE(funcctx);
}
