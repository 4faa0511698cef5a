/*-------------------------------------------------------------------------
 *
 * common.h
 *		What every file of replica_gate shares, on the ground floor of the
 *		house: its SQLSTATEs, the words of a gate (a target, a wait mode, a
 *		wait's result), its clock, and what a client's session is.  It
 *		defines nothing that a file must link with.  The settings are in
 *		settings.h; each module declares its own functions in a header of its
 *		own; see src/README.md for the map.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_COMMON_H
#define RG_COMMON_H

#include <time.h>

#include "access/xlogdefs.h"
#include "miscadmin.h"
#include "replication/walsender.h"

#include "compat.h"

/* replica_gate's own SQLSTATEs (class RG). */
#define ERRCODE_RG_REPLICA_BEHIND	MAKE_SQLSTATE('R','G','0','0','1') /* not reached in time */
#define ERRCODE_RG_WRITE_LOST		MAKE_SQLSTATE('R','G','0','0','2') /* lost in a failover */
#define ERRCODE_RG_UNKNOWN_TIMELINE	MAKE_SQLSTATE('R','G','0','0','3') /* not in our history */

/* What a gate waits for on a standby: the target replayed, or only received. */
typedef enum RgWaitMode
{
	RG_MODE_REPLAY,				/* replayed: visible to reads */
	RG_MODE_WRITE,				/* written to pg_wal by the walreceiver */
	RG_MODE_FLUSH				/* written and flushed to disk */
} RgWaitMode;

#define RG_NMODES (RG_MODE_FLUSH + 1)

/*
 * A gate's target: a token (timeline and LSN), a plain LSN (tli 0), or the
 * primary's position when the gate begins (primary; question.c learns it,
 * and the gate then waits for that token, marked as an answer: no write of
 * the client's).
 */
typedef struct RgTarget
{
	XLogRecPtr	lsn;
	TimeLineID	tli;
	bool		primary;
	bool		answer;
} RgTarget;

/* How a gate's wait ended. */
typedef enum RgWaitResult
{
	RG_WAIT_REACHED,			/* target reached (or written, on a primary) */
	RG_WAIT_TIMEOUT,			/* timeout expired first (or a check failed) */
	RG_WAIT_GAVE_WAY,			/* stopped so as not to hold back replay */
	RG_WAIT_NOT_IN_RECOVERY,	/* recovery ended before the target */
	RG_WAIT_NO_ANSWER,			/* the primary's position stayed unknown */
	RG_WAIT_ERROR				/* an error ended the wait (statistics only) */
} RgWaitResult;

/*
 * The clock that the commit wait and a standby's answers are timed with, in
 * microseconds: never stepped, unlike the wall clock, comparable between the
 * processes of one machine, and, on Linux, counting the time the machine
 * was suspended (CLOCK_BOOTTIME; CLOCK_MONOTONIC stops then).  No clock
 * inside a virtual machine counts the time its hypervisor paused it:
 * proof.c checks it against the primary's.
 */
#ifdef CLOCK_BOOTTIME
#define RG_CLOCK_ID CLOCK_BOOTTIME
#else
#define RG_CLOCK_ID CLOCK_MONOTONIC
#endif

static inline int64
rg_clock_us(void)
{
	struct timespec ts;

	clock_gettime(RG_CLOCK_ID, &ts);
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * Is this process a client's session: a client backend, or a walsender of a
 * replication=database connection, which runs a client's SQL as well (and
 * commits, and reads on a standby)?  What a client is promised (gates of
 * the session mode, the commit wait, the token in ParameterStatus) is kept
 * in both, and only there: not in background or parallel workers.
 */
static inline bool
rg_client_session(void)
{
	return MyBackendType == B_BACKEND ||
		(MyBackendType == B_WAL_SENDER && am_db_walsender);
}

#endif							/* RG_COMMON_H */
