/*-------------------------------------------------------------------------
 *
 * ack.h
 *		What a client hears of its commits, and when (ack.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_ACK_H
#define RG_ACK_H

extern void rg_ack_init(void);

#endif							/* RG_ACK_H */
