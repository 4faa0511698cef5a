/*-------------------------------------------------------------------------
 *
 * gate.c
 *		SQL-callable LSN gates: caught_up, wait_for_lsn and require_lsn.
 *
 * Each takes its target as a pg_lsn (timeline-blind) or as text, which may
 * be a token "<timeline>:<lsn>" (checked against this server's timeline
 * history, see target.c) or a plain LSN.  A NULL target means "no write to
 * wait for": the gates pass at once.  A NULL timeout means
 * replica_gate.default_timeout.  The optional mode says what to wait for on
 * a standby: 'replay' (the default; the only mode that makes the write
 * visible to reads), 'write' or 'flush'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"

#include "replica_gate.h"

PG_FUNCTION_INFO_V1(rg_caught_up);
PG_FUNCTION_INFO_V1(rg_caught_up_text);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_sql);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_text);
PG_FUNCTION_INFO_V1(rg_require_lsn_sql);
PG_FUNCTION_INFO_V1(rg_require_lsn_text);

/*
 * rg_gate_mode_arg
 *		The wait mode given as argument "argno".  The SQL definitions of
 *		version 0.1.0 (a new library before ALTER EXTENSION ... UPDATE) pass
 *		no mode: replay.
 */
static RgWaitMode
rg_gate_mode_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno)
		return RG_MODE_REPLAY;
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("\"mode\" must not be null")));
	return rg_wait_mode(text_to_cstring(PG_GETARG_TEXT_PP(argno)));
}

/*
 * rg_gate_target_arg
 *		The target in the first argument, a pg_lsn or text; false if NULL.
 *		Fails first after a SET form that did not wait (rg_check_missed_set).
 */
static bool
rg_gate_target_arg(FunctionCallInfo fcinfo, bool is_text, RgTarget *target)
{
	/* even "nothing to wait for" must not pass after an unchecked SET */
	rg_check_missed_set();
	if (PG_ARGISNULL(0))
		return false;
	if (is_text)
		rg_target_parse(text_to_cstring(PG_GETARG_TEXT_PP(0)), target);
	else
	{
		target->lsn = PG_GETARG_LSN(0);
		target->tli = 0;
	}
	return true;
}

/*
 * rg_gate_caught_up
 *		caught_up(target, mode) returns boolean
 */
static Datum
rg_gate_caught_up(FunctionCallInfo fcinfo, bool is_text)
{
	RgWaitMode	mode = rg_gate_mode_arg(fcinfo, 1);
	RgTarget	target;
	XLogRecPtr	position;

	if (!rg_gate_target_arg(fcinfo, is_text, &target))
		PG_RETURN_BOOL(true);
	rg_check_xact_snapshot("replica_gate.caught_up");
	PG_RETURN_BOOL(rg_wait_for_target(&target, mode, 0, NULL, &position) ==
				   RG_WAIT_REACHED);
}

/*
 * rg_gate_wait_for_lsn
 *		wait_for_lsn(target, timeout_ms integer, mode) returns boolean
 */
static Datum
rg_gate_wait_for_lsn(FunctionCallInfo fcinfo, bool is_text)
{
	int			timeout = rg_effective_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	RgWaitMode	mode = rg_gate_mode_arg(fcinfo, 2);
	RgTarget	target;
	RgGuard		guard;
	XLogRecPtr	position;
	RgWaitResult result;

	if (!rg_gate_target_arg(fcinfo, is_text, &target))
		PG_RETURN_BOOL(true);
	rg_check_xact_snapshot("replica_gate.wait_for_lsn");

	rg_guard_prepare(&guard, fcinfo);
	result = rg_wait_for_target(&target, mode, timeout, &guard, &position);
	if (result == RG_WAIT_NOT_IN_RECOVERY)
		rg_report_not_in_recovery(&target, mode, position);
	PG_RETURN_BOOL(result == RG_WAIT_REACHED);
}

/*
 * rg_gate_require_lsn
 *		require_lsn(target, timeout_ms integer, mode) returns void
 */
static Datum
rg_gate_require_lsn(FunctionCallInfo fcinfo, bool is_text)
{
	int			timeout = rg_effective_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	RgWaitMode	mode = rg_gate_mode_arg(fcinfo, 2);
	RgTarget	target;
	RgGuard		guard;

	if (!rg_gate_target_arg(fcinfo, is_text, &target))
		PG_RETURN_VOID();
	rg_check_xact_snapshot("replica_gate.require_lsn");
	rg_guard_prepare(&guard, fcinfo);
	rg_require_target(&target, mode, timeout, &guard);
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
	return rg_gate_wait_for_lsn(fcinfo, false);
}

Datum
rg_wait_for_lsn_text(PG_FUNCTION_ARGS)
{
	return rg_gate_wait_for_lsn(fcinfo, true);
}

Datum
rg_require_lsn_sql(PG_FUNCTION_ARGS)
{
	return rg_gate_require_lsn(fcinfo, false);
}

Datum
rg_require_lsn_text(PG_FUNCTION_ARGS)
{
	return rg_gate_require_lsn(fcinfo, true);
}
