/*-------------------------------------------------------------------------
 *
 * token.c
 *		Tokens for the gates: the timeline and end of this session's last
 *		commit record (the write token), reported to the client with the
 *		COMMIT itself as the run-time parameter
 *		replica_gate.last_commit_token, and the position that covers
 *		everything this session's reads on this node could have seen (the
 *		read token, for monotonic reads across replicas).  Both also as
 *		plain, timeline-blind LSNs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/pg_lsn.h"

#include "commit_wait.h"
#include "target.h"
#include "token.h"

#define RG_TOKEN_GUC "replica_gate.last_commit_token"

PG_FUNCTION_INFO_V1(rg_last_commit_lsn);
PG_FUNCTION_INFO_V1(rg_last_commit_token);
PG_FUNCTION_INFO_V1(rg_seen_lsn);
PG_FUNCTION_INFO_V1(rg_seen_token);

/*
 * End of the commit record of this session's last write transaction, and
 * the timeline it was written on.
 */
static XLogRecPtr rg_last_commit = InvalidXLogRecPtr;
static TimeLineID rg_last_commit_tli = 0;

/*
 * The reported parameter.  GUC owns its first value (empty); after the
 * first commit it points to rg_token_buf, which we write ourselves.
 */
static char *rg_last_commit_guc = NULL;
static char rg_token_buf[64];

/* rg_token_buf changed since it was last reported to the client. */
static bool rg_token_unreported = false;

/*
 * rg_token_set
 *		Remember a commit that ended at "lsn" on this primary's timeline and
 *		publish it as replica_gate.last_commit_token.  Must not throw (it
 *		runs after the commit): problems are reported as warnings.
 */
static void
rg_token_set(XLogRecPtr lsn)
{
	if (lsn == InvalidXLogRecPtr || lsn == rg_last_commit)
		return;
	rg_last_commit = lsn;
	rg_last_commit_tli = RG_INSERT_TLI();

	/*
	 * Set the parameter and report it ourselves, as set_config_option()
	 * and the GUC_REPORT machinery would: they would parse and copy the
	 * value, and look through every setting to find the one to report.
	 * Nothing else sets a PGC_INTERNAL parameter, RESET and DISCARD leave
	 * it alone, and SHOW reads the variable.  It is reported just before
	 * the first message after the commit (ack.c), after the commit wait.
	 */
	strlcpy(rg_token_buf, rg_token_text(rg_last_commit_tli, rg_last_commit),
			sizeof(rg_token_buf));
	rg_last_commit_guc = rg_token_buf;
	rg_token_unreported = true;
}

/*
 * rg_token_report
 *		Send the client the token of the commits since the last message, if
 *		any: called before each message a client session sends (ack.c).
 *		ParameterStatus may arrive at any time; this one goes out with the
 *		COMMIT's response.
 */
void
rg_token_report(void)
{
	StringInfoData msg;

	if (!rg_token_unreported)
		return;
	rg_token_unreported = false;

	/*
	 * Only to a client, as GUC reporting would: other processes can send
	 * "remotely" too (a parallel apply worker of logical replication writes
	 * to its leader through a queue, which refuses this message), and 13's
	 * protocol 2 has no ParameterStatus.
	 */
	if (whereToSendOutput != DestRemote || !rg_client_session() ||
		!RG_CLIENT_HAS_PARAMETER_STATUS())
		return;
	pq_beginmessage(&msg, 'S');	/* ParameterStatus */
	pq_sendstring(&msg, RG_TOKEN_GUC);
	pq_sendstring(&msg, rg_token_buf);
	pq_endmessage(&msg);
}

/*
 * rg_token_xact_callback
 *		After a commit that wrote a commit record, take its end as the token.
 *
 * A transaction without an xid writes no commit record: core may still move
 * XactLastCommitEnd for it (to the end of a pruning record, say), which is
 * why we keep our own copy.
 */
static void
rg_token_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT &&
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
		rg_token_set(XactLastCommitEnd);
}

/* Does this utility statement commit another transaction? */
static bool
rg_token_commits_prepared(Node *parsetree)
{
	return IsA(parsetree, TransactionStmt) &&
		((TransactionStmt *) parsetree)->kind == TRANS_STMT_COMMIT_PREPARED;
}

/*
 * rg_token_utility_start
 *		Called before a utility statement runs: a COMMIT PREPARED that pays
 *		is counted from before its commit record (commit_wait.c).
 */
void
rg_token_utility_start(Node *parsetree)
{
	if (rg_token_commits_prepared(parsetree))
		rg_commit_wait_expect(true);
}

/*
 * rg_token_utility_done
 *		Called after a utility statement ran.  COMMIT PREPARED commits
 *		another transaction from one that has no xid of its own, so the
 *		commit callback does not see it: its commit record is the last WAL
 *		record this backend wrote.
 */
void
rg_token_utility_done(Node *parsetree)
{
	if (rg_token_commits_prepared(parsetree))
	{
		rg_token_set(XactLastRecEnd);
		rg_commit_wait_note(XactLastRecEnd);
	}
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
							   "Token of this session's last write transaction: timeline and end of its commit record.",
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
	if (XactLastCommitEnd != InvalidXLogRecPtr && !RecoveryInProgress())
	{
		rg_last_commit = XactLastCommitEnd;
		rg_last_commit_tli = RG_INSERT_TLI();
	}
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
 * last_commit_token() returns text: NULL before this session's first write.
 */
Datum
rg_last_commit_token(PG_FUNCTION_ARGS)
{
	if (rg_last_commit == InvalidXLogRecPtr)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(rg_token_text(rg_last_commit_tli,
												   rg_last_commit)));
}

/*
 * rg_seen_position
 *		A position that covers everything this session's reads on this node
 *		could have seen so far, and its timeline.  On a standby that is the
 *		end of the record being replayed (a snapshot sees replayed WAL, and
 *		a commit in the middle of its redo); on a primary the position a
 *		question's answer gives (every commit a snapshot can see was
 *		inserted before it; never past a page header a standby cannot
 *		report, and flushed, so that a standby gets it now).
 */
static XLogRecPtr
rg_seen_position(TimeLineID *tli)
{
	if (RecoveryInProgress())
		return rg_standby_visible_position(tli);
	return rg_primary_position(tli);
}

/*
 * seen_lsn() returns pg_lsn: the read token as a plain LSN.  Gating the next
 * read on another replica on it keeps reads monotonic.
 */
Datum
rg_seen_lsn(PG_FUNCTION_ARGS)
{
	TimeLineID	tli;

	PG_RETURN_LSN(rg_seen_position(&tli));
}

/*
 * seen_token() returns text: the read token, with its timeline.
 */
Datum
rg_seen_token(PG_FUNCTION_ARGS)
{
	TimeLineID	tli;
	XLogRecPtr	lsn = rg_seen_position(&tli);

	PG_RETURN_TEXT_P(cstring_to_text(rg_token_text(tli, lsn)));
}
