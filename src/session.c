/*-------------------------------------------------------------------------
 *
 * session.c
 *		Gates that need no call: the session mode
 *		replica_gate.consistency = 'strong', which makes every statement
 *		that takes a new snapshot on a standby first gate on 'primary' (a
 *		strong read), or 'bounded', which makes it first wait until the
 *		standby's staleness bound is within replica_gate.max_staleness, and
 *		the session token floor replica_gate.read_after, which makes it
 *		first gate on that token.  On a primary the floor is checked
 *		against the server's timeline history once (a write lost in a
 *		failover fails every read, RG002), and a strong read waits, after
 *		its snapshot, until the paying commits it can see are released
 *		(below); the bounded mode costs a flag test per statement.
 *
 * Which statements.  A statement gates before its snapshot when it starts
 * at the top level of the session, in the portal that runs it (not inside
 * a function, a procedure, planning or another statement; not in a
 * parallel worker): in READ COMMITTED every such statement, in REPEATABLE
 * READ and SERIALIZABLE the start of the transaction.  Fast-path function
 * calls (libpq's PQfn, the large-object API) run outside any portal and
 * read with a snapshot taken before any hook: they are refused.
 *
 * Where.  No hook runs between a statement's arrival and its first
 * snapshot: parse analysis takes one before any extension sees the
 * statement.  So the gate runs in the ExecutorStart hook (or, for the
 * utility statements that read through the executor or a snapshot, in the
 * ProcessUtility hook), where the snapshot the statement will read with has
 * just been taken, and replaces it: it gives the snapshot back, waits, and
 * takes a new one, taken after the wait, for the statement to read with.
 * A query whose targets the replay position noted after a gate of an
 * earlier transaction already covers keeps it instead, as a plain read
 * does: that snapshot is newer than the position, and sees it.
 * While it waits the session advertises no xmin, unless something else of
 * it holds a snapshot (an open cursor).  The first statement of a
 * transaction gives back the locks of its parse analysis too, and takes
 * them again after the wait (guard.c, rule 3); a later one keeps them and
 * gives way, raising RG001, rather than hold back replay on a lock
 * conflict.  The plan, too, was made before the wait: if replay changed
 * the catalog meanwhile, the statement is planned again from its text
 * before it runs (replan.c), so that its plan is as new as its snapshot.
 *
 * A REPEATABLE READ or SERIALIZABLE transaction keeps the snapshot of its
 * first statement, which cannot be replaced: it gates at its BEGIN (or at
 * the SET TRANSACTION that makes it one), before any snapshot.  A statement
 * of such a transaction that was not gated so (an implicit transaction
 * under default_transaction_isolation, or the mode set inside the
 * transaction) is refused; so is any statement whose snapshot is not where
 * the gate can replace it, and SET TRANSACTION SNAPSHOT (an imported
 * snapshot predates the gate).  A change of either setting makes the
 * transaction gate again before its snapshot.  Nothing runs ungated.
 *
 * A strong read on the primary.  A paying commit becomes visible on the
 * primary before it is acknowledged, while it waits for the standbys that
 * hold a lease (commit_wait.c).  A statement of the mode 'strong' there
 * waits, once its snapshot is taken, until every paying commit that
 * snapshot can see is released as its acknowledgement would be
 * (rg_commit_wait_read), so that a strong read on a standby that begins
 * after it sees what it saw.  Nothing is replaced: the wait makes what the
 * snapshot sees safe to have seen.  Every statement that starts the
 * executor, at any depth (a function's statements take snapshots of their
 * own), COPY from a table, which reads without the executor, and fast-path
 * calls, in REPEATABLE READ and SERIALIZABLE once per transaction.
 *
 * Without shared_preload_libraries the hooks exist only once the library is
 * loaded in the session: statements before that are not gated.  So the way
 * to turn the mode on for a role loads the library with it at session start
 * (ALTER ROLE ... SET local_preload_libraries = 'replica_gate'); a session
 * that loads it later with the mode or floor already set fails its first
 * gate (55000), as its earlier reads ran ungated.  The mode is reported to
 * the client (GUC_REPORT) only where the library is loaded, so a client
 * sees at connection start whether it holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "storage/proc.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "tcop/pquery.h"
#include "utils/guc.h"
#include "utils/portal.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "commit_wait.h"
#include "gate.h"
#include "guard.h"
#include "replan.h"
#include "session.h"
#include "settings.h"
#include "staleness.h"
#include "target.h"

typedef enum RgConsistency
{
	RG_CONSISTENCY_EVENTUAL,
	RG_CONSISTENCY_BOUNDED,
	RG_CONSISTENCY_STRONG
} RgConsistency;

static const struct config_enum_entry rg_consistency_options[] = {
	{"eventual", RG_CONSISTENCY_EVENTUAL, false},
	{"bounded", RG_CONSISTENCY_BOUNDED, false},
	{"strong", RG_CONSISTENCY_STRONG, false},
	{NULL, 0, false}
};

static int	rg_consistency = RG_CONSISTENCY_EVENTUAL;
static int	rg_max_staleness_ms = 1000;
static char *rg_read_after_guc = NULL;

/*
 * replica_gate.read_after, parsed by its assign hook, and the timeline a
 * primary found it in its history on (0: not checked since it was set).
 */
static bool rg_read_after_set = false;
static RgTarget rg_read_after;
static TimeLineID rg_read_after_checked = 0;

/*
 * The library was loaded after the mode or the floor had been set in this
 * session: the statements before ran ungated, and the next gate fails.
 */
static bool rg_session_missed = false;

/* Executor and utility nesting: 0 at the top level of the session. */
static int	rg_session_depth = 0;

/*
 * The replay position, and its timeline, read after this session's last
 * gate that checked replay, and the transaction it ran in: every snapshot
 * of a later transaction is taken after, and sees every commit up to it.
 */
static XLogRecPtr rg_session_replayed = InvalidXLogRecPtr;
static TimeLineID rg_session_replayed_tli = 0;
static LocalTransactionId rg_session_replayed_lxid = InvalidLocalTransactionId;

/*
 * The REPEATABLE READ transaction gated at its start, with the settings of
 * then (a change of either forgets it).
 */
static LocalTransactionId rg_session_gated_lxid = InvalidLocalTransactionId;

/* On a primary: the REPEATABLE READ transaction whose snapshot waited. */
static LocalTransactionId rg_session_primary_lxid = InvalidLocalTransactionId;

static ExecutorStart_hook_type rg_session_prev_executor_start = NULL;
static planner_hook_type rg_session_prev_planner = NULL;
static object_access_hook_type rg_session_prev_object_access = NULL;
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
	rg_read_after_checked = 0;
	rg_session_gated_lxid = InvalidLocalTransactionId;
}

/* GUC assign hook of replica_gate.consistency: a new mode gates anew. */
static void
rg_session_assign_consistency(int newval, void *extra)
{
	rg_session_gated_lxid = InvalidLocalTransactionId;
}

/*
 * rg_session_check_floor
 *		On a primary, reads are fresh, but a floor whose write this server's
 *		history excludes (lost in a failover: RG002; an unknown timeline:
 *		RG003) or never had fails them, as the floor's gate would on a
 *		standby.  Checked once per floor and timeline.
 */
static void
rg_session_check_floor(void)
{
	TimeLineID	tli = RG_INSERT_TLI();

	if (rg_read_after_checked == tli)
		return;
	rg_gate_require(&rg_read_after, RG_MODE_REPLAY, 0, NULL);
	rg_read_after_checked = tli;
}

/*
 * rg_session_wanted
 *		Must the statements of this session gate here?  Only those of a
 *		client session (a walsender's SQL included; not a parallel
 *		worker's, nor those of another extension's background worker
 *		running as a role with the mode set: those run ungated), on a
 *		standby; on a primary a floor is checked instead.
 */
static bool
rg_session_wanted(void)
{
	if (!(rg_consistency != RG_CONSISTENCY_EVENTUAL || rg_read_after_set) ||
		rg_session_depth != 0 || !rg_client_session())
		return false;
	if (RecoveryInProgress())
		return true;
	if (rg_read_after_set)
		rg_session_check_floor();
	return false;
}

/*
 * rg_session_primary_read
 *		A client session's statement, in the mode 'strong', whose snapshot is
 *		taken: on a primary, wait until what that snapshot can see is
 *		released (file header).
 */
static void
rg_session_primary_read(void)
{
	if (rg_consistency != RG_CONSISTENCY_STRONG || !rg_client_session() ||
		RecoveryInProgress())
		return;
	if (IsolationUsesXactSnapshot())
	{
		if (rg_session_primary_lxid == RG_MY_LXID)
			return;
		rg_session_primary_lxid = RG_MY_LXID;
	}
	rg_commit_wait_read();
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
 *		Gate on the floor, then on the primary's position or on the
 *		staleness bound, as the session asks, each within
 *		replica_gate.default_timeout.  The caller holds no snapshot it will
 *		read with, and then consumes the invalidation messages of what was
 *		replayed (rg_replan_needed).  Returns whether the statement gave
 *		back its locks to wait (guard.c, rule 3): the caller takes again
 *		those it needs.
 */
static bool
rg_session_gate(void)
{
	RgGuard		guard;
	int			timeout = rg_gate_timeout(true, 0);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   timeout);
	ErrorContextCallback context;

	/*
	 * The context names the setting that makes the statement gate, set
	 * before anything can fail (the missed SET below): the mode, else the
	 * floor; each wait then names its own.
	 */
	context.callback = rg_session_error_context;
	context.arg = rg_consistency == RG_CONSISTENCY_STRONG ?
		"replica_gate.consistency = strong" :
		rg_consistency == RG_CONSISTENCY_BOUNDED ?
		"replica_gate.consistency = bounded" : "replica_gate.read_after";
	context.previous = error_context_stack;
	error_context_stack = &context;

	if (rg_session_missed)
	{
		rg_session_missed = false;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("earlier statements of this session were not gated"),
				 errdetail("replica_gate.consistency or replica_gate.read_after was set in this session before replica_gate was loaded, so the reads before it ran ungated."),
				 errhint("Load the library at session start: ALTER ROLE ... SET local_preload_libraries = 'replica_gate', or add it to shared_preload_libraries on this server.")));
	}
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
		long		left = (long) ((deadline - GetCurrentTimestamp()) / 1000);

		context.arg = "replica_gate.consistency = strong";
		rg_gate_require(&primary, RG_MODE_REPLAY, (int) Max(left, 0), &guard);
	}
	else if (rg_consistency == RG_CONSISTENCY_BOUNDED)
	{
		long		left = (long) ((deadline - GetCurrentTimestamp()) / 1000);

		context.arg = "replica_gate.consistency = bounded";
		rg_staleness_require(rg_max_staleness_ms * (int64) 1000,
							 (int) Max(left, 0), &guard, true);
	}
	error_context_stack = context.previous;
	rg_session_replayed = GetXLogReplayRecPtr(&rg_session_replayed_tli);
	rg_session_replayed_lxid = RG_MY_LXID;
	return guard.unlocked;
}

/*
 * rg_session_relock
 *		Take again the locks a plan needs, after its statement gave them
 *		back to wait: those of its range table, as the plan cache takes
 *		them for a cached plan.
 */
static void
rg_session_relock(const PlannedStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (OidIsValid(rte->relid) && rte->rellockmode != NoLock &&
			(rte->rtekind == RTE_RELATION || rte->rtekind == RTE_SUBQUERY))
			LockRelationOid(rte->relid, rte->rellockmode);
	}
}

/*
 * rg_session_passed_before
 *		Do the statement's gates pass at the replay position noted after
 *		a gate of an earlier transaction, which its snapshot is newer than
 *		(and so sees)?  Under a steady write load nearly always: a strong
 *		read served locally takes an answer a question interval old
 *		(proof.c), and a statement that finds its target past the noted
 *		position gates as usual and notes a new one, so about one statement
 *		in each question interval does.  Not in the transaction that noted
 *		it: only a transaction's end orders the position before every
 *		snapshot a statement can start with (none is known to start with
 *		one taken before a gate of its own transaction, but nothing here
 *		proves that).  Nor in the bounded mode, whose bound is measured
 *		now, nor in a session whose earlier reads ran ungated.
 */
static bool
rg_session_passed_before(void)
{
	if (rg_session_missed || rg_consistency == RG_CONSISTENCY_BOUNDED ||
		rg_session_replayed_lxid == RG_MY_LXID)
		return false;
	return rg_gate_passed_before(rg_read_after_set ? &rg_read_after : NULL,
								 rg_consistency == RG_CONSISTENCY_STRONG,
								 rg_session_replayed, rg_session_replayed_tli);
}

/* Give back the snapshot a query was started with, which it will not use. */
static void
rg_session_give_back(QueryDesc *queryDesc)
{
	UnregisterSnapshot(queryDesc->snapshot);
	PopActiveSnapshot();
	queryDesc->snapshot = NULL;
}

/*
 * rg_session_gate_query
 *		Gate a query the executor is starting with the portal's snapshot.
 *		If its gates passed before that snapshot was taken, it keeps it, as
 *		a plain read would.  Otherwise it gives the snapshot back, gates,
 *		and takes a new one after.  Either way, make sure its plan is as
 *		new as its snapshot: plan it again, with a new snapshot, if replay
 *		changed the catalog since before it was parsed (replan.c).
 */
static void
rg_session_gate_query(QueryDesc *queryDesc)
{
	if (!rg_session_passed_before())
	{
		rg_session_give_back(queryDesc);
		if (rg_session_gate())
			rg_session_relock(queryDesc->plannedstmt);
	}
	if (rg_replan_needed(queryDesc->plannedstmt, queryDesc->sourceText))
	{
		if (queryDesc->snapshot != NULL)
			rg_session_give_back(queryDesc);
		PushActiveSnapshot(GetTransactionSnapshot());
		queryDesc->plannedstmt = rg_replan(queryDesc->sourceText,
										   queryDesc->plannedstmt,
										   queryDesc->params,
										   queryDesc->queryEnv,
										   CURSOR_OPT_PARALLEL_OK);
		queryDesc->operation = queryDesc->plannedstmt->commandType;
		PopActiveSnapshot();
	}
	if (queryDesc->snapshot == NULL)
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		queryDesc->snapshot = RegisterSnapshot(GetActiveSnapshot());
	}
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
			 errdetail("replica_gate.consistency is \"strong\" or \"bounded\", or replica_gate.read_after is set, and the transaction's snapshot was taken before a gate could run."),
			 errhint("Start the transaction with BEGIN ISOLATION LEVEL REPEATABLE READ: it is gated there. Or use READ COMMITTED.")));
}

/* Refuse a statement whose snapshot the gate cannot replace. */
static void
rg_session_refuse(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("replica_gate cannot gate this statement before its snapshot"),
			 errdetail("replica_gate.consistency is \"strong\" or \"bounded\", or replica_gate.read_after is set, and this statement's snapshot is not one the gate can replace."),
			 errhint("Run the statement on the primary, or set replica_gate.consistency to \"eventual\" and gate it with replica_gate.require_lsn().")));
}

/*
 * rg_session_executor_start
 *		ExecutorStart hook: a top-level statement gates, and starts with the
 *		snapshot it was started with if that one sees its targets, else with
 *		one taken after the gate (rg_session_gate_query).
 */
static void
rg_session_executor_start(QueryDesc *queryDesc, int eflags)
{
	Portal		portal = ActivePortal;

	/*
	 * Only the query a portal is starting: a query run at depth 0 outside
	 * a portal is part of binding a statement (a domain's check), and reads
	 * nothing the statement returns.
	 */
	if (!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		rg_session_primary_read();
	if (rg_session_wanted() && !(eflags & EXEC_FLAG_EXPLAIN_ONLY) &&
		portal != NULL)
	{
		if (IsolationUsesXactSnapshot())
			rg_session_check_xact();
		else
		{
			/* the portal's active snapshot, registered for the query */
			if (portal->queryDesc != NULL ||
				!((portal->status == PORTAL_DEFINED &&
				   portal->strategy == PORTAL_ONE_SELECT) ||
				  (portal->status == PORTAL_ACTIVE &&
				   portal->strategy == PORTAL_MULTI_QUERY)) ||
				queryDesc->snapshot == NULL || !ActiveSnapshotSet() ||
				queryDesc->snapshot != GetActiveSnapshot())
				rg_session_refuse();
			rg_session_gate_query(queryDesc);
		}
	}

	/* what the executor runs while it starts (initial pruning) is nested */
	rg_session_depth++;
	PG_TRY();
	{
		if (rg_session_prev_executor_start)
			rg_session_prev_executor_start(queryDesc, eflags);
		else
			standard_ExecutorStart(queryDesc, eflags);
	}
	PG_FINALLY();
	{
		rg_session_depth--;
	}
	PG_END_TRY();
}

/* Planner hook: what planning runs (a function's estimate) is nested. */
static PlannedStmt *
rg_session_planner(RG_PLANNER_ARGS)
{
	PlannedStmt *result;

	rg_session_depth++;
	PG_TRY();
	{
		if (rg_session_prev_planner)
			result = rg_session_prev_planner(RG_PLANNER_PASS);
		else
			result = standard_planner(RG_PLANNER_PASS);
	}
	PG_FINALLY();
	{
		rg_session_depth--;
	}
	PG_END_TRY();
	return result;
}

/*
 * rg_session_object_access
 *		Object access hook: a function executed at the top level of a client
 *		session, outside any portal and any query text (a domain's check
 *		while a statement is parsed or bound has both), is a fast-path call,
 *		which reads with a snapshot taken before any hook: refuse it on a
 *		standby; on a primary that snapshot waits, as a strong read's.
 */
static void
rg_session_object_access(ObjectAccessType access, Oid classId, Oid objectId,
						 int subId, void *arg)
{
	if (rg_session_prev_object_access)
		rg_session_prev_object_access(access, classId, objectId, subId, arg);
	if (access != OAT_FUNCTION_EXECUTE || ActivePortal != NULL ||
		debug_query_string != NULL)
		return;
	rg_session_primary_read();
	if (rg_session_wanted())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("replica_gate cannot gate a fast-path function call"),
				 errdetail("replica_gate.consistency is \"strong\" or \"bounded\", or replica_gate.read_after is set, and a fast-path call (PQfn, the large-object API) reads with a snapshot taken before a gate could run."),
				 errhint("Call the function in a SELECT, or on the primary.")));
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
	if (IsA(stmt, ExplainStmt))
	{
		ListCell   *lc;

		/* only EXPLAIN ANALYZE runs the query */
		foreach(lc, ((ExplainStmt *) stmt)->options)
			if (strcmp(lfirst_node(DefElem, lc)->defname, "analyze") == 0 &&
				defGetBoolean(lfirst_node(DefElem, lc)))
				return true;
		return false;
	}
	return IsA(stmt, DeclareCursorStmt) || IsA(stmt, ExecuteStmt) ||
		IsA(stmt, CallStmt) || IsA(stmt, DoStmt) ||
		(IsA(stmt, CopyStmt) && !((CopyStmt *) stmt)->is_from);
}

/*
 * rg_session_utility_gate
 *		Gate a top-level utility statement that reads: give back the
 *		snapshot its portal pushed (and holds for the rows it returns), gate,
 *		and push a new one in its place; then plan *pstmt again if replay
 *		changed the catalog, if it gave back its locks to wait (which of
 *		them it needs, only its parse analysis knew), or if it was bound
 *		from a saved plan (the extended protocol): a client may bind
 *		several portals before it executes them, and the gate of another
 *		one may then have consumed, between this one's Bind and its run, a
 *		change its plan predates.  (A query, not a utility statement, of
 *		such a portal gates at its Bind, with its plan just made.)  Returns
 *		the snapshot pushed, which 13 leaves to us to pop.
 */
static Snapshot
rg_session_utility_gate(PlannedStmt **pstmt, const char *queryString,
						ParamListInfo params, QueryEnvironment *queryEnv)
{
	Portal		portal = ActivePortal;
	bool		hold;
	bool		unlocked;

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

	unlocked = rg_session_gate();

#ifdef RG_HAVE_PORTAL_SNAPSHOT
	EnsurePortalSnapshotExists();
#else
	PushActiveSnapshot(GetTransactionSnapshot());
#endif
	if (hold)
		portal->holdSnapshot = RegisterSnapshotOnOwner(GetActiveSnapshot(),
													   portal->resowner);
	if (rg_replan_needed(*pstmt, queryString) || unlocked || portal->cplan != NULL)
		*pstmt = rg_replan(queryString, *pstmt, params, queryEnv,
						   CURSOR_OPT_PARALLEL_OK);
	return GetActiveSnapshot();
}

/*
 * rg_session_begins_xact_snapshot
 *		After a BEGIN, or a SET at the start of a transaction block (SET
 *		TRANSACTION, or one of our settings): is this now a REPEATABLE READ
 *		or SERIALIZABLE transaction without a snapshot yet, not gated so far
 *		with the settings it has now?
 */
static bool
rg_session_begins_xact_snapshot(Node *stmt)
{
	bool		begins;

	if (IsA(stmt, TransactionStmt))
		begins = ((TransactionStmt *) stmt)->kind == TRANS_STMT_BEGIN ||
			((TransactionStmt *) stmt)->kind == TRANS_STMT_START;
	else
		begins = IsA(stmt, VariableSetStmt);
	return begins && IsTransactionBlock() && IsolationUsesXactSnapshot() &&
		!FirstSnapshotSet && rg_session_gated_lxid != RG_MY_LXID;
}

/* Is this SET TRANSACTION SNAPSHOT, which imports an older snapshot? */
static bool
rg_session_imports_snapshot(Node *stmt)
{
	return IsA(stmt, VariableSetStmt) &&
		((VariableSetStmt *) stmt)->name != NULL &&
		strcmp(((VariableSetStmt *) stmt)->name, "TRANSACTION SNAPSHOT") == 0;
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

	if (at_top && rg_session_imports_snapshot(stmt))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("SET TRANSACTION SNAPSHOT cannot be gated"),
				 errdetail("replica_gate.consistency is \"strong\" or \"bounded\", or replica_gate.read_after is set, and an imported snapshot was taken before a gate could run.")));
	if (at_top && rg_session_utility_reads(stmt))
		pushed = rg_session_utility_gate(&pstmt, queryString, params, queryEnv);
	/* the one that reads without the executor, with its portal's snapshot */
	if (IsA(stmt, CopyStmt) && !((CopyStmt *) stmt)->is_from &&
		((CopyStmt *) stmt)->relation != NULL && ActiveSnapshotSet())
		rg_session_primary_read();

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

	/*
	 * A REPEATABLE READ transaction gates before its first snapshot (asked
	 * after the statement: it may have set the floor or the mode); its
	 * statements are parsed after the gate, or bound from saved plans that
	 * the gate marks to be planned again if replay changed the catalog.
	 */
	if (rg_session_wanted() && rg_session_begins_xact_snapshot(stmt))
	{
		rg_session_gate();
		(void) rg_replan_needed(NULL, NULL);
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
							 "strong: every statement that takes a new snapshot on a standby first waits until the standby has replayed what the primary had when it began; bounded: until its staleness bound is within replica_gate.max_staleness (RG001 if not within replica_gate.default_timeout).",
							 &rg_consistency,
							 RG_CONSISTENCY_EVENTUAL,
							 rg_consistency_options,
							 PGC_USERSET,
							 GUC_REPORT,
							 NULL, rg_session_assign_consistency, NULL);
	DefineCustomIntVariable("replica_gate.max_staleness",
							"How stale a statement of the bounded mode may read.",
							"With replica_gate.consistency = bounded, every statement that takes a new snapshot on a standby first waits until the standby's staleness bound is at most this (RG001 if not within replica_gate.default_timeout).",
							&rg_max_staleness_ms,
							1000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, rg_session_assign_consistency, NULL);
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
	rg_session_prev_planner = planner_hook;
	planner_hook = rg_session_planner;
	rg_session_prev_object_access = object_access_hook;
	object_access_hook = rg_session_object_access;
	rg_session_missed = !rg_loaded_at_start && RecoveryInProgress() &&
		(rg_consistency != RG_CONSISTENCY_EVENTUAL || rg_read_after_set);
	if (rg_session_missed)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replica_gate.consistency or replica_gate.read_after was set before replica_gate was loaded in this session"),
				 errdetail("The reads before it were not gated. The next gated statement of this session will fail."),
				 errhint("Load the library at session start: ALTER ROLE ... SET local_preload_libraries = 'replica_gate'.")));
}
