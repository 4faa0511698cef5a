/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		Shared memory of replica_gate (shmem.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_SHMEM_H
#define RG_SHMEM_H

extern void rg_shmem_install_hooks(void);

#endif							/* RG_SHMEM_H */
