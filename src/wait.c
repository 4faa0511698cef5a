/*-------------------------------------------------------------------------
 *
 * wait.c
 *		Waiting on a standby until it has replayed (or received) a target:
 *		the wait loop and its sleep, counted in the statistics and cleaned
 *		up on error.  The callers (gate.c, set_gate.c, staleness.c) check
 *		the arguments, apply the snapshot rules and word the errors.
 *
 * On PostgreSQL 19 and later the sleep goes through core's waiter machinery
 * (WaitForLSN(), woken by the startup process and the walreceiver); before
 * that through the replay watcher's registry (watcher.h), or by polling
 * when the library is not preloaded.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "settings.h"
#include "stats.h"
#include "target.h"
#include "wait.h"
#include "watcher.h"

#ifdef RG_HAVE_CORE_WAIT
/*
 * Longest single WaitForLSN() call in the write and flush modes.  19.0's
 * WaitForLSN() can miss a wake-up when the walreceiver's write or flush
 * position moves back after it removed us from its heap (a restarted
 * stream); re-entering it at this interval bounds what such a miss costs.
 * The replay position never moves back: a wait for it sleeps until woken,
 * since each wake-up costs a sleeping backend a few hundred microseconds of
 * CPU that replay would miss.
 */
#define RG_CORE_WAIT_RECHECK_MS	1000
#endif

/*
 * How often a token's wait re-checks the timeline this server follows, so
 * that a failover that excludes the write is reported at once.
 */
#define RG_TIMELINE_RECHECK_MS	100

static uint32 rg_wait_event = 0;

/*
 * rg_wait_start
 *		Shared start of the wait loops.  When the first check already
 *		decides (it passed, or the timeout is 0), count the call and return
 *		true with *result set.  Otherwise the caller is about to sleep: set
 *		*start and *deadline and return false; the caller then waits under
 *		PG_ENSURE_ERROR_CLEANUP(rg_wait_cleanup, PointerGetDatum(start)).
 */
bool
rg_wait_start(bool passed, int timeout_ms, RgWaitResult *result,
			  TimestampTz *start, TimestampTz *deadline)
{
	if (passed || timeout_ms <= 0)
	{
		*result = passed ? RG_WAIT_REACHED : RG_WAIT_TIMEOUT;
		rg_stats_count(*result, 0);
		return true;
	}
	*start = GetCurrentTimestamp();
	*deadline = TimestampTzPlusMilliseconds(*start, timeout_ms);
	rg_stats_sleep_begin();
	return false;
}

/*
 * rg_wait_sleep
 *		Shared sleep of the wait loops: sleep on our latch until "deadline",
 *		or at most cap_ms if that is positive, then reset the latch and
 *		process interrupts; the caller re-checks its condition afterwards.
 *		Returns false, without sleeping, once the deadline has passed.
 */
bool
rg_wait_sleep(TimestampTz deadline, long cap_ms, uint32 wait_event)
{
	/* rounded up, so that a wait never spins on a 0 ms sleep */
	long		ms = (long) ((deadline - GetCurrentTimestamp() + 999) / 1000);

	if (ms <= 0)
		return false;
	if (cap_ms > 0)
		ms = Min(ms, cap_ms);
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, wait_event);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * rg_wait_cleanup
 *		Error and exit cleanup of a sleeping wait: leave the waiters'
 *		registry (a no-op if not in it) and count the wait as ended by an
 *		error.
 *
 * "arg" points to when the wait started sleeping.  It must be a pointer:
 * PG_ENSURE_ERROR_CLEANUP compares the Datums given at its start and end,
 * and on 32-bit builds of 13-18 TimestampTzGetDatum() allocates a new one
 * each time.
 */
void
rg_wait_cleanup(int code, Datum arg)
{
#ifdef RG_HAVE_CORE_WAIT
	WaitLSNCleanup();
#else
	rg_registry_unlink();
#endif
	rg_stats_count(RG_WAIT_ERROR, *(TimestampTz *) DatumGetPointer(arg));
}

/*
 * rg_wait_reached
 *		Has this standby reached "target" in "mode"?  Sets *position; raises
 *		RG002 or RG003 for a token this server's history excludes.
 */
static bool
rg_wait_reached(const RgTarget *target, RgWaitMode mode, XLogRecPtr *position)
{
	TimeLineID	tli;

	*position = rg_standby_position(mode, &tli);
	return rg_target_reached(target, *position, tli, true);
}

#ifdef RG_HAVE_CORE_WAIT
/*
 * rg_wait_for_lsn
 *		Sleep until "lsn" is reached in "mode", recovery ends or "until"
 *		passes, in core's waiter machinery.  The caller re-checks.
 */
static void
rg_wait_for_lsn(XLogRecPtr lsn, RgWaitMode mode, TimestampTz until)
{
	static const WaitLSNType types[RG_NMODES] = {
		WAIT_LSN_TYPE_STANDBY_REPLAY,
		WAIT_LSN_TYPE_STANDBY_WRITE,
		WAIT_LSN_TYPE_STANDBY_FLUSH
	};

	for (;;)
	{
		long		ms = (long) ((until - GetCurrentTimestamp() + 999) / 1000);

		if (mode != RG_MODE_REPLAY)
			ms = Min(ms, RG_CORE_WAIT_RECHECK_MS);
		if (ms <= 0 ||
			WaitForLSN(types[mode], lsn, ms) != WAIT_LSN_RESULT_TIMEOUT)
			return;
	}
}
#else
/*
 * rg_wait_for_lsn
 *		Sleep until "lsn" is reached in "mode", recovery ends or "until"
 *		passes.  The caller re-checks.
 *
 * Linked into the registry, the backend sleeps on its latch and the replay
 * watcher wakes it exactly when its target is reached; without the registry
 * (library not preloaded, watcher not running) it polls every
 * poll_interval.
 */
static void
rg_wait_for_lsn(XLogRecPtr lsn, RgWaitMode mode, TimestampTz until)
{
	bool		linked = rg_registry_link(lsn, mode);

	/* Recovery's end makes the watcher wake everyone. */
	while (rg_standby_position(mode, NULL) < lsn && RecoveryInProgress())
	{
		/* Taken out without reaching the target: the watcher left. */
		if (linked && !rg_registry_is_linked())
			linked = false;

		/* Linked, the watcher wakes us; otherwise poll. */
		if (!rg_wait_sleep(until,
						   linked ? 0 : (long) ceil(rg_poll_interval),
						   RG_WAIT_EVENT(rg_wait_event, "ReplicaGateWaitReplay")))
			break;
	}
	rg_registry_unlink();
}
#endif

/*
 * rg_wait_for_target
 *		Wait until this standby has reached "target" in "mode" (replayed,
 *		written or flushed it), at most timeout_ms (0: check once).  Sets
 *		*position to the last position seen.  The caller has made sure this
 *		server is in recovery.
 *
 * If recovery ends during the wait, the answer is "reached" only when the
 * target was reached before it ended; WAL this server did not replay never
 * counts.  The timeline of a token can change during the wait (this standby
 * follows a promoted primary), so a token's wait re-checks it every
 * RG_TIMELINE_RECHECK_MS, and raises RG002 as soon as the history it
 * follows excludes the write.  A function-form gate passes a guard (see
 * guard.c): the wait then never holds back replay, and ends early
 * (RG_WAIT_GAVE_WAY) where it might.
 */
RgWaitResult
rg_wait_for_target(const RgTarget *target, RgWaitMode mode, int timeout_ms,
				   RgGuard *guard, XLogRecPtr *position)
{
	RgWaitResult result;
	TimestampTz start;
	TimestampTz deadline;

	if (rg_wait_start(rg_wait_reached(target, mode, position), timeout_ms,
					  &result, &start, &deadline))
		return result;
	if (guard != NULL)
		rg_guard_begin(guard);

	PG_ENSURE_ERROR_CLEANUP(rg_wait_cleanup, PointerGetDatum(&start));
	{
		for (;;)
		{
			TimestampTz until = deadline;
			long		look_ms = rg_guard_poll_ms(guard);
			bool		in_recovery;

			if (rg_guard_must_yield(guard))
			{
				result = RG_WAIT_GAVE_WAY;
				break;
			}

			if (target->tli != 0)
				look_ms = look_ms > 0 ? Min(look_ms, RG_TIMELINE_RECHECK_MS) :
					RG_TIMELINE_RECHECK_MS;
			if (look_ms > 0)
				until = Min(deadline,
							TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														look_ms));
			/*
			 * A guard that looks again within milliseconds anyway sleeps on
			 * the latch alone, without entering the waiters' registry.
			 * Otherwise sleep there, to be woken when the target is reached,
			 * unless the LSN is reached and only a token's timeline is not
			 * yet.
			 */
			if (rg_standby_position(mode, NULL) < target->lsn &&
				!rg_guard_polls_fast(guard))
				rg_wait_for_lsn(target->lsn, mode, until);
			else
				(void) rg_wait_sleep(until, 0,
									 RG_WAIT_EVENT(rg_wait_event, "ReplicaGateWaitReplay"));

			/*
			 * Read the recovery state before the position: replay stops
			 * before recovery is declared over, so a position read after
			 * seeing recovery ended is final.
			 */
			in_recovery = RecoveryInProgress();
			if (rg_wait_reached(target, mode, position))
				result = RG_WAIT_REACHED;
			else if (!in_recovery)
				result = RG_WAIT_NOT_IN_RECOVERY;
			else if (GetCurrentTimestamp() >= deadline)
				result = RG_WAIT_TIMEOUT;
			else
				continue;
			break;
		}
	}
	PG_END_ENSURE_ERROR_CLEANUP(rg_wait_cleanup, PointerGetDatum(&start));
	rg_guard_end(guard);
	rg_stats_count(result, start);

	return result;
}
