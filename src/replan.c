/*-------------------------------------------------------------------------
 *
 * replan.c
 *		Planning a gated statement again after its gate.  A statement of the
 *		session mode or the token floor is parsed, analysed and planned
 *		before it waits; replay may change the catalog meanwhile, and the
 *		statement must then run with a plan as new as its snapshot.
 *
 * Which changes.  Every catalog change, whatever lock it takes, reaches the
 * caches of a backend as shared invalidation messages: the startup process
 * sends those of a transaction while it replays its commit record, before
 * the replay position passes the record.  A backend consumes them
 * (AcceptInvalidationMessages) at the start of a transaction, before it
 * takes a lock, and whenever replica_gate asks; so once a gate has passed
 * its target, every change the statement must see has been sent, and the
 * gate consumes what is pending.  Consuming a message calls the callbacks
 * registered for its kind (CacheRegisterSyscacheCallback,
 * CacheRegisterRelcacheCallback) only if it is about this database or a
 * shared catalog (LocalExecuteInvalidationMessage filters on its database,
 * on 13 to 19), and calls every callback after a reset of the caches (a
 * backend that fell too far behind the message queue).  Whoever consumes
 * them, this gate, the start of a transaction or a lock, the callbacks
 * here note what matters since the last gate:
 *
 * - a relation (a relcache message, with its OID): every change to a
 *   relation's definition or to what hangs on it sends one for it, since
 *   the relation cache of every backend holds all of that (its row in
 *   pg_class, columns, indexes, constraints, rules and so views, policies,
 *   triggers, partitioning, extended statistics, a new inheritance child:
 *   its parent gets one too, even when relhassubclass was already set);
 * - a row of a catalog whose changes can change what parse analysis, rewriting
 *   or planning make of a statement without changing a relation: pg_namespace
 *   (the search path: a new schema named like $user), pg_type (see below),
 *   pg_proc (functions and aggregates: new overloads, bodies inlined,
 *   volatility, strictness, support functions), pg_operator, pg_cast,
 *   pg_collation, pg_enum (labels are constants in a plan), pg_opclass and
 *   pg_amop (the default ordering and equality of a type, the operators an
 *   index can serve), pg_authid and pg_auth_members (row security is applied
 *   while planning, for the role and its memberships), pg_ts_config and
 *   pg_ts_dict (regconfig and regdictionary constants), pg_foreign_server and
 *   pg_foreign_data_wrapper (as PostgreSQL's plan cache does).  One cache of
 *   each catalog is enough: a change of a row sends a message for every cache
 *   of its catalog.  Left out, each for a reason: the catalogs that only a
 *   relation's definition uses (above), statistics (pg_statistic: plans made
 *   without them return the same rows), and what is looked up when a statement
 *   runs, not when it is planned (conversions, languages, transforms, support
 *   procedures of operator families, sequences, user mappings), or only by DDL
 *   (access methods, tablespaces, databases, default privileges, event
 *   triggers, publications, subscriptions).
 *
 * At the gate, a relation noted matters unless the statement's plan does
 * not use it (its relationOids, which list every relation a plan depends
 * on, views and regclass constants included) and either it no longer
 * exists or it belongs to another session's temporary schema.  One that
 * no longer exists was dropped: if the statement had resolved it, its plan
 * would use it; if not, it was created after the plan was made, or its
 * name resolved to something else, and the snapshot sees nothing of it.
 * One of another session's temporary schema (on a standby, where no
 * session can create a temporary table, every temporary relation is) can
 * never be read by this session: at most it could turn a statement that
 * names that schema into an error.  Saved plans that use a relation are
 * invalidated by PostgreSQL's plan cache itself.  If anything matters, the
 * statement is parsed, analysed, rewritten and planned again from its text
 * (for one prepared by SQL PREPARE, the query the PREPARE holds), as if it
 * had arrived now, and every plan the plan cache saved is marked for the
 * same at its next use; if nothing does, every plan was made after every
 * change the snapshot will see that could alter it.
 *
 * A row of pg_type is different: its messages name it only by a hash of a
 * cache key, and the row type of a temporary table created by another
 * session (every CREATE TEMP TABLE sends them) cannot be told from a new
 * type of the search path (a CREATE DOMAIN sends nothing else) or an
 * altered one.  But a statement resolves a type by a row of pg_type only
 * where its text names one or a literal is read as a type's input (a cast,
 * a column definition list, 'name'::regtype or a literal in a list with
 * a regtype column, a one-argument call, which PostgreSQL tries as a cast
 * to the type named like the function when no function takes the argument
 * as it is, and so a field selection a.b or (x).b where b is no column),
 * where a subscript is taken (ALTER TYPE ... SET (SUBSCRIPT)), or in what
 * it calls that PostgreSQL parses or plans itself (a SQL function inlined,
 * a PL/pgSQL function's saved plans) or a domain without constraints,
 * which the planner turns into a relabelling: user functions and domains,
 * which the plan lists in its invalItems.  (A parameter of a reg* type is
 * read by its input function at Bind, before the gate, whatever this
 * decides.)  So a change of pg_type stays pending until a gate whose
 * statement may do any of that; that gate plans again (and marks every
 * saved plan), one that cannot leaves it pending for the next.  Its raw
 * parse tree is read from its text (parsed again, which costs a fraction
 * of planning) through the node types known to hold none of that; any
 * other node, a utility statement (EXECUTE, CALL, DO, EXPLAIN ANALYZE,
 * DECLARE, COPY) and a REPEATABLE READ transaction's gate at its BEGIN
 * count as doing it.
 *
 * What it costs (issue 40, item 6): catalog changes of other databases
 * nothing (temporary tables, ANALYZE, VACUUM there), nor the relations of
 * temporary tables created by other sessions of this database, nor their
 * row types for statements that name no type, take no subscript, hold no
 * string literal, select no field and call no one-argument or user
 * function (a parse of their text at the first gate after a change of
 * pg_type; such texts up to 8 kB are remembered in 16 slots by their
 * hash).  ANALYZE and VACUUM of a table of this database change its
 * pg_class row, and replan.
 *
 * The callbacks are registered at the first gate of a session, which
 * plans again whatever happened before (as does a reset of the caches):
 * callback slots are few (64 for the caches, shared with PostgreSQL, whose
 * plan cache alone takes seven, and every other library; 10 for the
 * relation cache), and only sessions that gate need them.  This takes 15
 * and one.
 *
 * A statement planned again must take the old plan's place in its portal:
 * the same kind of statement, one of it, with result columns of the same
 * types (a client may already have been told them, as PostgreSQL's plan
 * cache also requires).  Otherwise it fails with RG001, to be run again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/syscache.h"

#include "replan.h"

/*
 * The catalogs whose changes make plans stale besides relations' and
 * pg_type, by one cache each (see above).
 */
static const int rg_replan_caches[] = {
	NAMESPACEOID, PROCOID, OPEROID, CASTSOURCETARGET, COLLOID,
	ENUMOID, CLAOID, AMOPOPID, AUTHOID, AUTHMEMMEMROLE, TSCONFIGOID, TSDICTOID,
	FOREIGNSERVEROID, FOREIGNDATAWRAPPEROID
};

/*
 * Statements found to resolve no type (see rg_replan_types_matter), by the
 * hash of their text, their location in it and standard_conforming_strings
 * when they were parsed (which changes what a text parses to): a client
 * runs the same statements again and again, and comparing a text costs
 * less than parsing it.
 */
#define RG_REPLAN_TYPELESS_SLOTS 16
#define RG_REPLAN_TYPELESS_MAX_TEXT 8192	/* longer texts are not kept */

typedef struct RgReplanTypeless
{
	char	   *text;			/* in TopMemoryContext; NULL: empty slot */
	int			location;
	bool		scs;
} RgReplanTypeless;

static RgReplanTypeless rg_replan_typeless[RG_REPLAN_TYPELESS_SLOTS];

/* How many relations noted since the last gate are looked at there. */
#define RG_REPLAN_MAX_RELATIONS 64

/*
 * What the callbacks noted since the last gate: that a change matters (or
 * the callbacks are not registered yet, or more relations changed than are
 * noted), and the relations that changed, to be looked at by the gate; and
 * whether a row of pg_type changed since the last gate that planned again.
 */
static bool rg_replan_registered = false;
static bool rg_replan_stale = true;
static Oid	rg_replan_relations[RG_REPLAN_MAX_RELATIONS];
static int	rg_replan_nrelations = 0;
static bool rg_replan_types = false;

/* Syscache callback: a row of a catalog that matters changed. */
static void
rg_replan_catalog_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	rg_replan_stale = true;
}

/* Syscache callback: a row of pg_type changed. */
static void
rg_replan_type_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	rg_replan_types = true;
}

/*
 * rg_replan_relation_changed
 *		Relcache callback: note the relation, for the gate to look at
 *		(InvalidOid: every relation, after a reset of the caches).
 */
static void
rg_replan_relation_changed(Datum arg, Oid relid)
{
	if (rg_replan_stale)
		return;
	if (!OidIsValid(relid) || rg_replan_nrelations == RG_REPLAN_MAX_RELATIONS)
	{
		rg_replan_stale = true;
		return;
	}
	for (int i = 0; i < rg_replan_nrelations; i++)
		if (rg_replan_relations[i] == relid)
			return;
	rg_replan_relations[rg_replan_nrelations++] = relid;
}

/*
 * rg_replan_relations_matter
 *		Can a change of any of the "n" relations "relids" change the plan of
 *		"stmt" (NULL: no statement) or of a saved plan?  Not of one the plan
 *		does not use that no longer exists or belongs to another session's
 *		temporary schema.  pg_class is scanned, not searched through its
 *		cache: a miss there would leave a negative entry for every relation
 *		created and dropped since, kept until a reset of the caches.
 */
static bool
rg_replan_relations_matter(const Oid *relids, int n, const PlannedStmt *stmt)
{
	Relation	rel = NULL;
	bool		matters = false;

	for (int i = 0; i < n && !matters; i++)
	{
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tuple;

		if (stmt != NULL && list_member_oid(stmt->relationOids, relids[i]))
			matters = true;
		else
		{
			if (rel == NULL)
				rel = table_open(RelationRelationId, AccessShareLock);
			ScanKeyInit(&key, Anum_pg_class_oid, BTEqualStrategyNumber,
						F_OIDEQ, ObjectIdGetDatum(relids[i]));
			scan = systable_beginscan(rel, ClassOidIndexId, true, NULL, 1, &key);
			tuple = systable_getnext(scan);
			if (HeapTupleIsValid(tuple))
			{
				Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);

				matters = !(form->relpersistence == RELPERSISTENCE_TEMP &&
							!isTempOrTempToastNamespace(form->relnamespace));
			}
			systable_endscan(scan);
		}
	}
	if (rel != NULL)
		table_close(rel, AccessShareLock);
	return matters;
}

/*
 * rg_replan_register
 *		Register the callbacks, at the first gate of the session.
 */
static void
rg_replan_register(void)
{
	for (int i = 0; i < lengthof(rg_replan_caches); i++)
		CacheRegisterSyscacheCallback(rg_replan_caches[i],
									  rg_replan_catalog_changed, (Datum) 0);
	CacheRegisterSyscacheCallback(TYPEOID, rg_replan_type_changed, (Datum) 0);
	CacheRegisterRelcacheCallback(rg_replan_relation_changed, (Datum) 0);
	rg_replan_registered = true;
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
 * rg_replan_type_walker
 *		Raw parse tree walker: can "node" resolve a type by a row of pg_type
 *		(see above)?  Only the node types below are known to hold nothing
 *		that does but their subnodes, which raw_expression_tree_walker
 *		visits; any other node may.
 */
static bool
rg_replan_type_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_A_Const:
			/* a literal may be read as a type's name ('name'::regtype) */
			return nodeTag(&((A_Const *) node)->val) == T_String;
		case T_FuncCall:
			/* one argument: perhaps a cast to the type named like it */
			if (list_length(((FuncCall *) node)->args) == 1)
				return true;
			break;
		case T_ColumnRef:
			/* a.b, if b is no column of a, is b(a): a call of one argument */
			if (list_length(((ColumnRef *) node)->fields) > 1 &&
				IsA(llast(((ColumnRef *) node)->fields), String))
				return true;
			break;
		case T_A_Indirection:
			/* (x).b likewise */
			{
				ListCell   *lc;

				foreach(lc, ((A_Indirection *) node)->indirection)
					if (IsA(lfirst(lc), String))
						return true;
			}
			break;
		case T_CommonTableExpr:
			/* its CYCLE clause's values are not walked */
			if (RG_CTE_HAS_CYCLE((CommonTableExpr *) node))
				return true;
			break;
		case T_List:
		case T_SelectStmt:
		case T_ResTarget:
		case T_ParamRef:
		case T_A_Star:
		case T_Integer:
		case T_Float:
		case T_String:
		case T_A_Expr:
		case T_BoolExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_SubLink:
		case T_CaseExpr:
		case T_RowExpr:
		case T_CoalesceExpr:
		case T_MinMaxExpr:
		case T_A_ArrayExpr:
		case T_NamedArgExpr:
		case T_SQLValueFunction:
		case T_CollateClause:
		case T_SortBy:
		case T_WindowDef:
		case T_GroupingSet:
		case T_GroupingFunc:
		case T_LockingClause:
		case T_WithClause:
		case T_RangeVar:
		case T_Alias:
		case T_JoinExpr:
		case T_RangeSubselect:
		case T_RangeFunction:
			break;
		default:
			/* a type name, a subscript, anything else */
			return true;
	}
	return raw_expression_tree_walker(node, rg_replan_type_walker, context);
}

/*
 * rg_replan_types_matter
 *		Can a change of pg_type change the plan of "stmt" (NULL: no
 *		statement), planned from "source", or of a saved plan it runs?
 */
static bool
rg_replan_types_matter(const PlannedStmt *stmt, const char *source)
{
	RgReplanTypeless *slot;
	RawStmt    *raw;
	size_t		len;
	char	   *text;

	if (stmt == NULL || source == NULL || stmt->commandType == CMD_UTILITY ||
		stmt->invalItems != NIL)
		return true;
	len = strlen(source);
	slot = &rg_replan_typeless[(hash_bytes((const unsigned char *) source,
										   len) ^ stmt->stmt_location) %
							   RG_REPLAN_TYPELESS_SLOTS];
	if (slot->text != NULL && slot->location == stmt->stmt_location &&
		slot->scs == RG_STANDARD_CONFORMING_STRINGS &&
		strcmp(slot->text, source) == 0)
		return false;
	raw = rg_replan_raw(source, stmt);
	if (raw == NULL || rg_replan_type_walker(raw->stmt, NULL))
		return true;
	if (len > RG_REPLAN_TYPELESS_MAX_TEXT)
		return false;
	text = MemoryContextStrdup(TopMemoryContext, source);
	if (slot->text != NULL)
		pfree(slot->text);
	slot->text = text;
	slot->location = stmt->stmt_location;
	slot->scs = RG_STANDARD_CONFORMING_STRINGS;
	return false;
}

/*
 * rg_replan_needed
 *		After a gate passed: consume the pending invalidation messages, and
 *		tell whether a change that matters to the plan of "stmt", planned
 *		from "source" (NULL: no statement yet, a REPEATABLE READ
 *		transaction's gate at its BEGIN), was consumed since the last gate
 *		(of pg_type: since the last that planned again), so that the plan
 *		may predate a change its snapshot will see.  If so, every plan the
 *		plan cache saved (prepared statements, the unnamed statement, plans
 *		of functions) may predate it as well: mark them all invalid, so that
 *		each is analysed and planned again at its next use.  The plan cache
 *		itself re-checks a saved plan against the objects it uses, not
 *		against what its parse analysis resolved: a new overload of a
 *		function it calls, a table newly shadowing one it reads in the
 *		search path.
 */
bool
rg_replan_needed(const PlannedStmt *stmt, const char *source)
{
	bool		stale = false;

	if (!rg_replan_registered)
		rg_replan_register();
	AcceptInvalidationMessages();

	/*
	 * Looking a relation up may consume more messages (it locks pg_class):
	 * look until nothing new was noted.
	 */
	while (rg_replan_stale || rg_replan_nrelations > 0)
	{
		Oid			relations[RG_REPLAN_MAX_RELATIONS];
		int			n = rg_replan_nrelations;

		stale |= rg_replan_stale;
		memcpy(relations, rg_replan_relations, n * sizeof(Oid));
		rg_replan_stale = false;
		rg_replan_nrelations = 0;
		if (stale)
			continue;
		PG_TRY();
		{
			stale = rg_replan_relations_matter(relations, n, stmt);
		}
		PG_CATCH();
		{
			/* what was noted is forgotten: the next gate plans again */
			rg_replan_stale = true;
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	if (!stale && rg_replan_types)
		stale = rg_replan_types_matter(stmt, source);
	if (stale)
	{
		ereport(DEBUG1,
				(errmsg_internal("replica_gate: replay changed the catalog before the gate: planning again")));
		rg_replan_types = false;
		ResetPlanCache();
	}
	return stale;
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
