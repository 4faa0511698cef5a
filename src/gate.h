/*-------------------------------------------------------------------------
 *
 * gate.h
 *		The rules and messages every gate shares (gate.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_GATE_H
#define RG_GATE_H

#include "guard.h"
#include "common.h"

extern int	rg_gate_timeout(bool isnull, int32 timeout_ms);
extern void rg_gate_note_missed_set(void);
extern void rg_gate_check_missed_set(void);
extern void rg_gate_check_snapshot(const char *gate_name);
extern void rg_gate_require(const RgTarget *target, RgWaitMode mode,
							int timeout_ms, RgGuard *guard);
extern bool rg_gate_passed_before(const RgTarget *floor, bool strong,
								  XLogRecPtr replayed, TimeLineID tli);

#endif							/* RG_GATE_H */
