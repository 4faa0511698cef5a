/*-------------------------------------------------------------------------
 *
 * arrival.c
 *		Tell the replay watcher when WAL arrives in pg_wal, so that where it
 *		must poll (no replay condition variable) it polls only while there is
 *		WAL that replay could still apply.
 *
 * Replay can only pass a target once the WAL up to it is in pg_wal: written
 * by the walreceiver, or copied there by restore_command.  On Linux an
 * inotify watch on pg_wal turns those writes into a readable descriptor the
 * watcher can sleep on.  Elsewhere, or if the watch cannot be set up, there
 * is no descriptor and the watcher polls whenever anyone waits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#endif

#include "access/xlog_internal.h"

#include "replica_gate.h"

/*
 * rg_arrival_open
 *		Start watching pg_wal.  Returns a descriptor that turns readable when
 *		a file in pg_wal is created, written or moved in, or -1 (with a LOG
 *		message where the platform should have supported it).
 */
int
rg_arrival_open(void)
{
#ifdef __linux__
	int			fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (fd >= 0 &&
		inotify_add_watch(fd, XLOGDIR, IN_CREATE | IN_MODIFY | IN_MOVED_TO) >= 0)
		return fd;

	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("replica_gate could not watch directory \"%s\" for new WAL: %m",
					XLOGDIR),
			 errdetail("The replay watcher polls the replay position whenever anyone waits.")));
	if (fd >= 0)
		close(fd);
#endif
	return -1;
}

/*
 * rg_arrival_drain
 *		Consume the pending notifications of "fd"; true if there were any.
 *		Their content does not matter, only that WAL may have arrived.
 */
bool
rg_arrival_drain(int fd)
{
	char		buf[4096];
	bool		any = false;

	if (fd < 0)
		return false;
	while (read(fd, buf, sizeof(buf)) > 0)
		any = true;
	return any;
}
