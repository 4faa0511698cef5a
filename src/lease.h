/*-------------------------------------------------------------------------
 *
 * lease.h
 *		The primary's leases to standbys that serve strong reads without
 *		asking (lease.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_LEASE_H
#define RG_LEASE_H

#include "common.h"

extern Size rg_lease_shmem_size(void);
extern void rg_lease_shmem_init(void);
extern void rg_lease_init(void);
extern bool rg_lease_grant(pid_t pid, int64 wait_us);
extern void rg_lease_note_commit(int64 visible);
extern void rg_lease_paying(int n, int64 abandoned);
extern bool rg_lease_read_owed(int64 wait_us, int64 *now);
extern bool rg_lease_released(XLogRecPtr lsn, int64 visible, int64 until,
							  int64 wait_us, int64 now);

#endif							/* RG_LEASE_H */
