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
 * change the statement must see has been sent; if, after consuming what is
 * pending, the counter still has the value it had at a moment before the
 * statement was parsed (rg_replan_mark), the statement's parse analysis and
 * plan saw every change its snapshot will.  Otherwise the statement is
 * parsed, analysed, rewritten and planned again from its text, as if it had
 * arrived now.  The rule names no kind of change, so it covers every kind:
 * tables, columns, inheritance and partitions, indexes and their states,
 * functions inlined or called, types, operators, views, rules, policies,
 * names newly shadowing others in the search path.
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
#include "storage/sinval.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/inval.h"
#include "utils/portal.h"

#include "replan.h"

/*
 * SharedInvalidMessageCounter at a moment known to precede the parse
 * analysis of every top-level statement not yet started.
 */
static uint64 rg_replan_seen = 0;

/*
 * rg_replan_mark
 *		Note that no statement is being parsed now: the next one is parsed
 *		after every invalidation message consumed so far.  Called between
 *		statements (the end of a transaction, and through rg_replan_passed
 *		after a gate) and when the library is loaded.
 */
void
rg_replan_mark(void)
{
	rg_replan_seen = SharedInvalidMessageCounter;
}

/*
 * rg_replan_passed
 *		A statement passed its gate, and its plan is as new as its snapshot:
 *		statements parsed from now on see every message consumed so far.
 *		But a client of the extended protocol may bind several portals
 *		before it executes them, and the gate of one (at Bind, or at
 *		Execute) then runs after the parse analysis of another, bound
 *		before it and still ready to run: that one's plan may predate what
 *		this gate consumed, so while any portal is ready, the mark stays
 *		where it was (a cursor left open has the same effect: statements
 *		after it are planned again whenever replay changed the catalog
 *		since the mark).
 */
void
rg_replan_passed(void)
{
	if (ThereAreNoReadyPortals())
		rg_replan_mark();
}

/*
 * rg_replan_needed
 *		After a gate passed: consume the pending invalidation messages, and
 *		tell whether any was consumed since the last mark, so that the
 *		statement's plan may predate a change its snapshot will see.
 */
bool
rg_replan_needed(void)
{
	AcceptInvalidationMessages();
	return SharedInvalidMessageCounter != rg_replan_seen;
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
	RawStmt    *raw = NULL;
	ListCell   *lc;
	Oid		   *types = NULL;
	int			ntypes = 0;
	List	   *plans;
	PlannedStmt *stmt;

	/* the statement's own text, among those of its query string */
	foreach(lc, pg_parse_query(source))
	{
		if (lfirst_node(RawStmt, lc)->stmt_location == old->stmt_location)
		{
			raw = lfirst_node(RawStmt, lc);
			break;
		}
	}
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
