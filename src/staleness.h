/*-------------------------------------------------------------------------
 *
 * staleness.h
 *		Bounded staleness (staleness.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_STALENESS_H
#define RG_STALENESS_H

#include "guard.h"
#include "common.h"

extern void rg_staleness_require(int64 limit_us, int timeout_ms, RgGuard *guard,
								 bool want);

#endif							/* RG_STALENESS_H */
