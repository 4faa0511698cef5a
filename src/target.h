/*-------------------------------------------------------------------------
 *
 * target.h
 *		Gate targets and where this server is (target.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_TARGET_H
#define RG_TARGET_H

#include "common.h"

extern char *rg_lsn_text(XLogRecPtr lsn);
extern char *rg_token_text(TimeLineID tli, XLogRecPtr lsn);
extern char *rg_target_text(const RgTarget *target);
extern bool rg_target_scan(const char *text, RgTarget *target);
extern void rg_target_parse(const char *text, RgTarget *target);
extern bool rg_target_reached(const RgTarget *target, XLogRecPtr position,
							  TimeLineID tli, bool in_recovery);
extern XLogRecPtr rg_primary_position(TimeLineID *tli);
extern XLogRecPtr rg_standby_position(RgWaitMode mode, TimeLineID *tli);
extern XLogRecPtr rg_standby_visible_position(TimeLineID *tli);

#endif							/* RG_TARGET_H */
