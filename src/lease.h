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

#include "datatype/timestamp.h"

#include "common.h"

/* A slot's lease and gone lease, as a look at the table found them. */
typedef struct RgLeaseHolder
{
	int			slot;
	pid_t		pid;			/* its WAL sender, 0: none */
	int64		expires;
	bool		reporting;		/* that WAL sender still holds the slot */
	XLogRecPtr	applied;		/* what it reported (0: not reporting) */
	int64		gone_expires;
	XLogRecPtr	gone_applied;
} RgLeaseHolder;

/* A look at the lease table (rg_lease_look). */
typedef struct RgLeaseView
{
	int64		primary_since;
	int64		last_expiry;
	int			n;
	RgLeaseHolder *holders;		/* room for max_wal_senders */
} RgLeaseView;

extern Size rg_lease_shmem_size(void);
extern void rg_lease_shmem_init(void);
extern void rg_lease_init(void);
extern bool rg_lease_grant(pid_t pid, TimestampTz started, int64 wait_us);
extern void rg_lease_note_commit(int64 visible);
extern void rg_lease_paying(int n, int64 abandoned);
extern bool rg_lease_read_owed(int64 wait_us, int64 *now);
extern RgLeaseView *rg_lease_view_create(void);
extern void rg_lease_look(RgLeaseView *view, int64 wait_us, int64 now);
extern bool rg_lease_view_released(const RgLeaseView *view, XLogRecPtr lsn,
								   int64 visible, int64 until, int64 wait_us,
								   int64 now, int64 *next, bool *reporting);

#endif							/* RG_LEASE_H */
