/*-------------------------------------------------------------------------
 *
 * replica_gate.h
 *		Declarations shared by the files of replica_gate: settings, the
 *		waiter registry, the wait loop and the utility hook.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REPLICA_GATE_H
#define REPLICA_GATE_H

#include "access/xlogdefs.h"
#include "fmgr.h"
#include "datatype/timestamp.h"
#include "nodes/nodes.h"
#include "pgtime.h"

#include "compat.h"

/* replica_gate's own SQLSTATEs (class RG). */
#define ERRCODE_RG_REPLICA_BEHIND	MAKE_SQLSTATE('R','G','0','0','1') /* not reached in time */
#define ERRCODE_RG_WRITE_LOST		MAKE_SQLSTATE('R','G','0','0','2') /* lost in a failover */
#define ERRCODE_RG_UNKNOWN_TIMELINE	MAKE_SQLSTATE('R','G','0','0','3') /* not in our history */

/* Settings, and whether the library was preloaded (replica_gate.c). */
extern bool rg_preloaded;
extern int	rg_default_timeout;
extern int	rg_max_timeout;
extern double rg_poll_interval;

/* Shared memory of the registry and the statistics (shmem.c). */
extern void rg_shmem_install_hooks(void);

/* What a gate waits for on a standby: the target replayed, or only received. */
typedef enum RgWaitMode
{
	RG_MODE_REPLAY,				/* replayed: visible to reads */
	RG_MODE_WRITE,				/* written to pg_wal by the walreceiver */
	RG_MODE_FLUSH				/* written and flushed to disk */
} RgWaitMode;

#define RG_NMODES (RG_MODE_FLUSH + 1)

/* A gate's target: a token (timeline and LSN), or a plain LSN (tli 0). */
typedef struct RgTarget
{
	XLogRecPtr	lsn;
	TimeLineID	tli;
} RgTarget;

/* Parsing targets, and checking them against the timeline history (target.c). */
extern char *rg_token_text(TimeLineID tli, XLogRecPtr lsn);
extern void rg_target_parse(const char *text, RgTarget *target);
extern bool rg_target_reached(const RgTarget *target, XLogRecPtr position,
							  TimeLineID tli, bool in_recovery);

#ifndef RG_HAVE_CORE_WAIT
/* Waiter registry in shared memory (registry.c); 13-18 only. */
extern Size rg_registry_shmem_size(void);
extern void rg_registry_shmem_init(void);
extern bool rg_registry_link(XLogRecPtr target, RgWaitMode mode);
extern bool rg_registry_is_linked(void);
extern void rg_registry_unlink(void);
extern int	rg_registry_waiters(void);
extern void rg_registry_nearest(XLogRecPtr *targets);
extern bool rg_registry_attach_watcher(void);
extern void rg_registry_detach_watcher(void);
extern int	rg_registry_wake(const XLogRecPtr *positions, bool wake_all);

/* The replay watcher background worker (worker.c); 13-18 only. */
extern void rg_worker_register(void);

/* Notice of WAL arriving in pg_wal, for the watcher (arrival.c). */
extern int	rg_arrival_open(void);
extern bool rg_arrival_drain(int fd);
#endif

/* Is the WAL receiver's sender the primary (upstream.c)? */
typedef struct RgUpstreamKey	/* a WAL receiver connection and timeline */
{
	pid_t		pid;
	pg_time_t	started;		/* when streaming was last requested */
	TimeLineID	tli;
} RgUpstreamKey;

extern Size rg_upstream_shmem_size(void);
extern void rg_upstream_shmem_init(void);
extern bool rg_upstream_is_primary(const RgUpstreamKey *key, TimestampTz *since);

/* Waiting for replay (wait.c). */
typedef enum RgWaitResult
{
	RG_WAIT_REACHED,			/* target reached (or written, on a primary) */
	RG_WAIT_TIMEOUT,			/* timeout expired first (or a check failed) */
	RG_WAIT_GAVE_WAY,			/* stopped so as not to hold back replay */
	RG_WAIT_NOT_IN_RECOVERY,	/* recovery ended before the target */
	RG_WAIT_ERROR				/* an error ended the wait (statistics only) */
} RgWaitResult;

/* Keeping a function-form gate from holding back replay (replay_guard.c). */
typedef struct RgGuard
{
	FunctionCallInfo fcinfo;	/* the gate's call */
	bool		watching;		/* looking out for recovery conflicts */
	bool		released;		/* waits without its xmin (rule 1) */
	XLogRecPtr	released_at;	/* replay position when it dropped it */
	XLogRecPtr	conflict_at;	/* replay position of the conflict seen */
	TimestampTz conflict_since; /* when it was first seen there, or 0 */
} RgGuard;

extern void rg_guard_init(void);
extern void rg_guard_utility(Node *parsetree);
extern void rg_guard_prepare(RgGuard *guard, FunctionCallInfo fcinfo);
extern void rg_guard_begin(RgGuard *guard);
extern long rg_guard_poll_ms(const RgGuard *guard);
extern bool rg_guard_must_yield(RgGuard *guard);

/* Gate statistics in shared memory (stats.c). */
extern Size rg_stats_shmem_size(void);
extern void rg_stats_shmem_init(void);
extern void rg_stats_sleep_begin(void);
extern void rg_stats_count(RgWaitResult result, TimestampTz slept_since);
extern int	rg_stats_sleeping(void);

/* Waiting for replay (wait.c). */
extern int	rg_effective_timeout(bool isnull, int32 timeout_ms);
extern bool rg_gate_decided(bool passed, int timeout_ms, RgWaitResult *result,
							TimestampTz *start, TimestampTz *deadline);
extern bool rg_gate_sleep(TimestampTz deadline, long cap_ms, uint32 wait_event);
extern void rg_gate_cleanup(int code, Datum arg);
extern void rg_check_xact_snapshot(const char *gate_name);
extern RgWaitMode rg_wait_mode(const char *name);
extern XLogRecPtr rg_standby_position(RgWaitMode mode, TimeLineID *tli);
extern RgWaitResult rg_wait_for_target(const RgTarget *target, RgWaitMode mode,
									   int timeout_ms, RgGuard *guard,
									   XLogRecPtr *position);
extern void rg_require_target(const RgTarget *target, RgWaitMode mode,
							  int timeout_ms, RgGuard *guard);
extern void rg_report_not_in_recovery(const RgTarget *target, RgWaitMode mode,
									  XLogRecPtr position);

/* Write and read tokens, LSN text (token.c). */
extern void rg_token_init(void);
extern char *rg_lsn_text(XLogRecPtr lsn);
extern void rg_token_utility_done(Node *parsetree);

/* SET replica_gate.require_lsn (set_gate.c). */
extern void rg_set_gate_init(void);
extern void rg_check_missed_set(void);

#endif							/* REPLICA_GATE_H */
