/*-------------------------------------------------------------------------
 *
 * lease_waker.h
 *		On a primary: the commits and strong reads that wait for the lease
 *		holders, and the background worker that wakes them
 *		(lease_waker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_LEASE_WAKER_H
#define RG_LEASE_WAKER_H

#include "common.h"

extern Size rg_waker_shmem_size(void);
extern void rg_waker_shmem_init(void);
extern bool rg_waker_link(XLogRecPtr lsn, int64 visible, int64 until);
extern bool rg_waker_released(void);
extern void rg_waker_unlink(void);

#endif							/* RG_LEASE_WAKER_H */
