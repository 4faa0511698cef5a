/*-------------------------------------------------------------------------
 *
 * target.c
 *		What a gate waits for: a plain LSN, or a token that carries the
 *		timeline of the write with its LSN.  Parsing both from text, and
 *		checking a token against this server's timeline history, so that a
 *		write lost in a failover is reported as lost, never as caught up.
 *
 * A token reads "<timeline>:<lsn>", for example "2:0/3000148": the LSN
 * printed as this server's pg_lsn output prints it, the timeline in decimal.
 * The colon makes it impossible to mistake for a plain LSN.  A plain LSN is
 * timeline-blind: after a failover, WAL of the new timeline reaches the same
 * number whether or not it contains the write.
 *
 * Also where this standby is, in each wait mode, to compare with a target,
 * and how far what its snapshots can see may reach.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/timeline.h"
#include "access/xlog_internal.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "replication/walreceiver.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"

#include "target.h"

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
 * rg_token_text
 *		The text form of the token (tli, lsn).
 */
char *
rg_token_text(TimeLineID tli, XLogRecPtr lsn)
{
	return psprintf("%u:%s", tli, rg_lsn_text(lsn));
}

/*
 * rg_target_text
 *		A target as a gate takes it: the token, or the plain LSN.
 */
char *
rg_target_text(const RgTarget *target)
{
	if (target->primary)
		return pstrdup("primary");
	if (target->tli == 0)
		return rg_lsn_text(target->lsn);
	return rg_token_text(target->tli, target->lsn);
}

/*
 * rg_target_scan
 *		Parse a gate's target, a token, a plain LSN or 'primary', into
 *		*target (tli 0 for a plain LSN); false if malformed.
 */
bool
rg_target_scan(const char *text, RgTarget *target)
{
	const char *colon = strchr(text, ':');
	const char *lsn_text = text;
	bool		bad = false;

	target->tli = 0;
	target->lsn = InvalidXLogRecPtr;
	target->answer = false;
	target->primary = (pg_strcasecmp(text, "primary") == 0);
	if (target->primary)
		return true;
	if (colon != NULL)
	{
		size_t		digits = strspn(text, "0123456789");
		unsigned long tli;

		errno = 0;
		tli = strtoul(text, NULL, 10);
		bad = digits == 0 || text + digits != colon || errno != 0 ||
			tli == 0 || tli > PG_UINT32_MAX;
		target->tli = (TimeLineID) tli;
		lsn_text = colon + 1;
	}
	if (!bad)
		target->lsn = rg_lsn_in(lsn_text, &bad);
	return !bad;
}

/*
 * rg_target_parse
 *		rg_target_scan, with malformed text an error.
 */
void
rg_target_parse(const char *text, RgTarget *target)
{
	if (!rg_target_scan(text, target))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for a replica_gate token: \"%s\"", text),
				 text[0] == '\0' ?
				 errhint("To gate on no write, pass NULL.") :
				 errhint("A gate takes a token \"<timeline>:<lsn>\", a plain LSN or \"primary\".")));
}

/*
 * rg_timeline_end
 *		Where timeline "target_tli" ended in the history of timeline "tli";
 *		false if it is not in that history.  A timeline's history never
 *		changes once the timeline exists, so the answer of the last lookup is
 *		kept: a waiting gate re-checks every 100 ms without re-reading the
 *		history file.
 */
static bool
rg_timeline_end(TimeLineID target_tli, TimeLineID tli, XLogRecPtr *end)
{
	static TimeLineID cached_tli = 0;
	static TimeLineID cached_target_tli = 0;
	static bool cached_found = false;
	static XLogRecPtr cached_end = InvalidXLogRecPtr;

	if (cached_tli != tli || cached_target_tli != target_tli)
	{
		List	   *history = readTimeLineHistory(tli);
		ListCell   *lc;
		bool		found = false;
		XLogRecPtr	found_end = InvalidXLogRecPtr;

		foreach(lc, history)
		{
			TimeLineHistoryEntry *entry = (TimeLineHistoryEntry *) lfirst(lc);

			if (entry->tli == target_tli)
			{
				found = true;
				found_end = entry->end;
				break;
			}
		}
		list_free_deep(history);

		/* only now: an error above must not leave a half-updated cache */
		cached_found = found;
		cached_end = found_end;
		cached_tli = tli;
		cached_target_tli = target_tli;
	}
	*end = cached_end;
	return cached_found;
}

/*
 * rg_target_reached
 *		Has a server at "position" on timeline "tli" reached "target"?
 *
 * A plain LSN, or a token of timeline "tli", compares LSNs.  A token of an
 * older timeline counts only if that timeline is in this server's history
 * and was left after the token's LSN; if it was left before, the write is
 * not part of this server's history: RG002, at once, whatever the timeout.
 * A token of a newer timeline is not reached yet on a standby, which may
 * still follow that timeline; a primary never will (RG003), nor does any
 * server reach a timeline missing from its history (RG003).  The answer to
 * a strong read's question is no write of the client's: where this
 * server's history excludes it, the read could not be gated (RG001).
 */
bool
rg_target_reached(const RgTarget *target, XLogRecPtr position,
				  TimeLineID tli, bool in_recovery)
{
	XLogRecPtr	end;

	Assert(!target->primary);
	if (target->tli == 0 || target->tli == tli)
		return position >= target->lsn;

	if (target->answer &&
		(target->tli > tli ? !in_recovery :
		 (!rg_timeline_end(target->tli, tli, &end) || target->lsn > end)))
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("the primary's position %s is not in the history of this server",
						rg_token_text(target->tli, target->lsn)),
				 errdetail("The primary this standby asked was replaced in a failover, and this server, on timeline %u, will never replay that position.",
						   tli),
				 errhint("Run the read again: it asks the new primary.")));

	if (target->tli > tli)
	{
		if (in_recovery)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_RG_UNKNOWN_TIMELINE),
				 errmsg("timeline %u of token %s is newer than this server's timeline %u",
						target->tli, rg_token_text(target->tli, target->lsn), tli),
				 errdetail("This server is not in recovery: it will never follow that timeline."),
				 errhint("The token comes from another primary; route the read there.")));
	}

	if (!rg_timeline_end(target->tli, tli, &end))
		ereport(ERROR,
				(errcode(ERRCODE_RG_UNKNOWN_TIMELINE),
				 errmsg("timeline %u of token %s is not in the history of this server",
						target->tli, rg_token_text(target->tli, target->lsn)),
				 errdetail("This server is on timeline %u.", tli),
				 errhint("The token comes from another cluster, or from a server whose history diverged from this one.")));
	if (target->lsn > end)
		ereport(ERROR,
				(errcode(ERRCODE_RG_WRITE_LOST),
				 errmsg("write of token %s was lost in a failover",
						rg_token_text(target->tli, target->lsn)),
				 errdetail("In the history of this server, timeline %u ended at %s, before the write; timeline %u does not contain it.",
						   target->tli, rg_lsn_text(end), tli),
				 errhint("Tell the user the write was lost, or redo it; waiting or reading elsewhere will not bring it back.")));
	return position >= target->lsn;
}

/*
 * rg_primary_position
 *		On a primary: a position that covers every commit whose COMMIT has
 *		returned, and its timeline; the answer to a strong read's question.
 *
 * The flush position misses commits made with synchronous_commit = off,
 * whose COMMIT returns before their record is flushed (and so before it
 * can be sent).  The insert position covers them, but when the last record
 * ended at a page boundary it points past the next page's header, which
 * replay never reports: back off to the boundary, the end of that record.
 * Then flush up to there, so that the WAL is sent now rather than when the
 * WAL writer gets to it (it may never, on an idle primary, for WAL that
 * holds no commit).
 */
XLogRecPtr
rg_primary_position(TimeLineID *tli)
{
	XLogRecPtr	position = GetXLogInsertRecPtr();
	uint64		in_segment = XLogSegmentOffset(position, wal_segment_size);

	if (in_segment == SizeOfXLogLongPHD)
		position -= SizeOfXLogLongPHD;
	else if (position % XLOG_BLCKSZ == SizeOfXLogShortPHD && in_segment > XLOG_BLCKSZ)
		position -= SizeOfXLogShortPHD;
	XLogFlush(position);
	*tli = RG_INSERT_TLI();
	return position;
}

/*
 * rg_standby_position
 *		How far this standby is in "mode", and on which timeline: the replay
 *		position, or what the walreceiver has written or flushed.  WAL up to
 *		the replay position is on disk here whatever brought it (archive,
 *		pg_wal, an earlier stream), so it is the floor of the other two, as
 *		for core's WAIT FOR.  "tli" may be NULL.
 *
 * Two received positions do not count.  The written one, until the current
 * stream has flushed something: a walreceiver that follows a timeline
 * switch on the same connection resets the flushed position to the new
 * stream's start, with the new timeline, but keeps the written one, which
 * may lie on the old timeline past the switch until the new stream writes.
 * And every received position once recovery has ended: WAL received but
 * not replayed is not part of this server's history after promotion.
 */
XLogRecPtr
rg_standby_position(RgWaitMode mode, TimeLineID *tli)
{
	WalRcvData *walrcv = WalRcv;
	TimeLineID	replay_tli;
	TimeLineID	received_tli;
	XLogRecPtr	replayed = GetXLogReplayRecPtr(&replay_tli);
	XLogRecPtr	received;
	XLogRecPtr	stream_start;

	if (mode != RG_MODE_REPLAY)
	{
		/*
		 * The written position first: one written after a timeline switch
		 * that happens between the two reads would otherwise be paired with
		 * the old timeline.
		 */
		XLogRecPtr	written = GetWalRcvWriteRecPtr();

		pg_read_barrier();
		SpinLockAcquire(&walrcv->mutex);
		received = walrcv->flushedUpto;
		received_tli = walrcv->receivedTLI;
		stream_start = walrcv->receiveStart;
		SpinLockRelease(&walrcv->mutex);
		if (mode == RG_MODE_WRITE && received > stream_start)
			received = Max(received, written);

		/* read after the positions: they were this standby's then */
		if (received > replayed && RecoveryInProgress())
		{
			if (tli)
				*tli = received_tli;
			return received;
		}
	}
	if (tli)
		*tli = replay_tli;
	return replayed;
}

#ifndef RG_HAVE_CURRENT_REPLAY_PTR
/*
 * rg_startup_between_records
 *		Is the startup process asleep where it cannot be inside the redo of
 *		a commit record: waiting for WAL, for its apply delay, paused, or
 *		waiting out a recovery conflict (which only other records cause)?
 */
static bool
rg_startup_between_records(void)
{
	volatile PGPROC *startup = ProcGlobal->startupProc;
	uint32		event;

	if (startup == NULL)
		return false;
	event = startup->wait_event_info;
	return event == WAIT_EVENT_RECOVERY_WAL_STREAM ||
		event == WAIT_EVENT_RECOVERY_RETRIEVE_RETRY_INTERVAL ||
		event == WAIT_EVENT_RECOVERY_APPLY_DELAY ||
		event == WAIT_EVENT_RECOVERY_PAUSE ||
		rg_replay_conflict_event(event);
}
#endif

/*
 * rg_standby_visible_position
 *		A position on this standby that covers every commit a snapshot taken
 *		before the call can see, and its timeline.
 *
 * The replay position does not: a commit becomes visible during its redo,
 * before the replay position moves past its record (the redo of a commit
 * that drops relations unlinks their files in between).  The end of the
 * record being replayed does.  13 and 14 do not export that, so wait
 * (milliseconds, the rest of one record's redo) until the replay position
 * moves, which it does at the end of the record replayed at the call, or
 * until the startup process is seen asleep between records; the replay
 * position read after either covers it.
 */
XLogRecPtr
rg_standby_visible_position(TimeLineID *tli)
{
#ifdef RG_HAVE_CURRENT_REPLAY_PTR
	return GetCurrentReplayRecPtr(tli);
#else
	XLogRecPtr	start = GetXLogReplayRecPtr(tli);

	for (;;)
	{
		bool		between = rg_startup_between_records();
		XLogRecPtr	now;

		pg_read_barrier();		/* the position read after the wait event */
		now = GetXLogReplayRecPtr(tli);

		if (between || now != start || !RecoveryInProgress())
			return now;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
#endif
}
