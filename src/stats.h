/*-------------------------------------------------------------------------
 *
 * stats.h
 *		Gate statistics in shared memory (stats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_STATS_H
#define RG_STATS_H

#include "datatype/timestamp.h"

#include "common.h"

extern Size rg_stats_shmem_size(void);
extern void rg_stats_shmem_init(void);
extern void rg_stats_sleep_begin(void);
extern void rg_stats_count(RgWaitResult result, TimestampTz slept_since);
extern int	rg_stats_sleeping(void);
extern void rg_stats_strong_read(bool local);
extern void rg_stats_question(bool answered, int64 us);

#endif							/* RG_STATS_H */
