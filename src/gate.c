/*-------------------------------------------------------------------------
 *
 * gate.c
 *		The LSN gates: caught_up, wait_for_lsn and require_lsn, and what
 *		every gate shares: the checks of its arguments, the snapshot rules
 *		that make a successful gate mean "the next statement sees the
 *		write", and its errors, one complete message per case.  The waiting
 *		itself is wait.c's.
 *
 * Each gate function takes its target as a pg_lsn (timeline-blind) or as
 * text, which may be a token "<timeline>:<lsn>" (checked against this
 * server's timeline history, see target.c), a plain LSN, or 'primary': the
 * primary's position when the gate begins, which a standby learns by asking
 * the primary (question.c) within the gate's timeout, then waits for as
 * for a token (a strong read).  A NULL target
 * means "no write to wait for": the gates pass at once.  A NULL timeout
 * means replica_gate.default_timeout.  The optional mode says what to wait
 * for on a standby: 'replay' (the default; the only mode that makes the
 * write visible to reads), 'write' or 'flush'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "gate.h"
#include "proof.h"
#include "question.h"
#include "settings.h"
#include "stats.h"
#include "target.h"
#include "wait.h"

PG_FUNCTION_INFO_V1(rg_caught_up);
PG_FUNCTION_INFO_V1(rg_caught_up_text);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_sql);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_text);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_mode);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_text_mode);
PG_FUNCTION_INFO_V1(rg_require_lsn_sql);
PG_FUNCTION_INFO_V1(rg_require_lsn_text);
PG_FUNCTION_INFO_V1(rg_require_lsn_mode);
PG_FUNCTION_INFO_V1(rg_require_lsn_text_mode);
PG_FUNCTION_INFO_V1(rg_primary_token);

/*
 * A SET replica_gate.require_lsn ran in this session before the library
 * was loaded: it did not wait, and the next gate of the session must fail
 * (see set_gate.c).
 */
static bool rg_gate_missed = false;

/*
 * The last timeout rg_gate_timeout() cut to replica_gate.max_timeout, and
 * the one asked for (-1: the last was not cut), so that a gate that times
 * out says so.
 */
static int	rg_gate_cut_to = -1;
static int	rg_gate_cut_from = -1;

/*
 * rg_gate_timeout
 *		The timeout a gate uses: NULL means replica_gate.default_timeout, and
 *		every wait is capped by replica_gate.max_timeout (the error of a gate
 *		that then times out names it: rg_gate_timeout_hint).
 */
int
rg_gate_timeout(bool isnull, int32 timeout_ms)
{
	int			timeout = isnull ? rg_default_timeout : timeout_ms;

	if (timeout < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"timeout_ms\" must not be negative")));
	if (timeout <= rg_max_timeout)
	{
		rg_gate_cut_to = -1;
		return timeout;
	}
	rg_gate_cut_to = rg_max_timeout;
	rg_gate_cut_from = timeout;
	return rg_max_timeout;
}

/*
 * rg_gate_timeout_hint
 *		The hint of a gate that timed out after "timeout_ms": where that was
 *		a longer timeout cut to replica_gate.max_timeout, waiting longer
 *		needs a higher max_timeout, and the hint says so.
 */
static int
rg_gate_timeout_hint(int timeout_ms)
{
	if (rg_gate_cut_to >= 0 && timeout_ms == rg_gate_cut_to)
		return errhint("Run the read on the primary. The timeout asked for, %d ms, was cut to replica_gate.max_timeout (%d ms); a superuser can raise it.",
					   rg_gate_cut_from, rg_gate_cut_to);
	return errhint("Run the read on the primary, or wait longer.");
}

/*
 * rg_gate_note_missed_set
 *		Remember that a SET of replica_gate.require_lsn did not wait.
 */
void
rg_gate_note_missed_set(void)
{
	rg_gate_missed = true;
}

/*
 * rg_gate_check_missed_set
 *		Fail the first gate after a SET of the parameter that did not wait:
 *		the application believes its reads since then were gated.  Every
 *		gate calls this first, even with nothing to wait for.
 */
void
rg_gate_check_missed_set(void)
{
	if (!rg_gate_missed)
		return;
	rg_gate_missed = false;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("an earlier SET replica_gate.require_lsn in this session did not wait"),
			 errdetail("It ran before replica_gate was loaded in this session, so the reads after it were not gated."),
			 errhint("Load replica_gate at session start: add it to shared_preload_libraries on this server, or to the role's local_preload_libraries; clients can check for the parameter replica_gate.version, reported at connection start where it is loaded.")));
}

/*
 * rg_gate_check_snapshot
 *		Refuse to gate once a REPEATABLE READ or SERIALIZABLE transaction has
 *		taken its snapshot: that snapshot predates the wait and can never see
 *		the write, so reporting success would be a lie.
 */
void
rg_gate_check_snapshot(const char *gate_name)
{
	if (IsolationUsesXactSnapshot() && FirstSnapshotSet)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s() cannot be used after the transaction snapshot was taken",
						gate_name),
				 errdetail("A REPEATABLE READ or SERIALIZABLE transaction reads from the snapshot of its first statement, which cannot see data replayed later."),
				 errhint("Gate before BEGIN, or make SET LOCAL replica_gate.require_lsn = '...' the first statement of the transaction.")));
}

/*
 * rg_gate_on_primary
 *		A gate on a server that is not in recovery: everything up to the WAL
 *		insert position exists, and a target beyond it cannot be a token of
 *		this server.  The write and flush modes promise the WAL is on disk
 *		here: flush it.
 */
static void
rg_gate_on_primary(const RgTarget *target, RgWaitMode mode)
{
	XLogRecPtr	insert = GetXLogInsertRecPtr();

	if (!rg_target_reached(target, insert, RG_INSERT_TLI(), false))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target %s is beyond the WAL insert position %s of this server",
						rg_target_text(target), rg_lsn_text(insert)),
				 errdetail("This server is not in recovery, and it has written WAL only up to its insert position."),
				 errhint("Use a token taken from this server, or gate on a standby of it.")));
	if (mode != RG_MODE_REPLAY)
		XLogFlush(target->lsn);
	rg_stats_count(RG_WAIT_REACHED, 0);
}

/*
 * rg_gate_ask_primary
 *		Make target 'primary' the primary's position, learned on a standby by
 *		a question (question.c) within *timeout_ms, which is lowered by the
 *		time the question took.  RG_WAIT_REACHED once *target is a token;
 *		otherwise how the question ended (*why set for RG_WAIT_NO_ANSWER).
 */
static RgWaitResult
rg_gate_ask_primary(RgTarget *target, int *timeout_ms, RgGuard *guard,
					RgQuestionFailure *why)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   *timeout_ms);
	RgTarget	answer;

	switch (rg_question_ask(deadline, guard, &answer, why))
	{
		case RG_ASK_ANSWERED:
			*target = answer;
			target->answer = true;
			*timeout_ms = (int) Max((deadline - GetCurrentTimestamp()) / 1000, 0);
			return RG_WAIT_REACHED;
		case RG_ASK_FAILED:
			return RG_WAIT_NO_ANSWER;
		case RG_ASK_TIMEOUT:
			return RG_WAIT_TIMEOUT;
		case RG_ASK_GAVE_WAY:
			return RG_WAIT_GAVE_WAY;
	}
	pg_unreachable();
}

/*
 * rg_gate_wait
 *		Gate on "target": on a primary at once, on a standby through the wait
 *		loop, within timeout_ms; a target 'primary' is first made the
 *		primary's position (in place, on a standby), and with "check_once"
 *		the time left after that question is not waited.  Raises the error
 *		of a wait that recovery's end cut short.
 */
static RgWaitResult
rg_gate_wait(RgTarget *target, RgWaitMode mode, int timeout_ms, bool check_once,
			 RgGuard *guard, XLogRecPtr *position, RgQuestionFailure *why)
{
	RgWaitResult result;
	const char *t;
	const char *p;

	if (!RecoveryInProgress())
	{
		if (target->primary)
			rg_stats_count(RG_WAIT_REACHED, 0);
		else
			rg_gate_on_primary(target, mode);
		return RG_WAIT_REACHED;
	}
	if (target->primary &&
		(result = rg_gate_ask_primary(target, &timeout_ms, guard, why)) != RG_WAIT_REACHED)
	{
		*position = rg_standby_position(mode, NULL);
		rg_stats_count(result, 0);
		return result;
	}
	result = rg_wait_for_target(target, mode, check_once ? 0 : timeout_ms,
								guard, position);
	if (result != RG_WAIT_NOT_IN_RECOVERY)
		return result;

	t = rg_target_text(target);
	p = rg_lsn_text(*position);
	switch (mode)
	{
		case RG_MODE_REPLAY:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("recovery is not in progress"),
					 errdetail("Recovery ended before target %s was replayed; the last replayed LSN is %s.",
							   t, p)));
			break;
		case RG_MODE_WRITE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("recovery is not in progress"),
					 errdetail("Recovery ended before target %s was written; the last written LSN is %s.",
							   t, p)));
			break;
		case RG_MODE_FLUSH:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("recovery is not in progress"),
					 errdetail("Recovery ended before target %s was flushed; the last flushed LSN is %s.",
							   t, p)));
			break;
	}
	pg_unreachable();
}

/*
 * rg_gate_no_answer
 *		Raise RG001 for a question that brought no answer, saying why.
 */
static void
rg_gate_no_answer(RgQuestionFailure why)
{
	switch (why)
	{
		case RG_QUESTION_NO_WORKER:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("The replica_gate question worker does not run on this standby."),
					 errhint("Add replica_gate to shared_preload_libraries on this standby and restart it; run the read on the primary meanwhile.")));
			break;
		case RG_QUESTION_BAD_CONNINFO:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("primary_conninfo or replica_gate.primary_conninfo cannot be parsed."),
					 errhint("Run the read on the primary.")));
			break;
		case RG_QUESTION_CONNECT:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("This standby could not connect to the primary; its server log says why."),
					 errhint("Run the read on the primary.")));
			break;
		case RG_QUESTION_LOST:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("The primary did not answer in time, or the connection to it was lost."),
					 errhint("Run the read on the primary.")));
			break;
		case RG_QUESTION_REFUSED:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("The primary refused the question; this standby's server log says why."),
					 errhint("The question needs the extension in the database it connects to on the primary: primary_conninfo's dbname, replica_gate.primary_conninfo's, or postgres.")));
			break;
		case RG_QUESTION_STANDBY:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("The server asked is in recovery: this standby streams from another standby."),
					 errhint("Set replica_gate.primary_conninfo on this standby to reach the primary, or run the read on the primary.")));
			break;
		case RG_QUESTION_OTHER_SYSTEM:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("The server asked belongs to another database system."),
					 errhint("Check primary_conninfo and replica_gate.primary_conninfo; run the read on the primary.")));
			break;
		case RG_QUESTION_OLD_TIMELINE:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("The server asked is on an older timeline than this standby: it is not the primary this standby follows."),
					 errhint("Check primary_conninfo and replica_gate.primary_conninfo; run the read on the primary.")));
			break;
		case RG_QUESTION_RECOVERY_ENDED:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("could not learn the primary's position"),
					 errdetail("This server left recovery while the question was asked."),
					 errhint("Run the read again.")));
			break;
	}
}

/*
 * rg_gate_position_detail
 *		The detail of a gate that timed out: where this standby is ("p", in
 *		the wait's mode), and, for a token of a timeline this standby has
 *		not reached, which timeline it is on.
 */
static int
rg_gate_position_detail(const RgTarget *target, RgWaitMode mode, const char *p)
{
	TimeLineID	tli = 0;

	if (target->tli != 0)
		(void) rg_standby_position(mode, &tli);
	if (target->tli > tli && tli != 0)
	{
		switch (mode)
		{
			case RG_MODE_REPLAY:
				return errdetail("This standby is on timeline %u, not yet on the target's timeline %u; the last replayed LSN is %s.",
								 tli, target->tli, p);
			case RG_MODE_WRITE:
				return errdetail("This standby is on timeline %u, not yet on the target's timeline %u; the last written LSN is %s.",
								 tli, target->tli, p);
			case RG_MODE_FLUSH:
				return errdetail("This standby is on timeline %u, not yet on the target's timeline %u; the last flushed LSN is %s.",
								 tli, target->tli, p);
		}
	}
	switch (mode)
	{
		case RG_MODE_REPLAY:
			return errdetail("The last replayed LSN is %s.", p);
		case RG_MODE_WRITE:
			return errdetail("The last written LSN is %s.", p);
		case RG_MODE_FLUSH:
			break;
	}
	return errdetail("The last flushed LSN is %s.", p);
}

/*
 * rg_gate_raise
 *		Raise the error of a gate whose wait ended with "result" (not
 *		reached): RG001, with one complete message per case.
 */
static void
rg_gate_raise(const RgTarget *target, RgWaitMode mode, int timeout_ms,
			  RgWaitResult result, XLogRecPtr position, RgQuestionFailure why)
{
	const char *t = rg_target_text(target);
	const char *p = rg_lsn_text(position);

	if (result == RG_WAIT_NO_ANSWER)
		rg_gate_no_answer(why);
	if (result == RG_WAIT_GAVE_WAY)
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("gate on target %s gave way to replay", t),
				 errdetail("Replay on this standby was waiting on a recovery conflict that the snapshot, locks or buffer pins of the gate's statement could cause."),
				 errhint("Call the gate as a statement of its own, first in its transaction, or use SET replica_gate.require_lsn; otherwise run the read on the primary.")));
	if (target->primary)
		ereport(ERROR,
				(errcode(ERRCODE_RG_REPLICA_BEHIND),
				 errmsg("timed out after %d ms waiting for the primary's position",
						timeout_ms),
				 errdetail("The primary did not answer this standby's question in time."),
				 rg_gate_timeout_hint(timeout_ms)));
	switch (mode)
	{
		case RG_MODE_REPLAY:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("timed out after %d ms waiting for target %s to be replayed",
							timeout_ms, t),
					 rg_gate_position_detail(target, mode, p),
					 rg_gate_timeout_hint(timeout_ms)));
			break;
		case RG_MODE_WRITE:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("timed out after %d ms waiting for target %s to be written",
							timeout_ms, t),
					 rg_gate_position_detail(target, mode, p),
					 rg_gate_timeout_hint(timeout_ms)));
			break;
		case RG_MODE_FLUSH:
			ereport(ERROR,
					(errcode(ERRCODE_RG_REPLICA_BEHIND),
					 errmsg("timed out after %d ms waiting for target %s to be flushed",
							timeout_ms, t),
					 rg_gate_position_detail(target, mode, p),
					 rg_gate_timeout_hint(timeout_ms)));
			break;
	}
}

/*
 * rg_gate_require
 *		rg_gate_wait, raising RG001 unless the target was reached.  The SET
 *		form (no guard: it holds no snapshot) and require_lsn() use it.
 */
void
rg_gate_require(const RgTarget *target, RgWaitMode mode, int timeout_ms,
				RgGuard *guard)
{
	RgTarget	resolved = *target;
	XLogRecPtr	position;
	RgQuestionFailure why;
	RgWaitResult result = rg_gate_wait(&resolved, mode, timeout_ms, false,
									   guard, &position, &why);

	if (result != RG_WAIT_REACHED)
		rg_gate_raise(&resolved, mode, timeout_ms, result, position, why);
}

/*
 * rg_gate_reached_at
 *		Had a standby that was at "replayed" on timeline "tli" reached
 *		"target"?  Without raising: a token of another timeline answers
 *		no, and the gate that follows says why.
 */
static bool
rg_gate_reached_at(const RgTarget *target, XLogRecPtr replayed,
				   TimeLineID tli)
{
	return (target->tli == 0 || target->tli == tli) && replayed >= target->lsn;
}

/*
 * rg_gate_passed_before
 *		Do a statement's gates pass, on a floor (NULL: none) and, if
 *		"strong", on the primary's position, at a replay position
 *		"replayed" on timeline "tli" that this standby had reached before
 *		the statement's snapshot was taken?  Then that snapshot sees every
 *		commit up to both targets, and the statement may keep it: the gates
 *		are counted as passed at once.  A strong read's target here is the
 *		answer this standby may take without asking (proof.c); its window
 *		covers the snapshot, which is older than now.  False, counting
 *		nothing, when either needs a question, a wait or a newer snapshot:
 *		the caller then gates as usual.
 */
bool
rg_gate_passed_before(const RgTarget *floor, bool strong,
					  XLogRecPtr replayed, TimeLineID tli)
{
	RgTarget	answer;

	if (replayed == InvalidXLogRecPtr ||
		(floor != NULL && !rg_gate_reached_at(floor, replayed, tli)))
		return false;
	if (strong)
	{
		/* (a fallback looks at the proof again: both looks are cheap) */
		if (!rg_proof_use(&answer) ||
			!rg_gate_reached_at(&answer, replayed, tli))
			return false;
	}
	if (floor != NULL)
		rg_stats_count(RG_WAIT_REACHED, 0);
	if (strong)
	{
		rg_stats_strong_read(true);
		rg_stats_count(RG_WAIT_REACHED, 0);
	}
	return true;
}

/*
 * rg_gate_mode_arg
 *		The wait mode given as argument "argno"; replay if the call has no
 *		such argument (caught_up(target), and every gate as version 0.1.0
 *		defines it, served by a new library before ALTER EXTENSION ...
 *		UPDATE).
 */
static RgWaitMode
rg_gate_mode_arg(FunctionCallInfo fcinfo, int argno)
{
	static const char *const names[RG_NMODES] = {"replay", "write", "flush"};
	text	   *arg;

	if (PG_NARGS() <= argno)
		return RG_MODE_REPLAY;
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"mode\" must not be null")));
	/* compared in place: a check that passes at once costs microseconds */
	arg = PG_GETARG_TEXT_PP(argno);
	for (int i = 0; i < RG_NMODES; i++)
		if (VARSIZE_ANY_EXHDR(arg) == strlen(names[i]) &&
			memcmp(VARDATA_ANY(arg), names[i], strlen(names[i])) == 0)
			return (RgWaitMode) i;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unrecognized value for \"mode\": \"%s\"", text_to_cstring(arg)),
			 errhint("Valid values are \"replay\", \"write\" and \"flush\".")));
	pg_unreachable();
}

/*
 * rg_gate_timeout_mode_args
 *		The timeout and the wait mode of wait_for_lsn and require_lsn.  They
 *		have no default arguments (PostgreSQL would read and parse the
 *		defaults at every call): their forms are (target), (target,
 *		timeout_ms), (target, timeout_ms, mode) and, "mode_second", (target,
 *		mode), where a NULL second argument keeps its old meaning, the
 *		default timeout.  Versions before 0.4.0 define one form with
 *		defaults, which the three-argument layout serves.
 */
static void
rg_gate_timeout_mode_args(FunctionCallInfo fcinfo, bool mode_second,
						  int *timeout, RgWaitMode *mode)
{
	if (mode_second)
	{
		*timeout = rg_gate_timeout(true, 0);
		*mode = PG_ARGISNULL(1) ? RG_MODE_REPLAY : rg_gate_mode_arg(fcinfo, 1);
		return;
	}
	*timeout = rg_gate_timeout(PG_NARGS() < 2 || PG_ARGISNULL(1),
							   PG_NARGS() < 2 ? 0 : PG_GETARG_INT32(1));
	*mode = rg_gate_mode_arg(fcinfo, 2);
}

/*
 * rg_gate_target_arg
 *		The target in the first argument, a pg_lsn or text; false if NULL.
 *		Fails first after a SET form that did not wait, then (for a target)
 *		in a transaction whose snapshot was already taken.
 */
static bool
rg_gate_target_arg(FunctionCallInfo fcinfo, bool is_text, const char *gate_name,
				   RgTarget *target)
{
	rg_gate_check_missed_set();
	if (PG_ARGISNULL(0))
		return false;
	if (is_text)
		rg_target_parse(text_to_cstring(PG_GETARG_TEXT_PP(0)), target);
	else
	{
		target->lsn = PG_GETARG_LSN(0);
		target->tli = 0;
		target->primary = false;
		target->answer = false;
	}
	rg_gate_check_snapshot(gate_name);
	return true;
}

/*
 * rg_gate_caught_up
 *		caught_up(target [, mode]) returns boolean
 */
static Datum
rg_gate_caught_up(FunctionCallInfo fcinfo, bool is_text)
{
	RgWaitMode	mode = rg_gate_mode_arg(fcinfo, 1);
	RgTarget	target;
	RgGuard		guard;
	XLogRecPtr	position;
	RgQuestionFailure why;

	if (!rg_gate_target_arg(fcinfo, is_text, "replica_gate.caught_up", &target))
		PG_RETURN_BOOL(true);
	/* 'primary' is asked within the default timeout, then compared */
	rg_guard_prepare(&guard, fcinfo);
	PG_RETURN_BOOL(rg_gate_wait(&target, mode, rg_gate_timeout(true, 0), true,
								&guard, &position, &why) == RG_WAIT_REACHED);
}

/*
 * rg_gate_wait_for_lsn
 *		wait_for_lsn(target [, timeout_ms integer] [, mode]) returns boolean
 */
static Datum
rg_gate_wait_for_lsn(FunctionCallInfo fcinfo, bool is_text, bool mode_second)
{
	int			timeout;
	RgWaitMode	mode;
	RgTarget	target;
	RgGuard		guard;
	XLogRecPtr	position;
	RgQuestionFailure why;

	rg_gate_timeout_mode_args(fcinfo, mode_second, &timeout, &mode);
	if (!rg_gate_target_arg(fcinfo, is_text, "replica_gate.wait_for_lsn", &target))
		PG_RETURN_BOOL(true);
	rg_guard_prepare(&guard, fcinfo);
	PG_RETURN_BOOL(rg_gate_wait(&target, mode, timeout, false, &guard,
								&position, &why) == RG_WAIT_REACHED);
}

/*
 * rg_gate_require_lsn
 *		require_lsn(target [, timeout_ms integer] [, mode]) returns void
 */
static Datum
rg_gate_require_lsn(FunctionCallInfo fcinfo, bool is_text, bool mode_second)
{
	int			timeout;
	RgWaitMode	mode;
	RgTarget	target;
	RgGuard		guard;

	rg_gate_timeout_mode_args(fcinfo, mode_second, &timeout, &mode);
	if (!rg_gate_target_arg(fcinfo, is_text, "replica_gate.require_lsn", &target))
		PG_RETURN_VOID();
	rg_guard_prepare(&guard, fcinfo);
	rg_gate_require(&target, mode, timeout, &guard);
	PG_RETURN_VOID();
}

/* The SQL entry points: target as pg_lsn, or as text (token or LSN). */
Datum
rg_caught_up(PG_FUNCTION_ARGS)
{
	return rg_gate_caught_up(fcinfo, false);
}

Datum
rg_caught_up_text(PG_FUNCTION_ARGS)
{
	return rg_gate_caught_up(fcinfo, true);
}

Datum
rg_wait_for_lsn_sql(PG_FUNCTION_ARGS)
{
	return rg_gate_wait_for_lsn(fcinfo, false, false);
}

Datum
rg_wait_for_lsn_text(PG_FUNCTION_ARGS)
{
	return rg_gate_wait_for_lsn(fcinfo, true, false);
}

Datum
rg_wait_for_lsn_mode(PG_FUNCTION_ARGS)
{
	return rg_gate_wait_for_lsn(fcinfo, false, true);
}

Datum
rg_wait_for_lsn_text_mode(PG_FUNCTION_ARGS)
{
	return rg_gate_wait_for_lsn(fcinfo, true, true);
}

Datum
rg_require_lsn_sql(PG_FUNCTION_ARGS)
{
	return rg_gate_require_lsn(fcinfo, false, false);
}

Datum
rg_require_lsn_text(PG_FUNCTION_ARGS)
{
	return rg_gate_require_lsn(fcinfo, true, false);
}

Datum
rg_require_lsn_mode(PG_FUNCTION_ARGS)
{
	return rg_gate_require_lsn(fcinfo, false, true);
}

Datum
rg_require_lsn_text_mode(PG_FUNCTION_ARGS)
{
	return rg_gate_require_lsn(fcinfo, true, true);
}

/*
 * primary_token(timeout_ms integer) returns text: the primary's position as
 * a token, on a primary its own (see rg_primary_position()), on a standby
 * the answer of a question to the primary, asked within timeout_ms (NULL:
 * replica_gate.default_timeout; RG001 if it cannot be learned in time).  A
 * guard keeps the question's wait from holding back replay, as a gate's.
 */
Datum
rg_primary_token(PG_FUNCTION_ARGS)
{
	int			timeout = rg_gate_timeout(PG_ARGISNULL(0), PG_GETARG_INT32(0));
	RgTarget	target = {0};
	RgGuard		guard;
	RgQuestionFailure why;
	RgWaitResult result;

	if (!RecoveryInProgress())
		target.lsn = rg_primary_position(&target.tli);
	else
	{
		target.primary = true;
		rg_guard_prepare(&guard, fcinfo);
		result = rg_gate_ask_primary(&target, &timeout, &guard, &why);
		if (result != RG_WAIT_REACHED)
			rg_gate_raise(&target, RG_MODE_REPLAY, timeout, result,
						  InvalidXLogRecPtr, why);
	}
	PG_RETURN_TEXT_P(cstring_to_text(rg_target_text(&target)));
}
