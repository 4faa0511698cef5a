/*-------------------------------------------------------------------------
 *
 * session.c
 *		Gates that need no call: the session mode
 *		replica_gate.consistency = 'strong', which makes every statement
 *		that takes a new snapshot on a standby first gate on 'primary' (a
 *		strong read), and the session token floor replica_gate.read_after,
 *		which makes it first gate on that token.  On a primary both cost a
 *		flag test per statement.
 *
 * Which statements.  A statement gates before its snapshot when it starts
 * at the top level of the session (not inside a function, a procedure or
 * another statement; not in a parallel worker): in READ COMMITTED every
 * such statement, in REPEATABLE READ and SERIALIZABLE the start of the
 * transaction.
 *
 * Where.  No hook runs between a statement's arrival and its first
 * snapshot: parse analysis takes one before any extension sees the
 * statement.  So the gate runs in the ExecutorStart hook (or, for the
 * utility statements that read through the executor or a snapshot, in the
 * ProcessUtility hook), where the snapshot the statement will read with has
 * just been taken, and replaces it: it gives the snapshot back, waits, and
 * takes a new one, taken after the wait, for the statement to read with.
 * While it waits the session advertises no xmin, unless something else of
 * it holds a snapshot (an open cursor); the locks of the statement's parse
 * analysis stay held, so the wait is guarded (guard.c, rule 3): it gives
 * way, raising RG001, rather than hold back replay on a lock conflict.
 *
 * A REPEATABLE READ or SERIALIZABLE transaction keeps the snapshot of its
 * first statement, which cannot be replaced: it gates at its BEGIN (or at
 * the SET TRANSACTION that makes it one), before any snapshot.  A statement
 * of such a transaction that was not gated so (an implicit transaction
 * under default_transaction_isolation, or the mode set inside the
 * transaction) is refused; so is any statement whose snapshot is not where
 * the gate can replace it.  Nothing runs ungated.
 *
 * Without shared_preload_libraries the hooks exist only once the library is
 * loaded in the session: statements before that are not gated.  The mode
 * is reported to the client (GUC_REPORT) only where the library is loaded,
 * so a client sees at connection start whether it holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "utils/guc.h"
#include "utils/portal.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "gate.h"
#include "guard.h"
#include "session.h"
#include "target.h"

typedef enum RgConsistency
{
	RG_CONSISTENCY_EVENTUAL,
	RG_CONSISTENCY_STRONG
} RgConsistency;

static const struct config_enum_entry rg_consistency_options[] = {
	{"eventual", RG_CONSISTENCY_EVENTUAL, false},
	{"strong", RG_CONSISTENCY_STRONG, false},
	{NULL, 0, false}
};

static int	rg_consistency = RG_CONSISTENCY_EVENTUAL;
static char *rg_read_after_guc = NULL;

/* replica_gate.read_after, parsed by its assign hook */
static bool rg_read_after_set = false;
static RgTarget rg_read_after;

/* Executor and utility nesting: 0 at the top level of the session. */
static int	rg_session_depth = 0;

/* The REPEATABLE READ transaction gated at its start. */
static LocalTransactionId rg_session_gated_lxid = InvalidLocalTransactionId;

static ExecutorStart_hook_type rg_session_prev_executor_start = NULL;
static ExecutorRun_hook_type rg_session_prev_executor_run = NULL;
static ExecutorFinish_hook_type rg_session_prev_executor_finish = NULL;
static ProcessUtility_hook_type rg_session_prev_utility = NULL;

/*
 * rg_session_check_read_after
 *		GUC check hook: a token or a plain LSN, or empty.
 */
static bool
rg_session_check_read_after(char **newval, void **extra, GucSource source)
{
	RgTarget	target;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!rg_target_scan(*newval, &target) || target.primary)
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("invalid value for parameter \"replica_gate.read_after\": \"%s\"",
						 *newval);
		GUC_check_errhint("It takes a token \"<timeline>:<lsn>\" or a plain LSN.");
		return false;
	}
	return true;
}

/* GUC assign hook: keep the parsed floor. */
static void
rg_session_assign_read_after(const char *newval, void *extra)
{
	rg_read_after_set = (newval != NULL && newval[0] != '\0');
	if (rg_read_after_set)
		(void) rg_target_scan(newval, &rg_read_after);
}

/*
 * rg_session_wanted
 *		Must the statements of this session gate here?
 */
static bool
rg_session_wanted(void)
{
	return (rg_consistency == RG_CONSISTENCY_STRONG || rg_read_after_set) &&
		rg_session_depth == 0 && !IsParallelWorker() && RecoveryInProgress();
}

/* Error context of a session gate: which setting made the statement wait. */
static void
rg_session_error_context(void *arg)
{
	errcontext("gate of the statement on a standby, for %s",
			   (const char *) arg);
}

/*
 * rg_session_gate
 *		Gate on the floor, then on the primary's position, as the session
 *		asks, each within replica_gate.default_timeout.  The caller holds no
 *		snapshot it will read with.
 */
static void
rg_session_gate(void)
{
	RgGuard		guard;
	int			timeout = rg_gate_timeout(true, 0);
	ErrorContextCallback context;

	context.callback = rg_session_error_context;
	context.previous = error_context_stack;
	error_context_stack = &context;

	InvalidateCatalogSnapshot();
	rg_guard_prepare_statement(&guard, !TransactionIdIsValid(RG_MY_XMIN));
	if (rg_read_after_set)
	{
		context.arg = "replica_gate.read_after";
		rg_gate_require(&rg_read_after, RG_MODE_REPLAY, timeout, &guard);
	}
	if (rg_consistency == RG_CONSISTENCY_STRONG)
	{
		RgTarget	primary = {.primary = true};

		context.arg = "replica_gate.consistency = strong";
		rg_gate_require(&primary, RG_MODE_REPLAY, timeout, &guard);
	}
	error_context_stack = context.previous;
}

/*
 * rg_session_check_xact
 *		A statement of a REPEATABLE READ or SERIALIZABLE transaction: pass if
 *		the transaction was gated at its start, refuse otherwise.
 */
static void
rg_session_check_xact(void)
{
	if (rg_session_gated_lxid == RG_MY_LXID)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
			 errmsg("this REPEATABLE READ or SERIALIZABLE transaction was not gated before its snapshot"),
			 errdetail("replica_gate.consistency is \"strong\" or replica_gate.read_after is set, and the transaction's snapshot was taken before a gate could run."),
			 errhint("Start the transaction with BEGIN ISOLATION LEVEL REPEATABLE READ: it is gated there. Or use READ COMMITTED.")));
}

/* Refuse a statement whose snapshot the gate cannot replace. */
static void
rg_session_refuse(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("replica_gate cannot gate this statement before its snapshot"),
			 errdetail("replica_gate.consistency is \"strong\" or replica_gate.read_after is set, and this statement's snapshot is not one the gate can replace."),
			 errhint("Run the statement on the primary, or set replica_gate.consistency to \"eventual\" and gate it with replica_gate.require_lsn().")));
}

/*
 * rg_session_executor_start
 *		ExecutorStart hook: a top-level statement gives back the snapshot it
 *		was started with, gates, and starts with a snapshot taken after.
 */
static void
rg_session_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (rg_session_wanted() && !(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		if (IsolationUsesXactSnapshot())
			rg_session_check_xact();
		else
		{
			/* the portal's active snapshot, registered for the query */
			if (queryDesc->snapshot == NULL || !ActiveSnapshotSet() ||
				queryDesc->snapshot != GetActiveSnapshot())
				rg_session_refuse();
			UnregisterSnapshot(queryDesc->snapshot);
			PopActiveSnapshot();
			rg_session_gate();
			PushActiveSnapshot(GetTransactionSnapshot());
			queryDesc->snapshot = RegisterSnapshot(GetActiveSnapshot());
		}
	}
	if (rg_session_prev_executor_start)
		rg_session_prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* ExecutorRun and ExecutorFinish hooks: count the nesting. */
static void
rg_session_executor_run(RG_EXECUTOR_RUN_ARGS)
{
	rg_session_depth++;
	PG_TRY();
	{
		if (rg_session_prev_executor_run)
			rg_session_prev_executor_run(RG_EXECUTOR_RUN_PASS);
		else
			standard_ExecutorRun(RG_EXECUTOR_RUN_PASS);
	}
	PG_FINALLY();
	{
		rg_session_depth--;
	}
	PG_END_TRY();
}

static void
rg_session_executor_finish(QueryDesc *queryDesc)
{
	rg_session_depth++;
	PG_TRY();
	{
		if (rg_session_prev_executor_finish)
			rg_session_prev_executor_finish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
	}
	PG_FINALLY();
	{
		rg_session_depth--;
	}
	PG_END_TRY();
}

/*
 * rg_session_utility_reads
 *		Does this utility statement read data with the snapshot its portal
 *		took for it (directly, or through a query, a prepared statement, a
 *		cursor or a procedure it runs)?
 */
static bool
rg_session_utility_reads(Node *stmt)
{
	return IsA(stmt, ExplainStmt) || IsA(stmt, DeclareCursorStmt) ||
		IsA(stmt, ExecuteStmt) || IsA(stmt, CallStmt) || IsA(stmt, DoStmt) ||
		(IsA(stmt, CopyStmt) && !((CopyStmt *) stmt)->is_from);
}

/*
 * rg_session_utility_gate
 *		Gate a top-level utility statement that reads: give back the
 *		snapshot its portal pushed (and holds for the rows it returns), gate,
 *		and push a new one in its place.  Returns the snapshot pushed, which
 *		13 leaves to us to pop.
 */
static Snapshot
rg_session_utility_gate(void)
{
	Portal		portal = ActivePortal;
	bool		hold;

	if (IsolationUsesXactSnapshot())
	{
		rg_session_check_xact();
		return NULL;
	}
	if (portal == NULL || !ActiveSnapshotSet()
#ifdef RG_HAVE_PORTAL_SNAPSHOT
		|| portal->portalSnapshot != GetActiveSnapshot()
#endif
		)
		rg_session_refuse();
	hold = (portal->holdSnapshot != NULL);
	if (hold)
	{
		UnregisterSnapshotFromOwner(portal->holdSnapshot, portal->resowner);
		portal->holdSnapshot = NULL;
	}
	PopActiveSnapshot();
#ifdef RG_HAVE_PORTAL_SNAPSHOT
	portal->portalSnapshot = NULL;
#endif
	if (ActiveSnapshotSet())
		rg_session_refuse();

	rg_session_gate();

#ifdef RG_HAVE_PORTAL_SNAPSHOT
	EnsurePortalSnapshotExists();
#else
	PushActiveSnapshot(GetTransactionSnapshot());
#endif
	if (hold)
		portal->holdSnapshot = RegisterSnapshotOnOwner(GetActiveSnapshot(),
													   portal->resowner);
	return GetActiveSnapshot();
}

/*
 * rg_session_begins_xact_snapshot
 *		After a BEGIN, or a SET TRANSACTION at the start of a transaction
 *		block: is this now a REPEATABLE READ or SERIALIZABLE transaction
 *		without a snapshot yet, not gated so far?
 */
static bool
rg_session_begins_xact_snapshot(Node *stmt)
{
	bool		begins;

	if (IsA(stmt, TransactionStmt))
		begins = ((TransactionStmt *) stmt)->kind == TRANS_STMT_BEGIN ||
			((TransactionStmt *) stmt)->kind == TRANS_STMT_START;
	else if (IsA(stmt, VariableSetStmt))
		begins = ((VariableSetStmt *) stmt)->name != NULL &&
			(pg_strcasecmp(((VariableSetStmt *) stmt)->name, "TRANSACTION") == 0 ||
			 pg_strcasecmp(((VariableSetStmt *) stmt)->name, "transaction_isolation") == 0);
	else
		return false;
	return begins && IsTransactionBlock() && IsolationUsesXactSnapshot() &&
		!FirstSnapshotSet && rg_session_gated_lxid != RG_MY_LXID;
}

/*
 * rg_session_utility
 *		ProcessUtility hook: gate the top-level utility statements that read,
 *		and REPEATABLE READ transactions where they begin; count nesting.
 */
static void
rg_session_utility(RG_UTILITY_ARGS)
{
	Node	   *stmt = pstmt->utilityStmt;
	Snapshot	pushed = NULL;
	bool		at_top = rg_session_wanted();

	if (at_top && rg_session_utility_reads(stmt))
		pushed = rg_session_utility_gate();

	rg_session_depth++;
	PG_TRY();
	{
		if (rg_session_prev_utility)
			rg_session_prev_utility(RG_UTILITY_PASS);
		else
			standard_ProcessUtility(RG_UTILITY_PASS);
	}
	PG_FINALLY();
	{
		rg_session_depth--;
	}
	PG_END_TRY();

#ifndef RG_HAVE_PORTAL_SNAPSHOT
	/* 13 pops only the snapshot it pushed itself */
	if (pushed != NULL && ActiveSnapshotSet() && GetActiveSnapshot() == pushed)
		PopActiveSnapshot();
#else
	(void) pushed;
#endif

	/* a REPEATABLE READ transaction gates before its first snapshot */
	if (at_top && rg_session_begins_xact_snapshot(stmt))
	{
		rg_session_gate();
		rg_session_gated_lxid = RG_MY_LXID;
	}
}

/*
 * rg_session_init
 *		Define the settings and install the hooks; called from _PG_init.
 */
void
rg_session_init(void)
{
	DefineCustomEnumVariable("replica_gate.consistency",
							 "Whether statements on a standby first gate on the primary's position.",
							 "strong: every statement that takes a new snapshot on a standby first waits until the standby has replayed what the primary had when it began (RG001 if not within replica_gate.default_timeout).",
							 &rg_consistency,
							 RG_CONSISTENCY_EVENTUAL,
							 rg_consistency_options,
							 PGC_USERSET,
							 GUC_REPORT,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("replica_gate.read_after",
							   "A token every statement on a standby first gates on.",
							   "Every statement that takes a new snapshot on a standby first waits until the standby has replayed this token (RG001, RG002, RG003 as require_lsn()); setting it returns at once, on every node.",
							   &rg_read_after_guc,
							   "",
							   PGC_USERSET,
							   GUC_NOT_IN_SAMPLE,
							   rg_session_check_read_after,
							   rg_session_assign_read_after,
							   NULL);

	rg_session_prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = rg_session_executor_start;
	rg_session_prev_executor_run = ExecutorRun_hook;
	ExecutorRun_hook = rg_session_executor_run;
	rg_session_prev_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = rg_session_executor_finish;
	rg_session_prev_utility = ProcessUtility_hook;
	ProcessUtility_hook = rg_session_utility;
}
