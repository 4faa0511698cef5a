/*-------------------------------------------------------------------------
 *
 * watcher.c
 *		The replay watcher: one background worker that notices replay
 *		progress and wakes exactly the waiters whose target was reached.
 *
 * It sleeps while nobody waits.  While someone waits, on PostgreSQL 16 and
 * later it sleeps on WalSndCtl->wal_replay_cv, which the startup process
 * broadcasts after every replayed record (when hot_standby is on and
 * max_wal_senders > 0), while replay stands still, and polls while records
 * stream (see rg_watcher_sleep).  Elsewhere nothing signals replay to an
 * extension, so it polls the replay position -- except while a walreceiver
 * streams and every WAL byte it wrote has been replayed: then nothing can be
 * replayed before the walreceiver writes more, and the watcher sleeps until
 * it does (see watcher_arrival.c).
 *
 * Polling looks every replica_gate.poll_interval while a target is near, and
 * less often while every target is further than replay could get in that
 * time, up to every RG_FAR_POLL_MS (see rg_watcher_poll_ms): looking every
 * poll_interval all through a long replay slows it (bench/README.md).
 *
 * When recovery ends it wakes everyone, so that waiters can tell whether
 * their target was replayed before the promotion, and exits for good: on a
 * primary (where it also exits at once) it would only hold a worker slot.
 *
 * Waiters in the write and flush modes are woken by the same scans: their
 * positions only move when the walreceiver writes, which either precedes a
 * replayed record (a broadcast) or ends a quiet sleep (watcher_arrival.c).
 *
 * Not built on PostgreSQL 19 and later: core's startup process and
 * walreceiver wake the waiters there (wait.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/walreceiver.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/timestamp.h"
#if PG_VERSION_NUM >= 160000
#include "replication/walsender_private.h"
#include "storage/condition_variable.h"
#endif

#include "settings.h"
#include "target.h"
#include "watcher.h"

#ifndef RG_HAVE_CORE_WAIT

/*
 * How long the watcher sleeps on wal_replay_cv before re-checking anyway.
 * The broadcasts wake it on replay, but nothing is broadcast when recovery
 * ends or the configuration is reloaded: this bounds how late it notices.
 */
#define RG_REPLAY_CV_RECHECK_MS		100

/*
 * How long the polling watcher sleeps, while no WAL is pending, before
 * re-checking anyway: a safety net in case a WAL arrival went unnoticed.
 */
#define RG_QUIET_RECHECK_MS			1000

/*
 * How long the watcher sleeps while nobody waits before checking whether
 * recovery has ended (it then leaves: a primary has no replay to watch).
 */
#define RG_IDLE_RECHECK_MS			10000

/*
 * How long the polling watcher keeps polling after WAL last arrived or
 * replay last moved, before it may sleep until WAL arrives.
 */
#define RG_PENDING_LINGER_MS		100

/*
 * How fast WAL is assumed to be replayed (or written, or flushed) at most,
 * in bytes per millisecond: 4 GB/s, many times what replay of full-page
 * images reaches.  While polling, the watcher need not look again before
 * the nearest target could be reached at this rate (rg_watcher_poll_ms).
 */
#define RG_WAL_RATE_BOUND			(4.0 * 1024 * 1024)

/*
 * The longest such polling sleep (unless poll_interval is longer).  It also
 * bounds how late a waiter is woken when replay does leap further (a WAL
 * segment switch record ends at the start of the next segment), and how
 * late the watcher notices that recovery ended while every target is far.
 */
#define RG_FAR_POLL_MS				10

PGDLLEXPORT void rg_watcher_main(Datum main_arg);

static uint32 rg_idle_event = 0;
static uint32 rg_watch_event = 0;

/* Notifications of WAL arriving in pg_wal (watcher_arrival.c), or -1. */
static int	rg_arrival_fd = -1;

/* The replay position at the previous look, and when WAL last moved. */
static XLogRecPtr rg_last_replayed = InvalidXLogRecPtr;
static TimestampTz rg_last_activity = 0;

/* before_shmem_exit callback: hand waiters back to polling. */
static void
rg_watcher_exit(int code, Datum arg)
{
	rg_registry_detach_watcher();
}

/* Does the watcher sleep on the replay condition variable (16+)? */
static bool
rg_watcher_uses_replay_cv(void)
{
#ifdef RG_HAVE_REPLAY_CV
	return AllowCascadeReplication();
#else
	return false;
#endif
}

/*
 * rg_watcher_streaming
 *		Is a walreceiver streaming?  (Not WalRcvStreaming(), which also acts
 *		on a walreceiver that failed to start.)
 */
static bool
rg_watcher_streaming(void)
{
	WalRcvState state;

	SpinLockAcquire(&WalRcv->mutex);
	state = WalRcv->walRcvState;
	SpinLockRelease(&WalRcv->mutex);
	return state == WALRCV_STREAMING;
}

/*
 * rg_watcher_wal_pending
 *		While polling: can replay advance soon?  Everything counts as pending
 *		except this one state: a walreceiver streams, all the WAL it wrote is
 *		replayed, and neither has new WAL arrived in pg_wal nor has replay
 *		moved for RG_PENDING_LINGER_MS.  Only then does every replay first
 *		need a walreceiver write, which the arrival notification reports.
 *		Without a walreceiver (archive recovery, WAL already in pg_wal, a
 *		promotion under way) replay needs no such write: we poll.  Received
 *		WAL not yet replayed (replay running, delayed by
 *		recovery_min_apply_delay, or paused) is pending too.
 *
 * The notifications are drained before the walreceiver is looked at: WAL
 * written after the drain leaves a notification that ends the next sleep.
 * The linger covers WAL written before it whose write position the
 * walreceiver has not published yet.
 */
static bool
rg_watcher_wal_pending(XLogRecPtr replayed)
{
	TimestampTz now = GetCurrentTimestamp();

	if (rg_arrival_drain(rg_arrival_fd) || replayed != rg_last_replayed)
		rg_last_activity = now;
	rg_last_replayed = replayed;

	return rg_arrival_fd < 0 ||
		!TimestampDifferenceExceeds(rg_last_activity, now, RG_PENDING_LINGER_MS) ||
		!rg_watcher_streaming() ||
		GetWalRcvWriteRecPtr() > replayed;
}

/*
 * rg_watcher_track_arrival
 *		Watch pg_wal for new WAL, from the first time it is needed (the
 *		watcher runs only in recovery; the descriptor goes with it).
 */
static void
rg_watcher_track_arrival(void)
{
	static bool tried = false;

	if (!tried && !rg_watcher_uses_replay_cv())
	{
		tried = true;
		rg_arrival_fd = rg_arrival_open();
	}
}

/*
 * rg_watcher_poll_ms
 *		How long a polling sleep may last: until the nearest target of any
 *		mode could be reached at RG_WAL_RATE_BOUND, within poll_interval and
 *		RG_FAR_POLL_MS.  A long wait on a far LSN (which any role can start)
 *		then costs a look every RG_FAR_POLL_MS while replay runs, not one
 *		every poll_interval.
 */
static double
rg_watcher_poll_ms(const XLogRecPtr *positions)
{
	XLogRecPtr	nearest[RG_NMODES];
	double		ms = RG_FAR_POLL_MS;

	rg_registry_nearest(nearest);
	for (int m = 0; m < RG_NMODES; m++)
	{
		double		distance = nearest[m] > positions[m] ?
			(double) (nearest[m] - positions[m]) : 0.0;

		ms = Min(ms, distance / RG_WAL_RATE_BOUND);
	}
	return Max(ms, rg_poll_interval);
}

/*
 * rg_watcher_poll
 *		One polling sleep (rg_watcher_poll_ms).  Below a millisecond a plain
 *		sleep, because latch waits cannot be shorter; signals end it early,
 *		and the main loop handles them (a latch set meanwhile ends the next
 *		latch wait at once).  Longer sleeps wait on the latch, which a
 *		waiter with a new lowest target of its mode sets.
 */
static void
rg_watcher_poll(uint32 event, const XLogRecPtr *positions)
{
	double		ms = rg_watcher_poll_ms(positions);

	if (ms >= 1.0)
	{
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 (long) ms, event);
		ResetLatch(MyLatch);
		return;
	}
	pgstat_report_wait_start(event);
	pg_usleep((long) (ms * 1000.0));
	pgstat_report_wait_end();
	if (!PostmasterIsAlive())
		proc_exit(1);
}

/*
 * rg_watcher_sleep
 *		Sleep until replay may have advanced past "replayed", while someone
 *		waits.
 *
 * On 16 and later, while replay stands still, sleep on wal_replay_cv: the
 * startup process broadcasts it after the next replayed record.  But while
 * records stream, sitting on its wait list would make the startup process
 * set our latch after every record it replays, a cost on the replay path
 * that any role could cause with one long wait: then leave the list and
 * poll, and go back to it once replay has stood still for one poll.
 */
static void
rg_watcher_sleep(const XLogRecPtr *positions)
{
	uint32		event = RG_WAIT_EVENT(rg_watch_event, "ReplicaGateWatchReplay");
	XLogRecPtr	replayed = positions[RG_MODE_REPLAY];

	if (rg_watcher_uses_replay_cv())
	{
#ifdef RG_HAVE_REPLAY_CV
		bool		moving = (replayed != rg_last_replayed);

		rg_last_replayed = replayed;
		if (moving)
		{
			ConditionVariableCancelSleep();
			rg_watcher_poll(event, positions);
			return;
		}

		/*
		 * The first call after polling only puts us on the wait list and
		 * returns, so that the caller re-checks before the real sleep: a
		 * record replayed in between is not missed.  It manages the latch
		 * itself: do not reset it here.
		 */
		(void) ConditionVariableTimedSleep(&WalSndCtl->wal_replay_cv,
										   RG_REPLAY_CV_RECHECK_MS, event);
#endif
		return;
	}
	if (rg_watcher_wal_pending(replayed))
	{
		rg_watcher_poll(event, positions);
		return;
	}
	(void) WaitLatchOrSocket(MyLatch,
							 WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
							 WL_EXIT_ON_PM_DEATH,
							 rg_arrival_fd, RG_QUIET_RECHECK_MS, event);
	ResetLatch(MyLatch);
}

/*
 * rg_watcher_main
 *		Entry point of the replay watcher.
 */
void
rg_watcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	/* No database: connecting only makes us visible in pg_stat_activity. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	if (!rg_registry_attach_watcher())
	{
		/* exit code 0: not restarted */
		ereport(LOG,
				(errmsg("replica_gate replay watcher is already running")));
		proc_exit(0);
	}
	before_shmem_exit(rg_watcher_exit, 0);

	for (;;)
	{
		bool		in_recovery;
		XLogRecPtr	positions[RG_NMODES];

		CHECK_FOR_INTERRUPTS();

		/* Shutdown: leave quietly (exit code 1: restarted if not). */
		if (ShutdownRequestPending)
			proc_exit(1);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/*
		 * On a primary, or once promoted, there is no replay to watch: leave
		 * for good (exit code 0: not restarted), waking every waiter on the
		 * way out (rg_watcher_exit) so that each decides on its own.
		 */
		in_recovery = RecoveryInProgress();
		if (!in_recovery)
			proc_exit(0);

		if (rg_registry_waiters() == 0)
		{
#ifdef RG_HAVE_REPLAY_CV
			ConditionVariableCancelSleep();
#endif
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 RG_IDLE_RECHECK_MS,
							 RG_WAIT_EVENT(rg_idle_event, "ReplicaGateWatcherIdle"));
			ResetLatch(MyLatch);
			continue;
		}

		rg_watcher_track_arrival();
		for (int m = 0; m < RG_NMODES; m++)
			positions[m] = rg_standby_position((RgWaitMode) m, NULL);
		(void) rg_registry_wake(positions, false);
		rg_watcher_sleep(positions);
	}
}

#endif							/* !RG_HAVE_CORE_WAIT */
