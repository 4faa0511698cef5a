/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Differences between PostgreSQL 13 to 19 that replica_gate relies on,
 *		as macros, so that the rest of the code reads the same everywhere.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REPLICA_GATE_COMPAT_H
#define REPLICA_GATE_COMPAT_H

#include "access/xlog.h"
#if PG_VERSION_NUM >= 150000
#include "access/xlogrecovery.h"	/* GetXLogReplayRecPtr moved here in 15 */
#endif
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#if PG_VERSION_NUM >= 140000
#include "utils/wait_event.h"
#else
#include "pgstat.h"
#endif

#if PG_VERSION_NUM < 130000
#error "replica_gate requires PostgreSQL 13 or later"
#endif

/* This backend's index into ProcGlobal->allProcs. */
#if PG_VERSION_NUM >= 170000
#define RG_MY_PROCNO MyProcNumber
#else
#define RG_MY_PROCNO (MyProc->pgprocno)
#endif

/* The xmin this backend advertises to recovery conflict resolution. */
#if PG_VERSION_NUM >= 140000
#define RG_MY_XMIN (MyProc->xmin)
#else
#define RG_MY_XMIN (MyPgXact->xmin)
#endif

/* The local id of this backend's top-level transaction. */
#if PG_VERSION_NUM >= 170000
#define RG_MY_LXID (MyProc->vxid.lxid)
#else
#define RG_MY_LXID (MyProc->lxid)
#endif

/*
 * The wait event of the startup process waiting for a cleanup lock on a
 * buffer (a pin held by a query): "BufferPin" before 19, "BufferCleanup"
 * from 19 on, the same number.
 */
#if PG_VERSION_NUM >= 190000
#define RG_WAIT_EVENT_BUFFER_CLEANUP WAIT_EVENT_BUFFER_CLEANUP
#elif PG_VERSION_NUM >= 170000
#define RG_WAIT_EVENT_BUFFER_CLEANUP WAIT_EVENT_BUFFER_PIN
#else
#define RG_WAIT_EVENT_BUFFER_CLEANUP PG_WAIT_BUFFER_PIN
#endif

/*
 * Is "event" the startup process waiting out a recovery conflict: for
 * snapshots, a tablespace, a heavyweight lock or a buffer pin?
 */
static inline bool
rg_replay_conflict_event(uint32 event)
{
	return event == WAIT_EVENT_RECOVERY_CONFLICT_SNAPSHOT ||
		event == WAIT_EVENT_RECOVERY_CONFLICT_TABLESPACE ||
		event == RG_WAIT_EVENT_BUFFER_CLEANUP ||
		(event & 0xFF000000) == PG_WAIT_LOCK;
}

/*
 * Does the client speak a protocol with ParameterStatus messages?  13 still
 * accepts protocol 2, which has none.  (FrontendProtocol is declared in
 * libpq-be.h, which may need GSSAPI headers to compile.)
 */
#if PG_VERSION_NUM < 140000
#include "libpq/pqcomm.h"
extern PGDLLIMPORT ProtocolVersion FrontendProtocol;
#define RG_CLIENT_HAS_PARAMETER_STATUS() (PG_PROTOCOL_MAJOR(FrontendProtocol) >= 3)
#else
#define RG_CLIENT_HAS_PARAMETER_STATUS() true
#endif

/*
 * From 15 on, GetCurrentReplayRecPtr() gives the end of the WAL record being
 * replayed (or of the last one replayed, between records).  13 and 14 do
 * not export it; target.c finds a bound that covers it instead.
 */
#if PG_VERSION_NUM >= 150000
#define RG_HAVE_CURRENT_REPLAY_PTR 1
#endif

/*
 * What the query of the WAL sender streaming to this standby matches, in
 * pg_stat_activity on the primary: its START_REPLICATION command with this
 * start point and timeline.  WAL senders show their commands from 14 on;
 * on 13 the query is empty and the pattern matches anything.
 */
#if PG_VERSION_NUM >= 140000
#define RG_SENDER_QUERY_PATTERN(start, tli) \
	psprintf("START_REPLICATION%% %s TIMELINE %u", (start), (tli))
#else
#define RG_SENDER_QUERY_PATTERN(start, tli) "%"
#endif

/*
 * Number of PGPROC slots that regular backends and background workers use.
 * Before 15, MaxBackends is not yet computed when _PG_init requests shared
 * memory, so compute it the way InitializeMaxBackends() does.
 */
#if PG_VERSION_NUM >= 150000
#define RG_MAX_BACKENDS() MaxBackends
#else
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#define RG_MAX_BACKENDS() \
	(MaxConnections + autovacuum_max_workers + 1 + \
	 max_worker_processes + max_wal_senders)
#endif

/* WAL positions and timeline of a primary; whether replay is paused. */
#if PG_VERSION_NUM >= 150000
#define RG_FLUSH_PTR() GetFlushRecPtr(NULL)
#define RG_INSERT_TLI() GetWALInsertionTimeLine()
#else
#define RG_FLUSH_PTR() GetFlushRecPtr()
#define RG_INSERT_TLI() ThisTimeLineID
#endif
#if PG_VERSION_NUM >= 140000
#define RG_REPLAY_PAUSED() (GetRecoveryPauseState() != RECOVERY_NOT_PAUSED)
#else
#define RG_REPLAY_PAUSED() RecoveryIsPaused()
#endif

/* Reserve the "replica_gate." GUC prefix. */
#if PG_VERSION_NUM >= 150000
#define RG_RESERVE_GUC_PREFIX(prefix) MarkGUCPrefixReserved(prefix)
#else
#define RG_RESERVE_GUC_PREFIX(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* ProcessUtility_hook gained readOnlyTree in 14. */
#if PG_VERSION_NUM >= 140000
#define RG_UTILITY_ARGS \
	PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define RG_UTILITY_PASS \
	pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc
#else
#define RG_UTILITY_ARGS \
	PlannedStmt *pstmt, const char *queryString, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define RG_UTILITY_PASS \
	pstmt, queryString, context, params, queryEnv, dest, qc
#endif

/* ExecutorRun_hook lost its execute_once argument in 18. */
#if PG_VERSION_NUM >= 180000
#define RG_EXECUTOR_RUN_ARGS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count
#define RG_EXECUTOR_RUN_PASS queryDesc, direction, count
#else
#define RG_EXECUTOR_RUN_ARGS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count, bool execute_once
#define RG_EXECUTOR_RUN_PASS queryDesc, direction, count, execute_once
#endif

/*
 * From 14 (and 13.4) on a portal running a utility statement remembers the
 * snapshot it pushed (portalSnapshot), pops it afterwards only if it is
 * still on top, and EnsurePortalSnapshotExists() pushes a new one the same
 * way.  Earlier 13 releases pop their snapshot only if it is still on top,
 * and forget it otherwise.
 */
#if PG_VERSION_NUM >= 130004
#define RG_HAVE_PORTAL_SNAPSHOT 1
#endif

/* Analysing and rewriting a statement with parameters of known types. */
#if PG_VERSION_NUM >= 150000
#define RG_ANALYZE_AND_REWRITE(raw, source, types, ntypes, env) \
	pg_analyze_and_rewrite_fixedparams((raw), (source), (types), (ntypes), (env))
#else
#define RG_ANALYZE_AND_REWRITE(raw, source, types, ntypes, env) \
	pg_analyze_and_rewrite((raw), (source), (types), (ntypes), (env))
#endif

/*
 * standard_conforming_strings, which changes what a statement's text parses
 * to, can no longer be turned off in 19.
 */
#if PG_VERSION_NUM >= 190000
#define RG_STANDARD_CONFORMING_STRINGS true
#else
#define RG_STANDARD_CONFORMING_STRINGS standard_conforming_strings
#endif

/* A common table expression's CYCLE clause came in 14. */
#if PG_VERSION_NUM >= 140000
#define RG_CTE_HAS_CYCLE(cte) ((cte)->cycle_clause != NULL)
#else
#define RG_CTE_HAS_CYCLE(cte) false
#endif

/* planner_hook gained an ExplainState argument in 19. */
#if PG_VERSION_NUM >= 190000
#define RG_PLANNER_ARGS \
	Query *parse, const char *query_string, int cursorOptions, \
	ParamListInfo boundParams, ExplainState *es
#define RG_PLANNER_PASS parse, query_string, cursorOptions, boundParams, es
#else
#define RG_PLANNER_ARGS \
	Query *parse, const char *query_string, int cursorOptions, \
	ParamListInfo boundParams
#define RG_PLANNER_PASS parse, query_string, cursorOptions, boundParams
#endif

/*
 * Wait events: 17 lets an extension name its own (shown in
 * pg_stat_activity.wait_event); before that all extensions share
 * "Extension".  "cache" is a uint32 lvalue initialised to 0.
 */
#if PG_VERSION_NUM >= 170000
#define RG_WAIT_EVENT(cache, name) \
	((cache) != 0 ? (cache) : ((cache) = WaitEventExtensionNew(name)))
#else
#define RG_WAIT_EVENT(cache, name) ((void) (cache), (uint32) PG_WAIT_EXTENSION)
#endif

/*
 * From 16 on, the startup process broadcasts WalSndCtl->wal_replay_cv after
 * replaying each record whenever AllowCascadeReplication() holds, so the
 * watcher can sleep on it instead of polling.
 */
#if PG_VERSION_NUM >= 160000
#define RG_HAVE_REPLAY_CV 1
#endif

/*
 * From 19 on, core keeps a registry of backends waiting for an LSN
 * (access/xlogwait.h, the machinery of WAIT FOR LSN) and the startup process
 * and walreceiver wake them: replica_gate waits through it, and needs no
 * registry or replay watcher of its own.
 */
#if PG_VERSION_NUM >= 190000
#define RG_HAVE_CORE_WAIT 1
#include "access/xlogwait.h"
#endif

/*
 * Parse an LSN without throwing: pg_lsn_in_internal() before 19,
 * pg_lsn_in_safe() with a soft-error context from 19 on.
 */
#if PG_VERSION_NUM >= 190000
#include "nodes/miscnodes.h"
#include "utils/pg_lsn.h"
static inline XLogRecPtr
rg_lsn_in(const char *str, bool *bad)
{
	ErrorSaveContext escontext = {T_ErrorSaveContext};
	XLogRecPtr	lsn = pg_lsn_in_safe(str, (Node *) &escontext);

	*bad = escontext.error_occurred;
	return lsn;
}
#else
#include "utils/pg_lsn.h"
#define rg_lsn_in(str, bad) pg_lsn_in_internal((str), (bad))
#endif

/* Infinite intervals exist from 17 on. */
#if PG_VERSION_NUM >= 170000
#define RG_INTERVAL_IS_NOBEGIN(i) INTERVAL_IS_NOBEGIN(i)
#define RG_INTERVAL_IS_NOEND(i) INTERVAL_IS_NOEND(i)
#else
#define RG_INTERVAL_IS_NOBEGIN(i) ((void) (i), false)
#define RG_INTERVAL_IS_NOEND(i) ((void) (i), false)
#endif

/* 18 records the library's name and version (from the Makefile) in its magic block. */
#if PG_VERSION_NUM >= 180000
#define RG_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "replica_gate", .version = RG_VERSION)
#else
#define RG_MODULE_MAGIC PG_MODULE_MAGIC
#endif

#endif							/* REPLICA_GATE_COMPAT_H */
