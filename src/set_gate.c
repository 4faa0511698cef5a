/*-------------------------------------------------------------------------
 *
 * set_gate.c
 *		The snapshot-free gate: SET [LOCAL] replica_gate.require_lsn = '<token>'
 *		waits for replay of <token> (or of a plain LSN) before the SET
 *		completes.  Its ProcessUtility hook also tells the write token about
 *		statements that commit (session.c installs another).
 *
 * A function call always runs inside a statement that holds a snapshot, and
 * on a standby a held snapshot can block the very replay the wait is for (a
 * recovery conflict on a cleanup record).  SET is a utility statement that
 * takes no snapshot, so a ProcessUtility hook can wait there.  As the first
 * statement of a REPEATABLE READ transaction it also runs before the
 * transaction snapshot is taken.  It must be the first statement of its
 * transaction: earlier statements hold locks, and possibly the transaction
 * snapshot, that replay can conflict with.  On timeout it raises the same error as
 * require_lsn(), so the SET does not take effect; on success SHOW returns the
 * LSN the session last gated on (until the value is reset or, with LOCAL,
 * the transaction ends).
 *
 * The parameter can only be given a value by that SET statement: set_config(),
 * ALTER ROLE/DATABASE SET, a function's SET clause, postgresql.conf and
 * connection options are refused by the check hook, because none of them
 * wait.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "gate.h"
#include "guard.h"
#include "set_gate.h"
#include "target.h"
#include "token.h"

#define RG_GATE_GUC "replica_gate.require_lsn"

static char *rg_require_lsn_guc = NULL;

/* True only while our hook applies a SET it has waited for. */
static bool rg_gate_passed = false;

/* True while the parameter is being defined (the library is loading). */
static bool rg_gate_defining = false;

static ProcessUtility_hook_type rg_prev_utility_hook = NULL;

/*
 * rg_check_gate_guc
 *		GUC check hook: only the empty value, or a value whose wait our
 *		utility hook completed, may be set.
 */
static bool
rg_check_gate_guc(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	/* A parallel worker copies the leader's settings. */
	if (rg_gate_passed || InitializingParallelWorker)
		return true;

	/*
	 * Defining the parameter while a value set before the library was
	 * loaded is pending: that SET only made a placeholder and did not wait.
	 * Say so, drop the value, and make the next gate of the session fail.
	 */
	if (rg_gate_defining)
	{
		rg_gate_note_missed_set();
		GUC_check_errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
		GUC_check_errmsg("SET %s ran before replica_gate was loaded in this session, and did not wait",
						 RG_GATE_GUC);
		GUC_check_errdetail("The reads after it were not gated. The next gate of this session will fail.");
		GUC_check_errhint("Add replica_gate to shared_preload_libraries on this server.");
		return false;
	}
	GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
	GUC_check_errmsg("parameter \"%s\" can only be set by a SET statement",
					 RG_GATE_GUC);
	GUC_check_errdetail("Only a SET statement waits for the LSN to be replayed.");
	return false;
}

/*
 * rg_set_gate_wait
 *		Validate the SET's value, check that nothing of ours can hold back
 *		replay, and wait.
 */
static void
rg_set_gate_wait(VariableSetStmt *stmt)
{
	char	   *value = ExtractSetVariableArgs(stmt);
	RgTarget	target;

	rg_gate_check_missed_set();
	if (value == NULL || value[0] == '\0')
		return;
	rg_target_parse(value, &target);

	/* Inside a function, procedure or DO block: its snapshot stays held. */
	if (ActiveSnapshotSet())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("SET %s cannot wait inside a function, procedure or DO block",
						RG_GATE_GUC),
				 errdetail("The snapshot held there can block the replay being waited for."),
				 errhint("Run the SET as a top-level statement, or call replica_gate.require_lsn() instead.")));

	/*
	 * After earlier statements of the transaction, their locks (and, in
	 * REPEATABLE READ, the transaction snapshot, which could never see the
	 * write) are still held: replay of a conflicting record would wait for
	 * us while we wait for it.
	 */
	if (FirstSnapshotSet)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("SET %s must be the first statement of its transaction",
						RG_GATE_GUC),
				 errdetail("Earlier statements of the transaction hold locks or a snapshot that can block the replay being waited for."),
				 errhint("Run the SET before any query of the transaction, or outside a transaction block.")));

	/*
	 * A catalog snapshot left by an earlier statement can go; anything that
	 * still holds back our xmin (an open cursor, say) cannot.
	 */
	InvalidateCatalogSnapshot();
	if (TransactionIdIsValid(RG_MY_XMIN))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("SET %s cannot wait while this session holds a snapshot",
						RG_GATE_GUC),
				 errdetail("A snapshot held during the wait can block the replay being waited for.")));

	rg_gate_require(&target, RG_MODE_REPLAY, rg_gate_timeout(true, 0), NULL);
}

/* Hand a utility statement to the next hook, or to core. */
static void
rg_utility_next(RG_UTILITY_ARGS)
{
	if (rg_prev_utility_hook)
		rg_prev_utility_hook(RG_UTILITY_PASS);
	else
		standard_ProcessUtility(RG_UTILITY_PASS);
}

/*
 * rg_utility_hook
 *		Make SET replica_gate.require_lsn wait; pass everything on, and let
 *		the write token see the statements that commit (COMMIT PREPARED).
 */
static void
rg_utility_hook(RG_UTILITY_ARGS)
{
	Node	   *parsetree = pstmt->utilityStmt;
	bool		save_passed = rg_gate_passed;

	rg_guard_utility(parsetree);
	if (!(IsA(parsetree, VariableSetStmt) &&
		  ((VariableSetStmt *) parsetree)->kind == VAR_SET_VALUE &&
		  pg_strcasecmp(((VariableSetStmt *) parsetree)->name, RG_GATE_GUC) == 0))
	{
		rg_token_utility_start(parsetree);
		rg_utility_next(RG_UTILITY_PASS);
		rg_token_utility_done(parsetree);
		return;
	}

	rg_set_gate_wait((VariableSetStmt *) parsetree);

	/* The wait passed: let the check hook accept the value. */
	rg_gate_passed = true;
	PG_TRY();
	{
		rg_utility_next(RG_UTILITY_PASS);
	}
	PG_FINALLY();
	{
		rg_gate_passed = save_passed;
	}
	PG_END_TRY();
}

/*
 * rg_set_gate_init
 *		Define the parameter and install the hook; called from _PG_init.
 */
void
rg_set_gate_init(void)
{
	rg_gate_defining = true;
	DefineCustomStringVariable(RG_GATE_GUC,
							   "Waits for replay of this LSN when SET; shows the LSN last gated on.",
							   "SET [LOCAL] replica_gate.require_lsn = '<lsn>' waits without holding a snapshot, up to replica_gate.default_timeout.",
							   &rg_require_lsn_guc,
							   "",
							   PGC_USERSET,
							   GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							   rg_check_gate_guc,
							   NULL,
							   NULL);
	rg_gate_defining = false;

	rg_prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = rg_utility_hook;
}
