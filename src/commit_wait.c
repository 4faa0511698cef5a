/*-------------------------------------------------------------------------
 *
 * commit_wait.c
 *		The primary's side of strong reads served without a question: a
 *		commit that wrote, in a session that pays
 *		(replica_gate.pay_commit_wait, on by default), is not acknowledged
 *		before every standby that holds a lease (lease.c) has applied it,
 *		or its lease has expired; never later than replica_gate.commit_wait
 *		(W) after it became visible.  A standby holding a lease knows that
 *		its answer, while younger than W, covers every paying commit
 *		acknowledged since (question.c, proof.c); src/README.md has the
 *		argument.
 *
 * Who waits, and where.  A commit notes when it became visible and where
 * its record ends.  A client session waits before the first message it
 * sends after the commit (ack.c), whatever that message is: a procedure's
 * commits are waited out once, by whichever message comes first, and
 * nothing is ever charged to a later statement.  A background worker
 * (logical replication's apply worker, another extension's worker) has no
 * client of its own, but its results may reach one (through a table, a
 * queue, the session that launched it): it waits at the end of each
 * commit, once the transaction has released its locks.  Other processes
 * (autovacuum) do not pay.
 *
 * Each paying commit is counted in the lease table from before its commit
 * record (XACT_EVENT_PRE_COMMIT; before COMMIT PREPARED) until it is
 * released, so that a strong read on this primary, which may see it
 * before it is acknowledged, knows to wait (rg_commit_wait_read).  One
 * that will never be acknowledged (its session told to terminate while it
 * waits, or gone, or a COMMIT PREPARED that failed, perhaps after its
 * commit) leaves the count with W more in which such reads wait.  (A
 * transaction that takes its xid only after XACT_EVENT_PRE_COMMIT, for a
 * NOTIFY or an ON COMMIT action on a temporary table, is counted from its
 * commit on: it changed nothing another session reads.)
 *
 * The wait is measured on the clock of rg_clock_us().  A commit that is
 * not released at its first look sleeps on its latch until the lease
 * waker wakes it (lease_waker.c), or looks every RG_COMMIT_WAIT_POLL_US on
 * its own where no waker runs.  One made with synchronous_commit = off
 * first flushes its record, which no standby can apply before.  It cannot
 * be cancelled (the commit is done and cannot fail; acknowledging it early
 * would break the promise): a cancel request is dropped, as synchronous
 * replication does after its warning; a terminate request or the
 * postmaster's death end it without acknowledging the commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "commit_wait.h"
#include "lease.h"
#include "lease_waker.h"
#include "settings.h"
#include "target.h"

/* How often a waiting commit looks on its own where no lease waker runs. */
#define RG_COMMIT_WAIT_POLL_US	200

static bool rg_pay_commit_wait = true;

/*
 * What the next acknowledgement owes: the first paying commit since the
 * last acknowledgement became visible at "visible" (rg_clock_us; 0: nothing
 * is owed), the last one ends at "lsn" and became visible W before "until".
 */
static int64 rg_commit_wait_visible = 0;
static XLogRecPtr rg_commit_wait_lsn = InvalidXLogRecPtr;
static int64 rg_commit_wait_until = 0;

/*
 * Paying commits of this session counted in the lease table and not yet
 * released (rg_lease_paying); whether the last of them is still to write
 * its commit record, and whether it is a COMMIT PREPARED's.
 */
static int	rg_commit_wait_counted = 0;
static bool rg_commit_wait_expecting = false;
static bool rg_commit_wait_prepared = false;

static uint32 rg_commit_wait_event = 0;
static uint32 rg_commit_wait_read_event = 0;

/* Room for a look at the lease table, made before a wait that must not throw. */
static RgLeaseView *rg_commit_wait_view = NULL;

PG_FUNCTION_INFO_V1(rg_commit_clock);
PG_FUNCTION_INFO_V1(rg_grant_lease);

/*
 * commit_clock() of 0.5.0: the clock a standby of that version reads in its
 * question, after the position, and no lease is recorded for it.  Its
 * answers would serve strong reads that no commit waits for: refused, so
 * that such a standby fails its strong reads until the primary's extension
 * is updated (0.6.0 drops the function: the standby then asks for each).
 */
Datum
rg_commit_clock(PG_FUNCTION_ARGS)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("replica_gate.commit_clock() is no longer supported"),
			 errdetail("The standby asking runs an older replica_gate than this primary, whose commits wait only for standbys that hold a lease."),
			 errhint("Run ALTER EXTENSION replica_gate UPDATE on the primary, and update replica_gate on the standby.")));
	PG_RETURN_NULL();
}

/*
 * grant_lease(sender_pid integer, sender_start timestamptz) returns (token
 * text, commit_clock bigint, granted boolean): a standby's question.
 * Grants the WAL sender process "sender_pid" started at "sender_start" (as
 * the standby identified it: upstream.c) a lease of
 * replica_gate.commit_wait if the caller is the standby it streams to and
 * that standby may have one (lease.c), and only then reads the primary's
 * position (g4): a paying commit that becomes visible after the lease was
 * recorded waits for it; one visible before is covered by the position.
 * With the position, the clock of the commit wait, for the standby's check
 * of the clocks (proof.c).  Anyone else gets the position, as from
 * primary_token(), and no lease.  grant_lease(sender_pid) of 0.6.0, which
 * the question of a standby whose library predates 0.7.0 calls, names no
 * process: it grants nothing (such a standby asks for every strong read).
 */
Datum
rg_grant_lease(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	RgTarget	target = {0};
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	bool		granted;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("leases are granted only by a primary")));
	granted = PG_NARGS() == 2 && !PG_ARGISNULL(0) && !PG_ARGISNULL(1) &&
		rg_lease_grant(PG_GETARG_INT32(0), PG_GETARG_TIMESTAMPTZ(1),
					   rg_commit_wait_ms * (int64) 1000);
	target.lsn = rg_primary_position(&target.tli);
	values[0] = CStringGetTextDatum(rg_target_text(&target));
	values[1] = Int64GetDatum(rg_clock_us());
	values[2] = BoolGetDatum(granted);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc),
													  values, nulls)));
}

/* Does this session's commit pay, if it wrote? */
static bool
rg_commit_wait_paying(void)
{
	return rg_commit_wait_ms > 0 && rg_pay_commit_wait &&
		(rg_client_session() || MyBackendType == B_BG_WORKER);
}

/*
 * rg_commit_wait_abandon
 *		This session's counted commits will never be released: leave the
 *		count, with W more in which a strong read may see one pending.  Must
 *		not throw.
 */
static void
rg_commit_wait_abandon(void)
{
	rg_lease_paying(-rg_commit_wait_counted,
					rg_clock_us() + rg_commit_wait_ms * (int64) 1000);
	rg_commit_wait_counted = 0;
	rg_commit_wait_expecting = false;
	rg_commit_wait_visible = 0;
	rg_commit_wait_lsn = InvalidXLogRecPtr;
	rg_commit_wait_until = 0;
}

/* before_shmem_exit callback: what this session owes, it never pays. */
static void
rg_commit_wait_exit(int code, Datum arg)
{
	if (rg_commit_wait_counted > 0)
		rg_commit_wait_abandon();
}

/*
 * rg_commit_wait_expect
 *		c1: a commit of this session that wrote is about to write its commit
 *		record ("prepared": COMMIT PREPARED's, of another transaction): if
 *		it pays, count it from now on.
 */
void
rg_commit_wait_expect(bool prepared)
{
	static bool exit_set = false;

	if (!rg_commit_wait_paying())
		return;
	if (!exit_set)
	{
		rg_commit_wait_view = rg_lease_view_create();
		before_shmem_exit(rg_commit_wait_exit, (Datum) 0);
		exit_set = true;
	}
	rg_lease_paying(1, 0);
	rg_commit_wait_counted++;
	rg_commit_wait_expecting = true;
	rg_commit_wait_prepared = prepared;
}

/*
 * rg_commit_wait_note
 *		c4: this session wrote a commit record ending at "lsn", and the
 *		commit is visible: unless the session does not pay, its
 *		acknowledgement waits for the lease holders.  Called by the callback
 *		below, and by token.c for COMMIT PREPARED (which commits another
 *		transaction).  Must not throw: it runs after the commit.
 */
void
rg_commit_wait_note(XLogRecPtr lsn)
{
	int64		now;

	if (rg_commit_wait_expecting)
		rg_commit_wait_expecting = false;
	else if (rg_commit_wait_paying())
	{
		/* its xid came after XACT_EVENT_PRE_COMMIT (file header) */
		rg_lease_paying(1, 0);
		rg_commit_wait_counted++;
	}
	else
		return;
	now = rg_clock_us();
	rg_lease_note_commit(now);
	if (rg_commit_wait_visible == 0)
		rg_commit_wait_visible = now;
	rg_commit_wait_lsn = Max(rg_commit_wait_lsn, lsn);
	rg_commit_wait_until = now + rg_commit_wait_ms * (int64) 1000;
}

/*
 * rg_commit_wait_released
 *		c5: is what a commit ending at "lsn", visible at "visible", waits
 *		for released at *now (read here)?  At "until" it is.
 */
static bool
rg_commit_wait_released(XLogRecPtr lsn, int64 visible, int64 until,
						int64 *now)
{
	int64		wait_us = rg_commit_wait_ms * (int64) 1000;
	int64		next;
	bool		reporting;

	*now = rg_clock_us();
	/* the waker's verdict on one look at the table, as good as our own */
	if (rg_waker_released())
		return true;
	rg_lease_look(rg_commit_wait_view, wait_us, *now);
	return rg_lease_view_released(rg_commit_wait_view, lsn, visible, until,
								  wait_us, *now, &next, &reporting);
}

/*
 * rg_commit_wait_sleep
 *		Sleep until the lease waker wakes us (lease_waker.c), at most until
 *		"until"; where no waker runs, for the next look of our own.  The
 *		latch is reset before the caller looks again.
 */
static void
rg_commit_wait_sleep(XLogRecPtr lsn, int64 visible, int64 until, int64 now,
					 uint32 event)
{
	if (rg_waker_link(lsn, visible, until))
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
						 Max((until - now + 999) / 1000, 1), event);
	else
	{
		pgstat_report_wait_start(event);
		pg_usleep(Max(Min(until - now, RG_COMMIT_WAIT_POLL_US), 0));
		pgstat_report_wait_end();
	}
	ResetLatch(MyLatch);
}

/*
 * rg_commit_wait_pay
 *		c5 to c7: wait until what the commits so far owe is released
 *		(lease.c), at most until W after the last of them, without
 *		throwing.  False if the session was told to terminate (or the
 *		postmaster died) first: the commit must then never be acknowledged.
 *		A cancel request that arrives meanwhile is dropped, and *cancelled
 *		(if not NULL) says so: the caller puts it back where a statement
 *		goes on after the wait.
 *
 * Several commits owed (a procedure's) are checked as one, visible at the
 * first's moment and ending at the last's record: a lease that was live at
 * any of them counts, which is at most waiting for one more holder.
 */
bool
rg_commit_wait_pay(bool *cancelled)
{
	int64		now;
	bool		flushed = false;

	if (rg_commit_wait_visible == 0)
		return true;
	while (!rg_commit_wait_released(rg_commit_wait_lsn, rg_commit_wait_visible,
									rg_commit_wait_until, &now))
	{
		/*
		 * A commit made with synchronous_commit = off is visible before its
		 * record is flushed, and no standby can apply it before: flush it
		 * now, as a synchronous commit would have, rather than wait for the
		 * WAL writer (wal_writer_delay).  (Its position is below the insert
		 * position: XLogFlush() cannot fail here but by a PANIC.)
		 */
		if (!flushed)
		{
			if (XLogNeedsFlush(rg_commit_wait_lsn))
				XLogFlush(rg_commit_wait_lsn);
			flushed = true;
			continue;
		}
		if (ProcDiePending || !PostmasterIsAlive())
		{
			/* ends the session at its next interrupt check */
			ProcDiePending = true;
			InterruptPending = true;
			rg_waker_unlink();
			rg_commit_wait_abandon();
			return false;
		}
		if (QueryCancelPending && cancelled != NULL)
			*cancelled = true;
		QueryCancelPending = false;
		rg_commit_wait_sleep(rg_commit_wait_lsn, rg_commit_wait_visible,
							 rg_commit_wait_until, now,
							 RG_WAIT_EVENT(rg_commit_wait_event,
										   "ReplicaGateCommitWait"));
	}
	rg_waker_unlink();
	/* c7, for the commits noted: not for one still to write its record */
	rg_lease_paying(-(rg_commit_wait_counted - rg_commit_wait_expecting), 0);
	rg_commit_wait_counted = rg_commit_wait_expecting;
	rg_commit_wait_visible = 0;
	rg_commit_wait_lsn = InvalidXLogRecPtr;
	rg_commit_wait_until = 0;
	return true;
}

/*
 * rg_commit_wait_read
 *		p1 to p4: a statement of the session mode 'strong' on this primary
 *		has taken its snapshot, which may see paying commits not yet
 *		acknowledged: wait until they are released as their acknowledgement
 *		is, at most W.  Else a read of it on a standby that applied it could
 *		be told to another client, whose strong read on a standby holding
 *		a lease, which has not applied it yet, would miss it; a standby's
 *		strong read sees what a strong read on the primary saw before it
 *		began, as it sees what was acknowledged.  The position waited for
 *		is read after the snapshot (rg_lease_read_owed's barrier), so it
 *		covers every commit the snapshot sees.  Nothing to wait for (no
 *		paying commit pending, none abandoned, the table W old) costs a
 *		read of the clock and of three shared counters.  The wait can be
 *		cancelled, as any statement (the abort unlinks it).
 */
void
rg_commit_wait_read(void)
{
	int64		wait_us = rg_commit_wait_ms * (int64) 1000;
	int64		visible;
	int64		now;
	XLogRecPtr	lsn;
	TimeLineID	tli;

	if (wait_us <= 0 || !rg_lease_read_owed(wait_us, &visible))
		return;
	if (rg_commit_wait_view == NULL)
		rg_commit_wait_view = rg_lease_view_create();
	lsn = rg_primary_position(&tli);
	while (!rg_commit_wait_released(lsn, visible, visible + wait_us, &now))
	{
		CHECK_FOR_INTERRUPTS();
		if (!PostmasterIsAlive())
			proc_exit(1);
		rg_commit_wait_sleep(lsn, visible, visible + wait_us, now,
							 RG_WAIT_EVENT(rg_commit_wait_read_event,
										   "ReplicaGateStrongRead"));
	}
	rg_waker_unlink();
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
	(void) RG_WAIT_EVENT(rg_commit_wait_read_event, "ReplicaGateStrongRead");
}

/*
 * rg_commit_wait_aborted
 *		A transaction aborted: a strong read's wait cancelled is over, and a
 *		commit counted before its record was never visible, unless it was
 *		COMMIT PREPARED's, which may fail after its commit.
 */
static void
rg_commit_wait_aborted(void)
{
	rg_waker_unlink();
	if (rg_commit_wait_expecting)
	{
		rg_commit_wait_expecting = false;
		rg_commit_wait_counted--;
		rg_lease_paying(-1, rg_commit_wait_prepared ?
						rg_clock_us() + rg_commit_wait_ms * (int64) 1000 : 0);
	}
}

/*
 * rg_commit_wait_xact_callback
 *		Before a commit that wrote writes its commit record, count it; after
 *		it, note it.  A transaction that aborts instead was never visible,
 *		but a COMMIT PREPARED may fail after its commit.
 */
static void
rg_commit_wait_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_COMMIT &&
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
		rg_commit_wait_expect(false);
	else if (event == XACT_EVENT_COMMIT &&
			 TransactionIdIsValid(GetTopTransactionIdIfAny()))
		rg_commit_wait_note(XactLastCommitEnd);
	else if (event == XACT_EVENT_ABORT)
		rg_commit_wait_aborted();
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
		rg_commit_wait_visible != 0 && !rg_client_session())
		(void) rg_commit_wait_pay(NULL);
}

/*
 * rg_commit_wait_init
 *		Define the setting of the sessions and install the callbacks; called
 *		from _PG_init.  The wait itself exists only where the library is
 *		preloaded (replica_gate.commit_wait, settings.c).
 */
void
rg_commit_wait_init(void)
{
	DefineCustomBoolVariable("replica_gate.pay_commit_wait",
							 "Whether this session's commits wait for the standbys that serve strong reads without asking.",
							 "off: its writes are not covered by strong reads that standbys serve without asking the primary.",
							 &rg_pay_commit_wait,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	RegisterXactCallback(rg_commit_wait_xact_callback, NULL);
	RegisterResourceReleaseCallback(rg_commit_wait_release_callback, NULL);
}
