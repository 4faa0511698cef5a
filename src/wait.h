/*-------------------------------------------------------------------------
 *
 * wait.h
 *		Waiting on a standby until a target is reached (wait.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_WAIT_H
#define RG_WAIT_H

#include "datatype/timestamp.h"

#include "guard.h"
#include "common.h"

extern bool rg_wait_start(bool passed, int timeout_ms, RgWaitResult *result,
						  TimestampTz *start, TimestampTz *deadline);
extern bool rg_wait_sleep(TimestampTz deadline, long cap_ms, uint32 wait_event);
extern void rg_wait_cleanup(int code, Datum arg);
extern RgWaitResult rg_wait_for_target(const RgTarget *target, RgWaitMode mode,
									   int timeout_ms, RgGuard *guard,
									   XLogRecPtr *position);

#endif							/* RG_WAIT_H */
