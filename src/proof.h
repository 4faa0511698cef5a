/*-------------------------------------------------------------------------
 *
 * proof.h
 *		What the primary's answers prove as time passes (proof.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_PROOF_H
#define RG_PROOF_H

#include "datatype/timestamp.h"
#include "storage/latch.h"

#include "common.h"

/* What an answer says of the primary's clocks and commit wait. */
typedef struct RgAnswerClocks
{
	int64		commit_clock;	/* its commit wait's and leases' clock */
	TimestampTz wall;			/* its wall clock */
	bool		paying;			/* its sessions pay the commit wait by default */
	bool		leased;			/* it granted this standby a lease */
} RgAnswerClocks;

extern Size rg_proof_shmem_size(void);
extern void rg_proof_shmem_init(void);
extern void rg_proof_attach(Latch *worker);
extern void rg_proof_connected(int commit_wait_ms);
extern void rg_proof_forget(void);
extern int	rg_proof_commit_wait_ms(void);
extern int64 rg_proof_wall_offset(void);
extern void rg_proof_answered(const RgTarget *answer, int64 asked,
							  int64 asked_offset, int64 received,
							  const RgAnswerClocks *clocks);
extern int64 rg_proof_refresh_in(void);
extern bool rg_proof_use(RgTarget *answer);
extern bool rg_proof_age_us(XLogRecPtr position, TimeLineID tli, bool want,
							int64 *us);

#endif							/* RG_PROOF_H */
