/*
 * rg_spi_worker.c
 *		A background worker of another extension, for 018: it connects as
 *		a role and reads through SPI, as pg_cron jobs and the like do.  The
 *		session mode of that role must neither gate it nor refuse it (its
 *		reads run outside any client statement).  Logs what it read, or
 *		the error that ended it.
 *
 * SQL: CREATE FUNCTION rg_spi_worker_start(role text, library text)
 *        RETURNS void AS '<library>', 'rg_spi_worker_start' LANGUAGE C;
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(rg_spi_worker_start);
PGDLLEXPORT void rg_spi_worker_main(Datum arg);

/* The worker: read as the role given in bgw_extra, log the result. */
void
rg_spi_worker_main(Datum arg)
{
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection("postgres", MyBgworkerEntry->bgw_extra, 0);
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute("SELECT v FROM counter WHERE v >= abs(0)", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "rg_spi_worker: the read failed");
	elog(LOG, "rg_spi_worker read %s",
		 SPI_processed == 1 ? SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) : "nothing");
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
}

/* rg_spi_worker_start(role, library): start one such worker. */
Datum
rg_spi_worker_start(PG_FUNCTION_ARGS)
{
	BackgroundWorker worker = {0};
	BackgroundWorkerHandle *handle;

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, text_to_cstring(PG_GETARG_TEXT_PP(1)), BGW_MAXLEN);
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "rg_spi_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "rg_spi_worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "rg_spi_worker");
	strlcpy(worker.bgw_extra, text_to_cstring(PG_GETARG_TEXT_PP(0)), BGW_EXTRALEN);
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		ereport(ERROR, (errmsg("could not start rg_spi_worker")));
	PG_RETURN_VOID();
}
