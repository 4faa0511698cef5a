/*-------------------------------------------------------------------------
 *
 * wait.c
 *		Waiting until this server has replayed a target LSN: the latch wait
 *		loop, timeout rules, and the snapshot rules that decide whether a
 *		successful gate really lets the following reads see the write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "replica_gate.h"

static uint32 rg_wait_event = 0;

/*
 * rg_effective_timeout
 *		The timeout a gate uses: NULL means replica_gate.default_timeout, and
 *		every wait is capped by replica_gate.max_timeout.
 */
int
rg_effective_timeout(bool isnull, int32 timeout_ms)
{
	int			timeout = isnull ? rg_default_timeout : timeout_ms;

	if (timeout < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"timeout_ms\" must not be negative")));
	return Min(timeout, rg_max_timeout);
}

/*
 * rg_check_xact_snapshot
 *		Refuse to gate once a REPEATABLE READ or SERIALIZABLE transaction has
 *		taken its snapshot: that snapshot predates the wait and can never see
 *		the write, so reporting success would be a lie.
 */
void
rg_check_xact_snapshot(const char *gate_name)
{
	if (IsolationUsesXactSnapshot() && FirstSnapshotSet)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s() cannot be used after the transaction snapshot was taken",
						gate_name),
				 errdetail("A REPEATABLE READ or SERIALIZABLE transaction reads from the snapshot of its first statement, which cannot see data replayed later."),
				 errhint("Gate before BEGIN, or make SET LOCAL replica_gate.require_lsn = '...' the first statement of the transaction.")));
}

/*
 * rg_gate_decided
 *		Shared start of the gates' wait loops.  When the first check already
 *		decides the gate (it passed, or the timeout is 0), count the call and
 *		return true with *result set.  Otherwise the gate is about to sleep:
 *		set *start and *deadline and return false; the caller then waits
 *		under PG_ENSURE_ERROR_CLEANUP(rg_gate_cleanup, start).
 */
bool
rg_gate_decided(bool passed, int timeout_ms, RgWaitResult *result,
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
 * rg_gate_sleep
 *		Shared sleep of the gates' wait loops: sleep on our latch until
 *		"deadline", or at most cap_ms if that is positive, then reset the
 *		latch and process interrupts; the caller re-checks its condition
 *		afterwards.  Returns false, without sleeping, once the deadline has
 *		passed.
 */
bool
rg_gate_sleep(TimestampTz deadline, long cap_ms, uint32 wait_event)
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
 * rg_gate_cleanup
 *		Error and exit cleanup of a sleeping gate: leave the registry (a no-op
 *		if not linked) and count the wait as ended by an error.  "arg" is
 *		when the gate started sleeping.
 */
void
rg_gate_cleanup(int code, Datum arg)
{
	rg_registry_unlink();
	rg_stats_count(RG_WAIT_ERROR, DatumGetTimestampTz(arg));
}

/*
 * rg_wait_on_primary
 *		On a server that is not in recovery everything up to the WAL insert
 *		position exists; a target beyond it cannot be a token of this server.
 */
static RgWaitResult
rg_wait_on_primary(XLogRecPtr target, XLogRecPtr *replayed)
{
	XLogRecPtr	insert = GetXLogInsertRecPtr();

	if (target > insert)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target LSN " RG_LSN_FMT " is beyond the WAL insert position " RG_LSN_FMT " of this server",
						RG_LSN_ARGS(target), RG_LSN_ARGS(insert)),
				 errdetail("This server is not in recovery, and it has written WAL only up to its insert position."),
				 errhint("Use a token taken from this server, or gate on a standby of it.")));
	*replayed = insert;
	rg_stats_count(RG_WAIT_REACHED, 0);
	return RG_WAIT_REACHED;
}

/*
 * rg_wait_for_lsn
 *		Wait until this server has replayed "target", at most timeout_ms
 *		(0: check once).  Sets *replayed to the last position seen.
 *
 * On a primary it answers at once (see rg_wait_on_primary).  If recovery
 * ends during the wait, the answer is "reached" only when the target was
 * replayed before it ended; WAL this server did not replay never counts.
 *
 * The backend sleeps on its latch.  With the registry it is woken by the
 * replay watcher exactly when its target is reached; without it (library
 * not preloaded, watcher not running) it polls every poll_interval.
 */
RgWaitResult
rg_wait_for_lsn(XLogRecPtr target, int timeout_ms, XLogRecPtr *replayed)
{
	RgWaitResult result;
	TimestampTz start;
	TimestampTz deadline;
	bool		linked;

	if (!RecoveryInProgress())
		return rg_wait_on_primary(target, replayed);

	*replayed = GetXLogReplayRecPtr(NULL);
	if (rg_gate_decided(*replayed >= target, timeout_ms, &result,
						&start, &deadline))
		return result;

	PG_ENSURE_ERROR_CLEANUP(rg_gate_cleanup, TimestampTzGetDatum(start));
	{
		linked = rg_registry_link(target);
		for (;;)
		{
			/* Read the recovery state before the position: see below. */
			bool		in_recovery = RecoveryInProgress();

			*replayed = GetXLogReplayRecPtr(NULL);
			if (*replayed >= target)
			{
				result = RG_WAIT_REACHED;
				break;
			}

			/*
			 * Replay stops before recovery is declared over, so a position
			 * read after seeing recovery ended is final.
			 */
			if (!in_recovery)
			{
				result = RG_WAIT_NOT_IN_RECOVERY;
				break;
			}

			/* Taken out without reaching the target: the watcher left. */
			if (linked && !rg_registry_is_linked())
				linked = false;

			/* Linked, the watcher wakes us; otherwise poll. */
			if (!rg_gate_sleep(deadline,
							   linked ? 0 : (long) ceil(rg_poll_interval),
							   RG_WAIT_EVENT(rg_wait_event, "ReplicaGateWaitReplay")))
			{
				result = RG_WAIT_TIMEOUT;
				break;
			}
		}
	}
	PG_END_ENSURE_ERROR_CLEANUP(rg_gate_cleanup, TimestampTzGetDatum(start));
	rg_registry_unlink();
	rg_stats_count(result, start);

	return result;
}

/*
 * rg_report_not_in_recovery
 *		Raise the error for a wait that recovery's end cut short.
 */
void
rg_report_not_in_recovery(XLogRecPtr target, XLogRecPtr replayed)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("recovery is not in progress"),
			 errdetail("Recovery ended before replaying target LSN " RG_LSN_FMT "; last replayed LSN " RG_LSN_FMT ".",
					   RG_LSN_ARGS(target), RG_LSN_ARGS(replayed))));
}

/*
 * rg_require_lsn
 *		rg_wait_for_lsn, raising an error unless the target was reached.
 */
void
rg_require_lsn(XLogRecPtr target, int timeout_ms)
{
	XLogRecPtr	replayed;
	RgWaitResult result = rg_wait_for_lsn(target, timeout_ms, &replayed);

	if (result == RG_WAIT_TIMEOUT)
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("replica has not replayed LSN " RG_LSN_FMT " within %d ms",
						RG_LSN_ARGS(target), timeout_ms),
				 errdetail("The last replayed LSN is " RG_LSN_FMT ".",
						   RG_LSN_ARGS(replayed)),
				 errhint("Run the read on the primary, or wait longer.")));
	if (result == RG_WAIT_NOT_IN_RECOVERY)
		rg_report_not_in_recovery(target, replayed);
}
