/*-------------------------------------------------------------------------
 *
 * gate.c
 *		SQL-callable LSN gates: caught_up, wait_for_lsn and require_lsn.
 *
 * A NULL target means "no write to wait for": the gates pass at once.  A
 * NULL timeout means replica_gate.default_timeout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/pg_lsn.h"

#include "compat.h"
#include "replica_gate.h"

PG_FUNCTION_INFO_V1(rg_caught_up);
PG_FUNCTION_INFO_V1(rg_wait_for_lsn_sql);
PG_FUNCTION_INFO_V1(rg_require_lsn_sql);

/*
 * caught_up(target pg_lsn) returns boolean
 */
Datum
rg_caught_up(PG_FUNCTION_ARGS)
{
	XLogRecPtr	replayed;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	rg_check_xact_snapshot("replica_gate.caught_up");
	PG_RETURN_BOOL(rg_wait_for_lsn(PG_GETARG_LSN(0), 0, &replayed) ==
				   RG_WAIT_REACHED);
}

/*
 * wait_for_lsn(target pg_lsn, timeout_ms integer) returns boolean
 */
Datum
rg_wait_for_lsn_sql(PG_FUNCTION_ARGS)
{
	XLogRecPtr	target;
	XLogRecPtr	replayed;
	RgWaitResult result;
	int			timeout;

	timeout = rg_effective_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	rg_check_xact_snapshot("replica_gate.wait_for_lsn");

	target = PG_GETARG_LSN(0);
	result = rg_wait_for_lsn(target, timeout, &replayed);
	if (result == RG_WAIT_NOT_IN_RECOVERY)
		rg_report_not_in_recovery(target, replayed);
	PG_RETURN_BOOL(result == RG_WAIT_REACHED);
}

/*
 * require_lsn(target pg_lsn, timeout_ms integer) returns void
 */
Datum
rg_require_lsn_sql(PG_FUNCTION_ARGS)
{
	int			timeout;

	timeout = rg_effective_timeout(PG_ARGISNULL(1), PG_GETARG_INT32(1));
	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	rg_check_xact_snapshot("replica_gate.require_lsn");
	rg_require_lsn(PG_GETARG_LSN(0), timeout);
	PG_RETURN_VOID();
}
