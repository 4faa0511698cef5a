/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Shared memory of replica_gate (the waiter registry, before 19, the
 *		gate statistics, what the upstream is, the question to the primary
 *		and what its answers prove, the primary's leases): requesting it at
 *		preload and creating it at startup.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "commit_wait.h"
#include "lease.h"
#include "lease_waker.h"
#include "proof.h"
#include "question.h"
#include "shmem.h"
#include "stats.h"
#include "upstream.h"
#include "watcher.h"

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type rg_prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type rg_prev_shmem_startup_hook = NULL;

/*
 * rg_shmem_request
 *		Ask for the shared memory and the registry's lock.
 */
static void
rg_shmem_request(void)
{
#if PG_VERSION_NUM >= 150000
	if (rg_prev_shmem_request_hook)
		rg_prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(add_size(add_size(rg_stats_shmem_size(),
											 rg_upstream_shmem_size()),
									add_size(rg_question_shmem_size(),
											 rg_proof_shmem_size())));
	RequestAddinShmemSpace(add_size(rg_lease_shmem_size(), rg_waker_shmem_size()));
#ifndef RG_HAVE_CORE_WAIT
	RequestAddinShmemSpace(rg_registry_shmem_size());
	RequestNamedLWLockTranche("replica_gate", 1);
#endif
}

/*
 * rg_shmem_startup
 *		Create or attach to the shared structures.
 */
static void
rg_shmem_startup(void)
{
	if (rg_prev_shmem_startup_hook)
		rg_prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
#ifndef RG_HAVE_CORE_WAIT
	rg_registry_shmem_init();
#endif
	rg_stats_shmem_init();
	rg_upstream_shmem_init();
	rg_question_shmem_init();
	rg_proof_shmem_init();
	rg_lease_shmem_init();
	rg_waker_shmem_init();
	LWLockRelease(AddinShmemInitLock);
	if (!IsUnderPostmaster)
		rg_commit_wait_startup();
}

/*
 * rg_shmem_install_hooks
 *		Called from _PG_init while shared_preload_libraries is processed.
 *		Before 15 there is no request hook: _PG_init is the place to ask.
 */
void
rg_shmem_install_hooks(void)
{
#if PG_VERSION_NUM >= 150000
	rg_prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = rg_shmem_request;
#else
	rg_shmem_request();
#endif
	rg_prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = rg_shmem_startup;
}
