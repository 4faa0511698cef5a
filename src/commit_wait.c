/*-------------------------------------------------------------------------
 *
 * commit_wait.c
 *		The primary's side of strong reads served without a question: a
 *		commit that wrote, in a session that pays
 *		(replica_gate.pay_commit_wait, on by default), is not acknowledged
 *		before replica_gate.commit_wait has passed since it became visible.
 *		A standby that holds an answer of the primary younger than that
 *		wait then knows it covers every paying commit acknowledged since
 *		(question.c); src/README.md has the argument.
 *
 * Who waits, and where.  A commit notes a deadline, the commit wait from
 * now, after its record was flushed and it became visible.  A client
 * session waits it out before the first message it sends after the commit
 * (ack.c), whatever that message is: a procedure's commits are waited out
 * once, by whichever message comes first, and nothing is ever charged to
 * a later statement.  A background worker (logical replication's apply
 * worker, another extension's worker) has no client of its own, but its
 * results may reach one (through a table, a queue, the session that
 * launched it): it waits at the end of each commit, once the transaction
 * has released its locks.  Other processes (autovacuum) do not pay.
 *
 * The wait is measured on the clock of rg_clock_us().  It cannot be
 * cancelled (the commit is done and cannot fail; acknowledging it early
 * would break the promise): a cancel request is dropped, as synchronous
 * replication does after its warning; a terminate request or the
 * postmaster's death end it without acknowledging the commit.  It is at
 * most replica_gate.commit_wait long, whatever the standbys do: none of
 * them is waited for.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/resowner.h"

#include "commit_wait.h"

/* replica_gate.commit_wait in milliseconds (0: off); set only where preloaded */
int			rg_commit_wait_ms = 0;
static bool rg_pay_commit_wait = true;

/* Until when (rg_clock_us) the next acknowledgement must wait; 0: none. */
static int64 rg_commit_wait_until = 0;

static uint32 rg_commit_wait_event = 0;

PG_FUNCTION_INFO_V1(rg_commit_clock);

/*
 * commit_clock() returns bigint: the clock of the commit wait, which a
 * standby's question worker compares with its own (proof.c).
 */
Datum
rg_commit_clock(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(rg_clock_us());
}

/*
 * rg_commit_wait_note
 *		This session wrote a commit record: unless it does not pay, its
 *		acknowledgement waits out replica_gate.commit_wait from now.  Called
 *		by the callback below, and by token.c for COMMIT PREPARED (which
 *		commits another transaction).  Must not throw: it runs after the
 *		commit.
 */
void
rg_commit_wait_note(void)
{
	if (rg_commit_wait_ms > 0 && rg_pay_commit_wait &&
		(rg_client_session() || MyBackendType == B_BG_WORKER))
		rg_commit_wait_until = Max(rg_commit_wait_until,
								   rg_clock_us() + rg_commit_wait_ms * (int64) 1000);
}

/*
 * rg_commit_wait_pay
 *		Wait out what the commits so far owe, without throwing.  False if
 *		the session was told to terminate (or the postmaster died) first:
 *		the commit must then never be acknowledged.  A cancel request that
 *		arrives meanwhile is dropped, and *cancelled (if not NULL) says so:
 *		the caller puts it back where a statement goes on after the wait.
 */
bool
rg_commit_wait_pay(bool *cancelled)
{
	if (rg_commit_wait_until == 0)
		return true;
	for (;;)
	{
		int64		left = rg_commit_wait_until - rg_clock_us();
		int			rc;

		if (left <= 0)
			break;
		if (ProcDiePending)
			return false;
		if (QueryCancelPending && cancelled != NULL)
			*cancelled = true;
		QueryCancelPending = false;
		/* a latch times out in whole milliseconds: sleep the rest */
		if (left < 1000)
		{
			pg_usleep(left);
			continue;
		}
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
					   (long) (left / 1000),
					   RG_WAIT_EVENT(rg_commit_wait_event, "ReplicaGateCommitWait"));
		ResetLatch(MyLatch);
		if (rc & WL_POSTMASTER_DEATH)
		{
			/* ends the session at its next interrupt check */
			ProcDiePending = true;
			InterruptPending = true;
			return false;
		}
	}
	rg_commit_wait_until = 0;
	return true;
}

/*
 * rg_commit_wait_startup
 *		In the postmaster, once shared memory exists: name the wait event
 *		now (on 17 and later that takes a lock and may fail), not in the
 *		middle of a commit or of an error report.
 */
void
rg_commit_wait_startup(void)
{
	(void) RG_WAIT_EVENT(rg_commit_wait_event, "ReplicaGateCommitWait");
}

/*
 * rg_commit_wait_xact_callback
 *		After a commit that wrote a commit record, note it.
 */
static void
rg_commit_wait_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT &&
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
		rg_commit_wait_note();
}

/*
 * rg_commit_wait_release_callback
 *		In a background worker, once a top-level commit has released its
 *		locks: wait out what it owes.  (A client session waits before its
 *		next message instead, ack.c.)
 */
static void
rg_commit_wait_release_callback(ResourceReleasePhase phase, bool isCommit,
								bool isTopLevel, void *arg)
{
	if (phase == RESOURCE_RELEASE_AFTER_LOCKS && isCommit && isTopLevel &&
		rg_commit_wait_until != 0 && !rg_client_session())
		(void) rg_commit_wait_pay(NULL);
}

/*
 * rg_commit_wait_init
 *		Define the settings and install the callback; called from _PG_init.
 *		The wait itself exists only where the library is preloaded, so that
 *		every session of the server pays it: a standby trusts the value it
 *		reads in pg_settings (question.c).
 */
void
rg_commit_wait_init(void)
{
	DefineCustomBoolVariable("replica_gate.pay_commit_wait",
							 "Whether this session's commits wait out replica_gate.commit_wait.",
							 "off: its writes are not covered by strong reads that standbys serve without asking the primary.",
							 &rg_pay_commit_wait,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("replica_gate.commit_wait",
							"How long each commit waits before it is acknowledged, so that standbys can serve strong reads without asking the primary.",
							"0 turns it off.  Set on the primary (and on every server that may become one); standbys learn it from there.",
							&rg_commit_wait_ms,
							0, 0, 1000,
							PGC_POSTMASTER,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	RegisterXactCallback(rg_commit_wait_xact_callback, NULL);
	RegisterResourceReleaseCallback(rg_commit_wait_release_callback, NULL);
}
