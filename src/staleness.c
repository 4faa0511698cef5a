/*-------------------------------------------------------------------------
 *
 * staleness.c
 *		Bounded staleness: an upper bound on how far this node's data is
 *		behind the primary, gates on that bound, and replica_gate.status(),
 *		the one cheap row a router needs.
 *
 * The bound comes from what the WAL receiver knows: the WAL end the primary
 * reported in its last message and when it sent that message (keepalives
 * refresh both on an idle system), and the replay position.  A sender that
 * is itself a standby knows nothing of the primary's progress: on a
 * cascading standby the bound is unknown (upstream.c finds out).
 *
 * Whatever this node lacks lies in the WAL after its last replayed commit
 * (or abort), so it became visible on the primary after that record's
 * time: the bound is at most the time since then.  When replay has reached
 * the reported end, this node also has everything the primary had flushed
 * when it sent the message.  A commit made with synchronous_commit = off
 * is visible on the primary before its WAL is flushed, for up to three
 * times the primary's wal_writer_delay (upstream.c asks for it): so this
 * node has everything visible on the primary that long before the message
 * was sent, and the bound is the smaller of the two.  Times sent by the
 * primary are compared with this server's clock, so the clocks must agree.
 *
 * A second bound needs no clock but this server's: the age of the newest
 * answer of the primary this standby has replayed (proof.c).  It holds on a
 * cascading standby too, where a question reaches the primary.  The
 * staleness is the smaller of the bounds known.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "common/int.h"
#include "fmgr.h"
#include "funcapi.h"
#include "replication/walreceiver.h"
#include "storage/ipc.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"

#include "commit_wait.h"
#include "gate.h"
#include "guard.h"
#include "proof.h"
#include "question.h"
#include "settings.h"
#include "staleness.h"
#include "stats.h"
#include "upstream.h"
#include "wait.h"

/* How often a bounded-staleness wait re-checks the bound. */
#define RG_FRESH_RECHECK_MS		10

PG_FUNCTION_INFO_V1(rg_staleness_sql);
PG_FUNCTION_INFO_V1(rg_fresh_within);
PG_FUNCTION_INFO_V1(rg_require_fresh);
PG_FUNCTION_INFO_V1(rg_status);

static uint32 rg_fresh_event = 0;

/*
 * rg_stream_staleness_us
 *		The bound from what the WAL receiver knows; false when it cannot be
 *		known (not streaming, nothing heard from the primary yet, streaming
 *		from another standby or not yet known not to be, replay behind with
 *		no replayed commit to date it).
 */
static bool
rg_stream_staleness_us(int64 *us)
{
	RgReceiver	rcv;
	TimestampTz now;
	TimestampTz as_of;
	TimestampTz last_commit;
	int64		unflushed_us;

	if (!rg_upstream_read_primary(&rcv, &unflushed_us))
		return false;

	now = GetCurrentTimestamp();
	last_commit = Min(GetLatestXTime(), rcv.sent_time);
	if (GetXLogReplayRecPtr(NULL) < rcv.wal_end)
		as_of = last_commit;
	else
		as_of = Max(rcv.sent_time - unflushed_us, last_commit);
	if (as_of <= 0)
		return false;
	*us = Max(now - as_of, 0);
	return true;
}

/*
 * rg_staleness_us
 *		Upper bound on this node's staleness in microseconds: 0 on a primary,
 *		on a standby the smaller of the stream's and the replayed answer's
 *		bounds; false when neither is known.  "want": a gate waits on it
 *		(proof.c then keeps answers fresh).
 */
static bool
rg_staleness_us(bool want, int64 *us)
{
	TimeLineID	tli;
	XLogRecPtr	replayed;
	int64		answer_us;
	bool		known;

	if (!RecoveryInProgress())
	{
		*us = 0;
		return true;
	}
	known = rg_stream_staleness_us(us);
	replayed = GetXLogReplayRecPtr(&tli);
	if (rg_proof_age_us(replayed, tli, want, &answer_us))
	{
		*us = known ? Min(*us, answer_us) : answer_us;
		known = true;
	}
	return known;
}

static Interval *
rg_interval_from_us(int64 us)
{
	Interval   *result = palloc0(sizeof(Interval));

	result->time = us;
	return result;
}

/*
 * rg_limit_us
 *		A staleness limit in microseconds; months count as 30 days,
 *		'infinity' (17+) accepts any known staleness.  Negative limits are
 *		refused, and so are limits too large to count in microseconds.
 */
static int64
rg_limit_us(Interval *limit)
{
	int64		days;
	int64		us = 0;

	if (RG_INTERVAL_IS_NOEND(limit))
		return PG_INT64_MAX;
	if (!RG_INTERVAL_IS_NOBEGIN(limit) &&
		(pg_mul_s64_overflow((int64) limit->month, DAYS_PER_MONTH, &days) ||
		 pg_add_s64_overflow(days, limit->day, &days) ||
		 pg_mul_s64_overflow(days, USECS_PER_DAY, &us) ||
		 pg_add_s64_overflow(us, limit->time, &us)))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("\"max_staleness\" is out of range")));
	if (RG_INTERVAL_IS_NOBEGIN(limit) || us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"max_staleness\" must not be negative")));
	return us;
}

/*
 * Is the bound known and within limit_us?  Sets *bound_us (-1: unknown).
 * "want": keep the primary's answers fresh meanwhile (proof.c).
 */
static bool
rg_fresh_enough(int64 limit_us, bool want, int64 *bound_us)
{
	if (!rg_staleness_us(want, bound_us))
		*bound_us = -1;
	return *bound_us >= 0 && *bound_us <= limit_us;
}

/*
 * rg_wait_fresh
 *		Wait until this node's staleness bound is at most limit_us, at most
 *		timeout_ms.  Sets *bound_us to the last bound seen (-1: unknown).
 *
 * Nothing signals a keepalive's arrival, so the wait re-checks every
 * RG_FRESH_RECHECK_MS.  A node promoted meanwhile is a primary: fresh.  The
 * guard keeps the wait from holding back replay (guard.c).
 */
static RgWaitResult
rg_wait_fresh(int64 limit_us, int timeout_ms, RgGuard *guard, bool want,
			  int64 *bound_us)
{
	RgWaitResult result;
	TimestampTz start;
	TimestampTz deadline;

	if (rg_wait_start(rg_fresh_enough(limit_us, want, bound_us), timeout_ms,
						&result, &start, &deadline))
		return result;
	rg_guard_begin(guard);

	PG_ENSURE_ERROR_CLEANUP(rg_wait_cleanup, PointerGetDatum(&start));
	{
		for (;;)
		{
			long		look_ms = rg_guard_poll_ms(guard);

			if (rg_fresh_enough(limit_us, want, bound_us))
			{
				result = RG_WAIT_REACHED;
				break;
			}
			if (rg_guard_must_yield(guard))
			{
				result = RG_WAIT_GAVE_WAY;
				break;
			}
			if (!rg_wait_sleep(deadline,
							   look_ms > 0 ? Min(look_ms, RG_FRESH_RECHECK_MS) :
							   RG_FRESH_RECHECK_MS,
							   RG_WAIT_EVENT(rg_fresh_event, "ReplicaGateWaitFresh")))
			{
				result = RG_WAIT_TIMEOUT;
				break;
			}
		}
	}
	PG_END_ENSURE_ERROR_CLEANUP(rg_wait_cleanup, PointerGetDatum(&start));
	rg_guard_end(guard);
	rg_stats_count(result, start);
	return result;
}

/*
 * staleness() returns interval: the bound, 0 on a primary, NULL if unknown.
 */
Datum
rg_staleness_sql(PG_FUNCTION_ARGS)
{
	int64		us;

	if (!rg_staleness_us(false, &us))
		PG_RETURN_NULL();
	PG_RETURN_INTERVAL_P(rg_interval_from_us(us));
}

/*
 * fresh_within(max_staleness interval, timeout_ms integer) returns boolean:
 * true as soon as staleness() <= max_staleness, false on timeout.  A NULL
 * limit passes at once.
 */
Datum
rg_fresh_within(PG_FUNCTION_ARGS)
{
	int			timeout = rg_gate_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	RgGuard		guard;
	int64		bound;

	rg_gate_check_missed_set();
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	rg_gate_check_snapshot("replica_gate.fresh_within");
	rg_guard_prepare(&guard, fcinfo);
	PG_RETURN_BOOL(rg_wait_fresh(rg_limit_us(PG_GETARG_INTERVAL_P(0)),
								 timeout, &guard, false, &bound) == RG_WAIT_REACHED);
}

/*
 * rg_staleness_require
 *		Wait until this node's staleness bound is at most limit_us, at most
 *		timeout_ms, raising RG001 if it does not get there; the messages
 *		name the limit as an interval.  require_fresh() and the session's
 *		bounded mode (session.c) gate so; the bounded mode ("want") also
 *		has the question worker keep the primary's answers fresh.
 */
void
rg_staleness_require(int64 limit_us, int timeout_ms, RgGuard *guard, bool want)
{
	Interval   *limit = rg_interval_from_us(limit_us);
	int64		bound;
	RgWaitResult result;

	result = rg_wait_fresh(limit_us, timeout_ms, guard, want, &bound);
	if (result == RG_WAIT_GAVE_WAY)
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("gate on staleness %s gave way to replay",
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(limit)))),
				 errdetail("Replay on this standby was waiting on a recovery conflict that the snapshot, locks or buffer pins of the gate's statement could cause."),
				 errhint("Call the gate as a statement of its own, first in its transaction; otherwise run the read on the primary.")));
	if (result != RG_WAIT_REACHED)
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("replica is not within %s of the primary after %d ms",
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(limit))),
						timeout_ms),
				 bound < 0 && !rg_preloaded ?
				 errdetail("Its staleness cannot be known without shared_preload_libraries = 'replica_gate'.") :
				 bound < 0 ?
				 errdetail("Its staleness cannot be known: the WAL receiver is not streaming from the primary.") :
				 errdetail("Its staleness bound is %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(rg_interval_from_us(bound))))),
				 errhint("Run the read on the primary, or accept more staleness.")));
}

/*
 * require_fresh(max_staleness interval, timeout_ms integer) returns void:
 * like fresh_within, raising RG001 on timeout.
 */
Datum
rg_require_fresh(PG_FUNCTION_ARGS)
{
	int			timeout = rg_gate_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	RgGuard		guard;

	rg_gate_check_missed_set();
	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	rg_gate_check_snapshot("replica_gate.require_fresh");
	rg_guard_prepare(&guard, fcinfo);
	rg_staleness_require(rg_limit_us(PG_GETARG_INTERVAL_P(0)), timeout, &guard, false);
	PG_RETURN_VOID();
}

/*
 * status() returns one row describing what this node can serve.
 */
Datum
rg_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[15];
	bool		nulls[15] = {0};
	int			commit_wait_ms;
	int64		us;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	if (RecoveryInProgress())
	{
		RgReceiver	rcv;
		TimeLineID	tli;
		XLogRecPtr	replay = GetXLogReplayRecPtr(&tli);

		rg_upstream_read_receiver(&rcv);
		values[0] = CStringGetTextDatum("standby");
		values[1] = LSNGetDatum(replay);
		values[2] = LSNGetDatum(rcv.received);
		nulls[2] = (rcv.received == InvalidXLogRecPtr);
		nulls[3] = nulls[4] = true;
		values[5] = Int32GetDatum((int32) tli);
		values[6] = BoolGetDatum(RG_REPLAY_PAUSED());
		values[7] = BoolGetDatum(rcv.streaming);
	}
	else
	{
		values[0] = CStringGetTextDatum("primary");
		nulls[1] = nulls[2] = true;
		values[3] = LSNGetDatum(GetXLogInsertRecPtr());
		values[4] = LSNGetDatum(RG_FLUSH_PTR());
		values[5] = Int32GetDatum((int32) RG_INSERT_TLI());
		nulls[6] = nulls[7] = true;
	}
	if (rg_staleness_us(false, &us))
		values[8] = IntervalPGetDatum(rg_interval_from_us(us));
	else
		nulls[8] = true;
	values[9] = Int32GetDatum(rg_stats_sleeping());
	values[10] = BoolGetDatum(rg_preloaded);
	/* the question connection, on a standby (from version 0.4.0 on) */
	values[11] = CStringGetTextDatum(rg_question_state());
	nulls[11] = !RecoveryInProgress();
	/* a standby serves them only through its question worker */
	values[12] = BoolGetDatum(!RecoveryInProgress() ||
							 strcmp(rg_question_state(), "off") != 0);
	values[13] = BoolGetDatum(rg_loaded_at_start);
	/* the primary's commit wait: this one's, or as learned by the question */
	commit_wait_ms = RecoveryInProgress() ? rg_proof_commit_wait_ms() :
		rg_preloaded ? rg_commit_wait_ms : 0;
	values[14] = IntervalPGetDatum(rg_interval_from_us(commit_wait_ms * (int64) 1000));
	nulls[14] = (commit_wait_ms < 0);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
