/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The replay watcher: one background worker that notices replay
 *		progress and wakes exactly the waiters whose target was reached.
 *
 * It sleeps without a timeout while nobody waits.  While someone waits, on
 * PostgreSQL 16 and later it sleeps on WalSndCtl->wal_replay_cv, which the
 * startup process broadcasts after every replayed record (when hot_standby is
 * on and max_wal_senders > 0); elsewhere it polls the replay position every
 * replica_gate.poll_interval, because 13 to 15 give an extension no signal
 * on replay.  When recovery ends it wakes everyone, so that waiters can
 * tell whether their target was replayed before the promotion.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#if PG_VERSION_NUM >= 160000
#include "replication/walreceiver.h"
#include "replication/walsender_private.h"
#include "storage/condition_variable.h"
#endif

#include "compat.h"
#include "replica_gate.h"

/*
 * How long the watcher sleeps on wal_replay_cv before re-checking anyway.
 * The broadcasts make this a safety net, not the wake-up path.
 */
#define RG_REPLAY_CV_RECHECK_MS		1000

PGDLLEXPORT void rg_worker_main(Datum main_arg);

static uint32 rg_idle_event = 0;
static uint32 rg_watch_event = 0;

/*
 * rg_worker_register
 *		Register the watcher; called from _PG_init during preload.
 */
void
rg_worker_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "replica_gate");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "rg_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "replica_gate replay watcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "replica_gate replay watcher");
	RegisterBackgroundWorker(&worker);
}

/* before_shmem_exit callback: hand waiters back to polling. */
static void
rg_worker_exit(int code, Datum arg)
{
	rg_registry_detach_watcher();
}

/*
 * rg_worker_sleep
 *		Sleep until replay may have advanced, while someone waits.
 */
static void
rg_worker_sleep(void)
{
	uint32		event = RG_WAIT_EVENT(rg_watch_event, "ReplicaGateWatchReplay");

#ifdef RG_HAVE_REPLAY_CV
	if (AllowCascadeReplication())
	{
		/*
		 * Leaves us on the CV's wait list between calls, so a broadcast that
		 * arrives while we scan the registry is not lost.  It manages the
		 * latch itself: do not reset it here.
		 */
		(void) ConditionVariableTimedSleep(&WalSndCtl->wal_replay_cv,
										   RG_REPLAY_CV_RECHECK_MS, event);
		return;
	}
#endif
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 rg_poll_interval, event);
	ResetLatch(MyLatch);
}

/*
 * rg_worker_main
 *		Entry point of the replay watcher.
 */
void
rg_worker_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
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
	before_shmem_exit(rg_worker_exit, 0);

	for (;;)
	{
		bool		in_recovery;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (rg_registry_waiters() == 0)
		{
#ifdef RG_HAVE_REPLAY_CV
			ConditionVariableCancelSleep();
#endif
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
							 RG_WAIT_EVENT(rg_idle_event, "ReplicaGateWatcherIdle"));
			ResetLatch(MyLatch);
			continue;
		}

		in_recovery = RecoveryInProgress();
		(void) rg_registry_wake(GetXLogReplayRecPtr(NULL), !in_recovery);
		if (in_recovery)
			rg_worker_sleep();
	}
}
