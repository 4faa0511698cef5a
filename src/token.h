/*-------------------------------------------------------------------------
 *
 * token.h
 *		Write and read tokens (token.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_TOKEN_H
#define RG_TOKEN_H

#include "nodes/nodes.h"

extern void rg_token_init(void);
extern void rg_token_utility_start(Node *parsetree);
extern void rg_token_utility_done(Node *parsetree);
extern void rg_token_report(void);

#endif							/* RG_TOKEN_H */
