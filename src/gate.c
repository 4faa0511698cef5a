/*-------------------------------------------------------------------------
 *
 * gate.c
 *		SQL-callable LSN gates: caught_up, wait_for_lsn and require_lsn.
 *
 * A NULL target means "no write to wait for": the gates pass at once.  A
 * NULL timeout means replica_gate.default_timeout.  The optional mode says
 * what to wait for on a standby: 'replay' (the default; the only mode that
 * makes the write visible to reads), 'write' or 'flush'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"

#include "replica_gate.h"

PG_FUNCTION_INFO_V1(rg_caught_up);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_sql);
PG_FUNCTION_INFO_V1(rg_require_lsn_sql);

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
 * caught_up(target pg_lsn, mode text) returns boolean
 */
Datum
rg_caught_up(PG_FUNCTION_ARGS)
{
	RgWaitMode	mode = rg_gate_mode_arg(fcinfo, 1);
	XLogRecPtr	position;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	rg_check_xact_snapshot("replica_gate.caught_up");
	PG_RETURN_BOOL(rg_wait_for_lsn(PG_GETARG_LSN(0), mode, 0, &position) ==
				   RG_WAIT_REACHED);
}

/*
 * wait_for_lsn(target pg_lsn, timeout_ms integer, mode text) returns boolean
 */
Datum
rg_wait_for_lsn_sql(PG_FUNCTION_ARGS)
{
	int			timeout = rg_effective_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	RgWaitMode	mode = rg_gate_mode_arg(fcinfo, 2);
	XLogRecPtr	target;
	XLogRecPtr	position;
	RgWaitResult result;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	rg_check_xact_snapshot("replica_gate.wait_for_lsn");

	target = PG_GETARG_LSN(0);
	result = rg_wait_for_lsn(target, mode, timeout, &position);
	if (result == RG_WAIT_NOT_IN_RECOVERY)
		rg_report_not_in_recovery(target, mode, position);
	PG_RETURN_BOOL(result == RG_WAIT_REACHED);
}

/*
 * require_lsn(target pg_lsn, timeout_ms integer, mode text) returns void
 */
Datum
rg_require_lsn_sql(PG_FUNCTION_ARGS)
{
	int			timeout = rg_effective_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	RgWaitMode	mode = rg_gate_mode_arg(fcinfo, 2);

	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	rg_check_xact_snapshot("replica_gate.require_lsn");
	rg_require_lsn(PG_GETARG_LSN(0), mode, timeout);
	PG_RETURN_VOID();
}
