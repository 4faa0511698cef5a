/*-------------------------------------------------------------------------
 *
 * token.c
 *		Tokens for the gates: the end of this session's last commit record
 *		(the write token), reported to the client with the COMMIT itself as
 *		the run-time parameter replica_gate.last_commit_lsn, and the LSN that
 *		covers everything this session's reads on this node could have seen
 *		(the read token, for monotonic reads across replicas).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/pg_lsn.h"

#include "replica_gate.h"

#define RG_TOKEN_GUC "replica_gate.last_commit_lsn"

PG_FUNCTION_INFO_V1(rg_last_commit_lsn);
PG_FUNCTION_INFO_V1(rg_seen_lsn);

/* End of the commit record of the last transaction that had an xid. */
static XLogRecPtr rg_last_commit = InvalidXLogRecPtr;

/* Backing store of the reported parameter; set only by us. */
static char *rg_last_commit_guc = NULL;

/*
 * rg_token_xact_callback
 *		After a commit that wrote a commit record, remember where it ended and
 *		publish it as replica_gate.last_commit_lsn.
 *
 * A transaction without an xid writes no commit record: core may still move
 * XactLastCommitEnd for it (to the end of a pruning record, say), which is
 * why we keep our own copy.  Runs after the commit is durable-or-async as
 * configured, so it must not throw: problems are reported as warnings.
 */
static void
rg_token_xact_callback(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_COMMIT ||
		!TransactionIdIsValid(GetTopTransactionIdIfAny()) ||
		XactLastCommitEnd == InvalidXLogRecPtr ||
		XactLastCommitEnd == rg_last_commit)
		return;

	rg_last_commit = XactLastCommitEnd;

	/*
	 * The parameter carries GUC_REPORT: setting it queues a ParameterStatus
	 * message that goes out before ReadyForQuery (at once on 13).
	 */
	(void) set_config_option(RG_TOKEN_GUC, rg_lsn_text(rg_last_commit),
							 PGC_INTERNAL, PGC_S_OVERRIDE,
							 GUC_ACTION_SET, true, WARNING, false);
}

/*
 * rg_lsn_text
 *		An LSN as text, exactly as this server's pg_lsn output prints it
 *		(%X/%X before 19, %X/%08X from 19 on), in tokens and messages alike.
 */
char *
rg_lsn_text(XLogRecPtr lsn)
{
	return DatumGetCString(DirectFunctionCall1(pg_lsn_out, LSNGetDatum(lsn)));
}

/*
 * rg_token_init
 *		Define the reported parameter and start tracking commits; called from
 *		_PG_init.
 */
void
rg_token_init(void)
{
	DefineCustomStringVariable(RG_TOKEN_GUC,
							   "End of the commit record of this session's last write transaction.",
							   "Reported to the client after every commit that changes it.",
							   &rg_last_commit_guc,
							   "",
							   PGC_INTERNAL,
							   GUC_REPORT | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							   NULL, NULL, NULL);
	RegisterXactCallback(rg_token_xact_callback, NULL);

	/*
	 * Loaded in the middle of a session (no preload), commits made before
	 * were not seen by the callback.  Core's own record is at or after the
	 * end of the last commit record, so it is a safe, if possibly late,
	 * start: a missing token would let a gate pass too early.
	 */
	rg_last_commit = XactLastCommitEnd;
}

/*
 * last_commit_lsn() returns pg_lsn: NULL before this session's first write.
 */
Datum
rg_last_commit_lsn(PG_FUNCTION_ARGS)
{
	if (rg_last_commit == InvalidXLogRecPtr)
		PG_RETURN_NULL();
	PG_RETURN_LSN(rg_last_commit);
}

/*
 * seen_lsn() returns pg_lsn: an LSN that covers everything this session's
 * reads on this node could have seen so far.  On a standby that is the
 * replay position (a snapshot only sees replayed WAL); on a primary the WAL
 * insert position (every commit a snapshot can see was inserted before it).
 * Gating the next read on another replica on it keeps reads monotonic.
 */
Datum
rg_seen_lsn(PG_FUNCTION_ARGS)
{
	if (RecoveryInProgress())
		PG_RETURN_LSN(GetXLogReplayRecPtr(NULL));
	PG_RETURN_LSN(GetXLogInsertRecPtr());
}
