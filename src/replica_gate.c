/*-------------------------------------------------------------------------
 *
 * replica_gate.c
 *		Module entry point: _PG_init, the top of the house, and the only file
 *		that knows every module (src/README.md, "Layers").  No file includes
 *		a header of this one.
 *
 * Loaded through shared_preload_libraries, the library also creates the
 * gate statistics in shared memory, the question worker that asks the
 * primary for its position (strong reads, question.c) and, on PostgreSQL 13
 * to 18, the waiter registry and the replay watcher, so that waiting backends sleep until
 * their target is replayed (19 and later wait in core's registry, preloaded
 * or not).  Loaded at session start (local_preload_libraries, for which
 * make install links the library into $libdir/plugins, or
 * session_preload_libraries), or on demand (the first call of one of its
 * functions in a session), the gates work the same way but on 13 to 18 each
 * waiting backend polls the replay position every replica_gate.poll_interval,
 * and strong reads fail (RG001: no question worker).  Loaded on demand, the
 * SET form and the session mode only hold from then on (see set_gate.c and
 * session.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "postmaster/bgworker.h"

#include "ack.h"
#include "commit_wait.h"
#include "guard.h"
#include "lease.h"
#include "lease_waker.h"
#include "question.h"
#include "session.h"
#include "set_gate.h"
#include "settings.h"
#include "shmem.h"
#include "token.h"
#include "watcher.h"

RG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * rg_register_worker
 *		Register the background worker that runs "function" of this library
 *		(its name and type "name") from "start_time" on, again a second
 *		after it exits.
 */
static void
rg_register_worker(const char *function, const char *name, int flags,
				   BgWorkerStartTime start_time)
{
	BackgroundWorker worker = {0};

	worker.bgw_flags = flags;
	worker.bgw_start_time = start_time;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "replica_gate");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "%s", name);
	RegisterBackgroundWorker(&worker);
}

/*
 * _PG_init
 *		Module load callback.
 */
void
_PG_init(void)
{
	rg_settings_init();
	rg_set_gate_init();
	rg_token_init();
	rg_commit_wait_init();
	rg_ack_init();
	rg_guard_init();
	rg_session_init();
	RG_RESERVE_GUC_PREFIX("replica_gate");

	if (!rg_preloaded)
		return;

	rg_shmem_install_hooks();
	rg_lease_init();
	/* the lease waker (lease_waker.c), on a primary whose commits wait */
	if (rg_commit_wait_ms > 0)
		rg_register_worker("rg_waker_main", "replica_gate lease waker",
						   BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
						   BgWorkerStart_RecoveryFinished);
	/* the question worker (question.c): it leaves for good off recovery */
	rg_register_worker("rg_question_main", "replica_gate question",
					   BGWORKER_SHMEM_ACCESS, BgWorkerStart_ConsistentState);
#ifndef RG_HAVE_CORE_WAIT
	/* the replay watcher (watcher.c) */
	rg_register_worker("rg_watcher_main", "replica_gate replay watcher",
					   BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
					   BgWorkerStart_ConsistentState);
#endif
}
