/*
 * strong.c
 *		Latency of reads on a standby, N client threads for S seconds, each
 *		read done one of four ways:
 *
 *		plain    SELECT v FROM profile WHERE id = K, on the standby
 *		strong   the same read on the standby, on a connection opened with
 *		         replica_gate.consistency = strong (a strong read, as an
 *		         application gets it with no change but the setting)
 *		app      what applications write without replica_gate's question:
 *		         ask the primary SELECT pg_current_wal_insert_lsn(), then
 *		         gate on that LSN and read on the standby (two round trips)
 *		primary  the plain read on the primary
 *
 * Each thread keeps its own connections (as a pool would), only to the
 * servers its way of reading uses, and reads as fast as it can; the first
 * read of each connection is not timed.  So that a caller can measure the
 * servers' CPU over the reads alone, without connecting and disconnecting:
 * once every thread is connected it prints "connected" and waits for a
 * line on stdin; when the reads are done it prints one line,
 * "reads=R errors=E p50_us=X p99_us=Y", and waits for another line before
 * the connections are closed.
 *
 * Usage: strong MODE N SECONDS PRIMARY_DSN STANDBY_DSN
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

typedef struct Reader
{
	int			id;
	long		n;
	long		cap;
	long		errors;
	double	   *us;
} Reader;

static const char *mode;
static double seconds;
static const char *primary_dsn;
static const char *standby_dsn;

/* threads and main meet here: connected, go, reads done, close */
static pthread_barrier_t step;

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* A connection to "dsn", with "options" (startup options) unless NULL. */
static PGconn *
open_conn(const char *dsn, const char *options)
{
	const char *keys[] = {"dbname", "options", NULL};
	const char *values[] = {dsn, options, NULL};
	PGconn	   *conn = PQconnectdbParams(keys, values, 1);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "strong: %s", PQerrorMessage(conn));
		exit(1);
	}
	return conn;
}

/* One read in the chosen way; 1 if it returned a row. */
static int
read_once(PGconn *primary, PGconn *standby, int key)
{
	char		sql[256];
	PGresult   *res;
	int			ok;

	if (strcmp(mode, "app") == 0)
	{
		char		lsn[64];

		res = PQexec(primary, "SELECT pg_current_wal_insert_lsn()");
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			PQclear(res);
			return 0;
		}
		snprintf(lsn, sizeof(lsn), "%s", PQgetvalue(res, 0, 0));
		PQclear(res);
		snprintf(sql, sizeof(sql),
				 "SELECT replica_gate.require_lsn('%s'); SELECT v FROM profile WHERE id = %d",
				 lsn, key);
	}
	else
		snprintf(sql, sizeof(sql), "SELECT v FROM profile WHERE id = %d", key);

	res = PQexec(strcmp(mode, "primary") == 0 ? primary : standby, sql);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
	PQclear(res);
	return ok;
}

static void *
reader_main(void *arg)
{
	Reader	   *r = arg;
	bool		on_primary = strcmp(mode, "app") == 0 || strcmp(mode, "primary") == 0;
	PGconn	   *primary = on_primary ? open_conn(primary_dsn, NULL) : NULL;
	PGconn	   *standby = NULL;
	unsigned int seed = r->id;
	double		end;

	if (strcmp(mode, "primary") != 0)
		standby = open_conn(standby_dsn, strcmp(mode, "strong") == 0 ?
							"-c replica_gate.consistency=strong" : NULL);
	read_once(primary, standby, 0);
	pthread_barrier_wait(&step);	/* connected */
	pthread_barrier_wait(&step);	/* go */
	end = now_us() + seconds * 1e6;
	for (;;)
	{
		double		t0 = now_us();
		int			ok = read_once(primary, standby, rand_r(&seed) % 300);
		double		t1 = now_us();

		if (t1 > end)
			break;
		if (!ok)
		{
			r->errors++;
			continue;
		}
		if (r->n == r->cap)
		{
			r->cap = r->cap ? 2 * r->cap : 1024;
			r->us = realloc(r->us, r->cap * sizeof(double));
		}
		r->us[r->n++] = t1 - t0;
	}
	pthread_barrier_wait(&step);	/* reads done */
	pthread_barrier_wait(&step);	/* close */
	PQfinish(primary);
	PQfinish(standby);
	return NULL;
}

/* Print "text" and wait for a line on stdin. */
static void
wait_for_line(const char *text)
{
	char		buf[16];

	printf("%s\n", text);
	fflush(stdout);
	if (fgets(buf, sizeof(buf), stdin) == NULL)
		exit(1);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int			n;
	Reader	   *readers;
	pthread_t  *threads;
	double	   *all;
	long		total = 0;
	long		errors = 0;
	char		line[128];

	if (argc != 6)
	{
		fprintf(stderr, "usage: strong MODE N SECONDS PRIMARY_DSN STANDBY_DSN\n");
		return 2;
	}
	mode = argv[1];
	n = atoi(argv[2]);
	seconds = atof(argv[3]);
	primary_dsn = argv[4];
	standby_dsn = argv[5];

	readers = calloc(n, sizeof(Reader));
	threads = calloc(n, sizeof(pthread_t));
	pthread_barrier_init(&step, NULL, n + 1);
	for (int i = 0; i < n; i++)
	{
		readers[i].id = i + 1;
		pthread_create(&threads[i], NULL, reader_main, &readers[i]);
	}
	pthread_barrier_wait(&step);
	wait_for_line("connected");
	pthread_barrier_wait(&step);
	pthread_barrier_wait(&step);
	for (int i = 0; i < n; i++)
	{
		total += readers[i].n;
		errors += readers[i].errors;
	}
	all = malloc((total + 1) * sizeof(double));
	total = 0;
	for (int i = 0; i < n; i++)
	{
		memcpy(all + total, readers[i].us, readers[i].n * sizeof(double));
		total += readers[i].n;
	}
	qsort(all, total, sizeof(double), cmp_double);
	snprintf(line, sizeof(line), "reads=%ld errors=%ld p50_us=%.0f p99_us=%.0f",
			 total, errors, total ? all[total / 2] : 0.0,
			 total ? all[(long) (total * 0.99)] : 0.0);
	wait_for_line(line);
	pthread_barrier_wait(&step);
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	return 0;
}
