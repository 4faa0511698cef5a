/*-------------------------------------------------------------------------
 *
 * wait.c
 *		Waiting until this server has replayed (or received) a target LSN:
 *		the wait loop, timeout rules, and the snapshot rules that decide
 *		whether a successful gate really lets the following reads see the
 *		write.
 *
 * On PostgreSQL 19 and later the wait goes through core's waiter machinery
 * (WaitForLSN(), woken by the startup process and the walreceiver); before
 * that through replica_gate's own registry, woken by the replay watcher, or
 * by polling when the library is not preloaded.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "replication/walreceiver.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "replica_gate.h"

#ifdef RG_HAVE_CORE_WAIT
/*
 * Longest single WaitForLSN() call.  19.0's WaitForLSN() can miss a wake-up
 * when the walreceiver's write or flush position moves back after it
 * removed us from its heap (a restarted stream); re-entering it at this
 * interval bounds what such a miss costs.
 */
#define RG_CORE_WAIT_RECHECK_MS	1000
#endif

/*
 * How often a token's wait re-checks the timeline this server follows, so
 * that a failover that excludes the write is reported at once.
 */
#define RG_TIMELINE_RECHECK_MS	100

static uint32 rg_wait_event = 0;

static const char *const rg_mode_names[RG_NMODES] = {"replay", "write", "flush"};
static const char *const rg_mode_verbs[RG_NMODES] = {"replayed", "written", "flushed"};

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
 *		Checks every gate function makes first.  Fail after a SET form that
 *		did not wait (see rg_check_missed_set).  Refuse to gate once a
 *		REPEATABLE READ or SERIALIZABLE transaction has taken its snapshot:
 *		that snapshot predates the wait and can never see the write, so
 *		reporting success would be a lie.
 */
void
rg_check_xact_snapshot(const char *gate_name)
{
	rg_check_missed_set();
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
 *		under PG_ENSURE_ERROR_CLEANUP(rg_gate_cleanup, PointerGetDatum(start)).
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
 *		Error and exit cleanup of a sleeping gate: leave the waiters' registry
 *		(a no-op if not in it) and count the wait as ended by an error.
 *
 * "arg" points to when the gate started sleeping.  It must be a pointer:
 * PG_ENSURE_ERROR_CLEANUP compares the Datums given at its start and end,
 * and on 32-bit builds of 13-18 TimestampTzGetDatum() allocates a new one
 * each time.
 */
void
rg_gate_cleanup(int code, Datum arg)
{
#ifdef RG_HAVE_CORE_WAIT
	WaitLSNCleanup();
#else
	rg_registry_unlink();
#endif
	rg_stats_count(RG_WAIT_ERROR, *(TimestampTz *) DatumGetPointer(arg));
}

/*
 * rg_wait_mode
 *		The wait mode named by a gate's "mode" argument.
 */
RgWaitMode
rg_wait_mode(const char *name)
{
	for (int i = 0; i < RG_NMODES; i++)
		if (strcmp(name, rg_mode_names[i]) == 0)
			return (RgWaitMode) i;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unrecognized value for \"mode\": \"%s\"", name),
			 errhint("Valid values are \"replay\", \"write\" and \"flush\".")));
	pg_unreachable();
}

/*
 * rg_standby_position
 *		How far this standby is in "mode", and on which timeline: the replay
 *		position, or what the walreceiver has written or flushed.  WAL up to
 *		the replay position is on disk here whatever brought it (archive,
 *		pg_wal, an earlier stream), so it is the floor of the other two, as
 *		for core's WAIT FOR.  "tli" may be NULL.
 */
XLogRecPtr
rg_standby_position(RgWaitMode mode, TimeLineID *tli)
{
	TimeLineID	replay_tli;
	TimeLineID	received_tli;
	XLogRecPtr	replayed = GetXLogReplayRecPtr(&replay_tli);
	XLogRecPtr	received;

	if (mode == RG_MODE_REPLAY)
	{
		if (tli)
			*tli = replay_tli;
		return replayed;
	}
	received = GetWalRcvFlushRecPtr(NULL, &received_tli);
	if (mode == RG_MODE_WRITE)
		received = Max(received, GetWalRcvWriteRecPtr());
	if (tli)
		*tli = received > replayed ? received_tli : replay_tli;
	return Max(received, replayed);
}

/*
 * rg_standby_reached
 *		Has this standby reached "target" in "mode"?  Sets *position; raises
 *		RG002 or RG003 for a token this server's history excludes.
 */
static bool
rg_standby_reached(const RgTarget *target, RgWaitMode mode,
				   XLogRecPtr *position)
{
	TimeLineID	tli;

	*position = rg_standby_position(mode, &tli);
	return rg_target_reached(target, *position, tli, true);
}

/*
 * rg_target_text
 *		"LSN <lsn>" or "token <token>", for messages.
 */
static char *
rg_target_text(const RgTarget *target)
{
	if (target->tli == 0)
		return psprintf("LSN %s", rg_lsn_text(target->lsn));
	return psprintf("token %s", rg_token_text(target->tli, target->lsn));
}

/*
 * rg_wait_on_primary
 *		On a server that is not in recovery everything up to the WAL insert
 *		position exists; a target beyond it cannot be a token of this server.
 *		The write and flush modes promise the WAL is on disk here: flush it.
 */
static RgWaitResult
rg_wait_on_primary(const RgTarget *target, RgWaitMode mode,
				   XLogRecPtr *position)
{
	XLogRecPtr	insert = GetXLogInsertRecPtr();

	if (!rg_target_reached(target, insert, RG_INSERT_TLI(), false))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target %s is beyond the WAL insert position %s of this server",
						rg_target_text(target), rg_lsn_text(insert)),
				 errdetail("This server is not in recovery, and it has written WAL only up to its insert position."),
				 errhint("Use a token taken from this server, or gate on a standby of it.")));
	if (mode != RG_MODE_REPLAY)
		XLogFlush(target->lsn);
	*position = insert;
	rg_stats_count(RG_WAIT_REACHED, 0);
	return RG_WAIT_REACHED;
}

#ifdef RG_HAVE_CORE_WAIT
/*
 * rg_sleep_for_lsn
 *		Sleep until "lsn" is reached in "mode", recovery ends or "until"
 *		passes, in core's waiter machinery.  The caller re-checks.
 */
static void
rg_sleep_for_lsn(XLogRecPtr lsn, RgWaitMode mode, TimestampTz until)
{
	static const WaitLSNType types[RG_NMODES] = {
		WAIT_LSN_TYPE_STANDBY_REPLAY,
		WAIT_LSN_TYPE_STANDBY_WRITE,
		WAIT_LSN_TYPE_STANDBY_FLUSH
	};

	for (;;)
	{
		long		ms = (long) ((until - GetCurrentTimestamp() + 999) / 1000);

		if (ms <= 0 ||
			WaitForLSN(types[mode], lsn,
					   Min(ms, RG_CORE_WAIT_RECHECK_MS)) != WAIT_LSN_RESULT_TIMEOUT)
			return;
	}
}
#else
/*
 * rg_sleep_for_lsn
 *		Sleep until "lsn" is reached in "mode", recovery ends or "until"
 *		passes.  The caller re-checks.
 *
 * Linked into the registry, the backend sleeps on its latch and the replay
 * watcher wakes it exactly when its target is reached; without the registry
 * (library not preloaded, watcher not running) it polls every
 * poll_interval.
 */
static void
rg_sleep_for_lsn(XLogRecPtr lsn, RgWaitMode mode, TimestampTz until)
{
	bool		linked = rg_registry_link(lsn, mode);

	/* Recovery's end makes the watcher wake everyone. */
	while (rg_standby_position(mode, NULL) < lsn && RecoveryInProgress())
	{
		/* Taken out without reaching the target: the watcher left. */
		if (linked && !rg_registry_is_linked())
			linked = false;

		/* Linked, the watcher wakes us; otherwise poll. */
		if (!rg_gate_sleep(until,
						   linked ? 0 : (long) ceil(rg_poll_interval),
						   RG_WAIT_EVENT(rg_wait_event, "ReplicaGateWaitReplay")))
			break;
	}
	rg_registry_unlink();
}
#endif

/*
 * rg_wait_for_target
 *		Wait until this server has reached "target" in "mode" (replayed,
 *		written or flushed it), at most timeout_ms (0: check once).  Sets
 *		*position to the last position seen.
 *
 * On a primary it answers at once (see rg_wait_on_primary).  If recovery
 * ends during the wait, the answer is "reached" only when the target was
 * reached before it ended; WAL this server did not replay never counts.
 * The timeline of a token can change during the wait (this standby follows
 * a promoted primary), so a token's wait re-checks it every
 * RG_TIMELINE_RECHECK_MS, and raises RG002 as soon as the history it
 * follows excludes the write.  A function-form gate passes a guard (see
 * replay_guard.c): the wait then never holds back replay, and ends early
 * (RG_WAIT_GAVE_WAY) when it might.
 */
RgWaitResult
rg_wait_for_target(const RgTarget *target, RgWaitMode mode, int timeout_ms,
				   RgGuard *guard, XLogRecPtr *position)
{
	RgWaitResult result;
	TimestampTz start;
	TimestampTz deadline;

	if (!RecoveryInProgress())
		return rg_wait_on_primary(target, mode, position);

	if (rg_gate_decided(rg_standby_reached(target, mode, position), timeout_ms,
						&result, &start, &deadline))
		return result;
	if (guard != NULL)
		rg_guard_begin(guard);

	PG_ENSURE_ERROR_CLEANUP(rg_gate_cleanup, PointerGetDatum(&start));
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
			 * A watching guard looks again within milliseconds anyway: sleep
			 * on the latch alone, without entering the waiters' registry.
			 * Otherwise sleep there, unless the LSN is reached and only a
			 * token's timeline is not yet.
			 */
			if (rg_standby_position(mode, NULL) < target->lsn &&
				rg_guard_poll_ms(guard) == 0)
				rg_sleep_for_lsn(target->lsn, mode, until);
			else
				(void) rg_gate_sleep(until, 0,
									 RG_WAIT_EVENT(rg_wait_event, "ReplicaGateWaitReplay"));

			/*
			 * Read the recovery state before the position: replay stops
			 * before recovery is declared over, so a position read after
			 * seeing recovery ended is final.
			 */
			in_recovery = RecoveryInProgress();
			if (rg_standby_reached(target, mode, position))
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
	PG_END_ENSURE_ERROR_CLEANUP(rg_gate_cleanup, PointerGetDatum(&start));
	rg_stats_count(result, start);

	return result;
}

/*
 * rg_report_not_in_recovery
 *		Raise the error for a wait that recovery's end cut short.
 */
void
rg_report_not_in_recovery(const RgTarget *target, RgWaitMode mode,
						  XLogRecPtr position)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("recovery is not in progress"),
			 errdetail("Recovery ended before target %s was %s; the last %s LSN is %s.",
					   rg_target_text(target), rg_mode_verbs[mode],
					   rg_mode_verbs[mode], rg_lsn_text(position))));
}

/*
 * rg_require_target
 *		rg_wait_for_target, raising an error unless the target was reached.
 */
void
rg_require_target(const RgTarget *target, RgWaitMode mode, int timeout_ms,
				  RgGuard *guard)
{
	XLogRecPtr	position;
	RgWaitResult result = rg_wait_for_target(target, mode, timeout_ms, guard,
											 &position);

	if (result == RG_WAIT_TIMEOUT)
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("replica has not %s %s within %d ms",
						rg_mode_verbs[mode], rg_target_text(target), timeout_ms),
				 errdetail("The last %s LSN is %s.",
						   rg_mode_verbs[mode], rg_lsn_text(position)),
				 errhint("Run the read on the primary, or wait longer.")));
	if (result == RG_WAIT_GAVE_WAY)
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("gate gave way to replay before %s was %s",
						rg_target_text(target), rg_mode_verbs[mode]),
				 errdetail("Replay on this standby was waiting on a recovery conflict that the snapshot or locks of the gate's statement could cause. The last %s LSN is %s.",
						   rg_mode_verbs[mode], rg_lsn_text(position)),
				 errhint("Call the gate as a statement of its own, first in its transaction, or use SET replica_gate.require_lsn; otherwise run the read on the primary.")));
	if (result == RG_WAIT_NOT_IN_RECOVERY)
		rg_report_not_in_recovery(target, mode, position);
}
