/*-------------------------------------------------------------------------
 *
 * guard.c
 *		Keeping a function-form gate from holding back the replay it waits
 *		for.
 *
 * A function runs inside a statement that holds a snapshot, and on a
 * standby the startup process must wait for every backend whose snapshot
 * (advertised xmin) conflicts with a cleanup record it replays, or whose
 * locks conflict with a lock it replays, until that backend's transaction
 * ends or max_standby_streaming_delay runs out.  A gate that waited with its
 * snapshot would hold replay back until its own timeout, and every other
 * reader of the standby with it.  Two rules prevent that:
 *
 * 1. A gate that is its statement's only work (SELECT gate(...), nothing
 *    else: no FROM, no subquery, the call itself the only output column),
 *    in the first statement of a READ COMMITTED transaction, waits without
 *    advertising its xmin: its snapshot is never read again, the statements
 *    after it take their own, and no earlier statement left locks or
 *    snapshots behind.  The startup process then never waits for it.
 * 2. Every other gate keeps its snapshot, and watches replay while it waits:
 *    when the startup process has stood still in a recovery-conflict wait
 *    (snapshot, tablespace, lock) at two looks RG_GUARD_YIELD_MS apart, the
 *    gate gives way: it stops waiting and reports that it was not caught
 *    up.  The startup process notices on its next look (it looks after 1,
 *    3, 7, 15, 31 ms...), so replay is held back for a few milliseconds.
 *    When the startup process waits for a buffer pin the gate holds (a gate
 *    evaluated during a scan), the gate gives way at once.
 *
 * 3. A statement gated by the session mode (session.c) waits after it gave
 *    back its snapshot.  If it is the first statement of its transaction,
 *    the locks of its parse analysis and plan are all the locks it holds:
 *    it gives them back too, and waits as a rule-1 gate does (session.c
 *    takes them again after the wait, and plans the statement again if the
 *    catalog changed meanwhile).  Otherwise it keeps them, and gives way to
 *    a lock conflict as in rule 2, looking every RG_GUARD_LOCK_POLL_MS and,
 *    once it has seen one, again after RG_GUARD_YIELD_MS.  If the session
 *    holds another snapshot (an open cursor), it watches as in rule 2.
 *
 * A gate that waits without its xmin (rules 1 and 3) may still have been
 * listed by the startup process just before, while its statement was
 * parsed and planned with a snapshot: replaying a cleanup record, the
 * startup process lists the backends whose xmin conflicts with it, then
 * waits for each listed virtual transaction to end (VirtualXactLock), not
 * for its xmin to go.  Under catalog churn (temporary tables created on the
 * primary, whose catalog rows are pruned at once) that happens to a large
 * share of statements, and the gate would wait for replay that waits for
 * it.  So such a gate also gives back its virtual transaction's lock while
 * it waits, and takes it again before its statement reads: to the startup
 * process its transaction has ended, which is true of everything it could
 * conflict with (it holds no snapshot, no pin).  On a standby only the
 * startup process looks at that lock: to wait for the backends it listed
 * for a snapshot or tablespace conflict, and to cancel, once
 * max_standby_streaming_delay has passed, those holding a lock it needs
 * (a rule-3 gate with locks gives way within RG_GUARD_LOCK_POLL_MS
 * instead).  Taking it back before the statement takes a snapshot again
 * makes any later listing wait as usual.  If the wait fails, the
 * end of the transaction cleans up, or the abort of a subtransaction takes
 * it back (a savepoint around the gated statement).  Such a gate never
 * causes a snapshot conflict, and one without locks causes none at all:
 * it does not watch replay.
 *
 * The guard cannot tell which backends the startup process waits for, so a
 * long conflict caused by another session makes a watching gate give way
 * too; it could not have been caught up before that conflict ended anyway.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "storage/bufmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "utils/portal.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "guard.h"

/*
 * How often a watching gate looks at replay, and how long it lets a conflict
 * last before it gives way.
 */
#define RG_GUARD_POLL_MS			2
#define RG_GUARD_YIELD_MS			2

/*
 * How often a statement that waits without a snapshot but with its locks
 * (rule 3) looks for a lock conflict: replay is held back at most this long
 * by it, and a waiting session wakes at most 20 times a second.
 */
#define RG_GUARD_LOCK_POLL_MS		50

/*
 * Statements started by this session in its current top-level transaction
 * (executor starts, and utility statements that can take locks or
 * snapshots), and which transaction they were counted in.
 */
static int	rg_guard_statements = 0;
static LocalTransactionId rg_guard_lxid = InvalidLocalTransactionId;

static ExecutorStart_hook_type rg_guard_prev_executor_start = NULL;

/* This backend gave back the lock on its virtual transaction (see above). */
static bool rg_guard_vxid_given_back = false;

/*
 * rg_guard_count_statement
 *		Count one statement of the current transaction.
 */
static void
rg_guard_count_statement(void)
{
	if (rg_guard_lxid != RG_MY_LXID)
	{
		rg_guard_lxid = RG_MY_LXID;
		rg_guard_statements = 0;
	}
	rg_guard_statements++;
}

/*
 * rg_guard_executor_start
 *		ExecutorStart hook: count the statement, then start it.
 */
static void
rg_guard_executor_start(QueryDesc *queryDesc, int eflags)
{
	rg_guard_count_statement();
	if (rg_guard_prev_executor_start)
		rg_guard_prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/*
 * rg_guard_utility
 *		Called by the utility hook before a utility statement runs: count it
 *		unless it takes neither locks nor a snapshot (transaction control,
 *		SET, SHOW) or only runs a prepared statement, which the executor
 *		counts (EXECUTE).
 */
void
rg_guard_utility(Node *parsetree)
{
	if (!IsA(parsetree, TransactionStmt) &&
		!IsA(parsetree, VariableSetStmt) &&
		!IsA(parsetree, VariableShowStmt) &&
		!IsA(parsetree, ExecuteStmt))
		rg_guard_count_statement();
}

/*
 * rg_guard_gate_alone
 *		Is the gate called through "fcinfo" the whole of the first statement
 *		of this transaction (rule 1 above)?
 *
 * The plan must be a bare Result node whose only output is this very call,
 * with constants and parameters for arguments: nothing in the statement
 * reads with its snapshot or takes a lock before or after the call.
 */
static bool
rg_guard_gate_alone(FunctionCallInfo fcinfo)
{
	PlannedStmt *stmt;
	Plan	   *plan;
	TargetEntry *tle;
	ListCell   *lc;

	if (IsolationUsesXactSnapshot() ||
		rg_guard_lxid != RG_MY_LXID || rg_guard_statements != 1 ||
		ActivePortal == NULL || ActivePortal->strategy != PORTAL_ONE_SELECT ||
		list_length(ActivePortal->stmts) != 1 ||
		fcinfo->flinfo == NULL || fcinfo->flinfo->fn_expr == NULL)
		return false;

	stmt = linitial_node(PlannedStmt, ActivePortal->stmts);
	plan = stmt->planTree;
	if (stmt->commandType != CMD_SELECT || stmt->hasModifyingCTE ||
		stmt->subplans != NIL || stmt->rowMarks != NIL ||
		!IsA(plan, Result) || ((Result *) plan)->resconstantqual != NULL ||
		plan->lefttree != NULL || plan->righttree != NULL ||
		plan->qual != NIL || plan->initPlan != NIL ||
		list_length(plan->targetlist) != 1)
		return false;

	/* this very call, with constants and parameters for arguments */
	tle = linitial_node(TargetEntry, plan->targetlist);
	if ((Node *) tle->expr != fcinfo->flinfo->fn_expr ||
		!IsA(tle->expr, FuncExpr))
		return false;
	foreach(lc, ((FuncExpr *) tle->expr)->args)
	{
		Node	   *arg = lfirst(lc);

		/* a cast of a constant (text to pg_lsn, say) is still constant */
		if (IsA(arg, RelabelType))
			arg = (Node *) ((RelabelType *) arg)->arg;
		if (!IsA(arg, Const) && !IsA(arg, Param))
			return false;
	}
	return true;
}

/*
 * rg_guard_prepare
 *		Set up the guard of the gate called through "fcinfo"; it acts only
 *		if the gate sleeps (rg_guard_begin).
 */
void
rg_guard_prepare(RgGuard *guard, FunctionCallInfo fcinfo)
{
	guard->fcinfo = fcinfo;
	guard->watching = false;
	guard->released = false;
	guard->holds_locks = false;
	guard->may_unlock = false;
	guard->unlocked = false;
}

/*
 * rg_guard_prepare_statement
 *		Set up the guard of a statement gated by the session mode (rule 3):
 *		"released" if the session advertises no xmin any more.  Called
 *		before the statement is counted: it may give back its locks if no
 *		statement ran before it in its transaction.
 */
void
rg_guard_prepare_statement(RgGuard *guard, bool released)
{
	guard->fcinfo = NULL;
	guard->watching = false;
	guard->released = released;
	guard->holds_locks = released;
	guard->may_unlock = released &&
		(rg_guard_lxid != RG_MY_LXID || rg_guard_statements == 0);
	guard->unlocked = false;
}

/*
 * rg_guard_unlock
 *		Give back the locks of the statement being gated, which are all the
 *		locks of its transaction (rule 3): those of the current transaction
 *		or subtransaction, where parse analysis and planning took them.
 */
static void
rg_guard_unlock(RgGuard *guard)
{
	ResourceOwner saved = CurrentResourceOwner;

	CurrentResourceOwner = CurTransactionResourceOwner;
	LockReleaseCurrentOwner(NULL, 0);
	CurrentResourceOwner = saved;
	guard->holds_locks = false;
	guard->unlocked = true;
}

/*
 * rg_guard_give_back_vxid
 *		Give back the lock on this backend's virtual transaction, so that a
 *		startup process waiting for it goes on.
 */
static void
rg_guard_give_back_vxid(void)
{
	if (rg_guard_vxid_given_back)
		return;
	VirtualXactLockTableCleanup();
	rg_guard_vxid_given_back = true;
}

/*
 * rg_guard_take_back_vxid
 *		Take the lock on this backend's virtual transaction again.
 */
static void
rg_guard_take_back_vxid(void)
{
	VirtualTransactionId vxid;

	if (!rg_guard_vxid_given_back)
		return;
	GET_VXID_FROM_PGPROC(vxid, *MyProc);
	VirtualXactLockTableInsert(vxid);
	rg_guard_vxid_given_back = false;
}

/*
 * rg_guard_begin
 *		Called when a gate is about to sleep: drop its xmin if rule 1
 *		allows, give back its virtual transaction if it waits without an
 *		xmin, and start watching replay if it can still hold it back.
 */
void
rg_guard_begin(RgGuard *guard)
{
	guard->conflict_since = 0;
	guard->conflict_at = InvalidXLogRecPtr;
	if (guard->fcinfo != NULL)
		guard->released = rg_guard_gate_alone(guard->fcinfo);
	if (!guard->released)
	{
		guard->watching = true;
		return;
	}
	if (guard->may_unlock && !guard->unlocked)
		rg_guard_unlock(guard);

	/*
	 * Nothing reads with the statement's snapshot any more; a catalog
	 * snapshot would advertise an xmin of its own.
	 */
	InvalidateCatalogSnapshot();
	RG_MY_XMIN = InvalidTransactionId;
	rg_guard_give_back_vxid();
	guard->watching = guard->holds_locks;
}

/*
 * rg_guard_end
 *		Called when a gate's wait ended (guard may be NULL: no guard): take
 *		back its virtual transaction before its statement reads.
 */
void
rg_guard_end(RgGuard *guard)
{
	if (guard != NULL)
		rg_guard_take_back_vxid();
}

/*
 * rg_guard_replay_conflict
 *		The recovery conflict the startup process is waiting on, as its wait
 *		event, or 0.  Of the auxiliary processes only the startup process
 *		waits for heavyweight locks or cleanup locks, or resolves conflicts;
 *		it reports those waits while it sleeps, which is nearly all of the
 *		time it waits.
 */
static uint32
rg_guard_replay_conflict(void)
{
	for (int i = 0; i < NUM_AUXILIARY_PROCS; i++)
	{
		volatile PGPROC *proc = &ProcGlobal->allProcs[MaxBackends + i];
		uint32		event = proc->wait_event_info;

		if (proc->pid != 0 && rg_replay_conflict_event(event))
			return event;
	}
	return 0;
}

/*
 * rg_guard_poll_ms
 *		The longest a watching gate may sleep before it looks again (0: not
 *		watching, sleep as long as the wait needs).
 */
long
rg_guard_poll_ms(const RgGuard *guard)
{
	if (guard == NULL || !guard->watching)
		return 0;
	/* rule 3 with locks, nothing seen yet: look now and then */
	if (guard->released && guard->conflict_since == 0)
		return RG_GUARD_LOCK_POLL_MS;
	return RG_GUARD_POLL_MS;
}

/*
 * rg_guard_polls_fast
 *		Does the gate look again within a few milliseconds anyway, so that
 *		it need not be woken when its target is reached?
 */
bool
rg_guard_polls_fast(const RgGuard *guard)
{
	return rg_guard_poll_ms(guard) == RG_GUARD_POLL_MS;
}

/*
 * rg_guard_must_yield
 *		Should the gate stop waiting so that replay can go on?  Called before
 *		each sleep of a gate that has not reached its target.
 */
bool
rg_guard_must_yield(RgGuard *guard)
{
	XLogRecPtr	replayed;
	TimestampTz now;
	uint32		conflict;

	if (guard == NULL || !guard->watching)
		return false;

	/*
	 * A pin conflict names its buffer: give way at once if it is ours (a
	 * gate evaluated during a scan), and never for somebody else's.  A
	 * released gate holds no pins and no snapshot that replay waits for:
	 * only a lock conflict can be its.
	 */
	conflict = rg_guard_replay_conflict();
	if (conflict == RG_WAIT_EVENT_BUFFER_CLEANUP)
		return !guard->released && HoldingBufferPinThatDelaysRecovery();
	if (conflict == 0 ||
		(guard->released && (conflict & 0xFF000000) != PG_WAIT_LOCK))
	{
		guard->conflict_since = 0;
		return false;
	}

	replayed = GetXLogReplayRecPtr(NULL);
	now = GetCurrentTimestamp();
	if (guard->conflict_since == 0 || guard->conflict_at != replayed)
	{
		guard->conflict_since = now;
		guard->conflict_at = replayed;
		return false;
	}
	return now - guard->conflict_since >= RG_GUARD_YIELD_MS * 1000;
}

/*
 * rg_guard_xact_callback
 *		The end of a transaction gives up its virtual transaction's lock,
 *		whatever state it was in.
 */
static void
rg_guard_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		rg_guard_vxid_given_back = false;
}

/*
 * rg_guard_subxact_callback
 *		A gate whose wait failed inside a subtransaction: its transaction
 *		goes on, and takes its virtual transaction back.
 */
static void
rg_guard_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		rg_guard_take_back_vxid();
}

/*
 * rg_guard_init
 *		Install the executor hook and the transaction callbacks; called
 *		from _PG_init.
 */
void
rg_guard_init(void)
{
	rg_guard_prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = rg_guard_executor_start;
	RegisterXactCallback(rg_guard_xact_callback, NULL);
	RegisterSubXactCallback(rg_guard_subxact_callback, NULL);
}
