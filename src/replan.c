/*-------------------------------------------------------------------------
 *
 * replan.c
 *		Planning a gated statement again after its gate.  A statement of the
 *		session mode or the token floor is parsed, analysed and planned
 *		before it waits; replay may change the catalog meanwhile, and the
 *		statement must then run with a plan as new as its snapshot.
 *
 * The rule.  Every catalog change, whatever lock it takes, reaches the
 * caches of a backend as shared invalidation messages: the startup process
 * sends those of a transaction while it replays its commit record, before
 * the replay position passes the record.  A backend consumes them
 * (AcceptInvalidationMessages) at the start of a transaction, before it
 * takes a lock, and whenever replica_gate asks, and counts each in
 * SharedInvalidMessageCounter.  So once a gate has passed its target, every
 * change the statement must see has been sent.  A gate consumes what is
 * pending and compares the counter with its value after the last gate: if
 * it moved, whoever consumed them (this gate, the start of a transaction,
 * a lock), the statement is parsed, analysed, rewritten and planned again
 * from its text (for one prepared by SQL PREPARE, the query the PREPARE
 * holds), as if it had arrived now, and every plan the plan cache saved is
 * marked for the same at its next use; if it did not, every plan was made
 * after every change the snapshot will see.  The rule names no
 * kind of change, so it covers every kind: tables, columns, inheritance
 * and partitions, indexes and their states, functions inlined or called,
 * new overloads, types, operators, views, rules, policies, names newly
 * shadowing others in the search path.
 *
 * A statement planned again must take the old plan's place in its portal:
 * the same kind of statement, one of it, with result columns of the same
 * types (a client may already have been told them, as PostgreSQL's plan
 * cache also requires).  Otherwise it fails with RG001, to be run again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "storage/sinval.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/inval.h"
#include "utils/plancache.h"

#include "replan.h"

/*
 * SharedInvalidMessageCounter after the last gate that checked it: every
 * message consumed since has not yet been answered by a replan.  The
 * counter starts at 0 in every backend, so before the first gate (even in
 * a session that loads the library late) every message it ever consumed
 * is unanswered.
 */
static uint64 rg_replan_seen = 0;

/*
 * rg_replan_needed
 *		After a gate passed: consume the pending invalidation messages, and
 *		tell whether any was consumed since the last gate, so that the
 *		statement's plan may predate a change its snapshot will see.  If
 *		so, every plan the plan cache saved (prepared statements, the
 *		unnamed statement, plans of functions) may predate it as well: mark
 *		them all invalid, so that each is analysed and planned again at its
 *		next use.  The plan cache itself re-checks a saved plan against the
 *		objects it uses, not against what its parse analysis resolved: a
 *		new overload of a function it calls, a table newly shadowing one it
 *		reads in the search path.
 */
bool
rg_replan_needed(void)
{
	AcceptInvalidationMessages();
	if (SharedInvalidMessageCounter == rg_replan_seen)
		return false;
	rg_replan_seen = SharedInvalidMessageCounter;
	ResetPlanCache();
	return true;
}

/* The statement could not be planned again in its old plan's place. */
static void
rg_replan_refuse(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_RG_REPLICA_BEHIND),
			 errmsg("the statement changed while it waited for replay"),
			 errdetail_internal("%s", detail),
			 errhint("Run the statement again.")));
}

/*
 * rg_replan_same_desc
 *		Do two result descriptors (either may be NULL: no result) have the
 *		same number of columns, of the same types?
 */
static bool
rg_replan_same_desc(TupleDesc a, TupleDesc b)
{
	if (a == NULL || b == NULL)
		return a == b;
	if (a->natts != b->natts)
		return false;
	for (int i = 0; i < a->natts; i++)
		if (TupleDescAttr(a, i)->atttypid != TupleDescAttr(b, i)->atttypid ||
			TupleDescAttr(a, i)->atttypmod != TupleDescAttr(b, i)->atttypmod)
			return false;
	return true;
}

/*
 * rg_replan_result
 *		The result columns of a planned statement, as its portal gives them
 *		to the client.
 */
static TupleDesc
rg_replan_result(const PlannedStmt *stmt)
{
	if (stmt->commandType == CMD_UTILITY)
		return UtilityTupleDescriptor(stmt->utilityStmt);
	return ExecCleanTypeFromTL(stmt->planTree->targetlist);
}

/*
 * rg_replan_raw
 *		The raw parse tree of the statement "old" planned from "source":
 *		that of the statement of the query string that starts where old
 *		does, or NULL.  A statement prepared by SQL PREPARE has the whole
 *		PREPARE command for its query string (its CachedPlanSource's
 *		query_string); the raw parse tree the plan cache analyses again is
 *		the query the PREPARE holds, wrapped in a RawStmt with the PREPARE's
 *		location (PrepareQuery), and so is the one returned here.  (A
 *		PREPARE itself is never gated: it reads nothing.)
 */
static RawStmt *
rg_replan_raw(const char *source, const PlannedStmt *old)
{
	ListCell   *lc;

	foreach(lc, pg_parse_query(source))
	{
		RawStmt    *raw = lfirst_node(RawStmt, lc);
		RawStmt    *inner;

		if (raw->stmt_location != old->stmt_location)
			continue;
		if (!IsA(raw->stmt, PrepareStmt))
			return raw;
		inner = makeNode(RawStmt);
		inner->stmt = ((PrepareStmt *) raw->stmt)->query;
		inner->stmt_location = raw->stmt_location;
		inner->stmt_len = raw->stmt_len;
		return inner;
	}
	return NULL;
}

/*
 * rg_replan
 *		Parse, analyse, rewrite and plan again the statement "old" planned
 *		from "source", with the types of "params" for its parameters, and
 *		return the new plan, which takes the old one's place; RG001 if it
 *		cannot.  The caller has pushed the snapshot to plan with.
 */
PlannedStmt *
rg_replan(const char *source, const PlannedStmt *old, ParamListInfo params,
		  QueryEnvironment *queryEnv, int cursor_options)
{
	RawStmt    *raw;
	Oid		   *types = NULL;
	int			ntypes = 0;
	List	   *plans;
	PlannedStmt *stmt;

	raw = rg_replan_raw(source, old);
	if (raw == NULL)
		rg_replan_refuse("Its text could not be found in its query string.");

	/* parameters keep the types they were bound with */
	if (params != NULL && params->numParams > 0)
	{
		if (params->paramFetch != NULL)
			rg_replan_refuse("Its parameters are fetched on demand.");
		ntypes = params->numParams;
		types = palloc(ntypes * sizeof(Oid));
		for (int i = 0; i < ntypes; i++)
			types[i] = params->params[i].ptype;
	}

	plans = pg_plan_queries(RG_ANALYZE_AND_REWRITE(raw, source, types, ntypes,
												   queryEnv),
							source, cursor_options, params);
	if (list_length(plans) != 1)
		rg_replan_refuse("It is now rewritten into another number of statements.");
	stmt = linitial_node(PlannedStmt, plans);
	if (stmt->commandType != old->commandType ||
		stmt->canSetTag != old->canSetTag ||
		stmt->hasReturning != old->hasReturning ||
		stmt->hasModifyingCTE != old->hasModifyingCTE ||
		(stmt->commandType == CMD_UTILITY &&
		 nodeTag(stmt->utilityStmt) != nodeTag(old->utilityStmt)))
		rg_replan_refuse("It is now another kind of statement.");
	if (!rg_replan_same_desc(rg_replan_result(old), rg_replan_result(stmt)))
		rg_replan_refuse("Its result columns changed.");
	return stmt;
}
