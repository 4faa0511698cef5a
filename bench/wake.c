/*
 * wake.c
 *		Wake-up latency of N sessions waiting on a standby for one commit.
 *
 * Per round: pause replay on the standby, commit a write on the primary and
 * take its token, start N standby sessions on the waiting query (token in
 * place of $1), wait until all N are running, let them sleep SLEEP_MS, then
 * resume replay.  Each waiting query returns the server's clock_timestamp()
 * after its wait as the last column it returns, so latency is measured on
 * the server clock from the resume to each waiter's return, however fast
 * this client reads the results.  One single-threaded client drives every
 * session with non-blocking libpq, so it adds little CPU load of its own.
 * Sessions run the query once on an already replayed target first, so that
 * the rounds measure warm sessions, as a connection pool would have.
 *
 * With PROBE = 1 one more session spins on pg_last_wal_replay_lsn() (at
 * nice 19, so that it yields to everything else) and returns when it sees
 * the target replayed: the moment replay passed the target, to within the
 * spin's own delay.  It takes a core, so use it only where one is spare.
 *
 * The CPU time the waiting backends used from the resume until all had
 * returned is read from /proc/PID/schedstat (same machine).
 *
 * Usage: wake PRIMARY_DSN STANDBY_DSN N ROUNDS SLEEP_MS PROBE WAIT_SQL
 * Prints CSV lines: "wake,ROUND,MS" per waiter, "probe,ROUND,MS" per round
 * with a probe, and "cpu,ROUND,MS" (CPU per waiter) per round.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <libpq-fe.h>

#include "schedstat.h"

#define WAKE_PROBE_SQL \
	"SELECT bench_spin(split_part($1, ':', 2)::pg_lsn), extract(epoch FROM clock_timestamp())"

static void
wake_die(const char *what, PGconn *conn)
{
	fprintf(stderr, "wake: %s: %s", what, conn ? PQerrorMessage(conn) : "\n");
	exit(1);
}

/* Run a query expected to return one value; returns a malloc'd copy. */
static char *
wake_one(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	char	   *value;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		wake_die(sql, conn);
	value = strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

static void
wake_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static PGconn *
wake_connect(const char *dsn)
{
	PGconn	   *conn = PQconnectdb(dsn);

	if (PQstatus(conn) != CONNECTION_OK)
		wake_die("connect", conn);
	return conn;
}

/* Pause replay and wait until the startup process has actually paused. */
static void
wake_pause(PGconn *standby)
{
	free(wake_one(standby, "SELECT pg_wal_replay_pause()::text"));
	for (;;)
	{
		char	   *state = wake_one(standby,
									 "SELECT pg_get_wal_replay_pause_state()");
		int			paused = strcmp(state, "paused") == 0;

		free(state);
		if (paused)
			return;
		wake_sleep_ms(10);
	}
}

/* Wait until n sessions named bench_waiter are running their query. */
static void
wake_wait_started(PGconn *standby, int n)
{
	for (int i = 0; i < 6000; i++)
	{
		char	   *count = wake_one(standby,
									 "SELECT count(*) FROM pg_stat_activity "
									 "WHERE application_name = 'bench_waiter' "
									 "AND state = 'active'");
		int			started = atoi(count);

		free(count);
		if (started == n)
			return;
		wake_sleep_ms(10);
	}
	fprintf(stderr, "wake: the %d waiters did not all start\n", n);
	exit(1);
}

/*
 * Send the query with the token, as a literal, in place of each $1, without
 * waiting for its result.  The simple protocol: the query may be several
 * statements (a gate as a statement of its own, then the time).
 */
static void
wake_send(PGconn *conn, const char *sql, const char *token)
{
	char	   *literal = PQescapeLiteral(conn, token, strlen(token));
	size_t		size = strlen(sql) + 1;
	char	   *text;
	char	   *out;

	if (literal == NULL)
		wake_die("escape", conn);
	for (const char *p = strstr(sql, "$1"); p; p = strstr(p + 2, "$1"))
		size += strlen(literal);
	out = text = malloc(size);
	for (const char *p = sql; *p;)
	{
		if (p[0] == '$' && p[1] == '1')
		{
			out += sprintf(out, "%s", literal);
			p += 2;
		}
		else
			*out++ = *p++;
	}
	*out = '\0';
	if (!PQsendQuery(conn, text))
		wake_die("send", conn);
	free(text);
	PQfreemem(literal);
}

/*
 * Collect the results of all sessions in conns[0..n-1]; store each one's
 * server-side return time (the last column of the last result, epoch
 * seconds) in at[].
 */
static void
wake_collect(PGconn **conns, int n, double *at)
{
	struct pollfd *fds = calloc(n, sizeof(struct pollfd));
	int			pending = n;

	for (int i = 0; i < n; i++)
	{
		fds[i].fd = PQsocket(conns[i]);
		fds[i].events = POLLIN;
	}
	while (pending > 0)
	{
		if (poll(fds, n, 60000) <= 0)
			wake_die("no waiter returned within 60 s", NULL);
		for (int i = 0; i < n; i++)
		{
			PGresult   *res;

			if (fds[i].fd < 0 || !(fds[i].revents & POLLIN))
				continue;
			if (!PQconsumeInput(conns[i]))
				wake_die("read", conns[i]);
			if (PQisBusy(conns[i]))
				continue;
			while ((res = PQgetResult(conns[i])) != NULL)
			{
				if (PQresultStatus(res) != PGRES_TUPLES_OK)
					wake_die("wait", conns[i]);
				at[i] = atof(PQgetvalue(res, 0, PQnfields(res) - 1));
				PQclear(res);
			}
			fds[i].fd = -1;
			pending--;
		}
	}
	free(fds);
}

int
main(int argc, char **argv)
{
	PGconn	   *primary;
	PGconn	   *standby;
	PGconn	   *probe = NULL;
	PGconn	  **waiters;
	long long  *cpu;
	double	   *at;
	double		probe_at;
	char	   *dsn;
	int			n;
	int			rounds;
	int			sleep_ms;
	const char *sql;

	if (argc != 8)
	{
		fprintf(stderr, "usage: wake PRIMARY_DSN STANDBY_DSN N ROUNDS SLEEP_MS PROBE WAIT_SQL\n");
		return 2;
	}
	n = atoi(argv[3]);
	rounds = atoi(argv[4]);
	sleep_ms = atoi(argv[5]);
	sql = argv[7];
	primary = wake_connect(argv[1]);
	standby = wake_connect(argv[2]);

	dsn = malloc(strlen(argv[2]) + 64);
	sprintf(dsn, "%s application_name=bench_waiter", argv[2]);
	waiters = calloc(n, sizeof(PGconn *));
	cpu = calloc(n, sizeof(long long));
	at = calloc(n, sizeof(double));
	for (int i = 0; i < n; i++)
	{
		/* a first run, on a target already reached, warms the session */
		const char *reached = "0/0";

		waiters[i] = wake_connect(dsn);
		PQclear(PQexecParams(waiters[i], sql, 1, NULL, &reached, NULL, NULL, 0));
	}
	if (atoi(argv[6]))
	{
		sprintf(dsn, "%s application_name=bench_probe", argv[2]);
		probe = wake_connect(dsn);
		if (setpriority(PRIO_PROCESS, PQbackendPID(probe), 19) != 0)
			wake_die("cannot renice the probe backend", NULL);
	}

	for (int r = 1; r <= rounds; r++)
	{
		const char *token;
		double		resumed;
		long long	used = 0;
		char	   *text;

		wake_pause(standby);
		/* an insert leaves no dead rows to prune: no recovery conflict */
		PQclear(PQexec(primary, "INSERT INTO wake_log DEFAULT VALUES"));
		token = PQparameterStatus(primary, "replica_gate.last_commit_token");
		if (token == NULL)
			wake_die("no replica_gate.last_commit_token reported", NULL);

		for (int i = 0; i < n; i++)
			wake_send(waiters[i], sql, token);
		wake_wait_started(standby, n);
		if (probe)
			wake_send(probe, WAKE_PROBE_SQL, token);
		wake_sleep_ms(sleep_ms);

		for (int i = 0; i < n; i++)
			cpu[i] = schedstat_cpu_ns(PQbackendPID(waiters[i]));
		/* the subquery fixes the order: clock first, then resume */
		text = wake_one(standby, "SELECT t, pg_wal_replay_resume() FROM "
						"(SELECT extract(epoch FROM clock_timestamp()) t "
						"OFFSET 0) s");
		resumed = atof(text);
		free(text);

		wake_collect(waiters, n, at);
		for (int i = 0; i < n; i++)
		{
			used += schedstat_cpu_ns(PQbackendPID(waiters[i])) - cpu[i];
			printf("wake,%d,%.3f\n", r, (at[i] - resumed) * 1000.0);
		}
		printf("cpu,%d,%.3f\n", r, used / 1e6 / n);
		if (probe)
		{
			wake_collect(&probe, 1, &probe_at);
			printf("probe,%d,%.3f\n", r, (probe_at - resumed) * 1000.0);
		}
	}

	for (int i = 0; i < n; i++)
		PQfinish(waiters[i]);
	if (probe)
		PQfinish(probe);
	PQfinish(standby);
	PQfinish(primary);
	return 0;
}
