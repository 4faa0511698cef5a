/*-------------------------------------------------------------------------
 *
 * guard.h
 *		Keeping a function-form gate from holding back replay (guard.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_GUARD_H
#define RG_GUARD_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/nodes.h"

#include "common.h"

typedef struct RgGuard
{
	FunctionCallInfo fcinfo;	/* the gate's call, or NULL for a statement's */
	bool		watching;		/* looking out for recovery conflicts */
	bool		released;		/* waits without its xmin (rules 1, 3) */
	bool		holds_locks;	/* released, but its statement holds locks */
	bool		may_unlock;		/* its statement's locks are all it holds */
	bool		unlocked;		/* and it gave them back to wait */
	XLogRecPtr	conflict_at;	/* replay position of the conflict seen */
	TimestampTz conflict_since; /* when it was first seen there, or 0 */
} RgGuard;

extern void rg_guard_init(void);
extern void rg_guard_utility(Node *parsetree);
extern void rg_guard_prepare(RgGuard *guard, FunctionCallInfo fcinfo);
extern void rg_guard_prepare_statement(RgGuard *guard, bool released);
extern void rg_guard_begin(RgGuard *guard);
extern void rg_guard_end(RgGuard *guard);
extern long rg_guard_poll_ms(const RgGuard *guard);
extern bool rg_guard_polls_fast(const RgGuard *guard);
extern bool rg_guard_must_yield(RgGuard *guard);

#endif							/* RG_GUARD_H */
