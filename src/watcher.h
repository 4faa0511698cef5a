/*-------------------------------------------------------------------------
 *
 * watcher.h
 *		The replay watcher of PostgreSQL 13 to 18: the shared registry of
 *		waiting backends (watcher_registry.c), the background worker that
 *		wakes them (watcher.c), and notices of WAL arriving in pg_wal
 *		(watcher_arrival.c).  PostgreSQL 19 and later wait in core's
 *		registry: nothing of this is built there.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_WATCHER_H
#define RG_WATCHER_H

#include "common.h"

#ifndef RG_HAVE_CORE_WAIT
extern Size rg_registry_shmem_size(void);
extern void rg_registry_shmem_init(void);
extern bool rg_registry_link(XLogRecPtr target, RgWaitMode mode);
extern bool rg_registry_is_linked(void);
extern void rg_registry_unlink(void);
extern int	rg_registry_waiters(void);
extern void rg_registry_nearest(XLogRecPtr *targets);
extern bool rg_registry_attach_watcher(void);
extern void rg_registry_detach_watcher(void);
extern int	rg_registry_wake(const XLogRecPtr *positions, bool wake_all);

extern int	rg_arrival_open(void);
extern bool rg_arrival_drain(int fd);
#endif

#endif							/* RG_WATCHER_H */
