/*-------------------------------------------------------------------------
 *
 * watcher_arrival.c
 *		Tell the replay watcher when the walreceiver writes WAL into pg_wal,
 *		so that where the watcher must poll (no replay condition variable) it
 *		can sleep while no received WAL is waiting for replay.
 *
 * While a walreceiver streams, replay only applies WAL that it wrote into
 * pg_wal.  On Linux an inotify watch on pg_wal turns those writes into a
 * readable descriptor the watcher can sleep on.  Elsewhere, or if the watch
 * cannot be set up, there is no descriptor and the watcher polls whenever
 * anyone waits.  Not built on 19 and later, which have no watcher.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#endif

#include "access/xlog_internal.h"
#include "storage/fd.h"

#include "watcher.h"

#ifndef RG_HAVE_CORE_WAIT

/*
 * rg_arrival_open
 *		Start watching pg_wal.  Returns a descriptor that turns readable when
 *		a file in pg_wal is created, written or moved in, or -1 (with a LOG
 *		message where the platform should have supported it).  It stays open
 *		until the watcher exits.
 */
int
rg_arrival_open(void)
{
#ifdef __linux__
	int			fd;

	if (!AcquireExternalFD())
	{
		ereport(LOG,
				(errmsg("replica_gate could not watch directory \"%s\": too many open files",
						XLOGDIR),
				 errdetail("The replay watcher polls the replay position whenever anyone waits.")));
		return -1;
	}
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd >= 0 &&
		inotify_add_watch(fd, XLOGDIR, IN_CREATE | IN_MODIFY | IN_MOVED_TO) >= 0)
		return fd;

	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("replica_gate could not watch directory \"%s\": %m", XLOGDIR),
			 errdetail("The replay watcher polls the replay position whenever anyone waits."),
			 errhint("Check the limits fs.inotify.max_user_instances and fs.inotify.max_user_watches.")));
	if (fd >= 0)
		close(fd);
	ReleaseExternalFD();
#endif
	return -1;
}

/*
 * rg_arrival_drain
 *		Consume the pending notifications of "fd"; true if there were any,
 *		or if reading them failed (so that the caller keeps polling).  Their
 *		content does not matter, only that WAL may have arrived.
 */
bool
rg_arrival_drain(int fd)
{
	char		buf[4096];
	bool		any = false;
	ssize_t		n;

	if (fd < 0)
		return false;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		any = true;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		any = true;
	return any;
}

#endif							/* !RG_HAVE_CORE_WAIT */
