/*-------------------------------------------------------------------------
 *
 * replica_gate.c
 *		Module entry point: settings, and what loading the library sets up.
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

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "tcop/tcopprot.h"

#include "ack.h"
#include "commit_wait.h"
#include "guard.h"
#include "question.h"
#include "session.h"
#include "set_gate.h"
#include "shmem.h"
#include "token.h"
#include "watcher.h"

RG_MODULE_MAGIC;

bool		rg_preloaded = false;
bool		rg_loaded_at_start = false;
int			rg_default_timeout = 1000;
static char *rg_version_guc = NULL;
int			rg_max_timeout = 60000;
double		rg_poll_interval = 0.5;

void		_PG_init(void);

/*
 * rg_define_settings
 *		Define the numeric settings.
 */
static void
rg_define_settings(void)
{
	DefineCustomIntVariable("replica_gate.default_timeout",
							"Timeout of a gate called without one.",
							"Used when timeout_ms is NULL and by SET replica_gate.require_lsn.",
							&rg_default_timeout,
							1000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("replica_gate.max_timeout",
							"Upper bound on the time any gate waits.",
							"Longer timeouts asked for by clients are cut to this value.",
							&rg_max_timeout,
							60000, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomRealVariable("replica_gate.poll_interval",
							 "How often the replay position is polled where no wake-up signal exists.",
							 "Used by the replay watcher on PostgreSQL 13 to 15 (and where max_wal_senders = 0) while WAL is pending, and by each waiting backend when the library is not preloaded (rounded up to whole milliseconds there).",
							 &rg_poll_interval,
							 0.5, 0.1, 1000.0,
							 PGC_SIGHUP,
							 GUC_UNIT_MS,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("replica_gate.primary_conninfo",
							   "Connection options for asking the primary where it is (strong reads).",
							   "Laid over primary_conninfo's options (a host or hostaddr here replaces both of primary_conninfo's): a cascading standby names the primary here, and a database where the extension exists (default postgres).",
							   &rg_primary_conninfo,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	/*
	 * Reported at connection start when the library is preloaded: a client
	 * sees, at no extra round trip, that this session can gate (the SET form
	 * only waits in sessions that loaded the library before the SET).
	 */
	DefineCustomStringVariable("replica_gate.version",
							   "Version of the replica_gate library loaded in this session.",
							   NULL,
							   &rg_version_guc,
							   RG_VERSION,
							   PGC_INTERNAL,
							   GUC_REPORT | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							   NULL, NULL, NULL);
}

/*
 * _PG_init
 *		Module load callback.
 */
void
_PG_init(void)
{
	/*
	 * Libraries are preloaded at session start before any statement; a
	 * call or LOAD loads them while a statement runs.
	 */
	rg_loaded_at_start = process_shared_preload_libraries_in_progress ||
		debug_query_string == NULL;

	rg_define_settings();
	rg_set_gate_init();
	rg_token_init();
	rg_commit_wait_init();
	rg_ack_init();
	rg_guard_init();
	rg_session_init();
	RG_RESERVE_GUC_PREFIX("replica_gate");

	if (!process_shared_preload_libraries_in_progress)
		return;
	rg_preloaded = true;

	rg_shmem_install_hooks();
	rg_question_register();
#ifndef RG_HAVE_CORE_WAIT
	rg_watcher_register();
#endif
}
