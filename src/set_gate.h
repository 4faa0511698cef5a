/*-------------------------------------------------------------------------
 *
 * set_gate.h
 *		SET replica_gate.require_lsn and the utility hook (set_gate.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_SET_GATE_H
#define RG_SET_GATE_H

extern void rg_set_gate_init(void);

#endif							/* RG_SET_GATE_H */
