/*-------------------------------------------------------------------------
 *
 * remote.c
 *		Client connections from this server to another server of the
 *		cluster (the primary, or the server the WAL receiver streams from),
 *		with libpq: options assembled from conninfo strings, and a connection
 *		and a query that never block.  Every wait is on the connection's
 *		socket and our latch, bounded by a deadline, and processes
 *		interrupts, so a backend can be cancelled and a worker told to stop
 *		while the other server does not answer.
 *
 * A connection holds one of the server's external file descriptors
 * (AcquireExternalFD) from rg_remote_connect() to rg_remote_finish().  One
 * wait cannot be bounded: libpq resolves a host name synchronously.  Give
 * addresses (hostaddr) where name resolution can hang.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "remote.h"

/* The value of option "key", or NULL if it is not set. */
const char *
rg_remote_get(const RgRemoteOptions *options, const char *key)
{
	for (int i = 0; i < options->n; i++)
		if (strcmp(options->keys[i], key) == 0)
			return options->values[i];
	return NULL;
}

/*
 * rg_remote_set
 *		Set option "key" to "value" (copied), or remove it if value is NULL.
 */
void
rg_remote_set(RgRemoteOptions *options, const char *key, const char *value)
{
	int			i;

	for (i = 0; i < options->n; i++)
		if (strcmp(options->keys[i], key) == 0)
			break;
	if (value == NULL)
	{
		if (i < options->n)
		{
			options->n--;
			options->keys[i] = options->keys[options->n];
			options->values[i] = options->values[options->n];
		}
		return;
	}
	if (i == options->n)
	{
		/* one slot stays free for the terminating NULL */
		if (options->n >= lengthof(options->keys) - 1)
			elog(ERROR, "too many connection options");
		options->keys[options->n++] = pstrdup(key);
	}
	options->values[i] = pstrdup(value);
}

/*
 * rg_remote_add_conninfo
 *		Set every option that "conninfo" (keyword/value or URI form) gives a
 *		non-empty value, over what is set already; false if it cannot be
 *		parsed.
 */
bool
rg_remote_add_conninfo(RgRemoteOptions *options, const char *conninfo)
{
	char	   *err = NULL;
	PQconninfoOption *parsed = PQconninfoParse(conninfo ? conninfo : "", &err);

	if (parsed == NULL)
	{
		if (err)
			PQfreemem(err);
		return false;
	}
	for (PQconninfoOption *o = parsed; o->keyword; o++)
		if (o->val != NULL && o->val[0] != '\0')
			rg_remote_set(options, o->keyword, o->val);
	PQconninfoFree(parsed);
	return true;
}

/*
 * rg_remote_wait
 *		Wait until conn's socket is readable (or writable), our latch is
 *		set, or the deadline passes; false once it has passed.
 */
static bool
rg_remote_wait(PGconn *conn, bool for_write, TimestampTz deadline,
			   uint32 wait_event)
{
	long		ms = (long) ((deadline - GetCurrentTimestamp() + 999) / 1000);
	int			rc;

	if (ms <= 0)
		return false;
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
						   (for_write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE),
						   PQsocket(conn), ms, wait_event);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * rg_remote_connect
 *		Connect with "options" before "deadline".  NULL on failure, with
 *		*error saying why (libpq's message: it names the server and the
 *		user, never a password).
 */
PGconn *
rg_remote_connect(RgRemoteOptions *options, TimestampTz deadline,
				  uint32 wait_event, char **error)
{
	PGconn	   *volatile conn;
	PostgresPollingStatusType poll = PGRES_POLLING_WRITING;

	if (!AcquireExternalFD())
	{
		*error = "out of file descriptors";
		return NULL;
	}
	options->keys[options->n] = NULL;
	options->values[options->n] = NULL;
	conn = PQconnectStartParams(options->keys, options->values, false);
	if (conn == NULL)
	{
		ReleaseExternalFD();
		*error = "out of memory";
		return NULL;
	}
	PG_TRY();
	{
		while (PQstatus(conn) != CONNECTION_BAD &&
			   poll != PGRES_POLLING_OK && poll != PGRES_POLLING_FAILED &&
			   rg_remote_wait(conn, poll == PGRES_POLLING_WRITING, deadline,
							  wait_event))
			poll = PQconnectPoll(conn);
	}
	PG_CATCH();
	{
		rg_remote_finish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* sending a query must not block either */
	if (PQstatus(conn) == CONNECTION_OK && PQsetnonblocking(conn, 1) == 0)
		return conn;
	*error = PQstatus(conn) != CONNECTION_OK ?
		(PQstatus(conn) == CONNECTION_BAD ? pchomp(PQerrorMessage(conn)) : "timed out") :
		"cannot make the connection non-blocking";
	rg_remote_finish(conn);
	return NULL;
}

/*
 * rg_remote_result
 *		Send what the caller queued on a connection and collect the answer
 *		before "deadline": its last result (the caller clears it), or NULL
 *		if no complete answer came in time (the connection is then
 *		unusable).
 */
static PGresult *
rg_remote_result(PGconn *conn, TimestampTz deadline, uint32 wait_event)
{
	PGresult   *volatile last = NULL;
	volatile bool complete = false;

	PG_TRY();
	{
		int			unsent;

		/* non-blocking: the query may leave in pieces */
		while ((unsent = PQflush(conn)) == 1 &&
			   rg_remote_wait(conn, true, deadline, wait_event))
			;
		while (unsent == 0)
		{
			PGresult   *res;

			/* PQgetResult() would block until the next message arrives */
			if (PQisBusy(conn) &&
				(!rg_remote_wait(conn, false, deadline, wait_event) ||
				 !PQconsumeInput(conn)))
				break;
			if (PQisBusy(conn))
				continue;
			if ((res = PQgetResult(conn)) == NULL)
			{
				complete = true;
				break;
			}
			PQclear(last);
			last = res;
		}
	}
	PG_CATCH();
	{
		PQclear(last);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (complete)
		return last;
	PQclear(last);
	return NULL;
}

/*
 * rg_remote_query
 *		Run "query" on a connection before "deadline": its last result (the
 *		caller clears it), or NULL if it could not be sent or no complete
 *		answer came in time (the connection is then unusable).
 */
PGresult *
rg_remote_query(PGconn *conn, const char *query, TimestampTz deadline,
				uint32 wait_event)
{
	if (!PQsendQuery(conn, query))
		return NULL;
	return rg_remote_result(conn, deadline, wait_event);
}

/*
 * rg_remote_execute
 *		rg_remote_query for the statement prepared on the connection as
 *		"name", which takes "nparams" parameters, "params" in text form,
 *		with the extended protocol: the server parses and plans nothing.
 */
PGresult *
rg_remote_execute(PGconn *conn, const char *name, int nparams,
				  const char *const *params, TimestampTz deadline,
				  uint32 wait_event)
{
	if (!PQsendQueryPrepared(conn, name, nparams, params, NULL, NULL, 0))
		return NULL;
	return rg_remote_result(conn, deadline, wait_event);
}

/* Close a connection (NULL: nothing to do) and give its descriptor back. */
void
rg_remote_finish(PGconn *conn)
{
	if (conn == NULL)
		return;
	PQfinish(conn);
	ReleaseExternalFD();
}
