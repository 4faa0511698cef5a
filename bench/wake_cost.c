/*
 * wake_cost.c
 *		CPU time a process spends on one wake-up, as a function of how long
 *		it slept before: a property of the machine, without PostgreSQL.
 *
 * N child processes block reading a pipe.  Each wake-up, a child touches
 * the same 512 pages (256 of a shared mapping, 256 of its own memory, the
 * way a backend touches shared buffers and its caches) and answers.  The
 * parent sleeps S ms, wakes all N at once and waits for their answers; the
 * CPU the children used is read from /proc/PID/schedstat.  Where sleeping
 * makes a process "cold" (caches, TLB, or a hypervisor's page tables), the
 * same work costs more after a long sleep than after a short one.
 *
 * Usage: wake_cost N ROUNDS S [S ...]
 * Prints "S,MICROSECONDS" lines: mean CPU per child and wake-up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "schedstat.h"

#define COST_PAGES	256
#define COST_PAGE	8192

/* A child: on each byte, touch its pages and answer; on 'q', exit. */
static void
cost_child(int in, int out, volatile char *shared)
{
	volatile char *own = malloc(COST_PAGES * COST_PAGE);
	char		c;

	memset((char *) own, 1, COST_PAGES * COST_PAGE);
	while (read(in, &c, 1) == 1 && c != 'q')
	{
		for (int p = 0; p < COST_PAGES; p++)
		{
			shared[p * COST_PAGE]++;
			own[p * COST_PAGE]++;
		}
		if (write(out, "y", 1) != 1)
			break;
	}
	_exit(0);
}

int
main(int argc, char **argv)
{
	int			n;
	int			rounds;
	int			answers[2];
	int		   *to;
	pid_t	   *pids;
	char	   *shared;

	if (argc < 4)
	{
		fprintf(stderr, "usage: wake_cost N ROUNDS S [S ...]\n");
		return 2;
	}
	n = atoi(argv[1]);
	rounds = atoi(argv[2]);
	to = calloc(n, sizeof(int));
	pids = calloc(n, sizeof(pid_t));
	shared = mmap(NULL, COST_PAGES * COST_PAGE, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED || pipe(answers) != 0)
		return 1;
	memset(shared, 1, COST_PAGES * COST_PAGE);

	for (int i = 0; i < n; i++)
	{
		int			p[2];

		if (pipe(p) != 0 || (pids[i] = fork()) < 0)
			return 1;
		if (pids[i] == 0)
			cost_child(p[0], answers[1], shared);
		close(p[0]);
		to[i] = p[1];
	}

	for (int a = 3; a < argc; a++)
	{
		int			sleep_ms = atoi(argv[a]);

		/* round 0 warms up and is not counted */
		for (int r = 0; r <= rounds; r++)
		{
			struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
			long long	before = 0;
			long long	after = 0;
			char		c;

			nanosleep(&ts, NULL);
			for (int i = 0; i < n; i++)
				before += schedstat_cpu_ns(pids[i]);
			for (int i = 0; i < n; i++)
				if (write(to[i], "x", 1) != 1)
					return 1;
			for (int i = 0; i < n; i++)
				if (read(answers[0], &c, 1) != 1)
					return 1;
			for (int i = 0; i < n; i++)
				after += schedstat_cpu_ns(pids[i]);
			if (r > 0)
				printf("%d,%.1f\n", sleep_ms, (after - before) / 1e3 / n);
		}
	}

	for (int i = 0; i < n; i++)
		if (write(to[i], "q", 1) != 1)
			return 1;
	while (wait(NULL) > 0)
		;
	return 0;
}
