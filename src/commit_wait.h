/*-------------------------------------------------------------------------
 *
 * commit_wait.h
 *		The primary's commit wait for strong reads served locally, and the
 *		wait of a strong read on the primary (commit_wait.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_COMMIT_WAIT_H
#define RG_COMMIT_WAIT_H

#include "common.h"

extern void rg_commit_wait_init(void);
extern void rg_commit_wait_expect(bool prepared);
extern void rg_commit_wait_note(XLogRecPtr lsn);
extern bool rg_commit_wait_pay(bool *cancelled);
extern void rg_commit_wait_read(void);
extern void rg_commit_wait_startup(void);

#endif							/* RG_COMMIT_WAIT_H */
