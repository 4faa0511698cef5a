/*-------------------------------------------------------------------------
 *
 * settings.c
 *		The settings that several files read, and what loading the library
 *		found: whether it was preloaded, and whether it was loaded when the
 *		session started.
 *
 * This file is on the ground floor of the house (src/README.md, "Layers"):
 * it calls no other file of replica_gate, so that every file can read the
 * settings without depending on the entry point (replica_gate.c), which
 * calls rg_settings_init() first.  Settings that one module alone reads
 * are defined by that module's init function.  replica_gate.commit_wait,
 * which the commit wait, the strong reads of a primary and their waker
 * read, has an effect only where the library is preloaded; elsewhere it is
 * defined with none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"

#include "settings.h"

bool		rg_preloaded = false;
bool		rg_loaded_at_start = false;
int			rg_default_timeout = 1000;
static char *rg_version_guc = NULL;
int			rg_max_timeout = 60000;
double		rg_poll_interval = 0.5;
char	   *rg_primary_conninfo = NULL;	/* read by question.c */
int			rg_commit_wait_ms = 0;	/* 0: off; set only where preloaded */

/*
 * replica_gate.commit_wait where the library is not preloaded: a value from
 * the configuration file, kept and shown, with no effect.
 */
static int	rg_commit_wait_unloaded = 0;

/*
 * rg_commit_wait_unloaded_show
 *		SHOW replica_gate.commit_wait where the library is not preloaded: the
 *		value, and that it is not in effect.
 */
static const char *
rg_commit_wait_unloaded_show(void)
{
	static char buf[128];

	snprintf(buf, sizeof(buf),
			 "%dms (not in effect: replica_gate is not in shared_preload_libraries)",
			 rg_commit_wait_unloaded);
	return buf;
}

/*
 * rg_define_commit_wait_unloaded
 *		Where the library is loaded by a session of a server that does not
 *		preload it, define replica_gate.commit_wait with no effect, so that
 *		a value in the configuration file (doc/setup.md puts one there) is
 *		not a placeholder that reserving the prefix removes with a WARNING
 *		in every such session.  The commit wait itself exists only where the
 *		library is preloaded (rg_settings_init defines the setting there).
 *		Hidden from pg_settings (GUC_NO_SHOW_ALL): a standby's question
 *		reads it there, and must find no commit wait on such a primary (it
 *		then asks for every strong read: fail closed).  SHOW says that it
 *		is not in effect, as status() does (preloaded false, commit_wait 0).
 */
static void
rg_define_commit_wait_unloaded(void)
{
	DefineCustomIntVariable("replica_gate.commit_wait",
							"Not in effect: replica_gate is not in shared_preload_libraries on this server.",
							"Commits wait only where the library is preloaded.",
							&rg_commit_wait_unloaded,
							0, 0, 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							NULL, NULL, rg_commit_wait_unloaded_show);
}

/*
 * rg_settings_init
 *		Note how the library was loaded, and define the settings; called
 *		first by _PG_init.
 */
void
rg_settings_init(void)
{
	/*
	 * Libraries are preloaded at session start before any statement; a
	 * call or LOAD loads them while a statement runs.
	 */
	rg_preloaded = process_shared_preload_libraries_in_progress;
	rg_loaded_at_start = process_shared_preload_libraries_in_progress ||
		debug_query_string == NULL;

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

	/*
	 * The commit wait exists only where the library is preloaded, so that
	 * every session of the server pays it: a standby trusts the value it
	 * reads in pg_settings (question.c).
	 */
	if (rg_preloaded)
		DefineCustomIntVariable("replica_gate.commit_wait",
								"The longest a commit waits for the standbys that serve strong reads without asking, before it is acknowledged.",
								"0 turns it off.  Set on the primary (and on every server that may become one); standbys learn it from there.",
								&rg_commit_wait_ms,
								0, 0, 1000,
								PGC_POSTMASTER,
								GUC_UNIT_MS,
								NULL, NULL, NULL);
	else
		rg_define_commit_wait_unloaded();
}
