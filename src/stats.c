/*-------------------------------------------------------------------------
 *
 * stats.c
 *		Cumulative gate statistics in shared memory (the replica_gate.stats
 *		view), and the number of backends sleeping in a gate right now.
 *
 * Each backend counts in a slot of its own (by its PGPROC number), which
 * only it writes: counting takes no lock and no atomic read-modify-write,
 * and backends on different cores do not fight over one cache line on a
 * check that costs a few microseconds.  The view adds the slots up and
 * subtracts what they held at the last stats_reset().  Slots outlive their
 * backends, so nothing counted is lost.  The longest wait and the number of
 * backends sleeping now are shared atomics, touched only by gates that
 * sleep.  Available only with shared_preload_libraries; without it the SQL
 * functions raise an error and the counting calls do nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
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
	RG_MAX_WAIT_US,				/* not a sum: RgStats.max_wait_us */
	RG_HIST,					/* RG_HIST_BUCKETS histogram buckets */
	RG_GAVE_WAY = RG_HIST + RG_HIST_BUCKETS,	/* after stats_reset, see below */
	RG_NCOUNTERS
};

/* One backend's counts since the server started. */
typedef struct RgStatsSlot
{
	pg_atomic_uint64 counter[RG_NCOUNTERS];
} RgStatsSlot;

typedef struct RgStats
{
	pg_atomic_uint32 sleeping;	/* backends sleeping in a gate now */
	pg_atomic_uint64 max_wait_us;	/* longest wait since the last reset */
	slock_t		mutex;			/* protects the two fields below */
	TimestampTz reset_time;		/* of the last reset */
	uint64		at_reset[RG_NCOUNTERS]; /* the slots' sums then */
	int			nslots;
	RgStatsSlot slot[FLEXIBLE_ARRAY_MEMBER];
} RgStats;

static RgStats *rg_stats = NULL;

PG_FUNCTION_INFO_V1(rg_stats_sql);
PG_FUNCTION_INFO_V1(rg_stats_reset);
PG_FUNCTION_INFO_V1(rg_waiters);

Size
rg_stats_shmem_size(void)
{
	return add_size(offsetof(RgStats, slot),
					mul_size(RG_MAX_BACKENDS(), sizeof(RgStatsSlot)));
}

/*
 * rg_stats_shmem_init
 *		Create or attach to the counters; called with AddinShmemInitLock held.
 */
void
rg_stats_shmem_init(void)
{
	bool		found;

	rg_stats = ShmemInitStruct("replica_gate stats", rg_stats_shmem_size(), &found);
	if (found)
		return;
	pg_atomic_init_u32(&rg_stats->sleeping, 0);
	pg_atomic_init_u64(&rg_stats->max_wait_us, 0);
	SpinLockInit(&rg_stats->mutex);
	rg_stats->reset_time = GetCurrentTimestamp();
	memset(rg_stats->at_reset, 0, sizeof(rg_stats->at_reset));
	rg_stats->nslots = RG_MAX_BACKENDS();
	for (int s = 0; s < rg_stats->nslots; s++)
		for (int i = 0; i < RG_NCOUNTERS; i++)
			pg_atomic_init_u64(&rg_stats->slot[s].counter[i], 0);
}

/*
 * rg_stats_add
 *		Add n to a counter of our slot.  Only this backend writes it: a plain
 *		read and write (atomic only so that a reader never sees half of it).
 */
static inline void
rg_stats_add(RgStatsSlot *slot, int counter, uint64 n)
{
	pg_atomic_uint64 *c = &slot->counter[counter];

	pg_atomic_write_u64(c, pg_atomic_read_u64(c) + n);
}

/* The sum of a counter over all slots. */
static uint64
rg_stats_sum(int counter)
{
	uint64		sum = 0;

	for (int s = 0; s < rg_stats->nslots; s++)
		sum += pg_atomic_read_u64(&rg_stats->slot[s].counter[counter]);
	return sum;
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
	RgStatsSlot *slot;
	uint64		us;
	uint64		max;
	int			bucket;

	if (rg_stats == NULL || MyProc == NULL || RG_MY_PROCNO >= rg_stats->nslots)
		return;
	slot = &rg_stats->slot[RG_MY_PROCNO];

	rg_stats_add(slot, RG_CALLS, 1);
	if (result == RG_WAIT_TIMEOUT)
		rg_stats_add(slot, RG_TIMEOUTS, 1);
	else if (result == RG_WAIT_GAVE_WAY)
		rg_stats_add(slot, RG_GAVE_WAY, 1);
	else if (result != RG_WAIT_REACHED)
		rg_stats_add(slot, RG_ERRORS, 1);

	if (slept_since == 0)
	{
		if (result == RG_WAIT_REACHED)
			rg_stats_add(slot, RG_IMMEDIATE, 1);
		return;
	}

	pg_atomic_fetch_sub_u32(&rg_stats->sleeping, 1);
	rg_stats_add(slot, RG_WAITS, 1);
	us = (uint64) Max(GetCurrentTimestamp() - slept_since, 0);
	rg_stats_add(slot, RG_WAIT_TIME_US, us);
	max = pg_atomic_read_u64(&rg_stats->max_wait_us);
	while (us > max &&
		   !pg_atomic_compare_exchange_u64(&rg_stats->max_wait_us, &max, us))
		;
	for (bucket = 0; bucket < lengthof(rg_hist_bounds_ms); bucket++)
		if (us <= (uint64) rg_hist_bounds_ms[bucket] * 1000)
			break;
	rg_stats_add(slot, RG_HIST + bucket, 1);
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
 * Counters added after version 0.2.0 come after the stats_reset column, so
 * that a new library still fills the row of the 0.2.0 definition (until
 * ALTER EXTENSION ... UPDATE) correctly: heap_form_tuple() takes only as
 * many values as the row has columns.
 */
Datum
rg_stats_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[RG_NCOUNTERS + 1];
	bool		nulls[RG_NCOUNTERS + 1] = {0};
	uint64		at_reset[RG_NCOUNTERS];
	TimestampTz reset_time;

	rg_stats_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	Assert(tupdesc->natts <= lengthof(values));

	SpinLockAcquire(&rg_stats->mutex);
	memcpy(at_reset, rg_stats->at_reset, sizeof(at_reset));
	reset_time = rg_stats->reset_time;
	SpinLockRelease(&rg_stats->mutex);

	for (int i = 0; i < RG_NCOUNTERS; i++)
	{
		uint64		v = i == RG_MAX_WAIT_US ?
			pg_atomic_read_u64(&rg_stats->max_wait_us) :
			rg_stats_sum(i) - at_reset[i];
		int			column = i < RG_GAVE_WAY ? i : i + 1;

		/* times are shown in milliseconds, like pg_stat_statements */
		if (i == RG_WAIT_TIME_US || i == RG_MAX_WAIT_US)
			values[column] = Float8GetDatum(v / 1000.0);
		else
			values[column] = Int64GetDatum((int64) v);
	}
	values[RG_GAVE_WAY] = TimestampTzGetDatum(reset_time);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * stats_reset() returns void: count from zero again, by remembering what the
 * slots hold now.  Not for PUBLIC (see the install script).
 */
Datum
rg_stats_reset(PG_FUNCTION_ARGS)
{
	uint64		sums[RG_NCOUNTERS];

	rg_stats_require_preload();
	for (int i = 0; i < RG_NCOUNTERS; i++)
		sums[i] = rg_stats_sum(i);
	SpinLockAcquire(&rg_stats->mutex);
	memcpy(rg_stats->at_reset, sums, sizeof(sums));
	rg_stats->reset_time = GetCurrentTimestamp();
	SpinLockRelease(&rg_stats->mutex);
	pg_atomic_write_u64(&rg_stats->max_wait_us, 0);
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
