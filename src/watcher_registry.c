/*-------------------------------------------------------------------------
 *
 * watcher_registry.c
 *		The shared registry of backends waiting for replay, and the wake-up
 *		that the replay watcher performs on it.
 *
 * Each backend owns the slot indexed by its PGPROC number, so linking needs
 * no allocation.  The watcher compares the replay position with the lowest
 * linked target and, only when that is reached, scans the slots under the
 * lock, unlinks every satisfied waiter itself and sets its latch after
 * releasing the lock.  A woken backend therefore only reads its own slot: it
 * never queues on the lock on its way out, which keeps a mass wake-up from
 * turning into a lock convoy.
 *
 * Only available when the library is in shared_preload_libraries; otherwise
 * rg_registry_link() returns false and waiters poll on their own.  Not
 * built on PostgreSQL 19 and later, where core's registry serves (wait.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

#include "watcher.h"

#ifndef RG_HAVE_CORE_WAIT

/* One slot per PGPROC that can run SQL. */
typedef struct RgSlot
{
	XLogRecPtr	target;			/* awaited LSN; written under lock */
	RgWaitMode	mode;			/* what the target is compared with */
	pg_atomic_uint32 linked;	/* 1 while registered; cleared by the waker */
} RgSlot;

typedef struct RgShared
{
	LWLock	   *lock;			/* protects targets, links and watcher */
	Latch	   *watcher_latch;	/* the replay watcher's latch, or NULL */
	pg_atomic_uint32 nwaiters;	/* number of linked slots */
	pg_atomic_uint64 min_target[RG_NMODES]; /* lower bound of linked targets */
	pg_atomic_uint32 min_stale;	/* 1: a lowest target left unwoken */
	int			nslots;
	RgSlot		slots[FLEXIBLE_ARRAY_MEMBER];
} RgShared;

static RgShared *rg_shared = NULL;

/* Scratch list of procnos to wake, used by the watcher only. */
static int *rg_wake_list = NULL;

/*
 * rg_registry_shmem_size
 *		Shared memory the registry needs.
 */
Size
rg_registry_shmem_size(void)
{
	return add_size(offsetof(RgShared, slots),
					mul_size(RG_MAX_BACKENDS(), sizeof(RgSlot)));
}

/*
 * rg_registry_shmem_init
 *		Create or attach to the registry; called with AddinShmemInitLock held.
 */
void
rg_registry_shmem_init(void)
{
	bool		found;

	rg_shared = ShmemInitStruct("replica_gate registry",
								rg_registry_shmem_size(), &found);
	if (found)
		return;
	rg_shared->lock = &(GetNamedLWLockTranche("replica_gate"))->lock;
	rg_shared->watcher_latch = NULL;
	pg_atomic_init_u32(&rg_shared->nwaiters, 0);
	for (int m = 0; m < RG_NMODES; m++)
		pg_atomic_init_u64(&rg_shared->min_target[m], PG_UINT64_MAX);
	pg_atomic_init_u32(&rg_shared->min_stale, 0);
	rg_shared->nslots = RG_MAX_BACKENDS();
	for (int i = 0; i < rg_shared->nslots; i++)
	{
		rg_shared->slots[i].target = InvalidXLogRecPtr;
		pg_atomic_init_u32(&rg_shared->slots[i].linked, 0);
	}
}

/* This backend's slot, or NULL when there is no registry or no slot. */
static RgSlot *
rg_my_slot(void)
{
	if (rg_shared == NULL || MyProc == NULL ||
		RG_MY_PROCNO < 0 || RG_MY_PROCNO >= rg_shared->nslots)
		return NULL;
	return &rg_shared->slots[RG_MY_PROCNO];
}

/*
 * rg_registry_link
 *		Register this backend as waiting for "target" in "mode".
 *
 * Returns false when nobody would wake us (no registry, no running
 * watcher): the caller must then poll.  The caller re-checks the replay
 * position after this returns, so a target replayed in between is not
 * missed.
 */
bool
rg_registry_link(XLogRecPtr target, RgWaitMode mode)
{
	RgSlot	   *slot = rg_my_slot();
	Latch	   *watcher;
	uint32		before;
	bool		nearest;

	if (slot == NULL)
		return false;

	LWLockAcquire(rg_shared->lock, LW_EXCLUSIVE);
	watcher = rg_shared->watcher_latch;
	if (watcher == NULL)
	{
		LWLockRelease(rg_shared->lock);
		return false;
	}
	Assert(pg_atomic_read_u32(&slot->linked) == 0);
	slot->target = target;
	slot->mode = mode;
	pg_atomic_write_u32(&slot->linked, 1);
	before = pg_atomic_fetch_add_u32(&rg_shared->nwaiters, 1);
	nearest = target < pg_atomic_read_u64(&rg_shared->min_target[mode]);
	if (nearest)
		pg_atomic_write_u64(&rg_shared->min_target[mode], target);
	LWLockRelease(rg_shared->lock);

	/*
	 * The watcher sleeps without a timeout while nobody waits, and polls
	 * less often while every target of a mode is far (rg_worker_poll): a
	 * new lowest target of its mode must not wait for either sleep to end.
	 * (On 16 to 18 its sleep on the replay condition variable, while replay
	 * stands still, ignores the latch: a replayed record, or its 100 ms
	 * re-check, ends that one.)
	 */
	if (before == 0 || nearest)
		SetLatch(watcher);
	return true;
}

/*
 * rg_registry_is_linked
 *		Is this backend still registered?  Reads only our own slot: the waker
 *		clears it before setting our latch.
 */
bool
rg_registry_is_linked(void)
{
	RgSlot	   *slot = rg_my_slot();

	return slot != NULL && pg_atomic_read_u32(&slot->linked) != 0;
}

/*
 * rg_registry_unlink
 *		Leave the registry if the waker has not already taken us out.  Safe to
 *		call at any time, also from error and exit cleanup.
 */
void
rg_registry_unlink(void)
{
	RgSlot	   *slot = rg_my_slot();

	if (slot == NULL || pg_atomic_read_u32(&slot->linked) == 0)
		return;

	LWLockAcquire(rg_shared->lock, LW_EXCLUSIVE);
	if (pg_atomic_read_u32(&slot->linked) != 0)
	{
		pg_atomic_write_u32(&slot->linked, 0);
		pg_atomic_fetch_sub_u32(&rg_shared->nwaiters, 1);
		/* the bound may now be too low: rg_registry_nearest() raises it */
		if (slot->target ==
			pg_atomic_read_u64(&rg_shared->min_target[slot->mode]))
			pg_atomic_write_u32(&rg_shared->min_stale, 1);
	}
	LWLockRelease(rg_shared->lock);
}

/* Number of backends registered right now (0 without the registry). */
int
rg_registry_waiters(void)
{
	if (rg_shared == NULL)
		return 0;
	return (int) pg_atomic_read_u32(&rg_shared->nwaiters);
}

/*
 * rg_registry_nearest
 *		Lower bounds of the linked targets, by mode (PG_UINT64_MAX where
 *		nobody waits in that mode), for the watcher.  After the lowest
 *		target of a mode left without being woken (a timeout, a cancel, an
 *		error), recompute the bounds first: one left too low would keep the
 *		watcher polling as if a target were near.
 *
 * A waiter that links a lower target right after we read the bound sets
 * the watcher's latch after writing it; the watcher resets its latch
 * before it reads the bounds again, so it does not sleep on the old one.
 */
void
rg_registry_nearest(XLogRecPtr *targets)
{
	if (rg_shared != NULL && pg_atomic_read_u32(&rg_shared->min_stale) != 0)
	{
		XLogRecPtr	min[RG_NMODES];

		for (int m = 0; m < RG_NMODES; m++)
			min[m] = PG_UINT64_MAX;
		LWLockAcquire(rg_shared->lock, LW_EXCLUSIVE);
		pg_atomic_write_u32(&rg_shared->min_stale, 0);
		for (int i = 0; i < rg_shared->nslots; i++)
		{
			RgSlot	   *slot = &rg_shared->slots[i];

			if (pg_atomic_read_u32(&slot->linked) != 0 &&
				slot->target < min[slot->mode])
				min[slot->mode] = slot->target;
		}
		for (int m = 0; m < RG_NMODES; m++)
			pg_atomic_write_u64(&rg_shared->min_target[m], min[m]);
		LWLockRelease(rg_shared->lock);
	}

	for (int m = 0; m < RG_NMODES; m++)
		targets[m] = rg_shared == NULL ? PG_UINT64_MAX :
			pg_atomic_read_u64(&rg_shared->min_target[m]);
}

/*
 * rg_registry_attach_watcher
 *		Announce the calling process as the replay watcher.  Returns false if
 *		there is no registry or another watcher is attached.
 */
bool
rg_registry_attach_watcher(void)
{
	bool		ok;

	if (rg_shared == NULL)
		return false;
	if (rg_wake_list == NULL)
		rg_wake_list = MemoryContextAlloc(TopMemoryContext,
										  sizeof(int) * rg_shared->nslots);

	LWLockAcquire(rg_shared->lock, LW_EXCLUSIVE);
	ok = (rg_shared->watcher_latch == NULL);
	if (ok)
		rg_shared->watcher_latch = MyLatch;
	LWLockRelease(rg_shared->lock);
	return ok;
}

/*
 * rg_registry_detach_watcher
 *		The watcher is going away: wake everyone so that they fall back to
 *		polling instead of sleeping until their timeout.
 */
void
rg_registry_detach_watcher(void)
{
	bool		was_watcher;

	if (rg_shared == NULL)
		return;
	LWLockAcquire(rg_shared->lock, LW_EXCLUSIVE);
	was_watcher = (rg_shared->watcher_latch == MyLatch);
	if (was_watcher)
		rg_shared->watcher_latch = NULL;
	LWLockRelease(rg_shared->lock);
	if (was_watcher)
		(void) rg_registry_wake(NULL, true);
}

/*
 * rg_registry_wake
 *		Unlink and wake every waiter whose target is at or before the
 *		position of its mode (positions[], indexed by RgWaitMode), or every
 *		waiter if "wake_all".  Returns the number woken.
 *
 * Called by the watcher on every replay advance, so the common case (no
 * target reached yet) must stay lock-free.
 */
int
rg_registry_wake(const XLogRecPtr *positions, bool wake_all)
{
	XLogRecPtr	new_min[RG_NMODES];
	bool		any = wake_all;
	int			nwake = 0;

	if (rg_shared == NULL || pg_atomic_read_u32(&rg_shared->nwaiters) == 0)
		return 0;

	/*
	 * No wake-up is lost between a waiter linking and our reading of the
	 * positions: the waiter re-reads its position after linking, and both
	 * reads go through a spinlock or a barrier, so either it sees the
	 * position we saw or we see its link (made under our lock) next time.
	 * The barrier orders our reads of the positions before those of the
	 * links' lower bounds.
	 */
	pg_memory_barrier();
	for (int m = 0; m < RG_NMODES && !any; m++)
		any = pg_atomic_read_u64(&rg_shared->min_target[m]) <= positions[m];
	if (!any)
		return 0;

	for (int m = 0; m < RG_NMODES; m++)
		new_min[m] = PG_UINT64_MAX;
	LWLockAcquire(rg_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < rg_shared->nslots; i++)
	{
		RgSlot	   *slot = &rg_shared->slots[i];

		if (pg_atomic_read_u32(&slot->linked) == 0)
			continue;
		if (wake_all || slot->target <= positions[slot->mode])
		{
			pg_atomic_write_u32(&slot->linked, 0);
			pg_atomic_fetch_sub_u32(&rg_shared->nwaiters, 1);
			rg_wake_list[nwake++] = i;
		}
		else if (slot->target < new_min[slot->mode])
			new_min[slot->mode] = slot->target;
	}
	for (int m = 0; m < RG_NMODES; m++)
		pg_atomic_write_u64(&rg_shared->min_target[m], new_min[m]);
	LWLockRelease(rg_shared->lock);

	for (int i = 0; i < nwake; i++)
		SetLatch(&GetPGProcByNumber(rg_wake_list[i])->procLatch);
	return nwake;
}

#endif							/* !RG_HAVE_CORE_WAIT */
