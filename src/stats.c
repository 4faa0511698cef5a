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

#include "compat.h"
#include "replica_gate.h"

/* Upper bounds (ms) of the wait-time histogram; one more bucket for above. */
static const int64 rg_hist_bounds_ms[] = {1, 10, 100, 1000, 10000};

#define RG_HIST_BUCKETS (lengthof(rg_hist_bounds_ms) + 1)

typedef struct RgStats
{
	pg_atomic_uint32 sleeping;	/* backends sleeping in a gate now */
	pg_atomic_uint64 calls;
	pg_atomic_uint64 immediate;
	pg_atomic_uint64 waits;
	pg_atomic_uint64 timeouts;
	pg_atomic_uint64 errors;
	pg_atomic_uint64 wait_time_us;
	pg_atomic_uint64 max_wait_us;
	pg_atomic_uint64 hist[RG_HIST_BUCKETS];
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

/* Zero the counters (not "sleeping", which tracks live backends). */
static void
rg_stats_zero(void)
{
	pg_atomic_write_u64(&rg_stats->calls, 0);
	pg_atomic_write_u64(&rg_stats->immediate, 0);
	pg_atomic_write_u64(&rg_stats->waits, 0);
	pg_atomic_write_u64(&rg_stats->timeouts, 0);
	pg_atomic_write_u64(&rg_stats->errors, 0);
	pg_atomic_write_u64(&rg_stats->wait_time_us, 0);
	pg_atomic_write_u64(&rg_stats->max_wait_us, 0);
	for (int i = 0; i < RG_HIST_BUCKETS; i++)
		pg_atomic_write_u64(&rg_stats->hist[i], 0);
	pg_atomic_write_u64(&rg_stats->reset_time, (uint64) GetCurrentTimestamp());
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
	pg_atomic_init_u64(&rg_stats->calls, 0);
	pg_atomic_init_u64(&rg_stats->immediate, 0);
	pg_atomic_init_u64(&rg_stats->waits, 0);
	pg_atomic_init_u64(&rg_stats->timeouts, 0);
	pg_atomic_init_u64(&rg_stats->errors, 0);
	pg_atomic_init_u64(&rg_stats->wait_time_us, 0);
	pg_atomic_init_u64(&rg_stats->max_wait_us, 0);
	for (int i = 0; i < RG_HIST_BUCKETS; i++)
		pg_atomic_init_u64(&rg_stats->hist[i], 0);
	pg_atomic_init_u64(&rg_stats->reset_time, (uint64) GetCurrentTimestamp());
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

	pg_atomic_fetch_add_u64(&rg_stats->calls, 1);
	if (result == RG_WAIT_TIMEOUT)
		pg_atomic_fetch_add_u64(&rg_stats->timeouts, 1);
	else if (result != RG_WAIT_REACHED)
		pg_atomic_fetch_add_u64(&rg_stats->errors, 1);

	if (slept_since == 0)
	{
		if (result == RG_WAIT_REACHED)
			pg_atomic_fetch_add_u64(&rg_stats->immediate, 1);
		return;
	}

	pg_atomic_fetch_sub_u32(&rg_stats->sleeping, 1);
	pg_atomic_fetch_add_u64(&rg_stats->waits, 1);
	us = (uint64) Max(GetCurrentTimestamp() - slept_since, 0);
	pg_atomic_fetch_add_u64(&rg_stats->wait_time_us, us);
	max = pg_atomic_read_u64(&rg_stats->max_wait_us);
	while (us > max &&
		   !pg_atomic_compare_exchange_u64(&rg_stats->max_wait_us, &max, us))
		;
	for (bucket = 0; bucket < lengthof(rg_hist_bounds_ms); bucket++)
		if (us <= (uint64) rg_hist_bounds_ms[bucket] * 1000)
			break;
	pg_atomic_fetch_add_u64(&rg_stats->hist[bucket], 1);
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
 */
Datum
rg_stats_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[8 + RG_HIST_BUCKETS];
	bool		nulls[8 + RG_HIST_BUCKETS] = {0};
	int			n = 0;

	rg_stats_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	Assert(tupdesc->natts == lengthof(values));

	values[n++] = Int64GetDatum(pg_atomic_read_u64(&rg_stats->calls));
	values[n++] = Int64GetDatum(pg_atomic_read_u64(&rg_stats->immediate));
	values[n++] = Int64GetDatum(pg_atomic_read_u64(&rg_stats->waits));
	values[n++] = Int64GetDatum(pg_atomic_read_u64(&rg_stats->timeouts));
	values[n++] = Int64GetDatum(pg_atomic_read_u64(&rg_stats->errors));
	values[n++] = Float8GetDatum(pg_atomic_read_u64(&rg_stats->wait_time_us) / 1000.0);
	values[n++] = Float8GetDatum(pg_atomic_read_u64(&rg_stats->max_wait_us) / 1000.0);
	for (int i = 0; i < RG_HIST_BUCKETS; i++)
		values[n++] = Int64GetDatum(pg_atomic_read_u64(&rg_stats->hist[i]));
	values[n++] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&rg_stats->reset_time));

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
	rg_stats_zero();
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
