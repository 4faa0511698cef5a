/*-------------------------------------------------------------------------
 *
 * upstream.h
 *		Is the WAL receiver's sender the primary (upstream.c)?
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_UPSTREAM_H
#define RG_UPSTREAM_H

#include "datatype/timestamp.h"
#include "libpq-fe.h"
#include "pgtime.h"
#include "storage/latch.h"

#include "common.h"

/* A WAL receiver connection and timeline. */
typedef struct RgUpstreamKey
{
	pid_t		pid;
	pg_time_t	started;		/* when streaming was last requested */
	TimeLineID	tli;
} RgUpstreamKey;

/* What the WAL receiver knows, read at once under its spinlock. */
typedef struct RgReceiver
{
	bool		streaming;
	XLogRecPtr	received;		/* flushed to disk here */
	XLogRecPtr	wal_end;		/* sender's WAL end in its last message */
	TimestampTz sent_time;		/* when the sender sent that (its clock) */
	RgUpstreamKey connection;	/* the WAL receiver's connection */
} RgReceiver;

extern void rg_upstream_read_receiver(RgReceiver *rcv);
extern bool rg_upstream_read_primary(RgReceiver *rcv, int64 *unflushed_us);
extern Size rg_upstream_shmem_size(void);
extern void rg_upstream_shmem_init(void);
extern bool rg_upstream_is_primary(const RgUpstreamKey *key, TimestampTz *since,
								   int64 *unflushed_us);

/* For the question worker, which finds the answer */
extern void rg_upstream_attach(Latch *worker);
extern void rg_upstream_forget(void);
/* Room for a WAL sender's start as text (pg_stat_activity.backend_start). */
#define RG_SENDER_START_LEN 64

extern bool rg_upstream_sender(pid_t *pid, char *start);
extern bool rg_upstream_wanted(RgUpstreamKey *key, XLogRecPtr *start);
extern bool rg_upstream_check(PGconn *conn, bool in_recovery,
							  const RgUpstreamKey *key, XLogRecPtr start,
							  TimestampTz deadline, uint32 wait_event);

#endif							/* RG_UPSTREAM_H */
