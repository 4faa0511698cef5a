/*
 * rg_client.c
 *		Read-your-writes with replica_gate from C (libpq): write on the
 *		primary, take the token from the ParameterStatus the COMMIT brought
 *		back (no extra query), gate the read on the standby in one round
 *		trip, fall back to the primary when the standby is behind.
 *
 * Usage: rg_client PRIMARY STANDBY ROUNDS BUDGETS FORM
 *   BUDGETS  gate budgets in ms, comma-separated, used round after round
 *   FORM     "function" (require_lsn) or "set" (SET replica_gate.require_lsn)
 * A first read, before any write, has no token.  Prints one summary line;
 * exits 1 on a stale read, a missing token, or a standby session where the
 * SET form would not wait.
 */
#include <stdbool.h>
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
 * SQLSTATE RG001 (standby behind) read it on the primary instead.  "token"
 * is NULL before the first write: nothing to wait for.  Returns the value;
 * *on_standby tells where it was read.
 */
static long
gated_read(PGconn *primary, PGconn *standby, const char *token, int budget_ms,
		   bool set_form, int *on_standby)
{
	/* No token: NULL for the function, '' for the SET form. */
	char	   *lit = token ? PQescapeLiteral(standby, token, strlen(token)) : NULL;
	char		sql[512];
	PGresult   *res;
	long		v;

	if (set_form)
		snprintf(sql, sizeof(sql),
				 "SET replica_gate.default_timeout = %d; "
				 "SET replica_gate.require_lsn = %s; SELECT v FROM counter",
				 budget_ms, lit ? lit : "''");
	else
		snprintf(sql, sizeof(sql),
				 "SELECT replica_gate.require_lsn(%s, %d); SELECT v FROM counter",
				 lit ? lit : "NULL", budget_ms);
	if (lit)
		PQfreemem(lit);

	res = PQexec(standby, sql);		/* last result: the read */
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		*on_standby = 1;
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
				nbudgets = 0,
				budgets[16],
				on_standby = 0,
				stale = 0,
				here;
	bool		set_form;
	char		token[64] = "";
	char	   *budget;

	if (argc != 6)
	{
		fprintf(stderr, "usage: %s PRIMARY STANDBY ROUNDS BUDGETS function|set\n", argv[0]);
		return 2;
	}
	primary = connect_or_die(argv[1]);
	standby = connect_or_die(argv[2]);
	rounds = atoi(argv[3]);
	for (budget = strtok(argv[4], ","); budget && nbudgets < 16; budget = strtok(NULL, ","))
		budgets[nbudgets++] = atoi(budget);
	set_form = strcmp(argv[5], "set") == 0;

	/*
	 * The SET form waits only where the library is active in the session:
	 * a preloaded library reports replica_gate.version at connection start.
	 */
	if (set_form && PQparameterStatus(standby, "replica_gate.version") == NULL)
	{
		fprintf(stderr, "the standby session has no replica_gate: the SET form would not wait\n");
		return 1;
	}

	/* A read before any write: no token, the gate passes at once. */
	if (gated_read(primary, standby, NULL, budgets[0], set_form, &here) != 0)
		stale++;
	on_standby += here;

	for (int i = 1; i <= rounds; i++)
	{
		char		sql[64];
		const char *reported;

		snprintf(sql, sizeof(sql), "UPDATE counter SET v = %d", i);
		PQclear(exec_ok(primary, sql));

		/*
		 * The COMMIT's response carried the new token: no extra query.  No
		 * token after a write is not "nothing to wait for": the primary is
		 * not preloaded.
		 */
		reported = PQparameterStatus(primary, "replica_gate.last_commit_token");
		if (reported == NULL || reported[0] == '\0' || strcmp(reported, token) == 0)
		{
			fprintf(stderr, "round %d: no new token reported (\"%s\")\n", i,
					reported ? reported : "(null)");
			return 1;
		}
		snprintf(token, sizeof(token), "%s", reported);

		if (gated_read(primary, standby, token, budgets[(i - 1) % nbudgets],
					   set_form, &here) != i)
			stale++;
		on_standby += here;
	}

	printf("libpq (%s): %d reads, %d on standby, %d on primary, %d stale\n",
		   argv[5], rounds + 1, on_standby, rounds + 1 - on_standby, stale);
	PQfinish(primary);
	PQfinish(standby);
	return stale == 0 ? 0 : 1;
}
