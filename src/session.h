/*-------------------------------------------------------------------------
 *
 * session.h
 *		The session mode and the session token floor (session.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_SESSION_H
#define RG_SESSION_H

extern void rg_session_init(void);

#endif							/* RG_SESSION_H */
