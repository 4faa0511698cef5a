/*
 * schedstat.h
 *		CPU time of a process from /proc/PID/schedstat (Linux), shared by
 *		the benchmark programs: exact, where utime and stime in
 *		/proc/PID/stat are sampled on timer ticks.
 */
#ifndef BENCH_SCHEDSTAT_H
#define BENCH_SCHEDSTAT_H

#include <stdio.h>
#include <stdlib.h>

/* Nanoseconds process "pid" has run so far; exits if it cannot tell. */
static long long
schedstat_cpu_ns(int pid)
{
	char		path[64];
	long long	ns = 0;
	FILE	   *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	f = fopen(path, "r");
	if (f == NULL || fscanf(f, "%lld", &ns) != 1)
	{
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	return ns;
}

#endif							/* BENCH_SCHEDSTAT_H */
