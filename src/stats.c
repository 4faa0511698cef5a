/*-------------------------------------------------------------------------
 *
 * stats.c
 *		Cumulative gate statistics in shared memory (the replica_gate.stats
 *		view), and the number of backends sleeping in a gate right now.
 *
 * Counters are atomics, updated once per gate call, so counting takes no
 * lock.  Available only with shared_preload_libraries; without it the SQL
 * functions raise an error and the counting calls do nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "stats.h"

/* Upper bounds (ms) of the wait-time histogram; one more bucket for above. */
static const int64 rg_hist_bounds_ms[] = {1, 10, 100, 1000, 10000};

#define RG_HIST_BUCKETS (lengthof(rg_hist_bounds_ms) + 1)

/* The cumulative counters, in the order of the stats() columns. */
enum
{
	RG_CALLS,
	RG_IMMEDIATE,
	RG_WAITS,
	RG_TIMEOUTS,
	RG_ERRORS,
	RG_WAIT_TIME_US,
	RG_MAX_WAIT_US,
	RG_HIST,					/* RG_HIST_BUCKETS histogram buckets */
	RG_GAVE_WAY = RG_HIST + RG_HIST_BUCKETS,	/* after stats_reset, see below */
	RG_STRONG_READS,			/* gates on 'primary' */
	RG_QUESTIONS,				/* questions the question worker asked */
	RG_QUESTIONS_FAILED,
	RG_QUESTION_TIME_US,		/* their total time */
	RG_STRONG_READS_LOCAL,		/* gates on 'primary' that needed no question */
	RG_NCOUNTERS
};

typedef struct RgStats
{
	pg_atomic_uint32 sleeping;	/* backends sleeping in a gate now */
	pg_atomic_uint64 counter[RG_NCOUNTERS];
	pg_atomic_uint64 reset_time;	/* TimestampTz of the last reset */
} RgStats;

static RgStats *rg_stats = NULL;

PG_FUNCTION_INFO_V1(rg_stats_sql);
PG_FUNCTION_INFO_V1(rg_stats_reset);
PG_FUNCTION_INFO_V1(rg_waiters);

Size
rg_stats_shmem_size(void)
{
	return sizeof(RgStats);
}

/*
 * rg_stats_shmem_init
 *		Create or attach to the counters; called with AddinShmemInitLock held.
 */
void
rg_stats_shmem_init(void)
{
	bool		found;

	rg_stats = ShmemInitStruct("replica_gate stats", sizeof(RgStats), &found);
	if (found)
		return;
	pg_atomic_init_u32(&rg_stats->sleeping, 0);
	for (int i = 0; i < RG_NCOUNTERS; i++)
		pg_atomic_init_u64(&rg_stats->counter[i], 0);
	pg_atomic_init_u64(&rg_stats->reset_time, (uint64) GetCurrentTimestamp());
}

static inline void
rg_stats_add(int counter, uint64 n)
{
	pg_atomic_fetch_add_u64(&rg_stats->counter[counter], n);
}

/* A gate is about to sleep for the first time. */
void
rg_stats_sleep_begin(void)
{
	if (rg_stats != NULL)
		pg_atomic_fetch_add_u32(&rg_stats->sleeping, 1);
}

/*
 * rg_stats_count
 *		Account for one gate call.  slept_since is when it started sleeping
 *		(after rg_stats_sleep_begin), or 0 if it never slept.  Recovery
 *		ending before the target counts as an error, like the one it raises.
 */
void
rg_stats_count(RgWaitResult result, TimestampTz slept_since)
{
	uint64		us;
	uint64		max;
	int			bucket;

	if (rg_stats == NULL)
		return;

	rg_stats_add(RG_CALLS, 1);
	if (result == RG_WAIT_TIMEOUT)
		rg_stats_add(RG_TIMEOUTS, 1);
	else if (result == RG_WAIT_GAVE_WAY)
		rg_stats_add(RG_GAVE_WAY, 1);
	else if (result != RG_WAIT_REACHED)
		rg_stats_add(RG_ERRORS, 1);

	if (slept_since == 0)
	{
		if (result == RG_WAIT_REACHED)
			rg_stats_add(RG_IMMEDIATE, 1);
		return;
	}

	pg_atomic_fetch_sub_u32(&rg_stats->sleeping, 1);
	rg_stats_add(RG_WAITS, 1);
	us = (uint64) Max(GetCurrentTimestamp() - slept_since, 0);
	rg_stats_add(RG_WAIT_TIME_US, us);
	max = pg_atomic_read_u64(&rg_stats->counter[RG_MAX_WAIT_US]);
	while (us > max &&
		   !pg_atomic_compare_exchange_u64(&rg_stats->counter[RG_MAX_WAIT_US],
										   &max, us))
		;
	for (bucket = 0; bucket < lengthof(rg_hist_bounds_ms); bucket++)
		if (us <= (uint64) rg_hist_bounds_ms[bucket] * 1000)
			break;
	rg_stats_add(RG_HIST + bucket, 1);
}

/* A gate on 'primary': it asked the question worker, or ("local") needed not. */
void
rg_stats_strong_read(bool local)
{
	if (rg_stats == NULL)
		return;
	rg_stats_add(RG_STRONG_READS, 1);
	if (local)
		rg_stats_add(RG_STRONG_READS_LOCAL, 1);
}

/* The question worker asked the primary, in "us" microseconds. */
void
rg_stats_question(bool answered, int64 us)
{
	if (rg_stats == NULL)
		return;
	rg_stats_add(RG_QUESTIONS, 1);
	if (!answered)
		rg_stats_add(RG_QUESTIONS_FAILED, 1);
	rg_stats_add(RG_QUESTION_TIME_US, (uint64) Max(us, 0));
}

/* Backends sleeping in a gate right now (0 without preload). */
int
rg_stats_sleeping(void)
{
	if (rg_stats == NULL)
		return 0;
	return (int) pg_atomic_read_u32(&rg_stats->sleeping);
}

static void
rg_stats_require_preload(void)
{
	if (rg_stats == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replica_gate statistics need shared memory"),
				 errhint("Add replica_gate to shared_preload_libraries and restart the server.")));
}

/*
 * stats() returns the single row of the replica_gate.stats view.
 *
 * Counters added after version 0.2.0 come after the stats_reset column, in
 * the order they were added, so that a new library still fills the row of
 * an older definition (until ALTER EXTENSION ... UPDATE) correctly:
 * heap_form_tuple() takes only as many values as the row has columns.
 */
Datum
rg_stats_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[RG_NCOUNTERS + 1];
	bool		nulls[RG_NCOUNTERS + 1] = {0};

	rg_stats_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	Assert(tupdesc->natts <= lengthof(values));

	for (int i = 0; i < RG_NCOUNTERS; i++)
	{
		uint64		v = pg_atomic_read_u64(&rg_stats->counter[i]);
		int			column = i < RG_GAVE_WAY ? i : i + 1;

		/* times are shown in milliseconds, like pg_stat_statements */
		if (i == RG_WAIT_TIME_US || i == RG_MAX_WAIT_US || i == RG_QUESTION_TIME_US)
			values[column] = Float8GetDatum(v / 1000.0);
		else
			values[column] = Int64GetDatum((int64) v);
	}
	values[RG_GAVE_WAY] =
		TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&rg_stats->reset_time));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * stats_reset() returns void: zero the counters.  Not for PUBLIC (see the
 * install script).
 */
Datum
rg_stats_reset(PG_FUNCTION_ARGS)
{
	rg_stats_require_preload();
	for (int i = 0; i < RG_NCOUNTERS; i++)
		pg_atomic_write_u64(&rg_stats->counter[i], 0);
	pg_atomic_write_u64(&rg_stats->reset_time, (uint64) GetCurrentTimestamp());
	PG_RETURN_VOID();
}

/*
 * waiters() returns integer: backends sleeping in a gate on this server.
 */
Datum
rg_waiters(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(rg_stats_sleeping());
}
