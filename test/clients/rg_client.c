/*
 * rg_client.c
 *		Read-your-writes with replica_gate from C (libpq): write on the
 *		primary, take the token from the ParameterStatus the COMMIT brought
 *		back (no extra query), gate the read on the standby in one round
 *		trip, fall back to the primary when the standby is behind.
 *
 * Usage: rg_client PRIMARY_CONNINFO STANDBY_CONNINFO ROUNDS BUDGET_MS
 * Prints one summary line; exits 1 on a stale read or a missing token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libpq-fe.h"

static void
die(PGconn *conn, const char *what)
{
	fprintf(stderr, "%s: %s", what, conn ? PQerrorMessage(conn) : "\n");
	exit(2);
}

static PGconn *
connect_or_die(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		die(conn, "connect");
	return conn;
}

/* Run a command that must succeed; return its result. */
static PGresult *
exec_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK &&
		PQresultStatus(res) != PGRES_TUPLES_OK)
		die(conn, sql);
	return res;
}

/*
 * Read the counter on the standby behind a gate, in one query string; on
 * SQLSTATE RG001 (standby behind) read it on the primary instead.
 * Returns the value; *on_standby tells where it was read.
 */
static long
gated_read(PGconn *primary, PGconn *standby, const char *token, int budget_ms,
		   int *on_standby)
{
	char	   *lit = PQescapeLiteral(standby, token, strlen(token));
	char		sql[256];
	PGresult   *res;
	long		v;

	snprintf(sql, sizeof(sql),
			 "SELECT replica_gate.require_lsn(%s, %d); SELECT v FROM counter",
			 lit, budget_ms);
	PQfreemem(lit);

	res = PQexec(standby, sql);		/* last result: the read */
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
	{
		*on_standby = 1;
	}
	else
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		if (state == NULL || strcmp(state, "RG001") != 0)
			die(standby, "gated read");
		PQclear(res);
		res = exec_ok(primary, "SELECT v FROM counter");
		*on_standby = 0;
	}
	v = atol(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

int
main(int argc, char **argv)
{
	PGconn	   *primary,
			   *standby;
	int			rounds,
				budget_ms,
				on_standby = 0,
				stale = 0;
	char		token[64] = "";

	if (argc != 5)
	{
		fprintf(stderr, "usage: %s PRIMARY STANDBY ROUNDS BUDGET_MS\n", argv[0]);
		return 2;
	}
	primary = connect_or_die(argv[1]);
	standby = connect_or_die(argv[2]);
	rounds = atoi(argv[3]);
	budget_ms = atoi(argv[4]);

	for (int i = 1; i <= rounds; i++)
	{
		char		sql[64];
		const char *reported;
		int			here;

		snprintf(sql, sizeof(sql), "UPDATE counter SET v = %d", i);
		PQclear(exec_ok(primary, sql));

		/* The COMMIT's response carried the new token: no extra query. */
		reported = PQparameterStatus(primary, "replica_gate.last_commit_lsn");
		if (reported == NULL || reported[0] == '\0' || strcmp(reported, token) == 0)
		{
			fprintf(stderr, "round %d: no new token reported (\"%s\")\n", i,
					reported ? reported : "(null)");
			return 1;
		}
		snprintf(token, sizeof(token), "%s", reported);

		if (gated_read(primary, standby, token, budget_ms, &here) != i)
			stale++;
		on_standby += here;
	}

	printf("libpq: %d reads, %d on standby, %d on primary, %d stale\n",
		   rounds, on_standby, rounds - on_standby, stale);
	PQfinish(primary);
	PQfinish(standby);
	return stale == 0 ? 0 : 1;
}
